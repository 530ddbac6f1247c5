package clickhouse

import (
	"fmt"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// Strings is a String column built value by value in the form a batch holds
// it (ch-go's proto.ColStr: the values' bytes one after another, and where
// each one starts and ends), so that AppendColumns hands it to the batch's
// column as it is instead of copying every value again.
//
// Why: a column appended as a []string is copied string by string into the
// batch's buffer when the insert is built, a pass per column over strings
// spread over the whole batch (cold in cache: in the fold the largest single
// cost of building an insert). Built row by row, each value is copied once,
// while its event is at hand, and the slice of string headers is not needed.
type Strings struct {
	col proto.ColStr
}

// Grow makes room for rows more values of bytes bytes in all.
func (s *Strings) Grow(rows, bytes int) {
	if free := cap(s.col.Pos) - len(s.col.Pos); free < rows {
		pos := make([]proto.Position, len(s.col.Pos), len(s.col.Pos)+rows)
		copy(pos, s.col.Pos)
		s.col.Pos = pos
	}
	if free := cap(s.col.Buf) - len(s.col.Buf); free < bytes {
		buf := make([]byte, len(s.col.Buf), len(s.col.Buf)+bytes)
		copy(buf, s.col.Buf)
		s.col.Buf = buf
	}
}

// Append appends a value.
func (s *Strings) Append(v string) {
	start := len(s.col.Buf)
	if cap(s.col.Buf)-start < len(v) {
		// Doubled, not grown by the runtime's 1.25 past a few hundred
		// bytes: a column of megabytes is then copied about once while it
		// is built, not four times.
		buf := make([]byte, start, max(2*cap(s.col.Buf), start+len(v), 512))
		copy(buf, s.col.Buf)
		s.col.Buf = buf
	}
	s.col.Buf = append(s.col.Buf, v...)
	s.col.Pos = append(s.col.Pos, proto.Position{Start: start, End: start + len(v)})
}

// Len is the number of values.
func (s *Strings) Len() int { return len(s.col.Pos) }

// At returns value i, sharing the column's bytes (no copy): the bytes of a
// value appended are never written again, but a string kept longer than the
// column keeps the whole column in memory, so copy (strings.Clone) what
// outlives the batch.
func (s *Strings) At(i int) string {
	p := s.col.Pos[i]
	if p.End == p.Start {
		return ""
	}
	return unsafe.String(&s.col.Buf[p.Start], p.End-p.Start)
}

// Bytes is the length of all the values together.
func (s *Strings) Bytes() int { return len(s.col.Buf) }

// appendTo appends the values to a String column: taken as they are when
// the column is empty and laid out as ReserveStrings expects (the column
// then shares s's memory: s must not be appended to again), else copied
// value by value.
func (s *Strings) appendTo(c column.Interface) error {
	if sc, ok := c.(*column.String); ok && sc != nil && stringLayout != noLayout && sc.Rows() == 0 {
		cs := (*proto.ColStr)(unsafe.Add(unsafe.Pointer(sc), stringLayout))
		// Capacity cut to the length: an append to the column (none
		// follows in an insert) would copy, not write into s.
		cs.Buf = s.col.Buf[:len(s.col.Buf):len(s.col.Buf)]
		cs.Pos = s.col.Pos[:len(s.col.Pos):len(s.col.Pos)]
		return nil
	}
	for i := range s.Len() {
		if err := c.AppendRow(s.At(i)); err != nil {
			return fmt.Errorf("append %s column: %w", c.Type(), err)
		}
	}
	return nil
}
