package projections

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
)

// SpendDiff is a spend counter of a campaign whose value in Redis differs
// from the sum of the campaign's charges in ClickHouse.
type SpendDiff struct {
	CampaignID string `json:"campaignId"`
	// Day is the local day of the counter, YYYY-MM-DD; Week the Monday of
	// its local week (spend.WeekOf); Month its local month, YYYY-MM; all ""
	// for the total.
	Day     string `json:"day,omitempty"`
	Week    string `json:"week,omitempty"`
	Month   string `json:"month,omitempty"`
	Redis   int64  `json:"redis"`   // micro-units
	Charges int64  `json:"charges"` // Σ amount_micros of the view `charges`
}

// ReconcileSpend compares the spend of marketplace mp's campaigns in Redis
// (spend.SpendKey: the total, and the days whose fields Redis keeps,
// spend.DayFieldsKept, with their weeks and months) with what the view `charges` says was charged (the
// source of truth: docs/design/charges.md, Operations), and returns the counters
// that differ, by campaign and day. The campaigns are those with charges
// and those with a spend hash in Redis (found with SCAN, on every master
// of a cluster). With fix, each counter that differs is set to the
// charges' sum (HSET; the refusal hints are left alone).
//
// Charges are applied in Redis a moment before their rows are inserted: a
// projector that folds meanwhile shows as Redis ahead of the charges. Fix
// only with the projectors stopped (or the fold caught up and no event
// coming in), or it would take back spend the next insert records.
func ReconcileSpend(ctx context.Context, ch clickhouse.Conn, rdb redis.UniversalClient, mp string, now time.Time, fix bool) ([]SpendDiff, error) {
	oldest := spend.DayOf(now.Add(-spend.DayFieldsKept), time.UTC)
	oldestWeek, oldestMonth := spend.WeekOf(oldest), spend.MonthOf(oldest)
	type counters struct {
		total int64
		// days, weeks and months by their field (spend.DayField, WeekField,
		// MonthField): the weeks and months whose days Redis may keep.
		periods map[string]int64
	}
	charged := map[string]*counters{}
	get := func(m map[string]*counters, camp string) *counters {
		c := m[camp]
		if c == nil {
			c = &counters{periods: map[string]int64{}}
			m[camp] = c
		}
		return c
	}
	rows, err := ch.Query(ctx, "SELECT campaign_id, toString(day_local), toInt64(sum(amount_micros)) FROM charges WHERE marketplace_id = ? GROUP BY campaign_id, day_local", mp)
	if err != nil {
		return nil, fmt.Errorf("reconcile spend: read the charges: %w", err)
	}
	for rows.Next() {
		var camp, day string
		var sum int64
		if err := rows.Scan(&camp, &day, &sum); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reconcile spend: read the charges: %w", err)
		}
		c := get(charged, camp)
		c.total += sum
		if day >= oldest {
			c.periods[spend.DayField(day)] += sum
		}
		if w := spend.WeekOf(day); w >= oldestWeek {
			c.periods[spend.WeekField(w)] += sum
		}
		if m := spend.MonthOf(day); m >= oldestMonth {
			c.periods[spend.MonthField(m)] += sum
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reconcile spend: read the charges: %w", err)
	}

	camps := map[string]bool{}
	for camp := range charged {
		camps[camp] = true
	}
	inRedis, err := spendCampaigns(ctx, rdb, mp)
	if err != nil {
		return nil, err
	}
	for _, camp := range inRedis {
		camps[camp] = true
	}
	ids := make([]string, 0, len(camps))
	for camp := range camps {
		ids = append(ids, camp)
	}
	slices.Sort(ids)
	pipe := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, camp := range ids {
		cmds[i] = pipe.HGetAll(ctx, spend.SpendKey(mp, camp))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("reconcile spend: read the spend hashes: %w", err)
	}
	var diffs []SpendDiff
	for i, camp := range ids {
		have := get(map[string]*counters{}, camp)
		for f, v := range cmds[i].Val() {
			n, err := strconv.ParseInt(v, 10, 64)
			day, isDay := strings.CutPrefix(f, "d:")
			week, isWeek := strings.CutPrefix(f, "w:")
			month, isMonth := strings.CutPrefix(f, "m:")
			switch {
			case f == spend.TotalField && err == nil:
				have.total = n
			case f == spend.TotalField:
				return nil, fmt.Errorf("reconcile spend: %s field %s holds %q, not an integer", spend.SpendKey(mp, camp), f, v)
			case err == nil && ((isDay && day >= oldest) || (isWeek && week >= oldestWeek) || (isMonth && month >= oldestMonth)):
				have.periods[f] = n
			}
		}
		want := get(charged, camp)
		if have.total != want.total {
			diffs = append(diffs, SpendDiff{CampaignID: camp, Redis: have.total, Charges: want.total})
		}
		fields := map[string]bool{}
		for f := range have.periods {
			fields[f] = true
		}
		for f := range want.periods {
			fields[f] = true
		}
		sorted := make([]string, 0, len(fields))
		for f := range fields {
			sorted = append(sorted, f)
		}
		slices.Sort(sorted)
		for _, f := range sorted {
			if have.periods[f] == want.periods[f] {
				continue
			}
			d := SpendDiff{CampaignID: camp, Redis: have.periods[f], Charges: want.periods[f]}
			switch f[0] {
			case 'd':
				d.Day = f[2:]
			case 'w':
				d.Week = f[2:]
			default:
				d.Month = f[2:]
			}
			diffs = append(diffs, d)
		}
	}
	if !fix || len(diffs) == 0 {
		return diffs, nil
	}
	pipe = rdb.Pipeline()
	for _, d := range diffs {
		f := spend.TotalField
		switch {
		case d.Day != "":
			f = spend.DayField(d.Day)
		case d.Week != "":
			f = spend.WeekField(d.Week)
		case d.Month != "":
			f = spend.MonthField(d.Month)
		}
		pipe.HSet(ctx, spend.SpendKey(mp, d.CampaignID), f, d.Charges)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return diffs, fmt.Errorf("reconcile spend: set the spend: %w", err)
	}
	return diffs, nil
}

// spendCampaigns lists the campaigns of marketplace mp that have a spend
// hash in Redis (SCAN of every master).
func spendCampaigns(ctx context.Context, rdb redis.UniversalClient, mp string) ([]string, error) {
	var mu sync.Mutex
	var out []string
	suffix := "}:" + mp + ":"
	err := redisstore.ForEachMaster(ctx, rdb, func(ctx context.Context, m *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := m.Scan(ctx, cursor, "ec:spend:{*}:"+mp+":*", 1000).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				if i := strings.Index(k, suffix); i > 0 {
					out = append(out, k[i+len(suffix):])
				}
			}
			mu.Unlock()
			if next == 0 {
				return nil
			}
			cursor = next
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile spend: scan the spend hashes: %w", err)
	}
	return out, nil
}
