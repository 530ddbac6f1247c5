package spend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/telemetry"
)

// Spent is one campaign's spend as the charge script keeps it: the counters
// of a local day and of all time, and the refusal hints beside them (the
// spend a charge refused for that budget would have made; 0 when none).
// Week and Month are the counters of the local week and month that hold
// the day. What was charged is Day, Week, Month and Total; the auction
// sees the campaign at max(counter, hint) (docs/design/budgets.md, The cap).
type Spent struct {
	Day, Total          int64
	DayHint, TotalHint  int64
	Week, Month         int64
	WeekHint, MonthHint int64
}

// EffectiveWeek is the week spend the auction's budget rule reads.
func (s Spent) EffectiveWeek() int64 { return max(s.Week, s.WeekHint) }

// EffectiveMonth is the month spend the auction's budget rule reads.
func (s Spent) EffectiveMonth() int64 { return max(s.Month, s.MonthHint) }

// EffectiveDay is the day spend the auction's budget rule reads: the
// counter, or the refusal hint when it is higher.
func (s Spent) EffectiveDay() int64 { return max(s.Day, s.DayHint) }

// EffectiveTotal is the total spend the auction's budget rule reads.
func (s Spent) EffectiveTotal() int64 { return max(s.Total, s.TotalHint) }

// ReadSpends reads the spend of campaigns ids of marketplace mp on the local
// day day (YYYY-MM-DD, see DayOf), of the local week and month that hold it
// and of all time, in one round trip: one
// HMGET of each campaign's spend hash, pipelined (on a Redis Cluster, one
// pipeline a master, sent together). Absent fields read 0. A value that is
// not an integer fails the whole read, naming the key and the field. The
// call is bounded by ctx only: give it a deadline.
func ReadSpends(ctx context.Context, rdb redis.UniversalClient, mp, day string, ids []string) ([]Spent, error) {
	if err := validMarketplace(mp); err != nil {
		return nil, err
	}
	if err := validDay(day); err != nil {
		return nil, err
	}
	out := make([]Spent, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	df, wf, mf := DayField(day), WeekField(WeekOf(day)), MonthField(MonthOf(day))
	fields := []string{df, "!" + df, TotalField, "!" + TotalField, wf, "!" + wf, mf, "!" + mf}
	cmds := make([]*redis.SliceCmd, len(ids))
	pipe := rdb.Pipeline()
	for i, id := range ids {
		if err := validCampaign(id); err != nil {
			return nil, err
		}
		cmds[i] = pipe.HMGet(ctx, SpendKey(mp, id), fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("budget: read spend of %d campaigns in marketplace %q: %w", len(ids), mp, err)
	}
	for i, cmd := range cmds {
		vals := cmd.Val()
		if len(vals) != len(fields) {
			return nil, fmt.Errorf("budget: HMGET answered %d values for %d fields", len(vals), len(fields))
		}
		var got [8]int64
		for k := range fields {
			v, err := spendValue(vals[k])
			if err != nil {
				return nil, fmt.Errorf("budget: %s: field %q %w", SpendKey(mp, ids[i]), fields[k], err)
			}
			got[k] = v
		}
		out[i] = Spent{Day: got[0], DayHint: got[1], Total: got[2], TotalHint: got[3],
			Week: got[4], WeekHint: got[5], Month: got[6], MonthHint: got[7]}
	}
	return out, nil
}

// spendValue reads one HMGET value: nil (absent) is 0.
func spendValue(v any) (int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("holds %q, not an int64", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("holds a %T", v)
}

// Defaults of a Reader.
const (
	// DefaultReadTimeout bounds one read (a healthy Redis answers a page's
	// spend in well under a millisecond).
	DefaultReadTimeout = 150 * time.Millisecond
	// DefaultReadCooldown: after a failed read, reads fail at once for this
	// long without asking Redis; the first read after it asks again.
	DefaultReadCooldown = time.Second
)

// ErrSpendUnavailable is the error of a read that was not sent because a
// read failed less than the cooldown ago.
var ErrSpendUnavailable = errors.New("budget: spend unavailable (a recent read failed)")

// Reader reads campaigns' spend for the management API: ReadSpend bounded
// by Timeout, and, after a failure, failing at once for Cooldown, so that a
// Redis that hangs costs the first read Timeout and the reads after it
// nothing. It logs the first failure and the recovery, not every read.
type Reader struct {
	rdb      redis.UniversalClient
	Timeout  time.Duration
	Cooldown time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu        sync.Mutex
	failUntil time.Time // zero: reads go to Redis
	failing   bool
}

// NewReader returns a Reader of rdb with the default timeout and cooldown
// (log nil: discarded).
func NewReader(rdb redis.UniversalClient, log *slog.Logger) *Reader {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Reader{rdb: rdb, Timeout: DefaultReadTimeout, Cooldown: DefaultReadCooldown, log: log, now: time.Now}
}

// ReadSpend is ReadSpends within r.Timeout (and ctx), or ErrSpendUnavailable
// at once while a recent failure's cooldown runs. Results are counted in
// endcap_budget_spend_reads_total.
func (r *Reader) ReadSpend(ctx context.Context, mp, day string, ids []string) ([]Spent, error) {
	r.mu.Lock()
	skip := r.now().Before(r.failUntil)
	r.mu.Unlock()
	if skip {
		telemetry.BudgetSpendReads.WithLabelValues("skipped").Inc()
		return nil, ErrSpendUnavailable
	}
	cctx, cancel := context.WithTimeout(ctx, r.Timeout)
	out, err := ReadSpends(cctx, r.rdb, mp, day, ids)
	cancel()
	if err != nil && ctx.Err() != nil {
		return nil, err // the caller went away: says nothing about Redis
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		telemetry.BudgetSpendReads.WithLabelValues("error").Inc()
		r.failUntil = r.now().Add(r.Cooldown)
		if !r.failing {
			r.failing = true
			r.log.Warn("budget: spend read failed; campaigns are answered without spend until Redis answers again",
				"marketplace", mp, "retry_in", r.Cooldown, "err", err)
		}
		return nil, err
	}
	telemetry.BudgetSpendReads.WithLabelValues("ok").Inc()
	r.failUntil = time.Time{}
	if r.failing {
		r.failing = false
		r.log.Info("budget: spend reads answer again")
	}
	return out, nil
}
