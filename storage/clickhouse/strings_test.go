package clickhouse

import (
	"bytes"
	"strconv"
	"testing"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/endcap/endcap/testkit/fakes"
)

func stringValues(n int) []string {
	vs := make([]string, n)
	for i := range vs {
		if i%3 != 0 { // every third value empty
			vs[i] = "value-" + strconv.Itoa(i*i)
		}
	}
	return vs
}

// TestStringsAppendColumns: a column built as Strings is sent byte for byte
// as the same values given as a []string; an empty String column takes it
// without copying it (its buffer is the Strings'), a column with rows
// already gets it value by value; At returns each value.
func TestStringsAppendColumns(t *testing.T) {
	vs := stringValues(1_000)
	var s Strings
	s.Grow(10, 0) // too small: Append grows it
	for _, v := range vs {
		s.Append(v)
	}
	if s.Len() != len(vs) {
		t.Fatalf("Len %d, want %d", s.Len(), len(vs))
	}
	for i, v := range vs {
		if s.At(i) != v {
			t.Fatalf("At(%d) = %q, want %q", i, s.At(i), v)
		}
	}
	want := newColumn(t, "String")
	if err := want.Append(vs); err != nil {
		t.Fatal(err)
	}
	ids := newColumn(t, "Int64")
	got, filled := newColumn(t, "String"), newColumn(t, "String")
	if err := filled.AppendRow("first"); err != nil {
		t.Fatal(err)
	}
	ints := make([]int64, len(vs))
	b := &fakes.CHBatch{Cols: []column.Interface{ids.col, got.col, filled.col}}
	yields := 0
	if err := AppendColumns(b, []any{ints, &s, &s}, func() error { yields++; return nil }); err != nil {
		t.Fatal(err)
	}
	if yields != 3 {
		t.Errorf("before ran %d times, want once a column (3)", yields)
	}
	if !bytes.Equal(got.encoded(), want.encoded()) {
		t.Error("a Strings column is encoded differently from the same []string")
	}
	if stringLayout != noLayout {
		cs := (*proto.ColStr)(unsafe.Add(unsafe.Pointer(got.col.(*column.String)), stringLayout))
		if unsafe.SliceData(cs.Buf) != unsafe.SliceData(s.col.Buf) {
			t.Error("the empty column copied the values: want it to share the Strings' buffer")
		}
	}
	wantFilled := newColumn(t, "String")
	if err := wantFilled.AppendRow("first"); err != nil {
		t.Fatal(err)
	}
	if err := wantFilled.Append(vs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(filled.encoded(), wantFilled.encoded()) {
		t.Error("a Strings appended to a column with rows is encoded differently from the same []string")
	}
}
