package chrecord

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// Canon is the form in which a value of ClickHouse type typ is compared
// between engines. v is what the driver scanned into the code's variable
// (a Go value), or what a JSON result decoded to (json.Number, string, nil,
// []any) when read with the settings of ReadSettings. Both sides of a value
// end up as the same string:
//   - NULL for a null, [a,b] for an array, (a,b) for a tuple;
//   - DateTime as Unix seconds (what the instant is, whatever the zone of
//     the column or of the connection), Date as YYYY-MM-DD;
//   - Float32/Float64 rounded to 12 significant digits: an aggregate sums
//     in whatever order its threads meet the rows, so the last digits of a
//     sum of floats differ from run to run and between versions;
//   - Decimal without trailing zeros (26 prints 1.5 where 18.16 prints
//     1.500000);
//   - every other value as its text.
func Canon(typ string, v any) string {
	typ = unwrap(typ)
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) {
		if rv.IsNil() {
			return "NULL"
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return "NULL"
	}
	v = rv.Interface()
	switch {
	case strings.HasPrefix(typ, "Array("):
		elem := typ[len("Array(") : len(typ)-1]
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			return fmt.Sprint(v)
		}
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = Canon(elem, rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ",") + "]"
	case strings.HasPrefix(typ, "DateTime64"):
		if t, ok := v.(time.Time); ok {
			return strconv.FormatInt(t.UnixNano(), 10)
		}
	case strings.HasPrefix(typ, "DateTime"):
		if t, ok := v.(time.Time); ok {
			return strconv.FormatInt(t.Unix(), 10)
		}
	case typ == "Date" || typ == "Date32":
		if t, ok := v.(time.Time); ok {
			return t.Format(time.DateOnly)
		}
	case strings.HasPrefix(typ, "Float"):
		f, ok := toFloat(v)
		if !ok {
			break
		}
		switch {
		case math.IsNaN(f):
			return "nan"
		case math.IsInf(f, 1):
			return "inf"
		case math.IsInf(f, -1):
			return "-inf"
		}
		return strconv.FormatFloat(f, 'g', 12, 64)
	case strings.HasPrefix(typ, "Decimal"):
		s := fmt.Sprint(v)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		if s == "-0" {
			s = "0"
		}
		return s
	}
	switch x := v.(type) {
	case bool:
		if x {
			return "1"
		}
		return "0"
	case []byte:
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case string:
		switch strings.ToLower(x) {
		case "nan", "+nan", "-nan":
			return math.NaN(), true
		case "inf", "+inf":
			return math.Inf(1), true
		case "-inf":
			return math.Inf(-1), true
		}
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

// unwrap removes Nullable(…) and LowCardinality(…): they change how a value
// is stored, not what it is.
func unwrap(typ string) string {
	for {
		switch {
		case strings.HasPrefix(typ, "Nullable("):
			typ = typ[len("Nullable(") : len(typ)-1]
		case strings.HasPrefix(typ, "LowCardinality("):
			typ = typ[len("LowCardinality(") : len(typ)-1]
		default:
			return typ
		}
	}
}

// canonRow is Canon of each scanned destination.
func canonRow(types []string, dest []any) []string {
	out := make([]string, len(dest))
	for i, d := range dest {
		typ := ""
		if i < len(types) {
			typ = types[i]
		}
		out[i] = Canon(typ, d)
	}
	return out
}

// jsonRow is row i of a batch's columns as a JSONEachRow object: DateTime
// as Unix seconds, Date as YYYY-MM-DD, Decimal and big integers as text,
// which every ClickHouse version parses back into the column's type.
func jsonRow(names, types []string, cols []column.Interface, i int) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for j, c := range cols {
		if j > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(names[j])
		b.Write(k)
		b.WriteByte(':')
		b.Write(jsonValue(types[j], c.Row(i, false)))
	}
	b.WriteByte('}')
	return []byte(b.String())
}

func jsonValue(typ string, v any) []byte {
	typ = unwrap(typ)
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) {
		if rv.IsNil() {
			return []byte("null")
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return []byte("null")
	}
	v = rv.Interface()
	if strings.HasPrefix(typ, "Array(") && (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Type().Elem().Kind() != reflect.Uint8 {
		elem := typ[len("Array(") : len(typ)-1]
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = string(jsonValue(elem, rv.Index(i).Interface()))
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	}
	switch x := v.(type) {
	case time.Time:
		if typ == "Date" || typ == "Date32" {
			return quote(x.Format(time.DateOnly))
		}
		if strings.HasPrefix(typ, "DateTime64") {
			return quote(x.UTC().Format("2006-01-02T15:04:05.999999999Z"))
		}
		return []byte(strconv.FormatInt(x.Unix(), 10))
	case big.Int:
		return quote(x.String())
	case []byte:
		return quote(string(x))
	case string:
		return quote(x)
	case fmt.Stringer: // decimal.Decimal, uuid.UUID, …
		return quote(x.String())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return quote(fmt.Sprint(v))
	}
	return b
}

func quote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
