// Package budget keeps campaign spend and decides whether a campaign may still
// take part in an auction.
//
// Spend lives in Redis (see docs/budgets.md for the key layout): the charging
// pipeline adds to it with AddSpend, and every auction process keeps an
// in-memory copy in a Cache, refreshed about once a second, so that the
// auction reads spend without a Redis round trip. Check applies the budget
// rule (total, daily, pacing) to what the Cache returns.
package budget

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DayTTL is the expiry set on a day hash each time it is written. The
// auction only reads today's hash, but the charge script reads the hash of
// the day an interaction happened to cap the daily budget, and a late
// interaction is charged up to 30 days after its auction: a day's hash must
// outlast its first write by the longest local day (25 hours), the 30-day
// charge window and the replays of a lagging projector (2 days, as the
// charge markers), so 34 days.
const DayTTL = 34 * 24 * time.Hour

// dayLayout is the form of the day in day-hash keys.
const dayLayout = "2006-01-02"

// defaultWriteTimeout bounds AddSpend when the caller's context has no deadline.
const defaultWriteTimeout = 2 * time.Second

// DayKey is the Redis hash of campaign id → micro-units spent on the local
// day day (YYYY-MM-DD, in the marketplace's time zone) in marketplace mp.
// "{mp}" is a Redis Cluster hash tag: a marketplace's keys share one slot.
func DayKey(mp, day string) string { return "ec:spend:{" + mp + "}:d:" + day }

// TotalKey is the Redis hash of campaign id → micro-units spent since the
// campaign started, in marketplace mp.
func TotalKey(mp string) string { return "ec:spend:{" + mp + "}:total" }

// DayOf is the local date of t in loc, as YYYY-MM-DD. A nil loc means UTC.
func DayOf(t time.Time, loc *time.Location) string {
	return t.In(orUTC(loc)).Format(dayLayout)
}

// AddSpend adds micros to campaignID's spend of the local day day (see DayOf)
// and to its all-time spend, and (re)sets the day hash's expiry to DayTTL, in
// one MULTI/EXEC transaction: both counters move together or neither does.
//
// AddSpend is NOT idempotent: calling it twice for one charge counts the
// charge twice. The charging pipeline must deduplicate charges (by click or
// impression id) before calling it. A failed call (error returned) may or may
// not have been applied if the connection broke after EXEC was sent.
//
// micros must be positive. When ctx has no deadline, the call is bounded by
// two seconds.
func AddSpend(ctx context.Context, rdb redis.UniversalClient, mp, campaignID, day string, micros int64) error {
	if err := validMarketplace(mp); err != nil {
		return err
	}
	if campaignID == "" {
		return errors.New("budget: empty campaign id")
	}
	if campaignID[0] == '!' {
		return fmt.Errorf("budget: campaign id %q begins with \"!\" (the mark of a refusal hint)", campaignID)
	}
	if err := validDay(day); err != nil {
		return err
	}
	if micros <= 0 {
		return fmt.Errorf("budget: spend must be positive, got %d micro-units", micros)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultWriteTimeout)
		defer cancel()
	}
	dk := DayKey(mp, day)
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, dk, campaignID, micros)
		p.HIncrBy(ctx, TotalKey(mp), campaignID, micros)
		p.Expire(ctx, dk, DayTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("budget: add spend for campaign %q in marketplace %q: %w", campaignID, mp, err)
	}
	return nil
}

// validMarketplace rejects ids that would break the key layout: empty, or
// containing a brace (which would move the Redis Cluster hash tag).
func validMarketplace(mp string) error {
	if mp == "" {
		return errors.New("budget: empty marketplace id")
	}
	if strings.ContainsAny(mp, "{}") {
		return fmt.Errorf("budget: marketplace id %q contains a brace", mp)
	}
	return nil
}

// validDay accepts exactly the YYYY-MM-DD form DayOf produces.
func validDay(day string) error {
	t, err := time.Parse(dayLayout, day)
	if err != nil || t.Format(dayLayout) != day {
		return fmt.Errorf("budget: day %q is not a YYYY-MM-DD date", day)
	}
	return nil
}

func orUTC(loc *time.Location) *time.Location {
	if loc == nil {
		return time.UTC
	}
	return loc
}
