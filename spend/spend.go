package spend

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DayFieldsKept is how long the day fields of a campaign's spend hash are
// kept after their day: the auction only reads today's, but the charge
// script reads the day an interaction happened on to cap the daily budget,
// and a late interaction is charged up to 30 days after its auction: a
// day's field must outlast its day by the longest local day (25 hours),
// the 30-day charge window and the replays of a lagging projector (2 days,
// as the charge markers). The charge script deletes a campaign's day fields
// older than that when it writes a new day's.
const DayFieldsKept = 35 * 24 * time.Hour

// dayLayout is the form of the day in day fields.
const dayLayout = "2006-01-02"

// defaultWriteTimeout bounds AddSpend when the caller's context has no deadline.
const defaultWriteTimeout = 2 * time.Second

// SpendKey is the Redis hash of campaign campaignID's spend in marketplace
// mp (docs/design/budgets.md, Keys): TotalField and one DayField per local day it
// spent on, in micro-units, and the refusal hints of its budgets. Its hash
// tag is the campaign's (Tag), so that its spend and its charge markers
// (MarkerPrefix) share one Redis Cluster slot and the charge script can
// update them together, while the campaigns of a marketplace spread over
// the cluster; the ids follow, for whoever reads the keys.
func SpendKey(mp, campaignID string) string {
	return "ec:spend:{" + Tag(mp, campaignID) + "}:" + mp + ":" + campaignID
}

// Tag is the Redis Cluster hash tag of campaign campaignID of marketplace
// mp: 16 characters (base64url) of SHA-256 of the two ids, short because
// every marker hash's name holds it. 96 bits: two campaigns have the same
// tag with a probability of 10^-17 among a million campaigns, and would
// then share a slot and their marker hashes (charge keys name winners,
// which belong to one campaign: they do not collide).
func Tag(mp, campaignID string) string {
	h := sha256.New()
	h.Write([]byte(mp))
	h.Write([]byte{0})
	h.Write([]byte(campaignID))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:12])
}

// TotalField is the field of a spend hash that holds the campaign's spend
// since it started; "!" + TotalField holds the refusal hint of its total
// budget.
const TotalField = "t"

// DayField is the field of a spend hash that holds the campaign's spend of
// local day day (YYYY-MM-DD, in the marketplace's time zone); "!" +
// DayField(day) holds the refusal hint of its daily budget that day.
func DayField(day string) string { return "d:" + day }

// WeekField is the field of a spend hash that holds the campaign's spend of
// the local week that begins on Monday monday (YYYY-MM-DD, WeekOf); "!" +
// WeekField(monday) holds the refusal hint of its weekly budget that week.
func WeekField(monday string) string { return "w:" + monday }

// MonthField is the field of a spend hash that holds the campaign's spend of
// the local calendar month month (YYYY-MM, MonthOf); "!" + MonthField(month)
// holds the refusal hint of its monthly budget that month.
func MonthField(month string) string { return "m:" + month }

// WeekOf is the Monday (YYYY-MM-DD) of the week that holds the local day day
// (YYYY-MM-DD, DayOf): weeks run Monday to Sunday in the marketplace's time
// zone. A day that is not a date gives "".
func WeekOf(day string) string {
	t, err := time.Parse(dayLayout, day)
	if err != nil {
		return ""
	}
	return t.AddDate(0, 0, -((int(t.Weekday()) + 6) % 7)).Format(dayLayout)
}

// MonthOf is the calendar month (YYYY-MM) of the local day day (YYYY-MM-DD).
func MonthOf(day string) string {
	if len(day) < 7 {
		return ""
	}
	return day[:7]
}

// DayOf is the local date of t in loc, as YYYY-MM-DD. A nil loc means UTC.
func DayOf(t time.Time, loc *time.Location) string {
	return t.In(orUTC(loc)).Format(dayLayout)
}

// AddSpend adds micros to campaignID's spend of the local day day (see DayOf),
// of the local week and month that hold it and of all time, in one
// MULTI/EXEC transaction on the campaign's spend hash: the counters move
// together or none does.
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
	if err := validCampaign(campaignID); err != nil {
		return err
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
	k := SpendKey(mp, campaignID)
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, k, DayField(day), micros)
		p.HIncrBy(ctx, k, WeekField(WeekOf(day)), micros)
		p.HIncrBy(ctx, k, MonthField(MonthOf(day)), micros)
		p.HIncrBy(ctx, k, TotalField, micros)
		return nil
	})
	if err != nil {
		return fmt.Errorf("budget: add spend for campaign %q in marketplace %q: %w", campaignID, mp, err)
	}
	return nil
}

// ReadSpend returns campaignID's spend in marketplace mp of local day day
// and of all time, in micro-units, as Redis has them now (0 when none).
func ReadSpend(ctx context.Context, rdb redis.UniversalClient, mp, campaignID, day string) (dayMicros, total int64, err error) {
	v, err := rdb.HMGet(ctx, SpendKey(mp, campaignID), DayField(day), TotalField).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("budget: read spend of campaign %q in marketplace %q: %w", campaignID, mp, err)
	}
	out := [2]int64{}
	for i, x := range v {
		if x == nil {
			continue
		}
		s, _ := x.(string)
		if out[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("budget: %s holds %q, not an integer", SpendKey(mp, campaignID), s)
		}
	}
	return out[0], out[1], nil
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

// validCampaign rejects campaign ids the key layout cannot hold: empty, or
// beginning with "!" (the mark of a refusal hint in the earlier layout).
func validCampaign(id string) error {
	if id == "" {
		return errors.New("budget: empty campaign id")
	}
	if id[0] == '!' {
		return fmt.Errorf("budget: campaign id %q begins with \"!\"", id)
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
