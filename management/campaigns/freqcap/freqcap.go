// Package freqcap counts the impressions and clicks of each shopper with
// each capped campaign and bid, per day, week and month of the
// marketplace, and reads them back for the auction (docs/reference/campaigns.md,
// Restrictions).
//
// The counts of one shopper of one marketplace live in Redis hashes that
// share the hash tag {<marketplace>:<opaqueUserId>}, one per period:
//
//	ec:fcap:{<mp>:<user>}:d<YYYYMMDD>   the day      (TTL: the day's end + 1 h)
//	ec:fcap:{<mp>:<user>}:w<YYYYWW>     the ISO week (TTL: the week's end + 1 h)
//	ec:fcap:{<mp>:<user>}:m<YYYYMM>     the month    (TTL: the month's end + 1 h)
//	ec:fcap:{<mp>:<user>}:o             the events topic's offsets counted, by partition
//
// A field is <campaign>:<i|c> (the campaign level) or <campaign>:<bid>:<i|c>
// (the bid level). Keys of one shopper are in one slot of a Redis Cluster,
// so the auction reads them in one round trip to one master and the count of
// one event is one script.
package freqcap

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
)

// The interactions counted, as the last letter of a field.
const (
	Impression = 'i'
	Click      = 'c'
)

// grace is how long a period's hash outlives the period.
const grace = time.Hour

// Store counts and reads the interactions of shoppers.
type Store struct {
	rdb redis.UniversalClient
}

// New returns a Store on rdb.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// Periods are the day, week and month an instant falls in, in a time zone.
type Periods struct {
	Day, Week, Month          string    // the keys' suffixes
	DayEnd, WeekEnd, MonthEnd time.Time // when each ends
}

// PeriodsAt returns the periods of t in loc (UTC when nil): the calendar
// day, the ISO week (Monday to Sunday) and the calendar month.
func PeriodsAt(t time.Time, loc *time.Location) Periods {
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, loc)
	wd := (int(day.Weekday()) + 6) % 7 // Monday 0
	iy, iw := t.ISOWeek()
	return Periods{
		Day:      fmt.Sprintf("d%04d%02d%02d", y, m, d),
		Week:     fmt.Sprintf("w%04d%02d", iy, iw),
		Month:    fmt.Sprintf("m%04d%02d", y, m),
		DayEnd:   day.AddDate(0, 0, 1),
		WeekEnd:  day.AddDate(0, 0, 7-wd),
		MonthEnd: time.Date(y, m+1, 1, 0, 0, 0, 0, loc),
	}
}

func tag(mp, user string) string { return "ec:fcap:{" + mp + ":" + user + "}:" }

// CampaignField and BidField name the count of one interaction with a
// campaign, or with one bid of it.
func CampaignField(campaignID string, kind byte) string { return campaignID + ":" + string(kind) }
func BidField(campaignID, bidID string, kind byte) string {
	return campaignID + ":" + bidID + ":" + string(kind)
}

// Counts are a shopper's counts in the current day, week and month.
type Counts struct {
	Day, Week, Month map[string]string
}

// Get returns the count of field in the period of a frequency type
// ("daily", "weekly", "monthly").
func (c *Counts) Get(frequency, field string) int64 {
	var m map[string]string
	switch frequency {
	case "daily":
		m = c.Day
	case "weekly":
		m = c.Week
	case "monthly":
		m = c.Month
	}
	n, _ := strconv.ParseInt(m[field], 10, 64)
	return n
}

// Read returns a shopper's counts in the periods of at: three HGETALL
// pipelined in one round trip (the keys share a slot).
func (s *Store) Read(ctx context.Context, mp, user string, at time.Time, loc *time.Location) (Counts, error) {
	p := PeriodsAt(at, loc)
	t := tag(mp, user)
	pipe := s.rdb.Pipeline()
	d := pipe.HGetAll(ctx, t+p.Day)
	w := pipe.HGetAll(ctx, t+p.Week)
	m := pipe.HGetAll(ctx, t+p.Month)
	if _, err := pipe.Exec(ctx); err != nil {
		return Counts{}, fmt.Errorf("%w: frequency caps: reading the counts: %v", errkind.Unavailable, err)
	}
	return Counts{Day: d.Val(), Week: w.Val(), Month: m.Val()}, nil
}

// Hit is one interaction to count: the record of the events topic it
// came in (Partition, Offset), when it happened and the fields it adds one to.
type Hit struct {
	MP, User  string
	Partition int32
	Offset    int64
	At        time.Time
	Loc       *time.Location
	Fields    []string
}

// countScript adds one to the fields of ARGV[7..] in each period's hash
// (KEYS[1..3]) whose TTL (ARGV[3..5], seconds) is positive, unless the
// shopper's offsets hash (KEYS[4]) says this partition (ARGV[1]) was counted
// up to this offset (ARGV[2]) or beyond: a replayed record counts once. The
// events topic is keyed by marketplace and shopper, so a shopper's records
// come in offset order on one partition.
var countScript = redis.NewScript(`
local last = redis.call('HGET', KEYS[4], ARGV[1])
if last and tonumber(last) >= tonumber(ARGV[2]) then return 0 end
for k = 1, 3 do
  local ttl = tonumber(ARGV[2 + k])
  if ttl > 0 then
    for i = 7, #ARGV do redis.call('HINCRBY', KEYS[k], ARGV[i], 1) end
    redis.call('EXPIRE', KEYS[k], ttl)
  end
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[4], ARGV[6])
return 1
`)

// Count adds the hits, one script each, pipelined (on a cluster, one round
// trip to each master concerned). A hit whose periods are all over counts
// nothing. now is the clock that sets the TTLs.
func (s *Store) Count(ctx context.Context, hits []Hit, now time.Time) error {
	if len(hits) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	n := 0
	for _, h := range hits {
		p := PeriodsAt(h.At, h.Loc)
		ttl := func(end time.Time) int64 {
			if d := end.Add(grace).Sub(now); d > 0 {
				return int64(d/time.Second) + 1
			}
			return 0
		}
		dt, wt, mt := ttl(p.DayEnd), ttl(p.WeekEnd), ttl(p.MonthEnd)
		if dt == 0 && wt == 0 && mt == 0 {
			continue
		}
		t := tag(h.MP, h.User)
		args := make([]any, 0, 6+len(h.Fields))
		args = append(args, h.Partition, h.Offset, dt, wt, mt, max(dt, wt, mt))
		for _, f := range h.Fields {
			args = append(args, f)
		}
		countScript.Eval(ctx, pipe, []string{t + p.Day, t + p.Week, t + p.Month, t + "o"}, args...)
		n++
	}
	if n == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("%w: frequency caps: counting: %v", errkind.Unavailable, err)
	}
	return nil
}

// Erase removes the counts of shoppers (a privacy erasure): every hash
// that can still live, those of the current and the previous day, week and
// month (a period's hash expires an hour after it ends), and the offsets.
func (s *Store) Erase(ctx context.Context, mp string, users []string, now time.Time) (int64, error) {
	if len(users) == 0 {
		return 0, nil
	}
	cur := PeriodsAt(now, time.UTC)
	prev := []Periods{PeriodsAt(now.AddDate(0, 0, -1), time.UTC), PeriodsAt(now.AddDate(0, 0, -7), time.UTC),
		PeriodsAt(time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1), time.UTC)}
	// Periods in any time zone: a marketplace's day is within a day of UTC's.
	var suffixes []string
	for _, p := range append(prev, cur, PeriodsAt(now.AddDate(0, 0, 1), time.UTC)) {
		suffixes = append(suffixes, p.Day, p.Week, p.Month)
	}
	suffixes = append(suffixes, "o")
	var n int64
	for i := 0; i < len(users); i += 1000 {
		pipe := s.rdb.Pipeline()
		var cmds []*redis.IntCmd
		for _, u := range users[i:min(i+1000, len(users))] {
			t := tag(mp, u)
			keys := make([]string, len(suffixes))
			for k, suf := range suffixes {
				keys[k] = t + suf
			}
			cmds = append(cmds, pipe.Unlink(ctx, keys...))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return n, fmt.Errorf("%w: frequency caps: erasing: %v", errkind.Unavailable, err)
		}
		for _, c := range cmds {
			n += c.Val()
		}
	}
	return n, nil
}
