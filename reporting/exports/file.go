package exports

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"time"
	"unsafe"

	"github.com/endcap/endcap/internal/jsontext"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/endcap/endcap/internal/timestamp"
)

// Formats of export files.
const (
	FormatCSV     = "csv"
	FormatParquet = "parquet"
)

// fileWriter writes the rows of an export file.
type fileWriter interface {
	// Write adds one row; row is reused by the caller after it returns.
	Write(row []cell) error
	// Close writes what is buffered and the file's trailer.
	Close() error
}

// contentType and extension of each format.
func contentType(format string) string {
	if format == FormatParquet {
		return "application/vnd.apache.parquet"
	}
	return "text/csv; charset=utf-8"
}

func extension(format string) string {
	if format == FormatParquet {
		return ".parquet"
	}
	return ".csv"
}

func newFileWriter(format string, w io.Writer, cols []Column, meta map[string]string) (fileWriter, error) {
	switch format {
	case FormatCSV, "":
		return newCSVWriter(w, cols)
	case FormatParquet:
		return newParquetWriter(w, cols, meta), nil
	}
	return nil, fmt.Errorf("exports: unknown format %q", format)
}

// ---- CSV (RFC 4180: comma, CRLF-free "\n" line ends, quotes doubled) ----

type csvWriter struct {
	w    *bufio.Writer
	cols []Column
	line []byte
}

func newCSVWriter(w io.Writer, cols []Column) (*csvWriter, error) {
	cw := &csvWriter{w: bufio.NewWriterSize(w, 256<<10), cols: cols}
	for i, c := range cols {
		if i > 0 {
			cw.line = append(cw.line, ',')
		}
		cw.line = appendCSVField(cw.line, c.Name)
	}
	cw.line = append(cw.line, '\n')
	_, err := cw.w.Write(cw.line)
	return cw, err
}

func (cw *csvWriter) Write(row []cell) error {
	b := cw.line[:0]
	for i, c := range cw.cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendText(b, c.Kind, &row[i], true)
	}
	b = append(b, '\n')
	cw.line = b
	_, err := cw.w.Write(b)
	return err
}

func (cw *csvWriter) Close() error { return cw.w.Flush() }

// appendText appends a cell as text; csv quotes it when needed, and
// neutralises a string a spreadsheet would run as a formula (FormulaSafe;
// the other kinds are numbers, dates, booleans and JSON arrays, which
// never begin with a formula's character but for a negative number).
func appendText(b []byte, k Kind, c *cell, csv bool) []byte {
	if c.null {
		return b
	}
	switch k {
	case KindString:
		if csv {
			return appendCSVField(b, FormulaSafe(c.s))
		}
		return append(b, c.s...)
	case KindStrings:
		j := appendJSONStrings(nil, c.ss)
		if csv {
			return appendCSVField(b, string(j))
		}
		return append(b, j...)
	case KindDate:
		return appendDate(b, c.i)
	case KindBool:
		return strconv.AppendBool(b, c.b)
	case KindInt:
		return strconv.AppendInt(b, c.i, 10)
	case KindMoney, KindPrice:
		return c.m.appendDecimal(b)
	case KindRatio:
		return strconv.AppendFloat(b, c.f, 'f', -1, 64)
	case KindTimestamp:
		return timestamp.Append(b, time.UnixMilli(c.i))
	}
	return b
}

// appendDate appends a day number (days since 1970-01-01) as YYYY-MM-DD.
func appendDate(b []byte, days int64) []byte {
	// Civil-from-days (H. Hinnant), valid for every day a Date can hold.
	z := days + 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	b = append(b, byte('0'+y/1000%10), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	b = append(b, byte('0'+m/10), byte('0'+m%10), '-')
	return append(b, byte('0'+d/10), byte('0'+d%10))
}

// appendCSVField quotes s when it holds a comma, a quote, a line break or
// leading/trailing space, doubling its quotes.
func appendCSVField(b []byte, s string) []byte {
	need := s != "" && (s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t')
	for i := 0; i < len(s) && !need; i++ {
		switch s[i] {
		case ',', '"', '\n', '\r':
			need = true
		}
	}
	if !need {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// appendJSONStrings appends ss as a JSON array of strings (jsontext.AppendString).
func appendJSONStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendString(b, s)
	}
	return append(b, ']')
}

// ---- Parquet ----

// rowBatch rows are handed to the Parquet writer at once.
const rowBatch = 1024

// DefaultRowGroupRows bounds the rows of a Parquet row group (held in
// memory until it is encoded and streamed out).
const DefaultRowGroupRows = 100_000

type parquetWriter struct {
	w     *parquet.GenericWriter[any]
	cols  []Column
	rows  []parquet.Row
	n     int
	arena []byte // DECIMAL bytes of the batch
}

// parquetSchema is a flat schema named after the dataset, with the columns
// in the requested order (parquet.Group would sort them by name).
func parquetSchema(name string, cols []Column) *parquet.Schema {
	fields := make([]parquet.Field, len(cols))
	for i, c := range cols {
		var n parquet.Node
		switch c.Kind {
		case KindString:
			n = parquet.String()
		case KindStrings:
			n = parquet.Repeated(parquet.String())
		case KindDate:
			n = parquet.Date()
		case KindBool:
			n = parquet.Leaf(parquet.BooleanType)
		case KindInt:
			n = parquet.Int(64)
		case KindMoney:
			n = parquet.Decimal(9, 38, parquet.FixedLenByteArrayType(16))
		case KindPrice:
			n = parquet.Optional(parquet.Decimal(9, 38, parquet.FixedLenByteArrayType(16)))
		case KindRatio:
			n = parquet.Optional(parquet.Leaf(parquet.DoubleType))
		case KindTimestamp:
			n = parquet.Timestamp(parquet.Millisecond)
		}
		fields[i] = &orderedField{Node: n, name: c.Name}
	}
	return parquet.NewSchema(name, orderedGroup{fields: fields})
}

func newParquetWriter(w io.Writer, cols []Column, meta map[string]string) *parquetWriter {
	name := meta["endcap.dataset"]
	if name == "" {
		name = DatasetMonitoringMetrics
	}
	opts := []parquet.WriterOption{
		parquetSchema(name, cols),
		parquet.MaxRowsPerRowGroup(DefaultRowGroupRows),
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.CreatedBy("endcap", "exports", "1"),
	}
	for k, v := range meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	pw := &parquetWriter{w: parquet.NewGenericWriter[any](w, opts...), cols: cols, rows: make([]parquet.Row, rowBatch)}
	return pw
}

func (pw *parquetWriter) Write(row []cell) error {
	r := pw.rows[pw.n][:0]
	for i, c := range pw.cols {
		v := &row[i]
		switch c.Kind {
		case KindString:
			r = append(r, parquet.ByteArrayValue(bytesOf(v.s)).Level(0, 0, i))
		case KindStrings:
			if len(v.ss) == 0 {
				r = append(r, parquet.NullValue().Level(0, 0, i))
			}
			for j, s := range v.ss {
				rep := 1
				if j == 0 {
					rep = 0
				}
				r = append(r, parquet.ByteArrayValue(bytesOf(s)).Level(rep, 1, i))
			}
		case KindDate:
			r = append(r, parquet.Int32Value(int32(v.i)).Level(0, 0, i))
		case KindBool:
			r = append(r, parquet.BooleanValue(v.b).Level(0, 0, i))
		case KindInt:
			r = append(r, parquet.Int64Value(v.i).Level(0, 0, i))
		case KindMoney, KindPrice:
			def := 0
			if c.Kind == KindPrice {
				if v.null {
					r = append(r, parquet.NullValue().Level(0, 0, i))
					continue
				}
				def = 1
			}
			var d [16]byte
			v.m.scaled(&d)
			at := len(pw.arena)
			pw.arena = append(pw.arena, d[:]...)
			r = append(r, parquet.FixedLenByteArrayValue(pw.arena[at:at+16:at+16]).Level(0, def, i))
		case KindTimestamp:
			r = append(r, parquet.Int64Value(v.i).Level(0, 0, i))
		case KindRatio:
			if v.null || math.IsNaN(v.f) || math.IsInf(v.f, 0) {
				r = append(r, parquet.NullValue().Level(0, 0, i))
			} else {
				r = append(r, parquet.DoubleValue(v.f).Level(0, 1, i))
			}
		}
	}
	pw.rows[pw.n] = r
	pw.n++
	if pw.n == len(pw.rows) {
		return pw.flush()
	}
	return nil
}

func (pw *parquetWriter) flush() error {
	if pw.n == 0 {
		return nil
	}
	if _, err := pw.w.WriteRows(pw.rows[:pw.n]); err != nil {
		return fmt.Errorf("exports: write parquet rows: %w", err)
	}
	pw.n = 0
	// The writer copied the values: the arena's bytes may be reused only if
	// no value still points at them, so start a new one when it grew big.
	if cap(pw.arena) > 1<<20 {
		pw.arena = nil
	} else {
		pw.arena = pw.arena[:0]
	}
	return nil
}

func (pw *parquetWriter) Close() error {
	if err := pw.flush(); err != nil {
		return err
	}
	if err := pw.w.Close(); err != nil {
		return fmt.Errorf("exports: finish parquet: %w", err)
	}
	return nil
}

// bytesOf is s's bytes without a copy (the writer copies them).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// orderedGroup is a group whose fields keep the order they were given.
type orderedGroup struct {
	parquet.Group
	fields []parquet.Field
}

func (g orderedGroup) Fields() []parquet.Field { return g.fields }
func (g orderedGroup) String() string          { return "group" }
func (g orderedGroup) GoType() reflect.Type {
	fs := make([]reflect.StructField, len(g.fields))
	for i, f := range g.fields {
		fs[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: f.GoType(), Tag: reflect.StructTag(`parquet:"` + f.Name() + `"`)}
	}
	return reflect.StructOf(fs)
}

type orderedField struct {
	parquet.Node
	name string
}

func (f *orderedField) Name() string                           { return f.name }
func (f *orderedField) Value(base reflect.Value) reflect.Value { return reflect.Value{} }
