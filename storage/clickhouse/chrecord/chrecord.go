// Package chrecord records every statement the code sends to ClickHouse
// through a connection of storage/clickhouse: the text as the server ran it
// (arguments bound), the rows of each batch insert, and the rows each query
// returned as the code read them. The two-engine test replays such a
// recording on a current ClickHouse (chDB) and compares the results
// (docs/design/clickhouse.md). It is for tests: Record wraps the connections that
// storage/clickhouse.Open returns for one database.
package chrecord

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"time"
	_ "unsafe" // go:linkname

	_ "github.com/ClickHouse/clickhouse-go/v2" // bind, below
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/endcap/endcap/storage/clickhouse"
)

// Kind is what a statement was sent as.
type Kind string

const (
	Exec  Kind = "exec"  // Conn.Exec: DDL, INSERT … SELECT, ALTER, OPTIMIZE …
	Query Kind = "query" // Conn.Query, QueryRow, Select
	Batch Kind = "batch" // PrepareBatch … Send: an INSERT with its rows
)

// Statement is one statement as the code sent it.
type Statement struct {
	Seq  int
	Kind Kind
	// SQL is the text the server ran, with the arguments bound as the driver
	// binds them; for a batch, "INSERT INTO t (a, b, …)".
	SQL string
	// Names and Types are a query's result columns, or a batch's columns
	// (as the server described them).
	Names, Types []string
	// RowCount and Rows: a batch's rows, one JSON object a row
	// (JSONEachRow). With Options.SpillDir the rows are in a file instead
	// (Rows is nil): RowsJSON reads them either way.
	RowCount int
	Rows     [][]byte
	spill    *spillRef
	// Result: a query's rows as the code read them, one value a column
	// (see Canon); Captured is false when the driver's rows were read some
	// other way (Select, ScanStruct) and only the statement is kept.
	Result   [][]string
	Captured bool
	// Complete: the code read every row (Next returned false).
	Complete bool
	// Err is the error the server (or the driver) answered.
	Err string
	// Duration: how long the statement took on this server.
	Duration time.Duration
}

// Recorder keeps the statements of the connections it wraps, in the order
// their effects are visible: a write (Exec, a batch's Send) is numbered
// when it completes, a read when it starts, and (with Options.Results) no
// write runs while a read is starting. A read's result therefore reflects
// exactly the writes numbered before it, which is what lets a replay
// compare it.
type Recorder struct {
	db string
	o  Options

	// gate: writes exclusive, reads shared while they start; only when
	// results are kept (Options.Results), where the order must be exact.
	// Without, the statements keep the order of the code that sends one after
	// the other, which is what replaying them for acceptance needs, and a
	// recorded test's concurrency is not changed.
	gate sync.RWMutex

	mu        sync.Mutex
	stmts     []*Statement
	tz        *time.Location
	spill     *os.File
	spillSize int64
}

// Options of a recording.
type Options struct {
	// Results keeps the rows each query returned, as the code scanned them
	// (for a comparison); without, only the statements are kept.
	Results bool
	// SpillDir, when set, is where a batch's rows go (a file), instead of
	// memory: a test that inserts millions of rows, or measures its own
	// memory, is not changed by being recorded.
	SpillDir string
}

type spillRef struct {
	f      *os.File
	off, n int64
}

// RowsJSON is the batch's rows as a JSONEachRow body.
func (s Statement) RowsJSON() ([]byte, error) {
	if s.spill == nil {
		return bytes.Join(s.Rows, []byte("\n")), nil
	}
	b := make([]byte, s.spill.n)
	if _, err := s.spill.f.ReadAt(b, s.spill.off); err != nil {
		return nil, fmt.Errorf("chrecord: read the rows of statement %d: %w", s.Seq, err)
	}
	return b, nil
}

var (
	regMu    sync.Mutex
	registry = map[string]*Recorder{}
	hookOnce sync.Once
)

// Record starts recording the statements sent on every connection that
// storage/clickhouse.Open returns for database from now on, until Stop.
func Record(database string, o Options) *Recorder {
	hookOnce.Do(func() {
		clickhouse.SetOpenHook(func(o clickhouse.Options, c clickhouse.Conn) clickhouse.Conn {
			regMu.Lock()
			r := registry[o.Database]
			regMu.Unlock()
			if r == nil {
				return c
			}
			return r.Wrap(c)
		})
	})
	r := &Recorder{db: database, o: o}
	regMu.Lock()
	registry[database] = r
	regMu.Unlock()
	return r
}

// Stop ends the recording of new connections (those already wrapped keep
// recording).
func (r *Recorder) Stop() {
	regMu.Lock()
	if registry[r.db] == r {
		delete(registry, r.db)
	}
	regMu.Unlock()
}

// Close stops the recording and removes its spill file: the statements'
// RowsJSON cannot be read after it.
func (r *Recorder) Close() {
	r.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spill != nil {
		_ = r.spill.Close()
		_ = os.Remove(r.spill.Name())
		r.spill = nil
	}
}

// keepRows stores a batch's rows (under r.mu).
func (r *Recorder) keepRows(s *Statement, rows [][]byte) error {
	s.RowCount = len(rows)
	if r.o.SpillDir == "" || len(rows) == 0 {
		s.Rows = rows
		return nil
	}
	if r.spill == nil {
		f, err := os.CreateTemp(r.o.SpillDir, "chrecord-*.jsonl")
		if err != nil {
			return err
		}
		r.spill = f
	}
	body := bytes.Join(rows, []byte("\n"))
	if _, err := r.spill.WriteAt(body, r.spillSize); err != nil {
		return err
	}
	s.spill = &spillRef{f: r.spill, off: r.spillSize, n: int64(len(body))}
	r.spillSize += int64(len(body))
	return nil
}

// Statements returns the statements recorded so far, in order.
func (r *Recorder) Statements() []Statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Statement, len(r.stmts))
	for i, s := range r.stmts {
		out[i] = *s
	}
	return out
}

// TimeZone is the recorded server's time zone (nil before the first bound
// argument or Timezone call).
func (r *Recorder) TimeZone() *time.Location {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tz
}

// add numbers s and keeps it.
func (r *Recorder) add(s *Statement) {
	r.mu.Lock()
	s.Seq = len(r.stmts) + 1
	r.stmts = append(r.stmts, s)
	r.mu.Unlock()
}

func (r *Recorder) lockWrite() {
	if r.o.Results {
		r.gate.Lock()
	}
}

func (r *Recorder) unlockWrite() {
	if r.o.Results {
		r.gate.Unlock()
	}
}

func (r *Recorder) lockRead() {
	if r.o.Results {
		r.gate.RLock()
	}
}

func (r *Recorder) unlockRead() {
	if r.o.Results {
		r.gate.RUnlock()
	}
}

// Wrap returns c recording into r.
func (r *Recorder) Wrap(c clickhouse.Conn) clickhouse.Conn { return &conn{Conn: c, r: r} }

type conn struct {
	driver.Conn
	r *Recorder
}

//go:linkname bind github.com/ClickHouse/clickhouse-go/v2.bind
func bind(tz *time.Location, query string, args ...any) (string, error)

// bound returns query with args bound as the driver binds them: with the
// server's time zone (from its handshake).
func (c *conn) bound(query string, args []any) (string, error) {
	tz, err := c.serverTZ()
	if len(args) == 0 {
		return query, nil // the time zone is for the replay only
	}
	if err != nil {
		return "", err
	}
	return bind(tz, query, args...)
}

// serverTZ is the server's time zone, from its handshake.
func (c *conn) serverTZ() (*time.Location, error) {
	c.r.mu.Lock()
	tz := c.r.tz
	c.r.mu.Unlock()
	if tz == nil {
		v, err := c.Conn.ServerVersion()
		if err != nil {
			return nil, err
		}
		tz = v.Timezone
		c.r.mu.Lock()
		c.r.tz = tz
		c.r.mu.Unlock()
	}
	return tz, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (c *conn) Exec(ctx context.Context, query string, args ...any) error {
	q, err := c.bound(query, args)
	if err != nil {
		return err
	}
	c.r.lockWrite()
	defer c.r.unlockWrite()
	start := time.Now()
	err = c.Conn.Exec(ctx, q)
	c.r.add(&Statement{Kind: Exec, SQL: q, Err: errText(err), Duration: time.Since(start)})
	return err
}

func (c *conn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	q, err := c.bound(query, args)
	if err != nil {
		return nil, err
	}
	s := &Statement{Kind: Query, SQL: q, Captured: c.r.o.Results}
	c.r.lockRead()
	start := time.Now()
	rows, err := c.Conn.Query(ctx, q)
	c.r.add(s)
	c.r.unlockRead()
	s.Duration = time.Since(start)
	if err != nil {
		s.Err = err.Error()
		return nil, err
	}
	for _, ct := range rows.ColumnTypes() {
		s.Names = append(s.Names, ct.Name())
		s.Types = append(s.Types, ct.DatabaseTypeName())
	}
	return &recRows{Rows: rows, r: c.r, s: s}, nil
}

// QueryRow is Query, reading the first row: as the driver's QueryRow does,
// with the result's columns recorded too.
func (c *conn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	rows, err := c.Query(ctx, query, args...)
	return &firstRow{rows: rows, err: err}
}

func (c *conn) Select(ctx context.Context, dest any, query string, args ...any) error {
	q, err := c.bound(query, args)
	if err != nil {
		return err
	}
	s := &Statement{Kind: Query, SQL: q}
	c.r.lockRead()
	start := time.Now()
	err = c.Conn.Select(ctx, dest, q)
	c.r.add(s)
	c.r.unlockRead()
	c.r.mu.Lock()
	s.Duration, s.Err = time.Since(start), errText(err)
	c.r.mu.Unlock()
	return err
}

func (c *conn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		c.r.lockWrite()
		c.r.add(&Statement{Kind: Batch, SQL: query, Err: err.Error()})
		c.r.unlockWrite()
		return nil, err
	}
	return &recBatch{Batch: b, r: c.r, query: query}, nil
}

// AsyncInsert is refused: the project never uses it (18.16 has no async
// inserts), and a recording could not replay it faithfully.
func (c *conn) AsyncInsert(context.Context, string, bool, ...any) error {
	return fmt.Errorf("chrecord: AsyncInsert is not recorded")
}

// firstRow is the driver.Row of QueryRow.
type firstRow struct {
	rows driver.Rows
	err  error
}

func (r *firstRow) Err() error { return r.err }

func (r *firstRow) Scan(dest ...any) error {
	return r.first(func() error { return r.rows.Scan(dest...) })
}

func (r *firstRow) ScanStruct(dest any) error {
	return r.first(func() error { return r.rows.ScanStruct(dest) })
}

func (r *firstRow) first(scan func() error) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	return scan()
}

type recRows struct {
	driver.Rows
	r *Recorder
	s *Statement
}

func (w *recRows) Next() bool {
	ok := w.Rows.Next()
	if !ok {
		w.r.mu.Lock()
		if err := w.Rows.Err(); err != nil {
			w.s.Err = err.Error()
		} else {
			w.s.Complete = true
		}
		w.r.mu.Unlock()
	}
	return ok
}

func (w *recRows) Scan(dest ...any) error {
	err := w.Rows.Scan(dest...)
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if err != nil {
		w.s.Captured = false
	} else if w.s.Captured {
		w.s.Result = append(w.s.Result, canonRow(w.s.Types, dest))
	}
	return err
}

func (w *recRows) ScanStruct(dest any) error {
	w.r.mu.Lock()
	w.s.Captured = false
	w.r.mu.Unlock()
	return w.Rows.ScanStruct(dest)
}

type recBatch struct {
	driver.Batch
	r     *Recorder
	query string
}

// take records the rows buffered in the batch (before Flush or Send
// clears them).
func (b *recBatch) take() *Statement {
	s := &Statement{Kind: Batch, SQL: b.query}
	cols := b.Batch.Columns()
	for _, c := range cols {
		s.Names = append(s.Names, c.Name())
		s.Types = append(s.Types, string(c.Type()))
	}
	rows := make([][]byte, b.Batch.Rows())
	for i := range rows {
		rows[i] = jsonRow(s.Names, s.Types, cols, i)
	}
	b.r.mu.Lock()
	if err := b.r.keepRows(s, rows); err != nil {
		s.Err = "chrecord: " + err.Error()
	}
	b.r.mu.Unlock()
	return s
}

func (b *recBatch) send(f func() error) error {
	s := b.take()
	b.r.lockWrite()
	defer b.r.unlockWrite()
	start := time.Now()
	err := f()
	s.Duration = time.Since(start)
	if s.Err == "" {
		s.Err = errText(err)
	}
	b.r.add(s)
	return err
}

func (b *recBatch) Flush() error { return b.send(b.Batch.Flush) }
func (b *recBatch) Send() error  { return b.send(b.Batch.Send) }
