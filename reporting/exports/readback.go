package exports

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/endcap/endcap/internal/timestamp"
)

// ReadFile reads an export file back as text: its column names and its
// rows, every value written the way the CSV format writes it (a Parquet
// null is ""). Tests and tools use it to compare the two formats.
func ReadFile(format string, data []byte) (header []string, rows [][]string, err error) {
	if format == FormatParquet {
		return readParquet(data)
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = 0
	all, err := r.ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(all) == 0 {
		return nil, nil, fmt.Errorf("exports: CSV without a header row")
	}
	return all[0], all[1:], nil
}

func readParquet(data []byte) ([]string, [][]string, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	fields := f.Schema().Fields()
	header := make([]string, len(fields))
	kinds := make([]Kind, len(fields))
	for i, fl := range fields {
		header[i] = fl.Name()
		kinds[i] = kindOfNode(fl)
	}
	var out [][]string
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		buf := make([]parquet.Row, 256)
		for {
			n, rerr := rr.ReadRows(buf)
			for _, row := range buf[:n] {
				out = append(out, rowText(row, kinds))
			}
			if rerr != nil {
				break
			}
		}
		_ = rr.Close()
	}
	return header, out, nil
}

func kindOfNode(n parquet.Node) Kind {
	if n.Repeated() {
		return KindStrings
	}
	if lt := n.Type().LogicalType(); lt != nil {
		switch lt.Value.(type) {
		case *format.DateType:
			return KindDate
		case *format.DecimalType:
			return KindMoney
		case *format.TimestampType:
			return KindTimestamp
		case *format.StringType:
			return KindString
		}
	}
	switch n.Type().Kind() {
	case parquet.Boolean:
		return KindBool
	case parquet.Int64:
		return KindInt
	case parquet.Double:
		return KindRatio
	}
	return KindString
}

func rowText(row parquet.Row, kinds []Kind) []string {
	out := make([]string, len(kinds))
	lists := make([][]string, len(kinds))
	isList := make([]bool, len(kinds))
	for _, v := range row {
		col := v.Column()
		k := kinds[col]
		if k == KindStrings {
			isList[col] = true
			if !v.IsNull() {
				lists[col] = append(lists[col], string(v.ByteArray()))
			}
			continue
		}
		if v.IsNull() {
			continue
		}
		switch k {
		case KindString:
			out[col] = string(v.ByteArray())
		case KindDate:
			out[col] = string(appendDate(nil, int64(v.Int32())))
		case KindTimestamp:
			out[col] = string(timestamp.Append(nil, time.UnixMilli(v.Int64())))
		case KindBool:
			out[col] = strconv.FormatBool(v.Boolean())
		case KindInt:
			out[col] = strconv.FormatInt(v.Int64(), 10)
		case KindRatio:
			out[col] = strconv.FormatFloat(v.Double(), 'f', -1, 64)
		case KindMoney:
			b := v.ByteArray()
			n := new(big.Int).SetBytes(b)
			if len(b) > 0 && b[0]&0x80 != 0 {
				n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
			}
			out[col] = moneyFromNanos(n).String()
		}
	}
	for col, l := range lists {
		if isList[col] {
			out[col] = string(appendJSONStrings(nil, l))
		}
	}
	return out
}
