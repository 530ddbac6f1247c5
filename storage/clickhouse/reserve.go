package clickhouse

import (
	"reflect"
	"slices"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ReserveStrings sizes the String columns of a prepared batch for the whole
// slices about to be appended to them: for each i where cols[i] is a
// []string and the batch's column i a plain String, its buffer gets the
// total length of the strings and its positions one entry per string.
//
// Why: clickhouse-go builds each String column by appending to an empty
// buffer (it has no way to size one for a batch: clickhouse-go#1164), and
// past a few hundred bytes Go grows a slice by about 1.25× at a time, so a
// column of a few megabytes is copied about four times over while it is
// built. In the fold that growth was the largest single cost of the
// process (docs/design/performance.md).
//
// The buffer is a field clickhouse-go does not export. ReserveStrings
// reaches it only when column.String is laid out as this package was
// written against (checked once, by name, type and offset: stringLayout);
// otherwise it does nothing, and the columns grow as before.
// TestStringLayout fails when an upgrade changes the layout. It returns the
// number of columns it sized.
func ReserveStrings(b driver.Batch, cols []any) int {
	return reserveStrings(b.Columns(), cols)
}

// reserveStrings is ReserveStrings on the batch's columns bc.
func reserveStrings(bc []column.Interface, cols []any) int {
	if stringLayout == noLayout {
		return 0
	}
	sized := 0
	for i, c := range cols {
		ss, ok := c.([]string)
		if !ok || i >= len(bc) {
			continue
		}
		sc, ok := bc[i].(*column.String)
		if !ok || sc == nil {
			continue
		}
		total := 0
		for _, s := range ss {
			total += len(s)
		}
		cs := (*proto.ColStr)(unsafe.Add(unsafe.Pointer(sc), stringLayout))
		cs.Buf = slices.Grow(cs.Buf, total)
		cs.Pos = slices.Grow(cs.Pos, len(ss))
		sized++
	}
	return sized
}

// noLayout: column.String is not as ReserveStrings expects.
const noLayout = ^uintptr(0)

// stringLayout is the offset of the proto.ColStr inside column.String, or
// noLayout when column.String is not the struct ReserveStrings was written for:
// two fields, `name string` and `col proto.ColStr`.
var stringLayout = func() uintptr {
	t := reflect.TypeFor[column.String]()
	if t.Kind() != reflect.Struct || t.NumField() != 2 {
		return noLayout
	}
	name, col := t.Field(0), t.Field(1)
	if name.Name != "name" || name.Type != reflect.TypeFor[string]() ||
		col.Name != "col" || col.Type != reflect.TypeFor[proto.ColStr]() {
		return noLayout
	}
	return col.Offset
}()
