// Package rollups keeps rollup_daily, the daily aggregates of the export
// dataset monitoring_metrics, by recomputing whole marketplace-local days
// from the FINAL views of the raw tables and swapping each day in atomically
// (docs/design/rollups.md). A recomputation reads every raw row of its days, so
// replayed rows and superseded attribution versions never count twice, and a
// run repeated on unchanged data produces the same rows.
package rollups

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/clickhouse"
)

// Defaults of Options.
const (
	DefaultInterval     = time.Minute
	DefaultFullInterval = time.Hour
	// DefaultMaxShare bounds the share of wall time the job spends
	// recomputing: a recomputation reads whole days of raw rows, and on a
	// loaded ClickHouse it competes with the projectors' inserts.
	DefaultMaxShare   = 0.25
	DefaultRecentDays = 2
	// DefaultFullDays covers the 30 days an event may arrive late, the
	// widest zone offsets and a day of margin: a day leaves the full
	// refresh after it became final (FinalAfter).
	DefaultFullDays = 33
	// DefaultCatchUpDays is how far back a day that was never recomputed
	// after it became final is recomputed (first start, long downtime):
	// exports start at most 120 days back.
	DefaultCatchUpDays = 121
	// DefaultFoldWait: how long a run waits for the projectors to fold what
	// the topics held when it started (they commit a batch every second or
	// so when they keep up).
	DefaultFoldWait = 10 * time.Second
	// maxDaysPerRun bounds one recomputation (one scan of their months).
	maxDaysPerRun = 31
	// lockRetry: how often Refresh tries again to take a lock held elsewhere.
	lockRetry = 250 * time.Millisecond
	// stageMaxAge: staging tables left by a crashed run are dropped after it.
	stageMaxAge = 6 * time.Hour
	stagePrefix = "rollup_stage_"
)

// Options configure a Job.
type Options struct {
	ClickHouse clickhouse.Conn
	// Lock, when set, is taken around each run of Run and each call of
	// Refresh, so that one process refreshes at a time: a run that swapped
	// its days in after a later one would put back older rows under the
	// later run's watermark. It returns an error when another process holds
	// it; Run then skips its run, Refresh waits for it.
	Lock func(ctx context.Context) (unlock func(), err error)
	// Fold, when set, gives each run its watermark (DataAsOf); without it
	// a run knows none and leaves the days' watermark as it was.
	Fold *Watermark
	// FoldWait: how long a run waits for the projectors to fold what the
	// topics held when it started before it recomputes anyway, with the
	// latest watermark known (DefaultFoldWait when 0).
	FoldWait time.Duration
	// Interval: how often the recent days are recomputed.
	Interval time.Duration
	// FullInterval: how often every day that can still change is.
	FullInterval time.Duration
	// MaxShare (0 < MaxShare ≤ 1): after a run that took d, the next one
	// starts no sooner than d×(1−MaxShare)/MaxShare later, even when that
	// is longer than Interval, so that refreshing takes at most this share
	// of the time (1: runs start every Interval, or back to back).
	MaxShare float64
	// RecentDays: days before today (UTC) in the frequent refresh.
	RecentDays int
	// FullDays: days before today (UTC) in the full refresh.
	FullDays int
	// CatchUpDays: how far back days never recomputed once final are found.
	CatchUpDays int
	// Timeout of one recomputation of at most 31 days (default 10 min).
	Timeout time.Duration
	Now     func() time.Time
	Log     *slog.Logger
}

// Job recomputes the rollups.
type Job struct {
	o Options
}

// New returns a Job with o's zero fields set to their defaults.
func New(o Options) (*Job, error) {
	if o.ClickHouse == nil {
		return nil, errors.New("rollups: no ClickHouse connection")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.FullInterval <= 0 {
		o.FullInterval = DefaultFullInterval
	}
	if o.MaxShare <= 0 || o.MaxShare > 1 {
		o.MaxShare = DefaultMaxShare
	}
	if o.RecentDays <= 0 {
		o.RecentDays = DefaultRecentDays
	}
	if o.FullDays <= 0 {
		o.FullDays = DefaultFullDays
	}
	if o.CatchUpDays <= 0 {
		o.CatchUpDays = DefaultCatchUpDays
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.FoldWait <= 0 {
		o.FoldWait = DefaultFoldWait
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Job{o: o}, nil
}

// FinalAfter is the instant after which local day d (any zone) can no longer
// change: its last instant in the westernmost zone (UTC−12) plus the 30 days
// an event or an attribution may arrive late. A recomputation whose
// watermark (Day.DataAsOf) is at or after it is final.
func FinalAfter(d time.Time) time.Time {
	return dateOf(d).Add(24*time.Hour + 12*time.Hour + 30*24*time.Hour)
}

// Run refreshes until ctx ends: the recent days every Interval, every day
// that can change (and days never recomputed once final) every
// FullInterval, starting with a full refresh; a run that took long delays
// the next one (MaxShare). Failures are logged and retried at the next run.
func (j *Job) Run(ctx context.Context) error {
	var lastFull time.Time
	for {
		now := j.o.Now()
		start := time.Now()
		full := lastFull.IsZero() || now.Sub(lastFull) >= j.o.FullInterval
		ran, err := j.tick(ctx, now, full)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			telemetry.RollupRuns.WithLabelValues("error").Inc()
			j.o.Log.Warn("rollups: refresh failed; retrying at the next run", "full", full, "err", err)
		case !ran:
			telemetry.RollupRuns.WithLabelValues("skipped").Inc()
		default:
			telemetry.RollupRuns.WithLabelValues("ok").Inc()
			telemetry.RollupLastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
			if full {
				lastFull = now
			}
		}
		took := time.Since(start)
		wait := NextRunAfter(j.o.Interval, took, j.o.MaxShare)
		if wait > max(j.o.Interval-took, 0) {
			j.o.Log.Debug("rollups: next run delayed to bound the job's share of time", "took", took, "wait", wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// NextRunAfter is how long after a run that took took the next one starts:
// at interval from the start of the last one (at once if that has passed),
// but no sooner than took×(1−share)/share after its end.
func NextRunAfter(interval, took time.Duration, share float64) time.Duration {
	wait := max(interval-took, 0)
	if share > 0 && share < 1 {
		wait = max(wait, time.Duration(float64(took)*(1-share)/share))
	}
	return wait
}

// tick runs one refresh under the lock; ran is false when another process
// held it.
func (j *Job) tick(ctx context.Context, now time.Time, full bool) (ran bool, err error) {
	asOf := j.dataAsOf(ctx)
	if j.o.Lock != nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		unlock, err := j.o.Lock(lctx)
		cancel()
		if err != nil {
			j.o.Log.Debug("rollups: another process is refreshing; skipped", "err", err)
			return false, nil
		}
		defer unlock()
	}
	if err := j.dropStaleStages(ctx, now); err != nil {
		j.o.Log.Warn("rollups: could not drop stale staging tables", "err", err)
	}
	days := j.RecentDays(now)
	if full {
		days = j.FullDays(now)
		late, err := j.unfinalDays(ctx, now)
		if err != nil {
			return true, err
		}
		days = append(late, days...)
	}
	var total Stats
	for _, chunk := range chunks(days, maxDaysPerRun) {
		s, err := j.refresh(ctx, chunk, asOf)
		if err != nil {
			return true, err
		}
		total.Days += s.Days
		total.Rows += s.Rows
	}
	if full {
		j.o.Log.Info("rollups: full refresh done", "days", total.Days, "rows", total.Rows, "took", j.o.Now().Sub(now))
	}
	return true, nil
}

// RecentDays are the local dates of the frequent refresh: RecentDays before
// today (UTC) through tomorrow (zones east of UTC are a day ahead).
func (j *Job) RecentDays(now time.Time) []time.Time {
	return dayRange(dateOf(now).AddDate(0, 0, -j.o.RecentDays), dateOf(now).AddDate(0, 0, 1))
}

// FullDays are the local dates of the full refresh.
func (j *Job) FullDays(now time.Time) []time.Time {
	return dayRange(dateOf(now).AddDate(0, 0, -j.o.FullDays), dateOf(now).AddDate(0, 0, 1))
}

// unfinalDays are the days older than the full refresh, within CatchUpDays,
// whose last recomputation started before they were final (or never ran).
func (j *Job) unfinalDays(ctx context.Context, now time.Time) ([]time.Time, error) {
	today := dateOf(now)
	lo, hi := today.AddDate(0, 0, -j.o.CatchUpDays), today.AddDate(0, 0, -j.o.FullDays-1)
	if hi.Before(lo) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	known, err := ReadDays(ctx, j.o.ClickHouse, lo, hi)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for _, d := range dayRange(lo, hi) {
		if !known[d].Final(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// Day is what rollup_days says of a local day.
type Day struct {
	// ComputedAt: when its last recomputation started (second precision).
	ComputedAt time.Time
	// DataAsOf is the day's watermark: every event acknowledged before it
	// (by POST /v2/events) is counted in the day's rows. Zero when unknown.
	DataAsOf time.Time
}

// Final says whether day d's rows can no longer change: its watermark is
// at or after FinalAfter(d).
func (s Day) Final(d time.Time) bool {
	return !s.DataAsOf.IsZero() && !s.DataAsOf.Before(FinalAfter(d))
}

// DataAsOf is the watermark of the local days start..end (dates) of known:
// the earliest watermark of the days that can still change (every event
// acknowledged before it is in every day), or the latest of all when every
// day is final. Zero when a day's is unknown (or the day never ran).
func DataAsOf(known map[time.Time]Day, start, end time.Time) time.Time {
	var open, final time.Time
	for d := dateOf(start); !d.After(end); d = d.AddDate(0, 0, 1) {
		k := known[d]
		switch {
		case k.DataAsOf.IsZero():
			return time.Time{}
		case k.Final(d):
			if k.DataAsOf.After(final) {
				final = k.DataAsOf
			}
		case open.IsZero() || k.DataAsOf.Before(open):
			open = k.DataAsOf
		}
	}
	if open.IsZero() {
		return final
	}
	return open
}

// ReadDays reads what rollup_days says of the local days from..to (dates);
// a day never computed is absent.
func ReadDays(ctx context.Context, ch clickhouse.Conn, from, to time.Time) (map[time.Time]Day, error) {
	rows, err := ch.Query(ctx, `SELECT day_local, max(computed_at), max(data_as_of_ms) FROM rollup_days
		WHERE day_local >= toDate(?) AND day_local <= toDate(?) GROUP BY day_local`,
		dateOf(from).Format(time.DateOnly), dateOf(to).Format(time.DateOnly))
	if err != nil {
		return nil, fmt.Errorf("rollups: read rollup_days: %w", err)
	}
	defer rows.Close()
	out := map[time.Time]Day{}
	for rows.Next() {
		var d, at time.Time
		var asOfMs uint64
		if err := rows.Scan(&d, &at, &asOfMs); err != nil {
			return nil, fmt.Errorf("rollups: read rollup_days: %w", err)
		}
		s := Day{ComputedAt: at.UTC()}
		if asOfMs > 0 {
			s.DataAsOf = time.UnixMilli(int64(asOfMs)).UTC()
		}
		out[dateOf(d)] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rollups: read rollup_days: %w", err)
	}
	return out, nil
}

// Stats describe one recomputation.
type Stats struct {
	Days     int
	Rows     uint64 // rollup rows written
	Duration time.Duration
	// DataAsOf: the run's watermark (zero when none was known); a day's
	// recorded watermark is the later of it and the day's previous one.
	DataAsOf time.Time
}

// Refresh recomputes the local days (dates; time of day and zone ignored,
// at most 31 distinct days) from the FINAL views, for every marketplace, and
// replaces them in rollup_daily, each day atomically. It first waits (up to
// FoldWait) for the projectors to fold what the topics held when it was
// called, so that the days then count every event acknowledged before the
// call (their watermark, Day.DataAsOf); then it takes the lock, waiting for
// another run to end. The whole is bounded by Timeout and ctx.
func (j *Job) Refresh(ctx context.Context, days []time.Time) (Stats, error) {
	days = normalize(days)
	if len(days) == 0 {
		return Stats{}, nil
	}
	if len(days) > maxDaysPerRun {
		return Stats{}, fmt.Errorf("rollups: %d days in one refresh; at most %d", len(days), maxDaysPerRun)
	}
	ctx, cancel := context.WithTimeout(ctx, j.o.Timeout)
	defer cancel()
	asOf := j.dataAsOf(ctx)
	if j.o.Lock != nil {
		for {
			unlock, err := j.o.Lock(ctx)
			if err == nil {
				defer unlock()
				break
			}
			select {
			case <-ctx.Done():
				return Stats{}, fmt.Errorf("rollups: another process kept refreshing (%w): %w", err, context.Cause(ctx))
			case <-time.After(lockRetry):
			}
		}
	}
	return j.refresh(ctx, days, asOf)
}

// dataAsOf waits up to FoldWait for a watermark at the call (zero when
// none is known).
func (j *Job) dataAsOf(ctx context.Context) time.Time {
	if j.o.Fold == nil {
		return time.Time{}
	}
	at, caughtUp, err := j.o.Fold.Wait(ctx, j.o.FoldWait)
	switch {
	case err != nil && ctx.Err() == nil:
		j.o.Log.Warn("rollups: the projectors' progress could not be read; the days keep their watermark", "err", err)
	case !caughtUp && ctx.Err() == nil:
		j.o.Log.Info("rollups: the projectors are behind; recomputing with an older watermark", "wait", j.o.FoldWait, "dataAsOf", at)
	}
	return at
}

// refresh recomputes days (normalized, at most 31) with watermark asOf.
func (j *Job) refresh(ctx context.Context, days []time.Time, asOf time.Time) (Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, j.o.Timeout)
	defer cancel()
	started := j.o.Now().UTC()
	// What the days' rows counted so far is still counted by this run (the
	// raw tables only gain rows): a day's watermark never goes back.
	prev, err := ReadDays(ctx, j.o.ClickHouse, days[0], days[len(days)-1])
	if err != nil {
		return Stats{}, err
	}
	stage, err := j.createStage(ctx, started)
	if err != nil {
		return Stats{}, err
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		if err := j.o.ClickHouse.Exec(dctx, "DROP TABLE IF EXISTS "+stage); err != nil {
			j.o.Log.Warn("rollups: drop staging table", "table", stage, "err", err)
		}
	}()
	for _, st := range []func(string, []time.Time) (string, []any){interactionsStatement, purchasesStatement} {
		q, args := st(stage, days)
		if err := j.o.ClickHouse.Exec(ctx, q, args...); err != nil {
			return Stats{}, fmt.Errorf("rollups: compute %s..%s: %w", days[0].Format(time.DateOnly),
				days[len(days)-1].Format(time.DateOnly), err)
		}
	}
	counts, err := j.stageCounts(ctx, stage)
	if err != nil {
		return Stats{}, err
	}
	var total uint64
	for _, d := range days {
		// A day the stage has replaces the day in rollup_daily; an empty day
		// in the stage empties it. Not by a REPLACE from the stage: current
		// ClickHouse refuses to replace a partition from a table with no part
		// in it (Code 36), 18.16 took it (docs/design/clickhouse.md).
		swap := fmt.Sprintf("ALTER TABLE rollup_daily REPLACE PARTITION ID '%s' FROM %s", d.Format("20060102"), stage)
		if counts[d] == 0 {
			swap = fmt.Sprintf("ALTER TABLE rollup_daily DROP PARTITION ID '%s'", d.Format("20060102"))
		}
		if err := j.o.ClickHouse.Exec(ctx, swap); err != nil {
			return Stats{}, fmt.Errorf("rollups: swap in %s: %w", d.Format(time.DateOnly), err)
		}
		total += counts[d]
	}
	if err := j.recordDays(ctx, days, counts, started, asOf, prev); err != nil {
		return Stats{}, err
	}
	s := Stats{Days: len(days), Rows: total, Duration: j.o.Now().Sub(started), DataAsOf: asOf}
	j.o.Log.Debug("rollups: days recomputed", "from", days[0].Format(time.DateOnly),
		"to", days[len(days)-1].Format(time.DateOnly), "days", s.Days, "rows", s.Rows, "took", s.Duration)
	return s, nil
}

// createStage creates a private staging table: concurrent runs never share
// one. Its name carries its creation time for dropStaleStages.
func (j *Job) createStage(ctx context.Context, at time.Time) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := stagePrefix + strconv.FormatInt(at.Unix(), 10) + "_" + hex.EncodeToString(b[:])
	if err := clickhouse.CreateStage(ctx, j.o.ClickHouse, name, "rollup_daily"); err != nil {
		return "", fmt.Errorf("rollups: create staging table: %w", err)
	}
	return name, nil
}

// dropStaleStages drops staging tables of runs that crashed before their
// cleanup (older than stageMaxAge).
func (j *Job) dropStaleStages(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := j.o.ClickHouse.Query(ctx, `SELECT name FROM system.tables
		WHERE database = currentDatabase() AND startsWith(name, ?)`, stagePrefix)
	if err != nil {
		return err
	}
	var stale []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(name, stagePrefix), "_")
		if sec, err := strconv.ParseInt(ts, 10, 64); err == nil && now.Sub(time.Unix(sec, 0)) > stageMaxAge {
			stale = append(stale, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range stale {
		if err := j.o.ClickHouse.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			return err
		}
		j.o.Log.Info("rollups: dropped a stale staging table", "table", name)
	}
	return nil
}

// stageCounts counts the staged rows per day.
func (j *Job) stageCounts(ctx context.Context, stage string) (map[time.Time]uint64, error) {
	rows, err := j.o.ClickHouse.Query(ctx, "SELECT day_local, count() FROM "+stage+" GROUP BY day_local")
	if err != nil {
		return nil, fmt.Errorf("rollups: count staged rows: %w", err)
	}
	defer rows.Close()
	out := map[time.Time]uint64{}
	for rows.Next() {
		var d time.Time
		var n uint64
		if err := rows.Scan(&d, &n); err != nil {
			return nil, fmt.Errorf("rollups: count staged rows: %w", err)
		}
		out[dateOf(d)] = n
	}
	return out, rows.Err()
}

// recordDays notes in rollup_days when the days were recomputed, and their
// watermark: the later of asOf and the one they had.
func (j *Job) recordDays(ctx context.Context, days []time.Time, counts map[time.Time]uint64, at, asOf time.Time, prev map[time.Time]Day) error {
	b, err := j.o.ClickHouse.PrepareBatch(ctx, "INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms)")
	if err != nil {
		return fmt.Errorf("rollups: record days: %w", err)
	}
	for _, d := range days {
		w := asOf
		if p := prev[d].DataAsOf; p.After(w) {
			w = p
		}
		var ms uint64
		if !w.IsZero() {
			ms = uint64(w.UnixMilli())
		}
		if err := b.Append(d, at, counts[d], ms); err != nil {
			return fmt.Errorf("rollups: record days: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("rollups: record days: %w", err)
	}
	return nil
}

// dateOf is t's date (its own zone's) at 00:00 UTC.
func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// dayRange lists the dates lo..hi inclusive.
func dayRange(lo, hi time.Time) []time.Time {
	var out []time.Time
	for d := lo; !d.After(hi); d = d.AddDate(0, 0, 1) {
		out = append(out, d)
	}
	return out
}

// normalize turns days into sorted distinct dates.
func normalize(days []time.Time) []time.Time {
	seen := map[time.Time]bool{}
	var out []time.Time
	for _, d := range days {
		if d = dateOf(d); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Before(out[b]) })
	return out
}

// chunks splits sorted dates into runs of at most n dates spanning at most n
// days, so that one refresh scans a bounded window.
func chunks(days []time.Time, n int) [][]time.Time {
	days = normalize(days)
	var out [][]time.Time
	for len(days) > 0 {
		k := 1
		for k < len(days) && k < n && days[k].Sub(days[0]) < time.Duration(n)*24*time.Hour {
			k++
		}
		out = append(out, days[:k])
		days = days[k:]
	}
	return out
}
