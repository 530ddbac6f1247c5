package fakes

import (
	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// CHBatch is a prepared ClickHouse insert (driver.Batch) over bare
// clickhouse-go columns, without a server: what an insert appends lands in
// Cols, and Encode writes the columns as Send would put them on the wire.
// Append and AppendStruct (row by row) are not supported: they panic.
type CHBatch struct{ Cols []column.Interface }

// CHColumn is a batch's column (driver.BatchColumn) over a bare column.
type CHColumn struct{ Col column.Interface }

// Append appends a whole column of values.
func (c CHColumn) Append(v any) error { _, err := c.Col.Append(v); return err }

// AppendRow appends one value.
func (c CHColumn) AppendRow(v any) error { return c.Col.AppendRow(v) }

// Encode writes the column into buf as an insert sends it.
func (c CHColumn) Encode(buf *proto.Buffer) { c.Col.Encode(buf) }

// Encode resets buf and writes every column into it as an insert sends them.
func (b *CHBatch) Encode(buf *proto.Buffer) {
	buf.Reset()
	for _, c := range b.Cols {
		c.Encode(buf)
	}
}

func (b *CHBatch) Abort() error                    { return nil }
func (b *CHBatch) Append(...any) error             { panic("fakes.CHBatch: Append is not supported") }
func (b *CHBatch) AppendStruct(any) error          { panic("fakes.CHBatch: AppendStruct is not supported") }
func (b *CHBatch) Column(i int) driver.BatchColumn { return CHColumn{b.Cols[i]} }
func (b *CHBatch) Flush() error                    { return nil }
func (b *CHBatch) Send() error                     { return nil }
func (b *CHBatch) IsSent() bool                    { return false }
func (b *CHBatch) Rows() int                       { return b.Cols[0].Rows() }
func (b *CHBatch) Columns() []column.Interface     { return append([]column.Interface(nil), b.Cols...) }
func (b *CHBatch) Close() error                    { return nil }

var _ driver.Batch = (*CHBatch)(nil)
