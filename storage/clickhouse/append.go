package clickhouse

import (
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// AppendColumns appends vals to a prepared batch, vals[i] to its column i:
// a *Strings as it is (Strings), anything else as AppendColumn takes it,
// the String columns given a []string sized first (ReserveStrings). before,
// when set, runs before each column (the unit of work a fold's batch may
// give way after); its error stops the appends and is returned as it is.
func AppendColumns(b driver.Batch, vals []any, before func() error) error {
	cols := b.Columns()
	reserveStrings(cols, vals)
	for i, v := range vals {
		if before != nil {
			if err := before(); err != nil {
				return err
			}
		}
		var err error
		if s, ok := v.(*Strings); ok && i < len(cols) {
			err = s.appendTo(cols[i])
		} else {
			err = AppendColumn(b.Column(i), v)
		}
		if err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

// AppendColumn appends a whole column of values to a batch's column:
// cols[i] of an insert, as Append takes it. Arrays of strings and of int64
// ([][]string, [][]int64) go row by row as slices of pointers to their
// elements: clickhouse-go appends a [][]T by reflection, a reflect.Value
// boxed for each row and each element boxed again (about three allocations
// and a few hundred nanoseconds a row), while a []*T row takes its
// reflection-free path (one allocation a row, no copy of the elements until
// the column's own buffer).
func AppendColumn(col driver.BatchColumn, v any) error {
	switch rows := v.(type) {
	case [][]string:
		return appendArrays(col, rows)
	case [][]int64:
		return appendArrays(col, rows)
	}
	return col.Append(v)
}

// appendArrays appends rows to an Array(T) column, each row as a []*T of
// one shared slice.
func appendArrays[T any](col driver.BatchColumn, rows [][]T) error {
	n := 0
	for _, r := range rows {
		n += len(r)
	}
	ptrs := make([]*T, n)
	k := 0
	for _, r := range rows {
		for j := range r {
			ptrs[k] = &r[j]
			k++
		}
	}
	k = 0
	for _, r := range rows {
		if err := col.AppendRow(ptrs[k : k+len(r) : k+len(r)]); err != nil {
			return err
		}
		k += len(r)
	}
	return nil
}
