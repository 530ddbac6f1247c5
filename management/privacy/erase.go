package privacy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
)

// Defaults of EraserOptions.
const (
	DefaultInterval        = 24 * time.Hour
	DefaultMutationTimeout = time.Hour
	DefaultMaxAttempts     = 5
	// DefaultBatchIDs bounds the ids of one batch (every table's statement
	// names them all).
	DefaultBatchIDs = 100_000
	// lockTTL is the lease of the job's Redis lock, renewed while it runs.
	lockTTL = 30 * time.Second
	// mutationPoll is how often the wait for a mutation looks at it.
	mutationPoll = 250 * time.Millisecond
)

// Segments removes ids from a marketplace's segments (segments.Service).
type Segments interface {
	RemoveMembers(ctx context.Context, mp string, ids []string) (int64, error)
}

// FrequencyCaps removes shoppers' frequency cap counts (freqcap.Store).
type FrequencyCaps interface {
	Erase(ctx context.Context, mp string, users []string, now time.Time) (int64, error)
}

// ScoredFiles rewrites a day's scored-attribution file without users
// (scoredfiles.Service).
type ScoredFiles interface {
	Erase(ctx context.Context, mp string, day time.Time, users map[string]bool) (int64, error)
}

// EraserOptions configure an Eraser.
type EraserOptions struct {
	ClickHouse clickhouse.Conn
	Redis      redis.UniversalClient // the job's lock
	Segments   Segments
	Caps       FrequencyCaps // optional
	Scored     ScoredFiles
	// Folded returns an instant before which every event and auction the
	// API acknowledged is in ClickHouse (the projectors' progress): a
	// request is applied only once its time is before it, so that no row it
	// covers is inserted after its mutation. Nil: the present.
	Folded func(ctx context.Context) (time.Time, error)
	// Interval between runs (DefaultInterval).
	Interval time.Duration
	// MutationTimeout bounds the wait for one table's mutation.
	MutationTimeout time.Duration
	// MaxAttempts: a request whose runs failed this many times is failed.
	MaxAttempts int
	// BatchIDs bounds the ids of one batch (DefaultBatchIDs).
	BatchIDs int
	Log      *slog.Logger
	// LockKey is the Redis lock of the job (one run at a time across the
	// processes of a database); "" means "ec:lock:privacy".
	LockKey string
}

// Eraser applies pending deletion requests.
type Eraser struct {
	s *Service
	o EraserOptions
}

// Eraser returns the job that applies s's requests.
func (s *Service) Eraser(o EraserOptions) *Eraser {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MutationTimeout <= 0 {
		o.MutationTimeout = DefaultMutationTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.BatchIDs <= 0 {
		o.BatchIDs = DefaultBatchIDs
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.LockKey == "" {
		o.LockKey = "ec:lock:privacy"
	}
	return &Eraser{s: s, o: o}
}

// target is a ClickHouse table that holds opaque_user_id. at is the column
// of the time the row's event or auction was received (milliseconds), which
// the request's time bounds. blank: the rows are kept with the id blanked
// (aggregates are recomputed from them: rollups, exports, the
// scored-attribution files); otherwise they are deleted.
type target struct {
	table, at string
	blank     bool
}

// Targets are the tables that hold opaque_user_id, in the order they are
// erased.
var targets = []target{
	{"events_raw", "received_at_ms", false},
	{"attribution_touches_raw", "received_at_ms", false},
	{"attribution_purchases_raw", "received_at_ms", false},
	{"interactions_raw", "received_at_ms", true},
	{"auctions_raw", "at_ms", true},
	{"attributed_purchases_raw", "purchase_received_at_ms", true},
}

// Tables are the ClickHouse tables an erasure reaches, and whether their
// rows are kept with the id blanked (else deleted).
func Tables() map[string]bool {
	out := map[string]bool{}
	for _, t := range targets {
		out[t.table] = t.blank
	}
	return out
}

// item is a request a run applies.
type item struct {
	mp      string
	d       Deletion
	version int64
}

// RunResult is what a run did.
type RunResult struct {
	Completed int `json:"completed"` // requests completed
	Failed    int `json:"failed"`    // requests failed for good
	Retry     int `json:"retry"`     // requests left pending after a failure, for the next run
	Waiting   int `json:"waiting"`   // requests not applied: newer than what the projectors have folded
}

// ErrBusy means another process is applying deletions right now.
var ErrBusy = redisstore.ErrBusy

// Run applies the pending requests every Interval (and once at start)
// until ctx ends.
func (e *Eraser) Run(ctx context.Context) error {
	for {
		res, err := e.RunPending(ctx)
		switch {
		case errors.Is(err, ErrBusy):
		case err != nil:
			e.o.Log.Error("privacy: deletions not applied; retrying at the next run", "err", err, "next_in", e.o.Interval)
		case res != RunResult{}:
			e.o.Log.Info("privacy: deletions applied", "completed", res.Completed, "failed", res.Failed, "retry", res.Retry, "waiting", res.Waiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.o.Interval):
		}
	}
}

// RunPending applies every pending request (and any left running by a run
// that died) whose time the projectors have folded, in batches, under the
// job's Redis lock (ErrBusy when another process holds it).
func (e *Eraser) RunPending(ctx context.Context) (RunResult, error) {
	var res RunResult
	lctx, release, err := redisstore.Lease(ctx, e.o.Redis, e.o.LockKey, lockTTL)
	if err != nil {
		return res, err
	}
	defer release()
	ctx = lctx
	var todo []item
	for _, mp := range e.s.items.Marketplaces() {
		var ids []string
		e.s.items.Each(mp, func(id string, d Deletion) bool {
			if !d.Status.Terminal() {
				ids = append(ids, id)
			}
			return true
		})
		for _, id := range ids {
			if d, ver, ok := e.s.items.Get(mp, id); ok && !d.Status.Terminal() {
				todo = append(todo, item{mp: mp, d: d, version: ver})
			}
		}
	}
	if len(todo) == 0 {
		return res, nil
	}
	folded := time.Now()
	if e.o.Folded != nil {
		if folded, err = e.o.Folded(ctx); err != nil {
			return res, fmt.Errorf("privacy: projectors' progress: %w", err)
		}
	}
	ready := todo[:0]
	for _, it := range todo {
		if it.d.RequestedAt.After(folded) {
			res.Waiting++
			continue
		}
		ready = append(ready, it)
	}
	slices.SortFunc(ready, func(a, b item) int { return a.d.RequestedAt.Compare(b.d.RequestedAt) })
	for len(ready) > 0 {
		n, ids := 0, 0
		for n < len(ready) && (n == 0 || ids+len(ready[n].d.OpaqueUserIDs) <= e.o.BatchIDs) {
			ids += len(ready[n].d.OpaqueUserIDs)
			n++
		}
		batch := ready[:n]
		ready = ready[n:]
		if err := e.apply(ctx, batch); err != nil {
			e.o.Log.Error("privacy: batch of deletions failed", "requests", len(batch), "err", err)
			for _, it := range batch {
				failed, ferr := e.fail(ctx, it, err)
				switch {
				case ferr != nil:
					return res, errors.Join(err, ferr)
				case failed:
					res.Failed++
				default:
					res.Retry++
				}
			}
			if ctx.Err() != nil {
				return res, err
			}
			continue
		}
		res.Completed += len(batch)
	}
	return res, nil
}

// fail records a failed run of a request: pending again, or failed for good
// after MaxAttempts.
func (e *Eraser) fail(ctx context.Context, it item, cause error) (bool, error) {
	cur, ver, ok := e.s.items.Get(it.mp, it.d.ID)
	if !ok {
		return false, nil
	}
	cur.Failure = firstLine(cause.Error())
	failed := cur.Attempts >= e.o.MaxAttempts
	if failed {
		now := time.Now().UTC()
		cur.Status, cur.FinishedAt, cur.OpaqueUserIDs, cur.Days = StatusFailed, &now, nil, nil
	} else {
		cur.Status = StatusPending
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := e.s.items.Put(wctx, it.mp, it.d.ID, ver, cur)
	return failed, err
}

// apply erases one batch of requests from every store.
func (e *Eraser) apply(ctx context.Context, batch []item) error {
	// Count what each store holds of each request before any of it is
	// removed (a request retried after a failed run keeps its first
	// counts), and the days of its scored-attribution files; record the
	// requests as running with them.
	start := time.Now()
	counts, days, err := e.count(ctx, batch)
	if err != nil {
		return err
	}
	e.o.Log.Debug("privacy: batch counted", "requests", len(batch), "took", time.Since(start).Round(time.Millisecond))
	now := time.Now().UTC()
	for i := range batch {
		it := &batch[i]
		d := it.d // the view's value: its slices and Removed are copied before they change
		d.Status, d.Attempts, d.StartedAt, d.Failure = StatusRunning, d.Attempts+1, &now, ""
		if d.Removed == nil {
			d.Removed = &Removed{ClickHouse: counts[i]}
		} else {
			r := *d.Removed
			d.Removed = &r
		}
		d.Days = slices.Clone(d.Days)
		for _, day := range days[i] {
			if !slices.Contains(d.Days, day) {
				d.Days = append(d.Days, day)
			}
		}
		slices.Sort(d.Days)
		v, err := e.s.items.Put(ctx, it.mp, d.ID, it.version, d)
		if err != nil {
			return fmt.Errorf("privacy: record deletion %s as running: %w", d.ID, err)
		}
		it.d, it.version = d, v
	}
	// ClickHouse: one mutation per table for the whole batch.
	for _, t := range targets {
		if err := e.mutate(ctx, t, batch); err != nil {
			return err
		}
	}
	// Redis: segment memberships; S3: the days' scored-attribution files.
	for i := range batch {
		it := &batch[i]
		n, err := e.o.Segments.RemoveMembers(ctx, it.mp, it.d.OpaqueUserIDs)
		if err != nil {
			return fmt.Errorf("privacy: segments of %s: %w", it.mp, err)
		}
		it.d.Removed.Redis.SegmentMemberships += n
		if e.o.Caps != nil {
			if _, err := e.o.Caps.Erase(ctx, it.mp, it.d.OpaqueUserIDs, time.Now()); err != nil {
				return fmt.Errorf("privacy: frequency cap counts of %s: %w", it.mp, err)
			}
		}
		users := make(map[string]bool, len(it.d.OpaqueUserIDs))
		for _, id := range it.d.OpaqueUserIDs {
			users[id] = true
		}
		for _, day := range it.d.Days {
			t, err := time.Parse(time.DateOnly, day)
			if err != nil {
				continue
			}
			rows, err := e.o.Scored.Erase(ctx, it.mp, t, users)
			if err != nil {
				return fmt.Errorf("privacy: scored-attribution file of %s %s: %w", it.mp, day, err)
			}
			if rows > 0 {
				it.d.Removed.S3.ScoredAttributionFiles++
				it.d.Removed.S3.ScoredAttributionRows += rows
			}
		}
	}
	done := time.Now().UTC()
	for _, it := range batch {
		d := it.d
		d.Status, d.FinishedAt, d.OpaqueUserIDs, d.Days = StatusCompleted, &done, nil, nil
		if _, err := e.s.items.Put(ctx, it.mp, d.ID, it.version, d); err != nil {
			return fmt.Errorf("privacy: record deletion %s as completed: %w", d.ID, err)
		}
	}
	return nil
}

// The statements name the ids only by their SHA-256: a mutation's text
// stays in system.mutations (and in the server's query log, when it keeps
// one) after the rows are gone.
const userMatch = "hex(SHA256(opaque_user_id)) IN ?"

// hashes is the GroupSet of the ids' SHA-256 in hexadecimal, as ClickHouse's
// hex(SHA256(…)) writes them (upper case), and how long its text is.
func hashes(ids []string) (ch.GroupSet, int) {
	set := make([]any, len(ids))
	for i, id := range ids {
		sum := sha256.Sum256([]byte(id))
		set[i] = strings.ToUpper(hex.EncodeToString(sum[:]))
	}
	return ch.GroupSet{Value: set}, len(ids) * 68
}

// condition is the condition that selects the rows of one request in a
// table whose receipt time is the column at, and its arguments: the
// marketplace's ids received at or before the request's time.
func condition(at string, it item) (string, []any, int) {
	set, n := hashes(it.d.OpaqueUserIDs)
	return "marketplace_id = toUUID(?) AND " + userMatch + " AND " + at + " <= ?", []any{it.mp, set, it.d.RequestedAt.UnixMilli()}, n
}

// where is the condition that selects the rows of the batch's requests in
// table t, its arguments, and the length of the statement it makes.
func where(t target, batch []item) (string, []any, int) {
	var b strings.Builder
	var args []any
	size := 0
	for i, it := range batch {
		if i > 0 {
			b.WriteString(" OR ")
		}
		c, a, n := condition(t.at, it)
		b.WriteString("(" + c + ")")
		args = append(args, a...)
		size += n
	}
	return b.String(), args, size + b.Len() + 64<<10
}

// which is a multiIf that names the request (its index in the batch) a row
// of t belongs to, -1 for none.
func which(t target, batch []item) (string, []any, int) {
	var b strings.Builder
	var args []any
	size := 0
	b.WriteString("multiIf(")
	for i, it := range batch {
		c, a, n := condition(t.at, it)
		b.WriteString(c + ", " + strconv.Itoa(i) + ", ")
		args = append(args, a...)
		size += n
	}
	b.WriteString("-1)")
	return b.String(), args, size + b.Len() + 64<<10
}

// count reads, for each request of the batch, its rows per table and the
// local days of its attributed purchases (the days of its
// scored-attribution files).
func (e *Eraser) count(ctx context.Context, batch []item) ([]map[string]int64, [][]string, error) {
	counts := make([]map[string]int64, len(batch))
	for i := range counts {
		counts[i] = map[string]int64{}
		for _, t := range targets {
			counts[i][t.table] = 0
		}
	}
	days := make([][]string, len(batch))
	for _, t := range targets {
		expr, args, size := which(t, batch)
		q := "SELECT toInt32(" + expr + ") AS r, toUInt64(count()) FROM " + t.table + " WHERE r >= 0 GROUP BY r"
		rows, err := e.o.ClickHouse.Query(clickhouse.LongQuery(ctx, size), q, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("privacy: count %s: %w", t.table, err)
		}
		for rows.Next() {
			var r int32
			var n uint64
			if err := rows.Scan(&r, &n); err != nil {
				rows.Close()
				return nil, nil, err
			}
			if int(r) < len(batch) {
				counts[r][t.table] = int64(n)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("privacy: count %s: %w", t.table, err)
		}
	}
	expr, args, size := which(target{at: "purchase_received_at_ms"}, batch)
	q := "SELECT toInt32(" + expr + ") AS r, toString(day_local) AS d FROM attributed_purchases_raw WHERE r >= 0 GROUP BY r, d ORDER BY r, d"
	rows, err := e.o.ClickHouse.Query(clickhouse.LongQuery(ctx, size), q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("privacy: days of attributed purchases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r int32
		var d string
		if err := rows.Scan(&r, &d); err != nil {
			return nil, nil, err
		}
		if int(r) < len(batch) {
			days[r] = append(days[r], d)
		}
	}
	return counts, days, rows.Err()
}

// mutate deletes the batch's rows of t, or blanks their id, and waits for
// the mutation to end (MutationTimeout at most). On a replicated table the
// mutation reaches every replica through ZooKeeper, as an ALTER does
// (docs/design/clickhouse.md): no ON CLUSTER.
func (e *Eraser) mutate(ctx context.Context, t target, batch []item) error {
	cond, args, size := where(t, batch)
	stmt := "ALTER TABLE " + t.table + " DELETE WHERE " + cond
	if t.blank {
		stmt = "ALTER TABLE " + t.table + " UPDATE opaque_user_id = '' WHERE " + cond
	}
	start := time.Now()
	if err := e.o.ClickHouse.Exec(clickhouse.LongQuery(ctx, size), stmt, args...); err != nil {
		return fmt.Errorf("privacy: mutation of %s: %w", t.table, err)
	}
	wctx, cancel := context.WithTimeout(ctx, e.o.MutationTimeout)
	defer cancel()
	for {
		var pending uint64
		err := e.o.ClickHouse.QueryRow(wctx, "SELECT toUInt64(count()) FROM system.mutations WHERE database = currentDatabase() AND table = ? AND is_done = 0", t.table).Scan(&pending)
		if err == nil && pending == 0 {
			e.o.Log.Debug("privacy: mutation done", "table", t.table, "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if wctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("%d mutations not done after %s", pending, e.o.MutationTimeout)
			}
			return fmt.Errorf("privacy: mutation of %s: %w", t.table, err)
		}
		select {
		case <-wctx.Done():
		case <-time.After(mutationPoll):
		}
	}
}
