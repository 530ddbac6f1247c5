package clickhouse

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// batchColumn is a batch's column over a bare clickhouse-go column.
type batchColumn struct{ col column.Interface }

func (b batchColumn) Append(v any) error    { _, err := b.col.Append(v); return err }
func (b batchColumn) AppendRow(v any) error { return b.col.AppendRow(v) }
func (b batchColumn) encoded() []byte       { var buf proto.Buffer; b.col.Encode(&buf); return buf.Buf }
func newColumn(t *testing.T, typ string) batchColumn {
	t.Helper()
	c, err := column.Type(typ).Column("c", nil)
	if err != nil {
		t.Fatal(err)
	}
	return batchColumn{c}
}

func arrayRows(n int) ([][]string, [][]int64) {
	ss, is := make([][]string, n), make([][]int64, n)
	for i := range n {
		ss[i], is[i] = []string{}, []int64{}
		for j := range i % 4 {
			ss[i] = append(ss[i], "value-"+strconv.Itoa(i*j))
			is[i] = append(is[i], int64(i*j-7))
		}
	}
	ss[3] = nil // a row without a slice is an empty array
	return ss, is
}

// TestAppendColumnArrays: AppendColumn writes an Array(String) and an
// Array(Int64) column byte for byte as clickhouse-go's own Append of the
// same [][]T, and so does it for other columns (which it hands to Append).
func TestAppendColumnArrays(t *testing.T) {
	ss, is := arrayRows(1_000)
	for _, c := range []struct {
		typ  string
		rows any
	}{{"Array(String)", ss}, {"Array(Int64)", is}, {"String", []string{"a", "", "bc"}}} {
		want, got := newColumn(t, c.typ), newColumn(t, c.typ)
		if err := want.Append(c.rows); err != nil {
			t.Fatal(err)
		}
		if err := AppendColumn(got, c.rows); err != nil {
			t.Fatal(err)
		}
		if got.col.Rows() != want.col.Rows() || !bytes.Equal(got.encoded(), want.encoded()) {
			t.Errorf("%s: %d rows, encoded differently from clickhouse-go's Append (%d rows)", c.typ, got.col.Rows(), want.col.Rows())
		}
	}
}

// TestAppendColumnArraysAllocations: an array column costs at most about one
// allocation a row (clickhouse-go's Append by reflection: about three).
func TestAppendColumnArraysAllocations(t *testing.T) {
	const n = 10_000
	ss, is := arrayRows(n)
	for typ, rows := range map[string]any{"Array(String)": ss, "Array(Int64)": is} {
		col := newColumn(t, typ)
		allocs := testing.AllocsPerRun(3, func() {
			col.col.Reset()
			if err := AppendColumn(col, rows); err != nil {
				t.Fatal(err)
			}
		})
		if a := allocs / n; a > 1.2 {
			t.Errorf("%s: %.2f allocations a row, want at most 1.2", typ, a)
		}
	}
}
