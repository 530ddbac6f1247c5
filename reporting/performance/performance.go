// Package performance reads a vendor's daily advertising results —
// impressions, clicks, spend, attributed sales, ROAS and ACOS per campaign
// and day — from rollup_daily, the daily rollup the exports read
// (docs/design/rollups.md), for the console's charts and tables.
package performance

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/storage/clickhouse"
)

// MaxDays is the longest window a read covers.
const MaxDays = 180

// Row is one campaign's results of one local day. Money is micro-units of
// the marketplace currency.
type Row struct {
	Day         time.Time // local day, at 00:00 UTC
	CampaignID  string
	Campaign    string // the name the rollup recorded
	Impressions uint64
	Clicks      uint64
	SpendMicros int64
	SalesMicros int64 // attributed purchase amount
}

// Totals are sums over rows, with the ratios of the exports (docs/reference/exports.md).
type Totals struct {
	Impressions, Clicks      uint64
	SpendMicros, SalesMicros int64
}

// Add adds a row.
func (t *Totals) Add(r Row) {
	t.Impressions += r.Impressions
	t.Clicks += r.Clicks
	t.SpendMicros += r.SpendMicros
	t.SalesMicros += r.SalesMicros
}

// ROAS is sales / spend (ok false without spend).
func (t Totals) ROAS() (float64, bool) {
	if t.SpendMicros == 0 {
		return 0, false
	}
	return float64(t.SalesMicros) / float64(t.SpendMicros), true
}

// ACOS is spend / sales (ok false without sales).
func (t Totals) ACOS() (float64, bool) {
	if t.SalesMicros == 0 {
		return 0, false
	}
	return float64(t.SpendMicros) / float64(t.SalesMicros), true
}

// CTR is clicks / impressions (ok false without impressions).
func (t Totals) CTR() (float64, bool) {
	if t.Impressions == 0 {
		return 0, false
	}
	return float64(t.Clicks) / float64(t.Impressions), true
}

// Reader reads the rollup.
type Reader struct {
	ch      clickhouse.Conn
	Timeout time.Duration
}

// New returns a Reader of conn.
func New(conn clickhouse.Conn) *Reader { return &Reader{ch: conn, Timeout: 10 * time.Second} }

// ErrUnavailable means ClickHouse did not answer.
var ErrUnavailable = errkind.New(errkind.Unavailable, "reports cannot be read right now; retry in a moment")

// Window checks a window of local days [from, to].
func Window(from, to time.Time) error {
	switch {
	case to.Before(from):
		return fmt.Errorf("%w: the last day is before the first", errkind.Invalid)
	case to.Sub(from) >= MaxDays*24*time.Hour:
		return fmt.Errorf("%w: a window is at most %d days", errkind.Invalid, MaxDays)
	}
	return nil
}

// Vendor reads the sponsored results of vendor's campaigns in marketplace
// mp over the local days [from, to], by day then campaign.
func (r *Reader) Vendor(ctx context.Context, mp, vendor string, from, to time.Time) ([]Row, error) {
	if err := Window(from, to); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	// The rollup's sort key starts (marketplace_id, vendor_id, campaign_id)
	// and its partitions are days: the read is the window's rows of one
	// vendor. Spend is exact: micros plus the thousandths, summed apart.
	// Purchase counts (uniqExactMerge of the purchase-id sets) are left to
	// the exports: merging the sets is most of such a query's time.
	rows, err := r.ch.Query(ctx, `
SELECT day_local, campaign_id, any(campaign_name),
       sum(impressions), sum(clicks),
       sum(ad_spent_clicks_micros) + sum(ad_spent_impressions_micros)
         + toInt64(intDiv(sum(ad_spent_clicks_sub_micros) + sum(ad_spent_impressions_sub_micros), 1000)),
       sum(total_purchase_amount_micros)
FROM rollup_daily
WHERE marketplace_id = toUUID(?) AND vendor_id = ? AND sponsored = 1 AND campaign_id != ''
  AND day_local >= toDate(?) AND day_local <= toDate(?)
GROUP BY day_local, campaign_id
ORDER BY day_local, campaign_id`, mp, vendor, from.Format(time.DateOnly), to.Format(time.DateOnly))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var x Row
		if err := rows.Scan(&x.Day, &x.CampaignID, &x.Campaign, &x.Impressions, &x.Clicks, &x.SpendMicros, &x.SalesMicros); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return out, nil
}

// Day is the totals of one day.
type Day struct {
	Day time.Time
	Totals
}

// ByDay sums rows per day over [from, to], every day present (zeros where
// the rollup has none).
func ByDay(rows []Row, from, to time.Time) []Day {
	idx := map[time.Time]int{}
	var out []Day
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		idx[d] = len(out)
		out = append(out, Day{Day: d})
	}
	for _, r := range rows {
		if i, ok := idx[r.Day.UTC()]; ok {
			out[i].Add(r)
		}
	}
	return out
}

// Campaign is the totals of one campaign.
type Campaign struct {
	ID, Name string
	Totals
}

// ByCampaign sums rows per campaign, by spend (largest first) then id.
func ByCampaign(rows []Row) []Campaign {
	idx := map[string]int{}
	var out []Campaign
	for _, r := range rows {
		i, ok := idx[r.CampaignID]
		if !ok {
			i = len(out)
			idx[r.CampaignID] = i
			out = append(out, Campaign{ID: r.CampaignID, Name: r.Campaign})
		}
		out[i].Add(r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SpendMicros != out[j].SpendMicros {
			return out[i].SpendMicros > out[j].SpendMicros
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// MaxSteps bounds the steps of one SpendSteps read.
const MaxSteps = 2000

// SpendSteps reads campaign's charged spend in marketplace mp over the
// instants [from, to), in steps of step from from: out[i] is the spend of
// the charges whose interaction happened in [from + i×step, from +
// (i+1)×step), in micro-units, as the charges moved it in Redis
// (amount_micros of charges_raw; refused charges left out). For a local
// day's bounds (budget.DayBounds) their sum is the day's spend the budget
// counts. charges_raw FINAL is read directly, its sort key (marketplace_id,
// timestamp) as PREWHERE: campaign_id and refused_reason are the same in
// every copy of a replayed row, so they are filtered before the fold too.
func (r *Reader) SpendSteps(ctx context.Context, mp, campaign string, from, to time.Time, step time.Duration) ([]int64, error) {
	if step < time.Second || !to.After(from) || to.Sub(from)/step >= MaxSteps {
		return nil, fmt.Errorf("%w: a spend read covers up to %d steps of a second or more", errkind.Invalid, MaxSteps)
	}
	n := int((to.Sub(from) + step - 1) / step)
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	f, t := from.Unix(), to.Unix()
	rows, err := r.ch.Query(ctx, `
SELECT toUInt64(intDiv(toUInt32(timestamp) - ?, ?)) AS step, toInt64(sum(amount_micros))
FROM charges_raw FINAL
PREWHERE marketplace_id = toUUID(?) AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?)
  AND campaign_id = ? AND refused_reason = ''
GROUP BY step
ORDER BY step`, uint32(f), uint32(step/time.Second), mp, uint32(f), uint32(t), campaign)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	out := make([]int64, n)
	for rows.Next() {
		var i uint64
		var v int64
		if err := rows.Scan(&i, &v); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if i < uint64(n) {
			out[i] += v
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return out, nil
}

// spendExpr is a row group's spend in micro-units, exact: the micros plus
// the thousandths, summed apart.
const spendExpr = `sum(ad_spent_clicks_micros) + sum(ad_spent_impressions_micros)
         + toInt64(intDiv(sum(ad_spent_clicks_sub_micros) + sum(ad_spent_impressions_sub_micros), 1000))`

// Ranked is a campaign's or a vendor's totals over a window (a vendor's:
// CampaignID and Campaign empty).
type Ranked struct {
	VendorID, CampaignID, Campaign string
	Totals
}

// Overview is a marketplace's sponsored results: Days, every local day of
// a window; Campaigns and Vendors, the largest spenders of a (shorter)
// window, largest first.
type Overview struct {
	Days      []Day
	Campaigns []Ranked
	Vendors   []Ranked
}

// MaxTop bounds the campaigns and vendors an overview ranks.
const MaxTop = 50

// Marketplace reads marketplace mp's sponsored results from the rollup: the
// totals of each local day of [from, to], and the top campaigns and vendors
// by spend over [topFrom, to] (at most top of each, 0 for none). Three
// reads of the marketplace's rows of the window (the rollup's sort key
// starts with marketplace_id), each a few rows of answer.
func (r *Reader) Marketplace(ctx context.Context, mp string, from, topFrom, to time.Time, top int) (Overview, error) {
	if err := Window(from, to); err != nil {
		return Overview{}, err
	}
	if topFrom.Before(from) || topFrom.After(to) || top < 0 || top > MaxTop {
		return Overview{}, fmt.Errorf("%w: the ranking's window is within the overview's, and ranks at most %d", errkind.Invalid, MaxTop)
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	const where = `WHERE marketplace_id = toUUID(?) AND sponsored = 1 AND campaign_id != ''
  AND day_local >= toDate(?) AND day_local <= toDate(?)`
	var days []Row
	if err := r.scan(ctx, func(s scanner) (err error) {
		var x Row
		if err = s.Scan(&x.Day, &x.Impressions, &x.Clicks, &x.SpendMicros, &x.SalesMicros); err == nil {
			days = append(days, x)
		}
		return err
	}, `SELECT day_local, sum(impressions), sum(clicks), `+spendExpr+`, sum(total_purchase_amount_micros)
FROM rollup_daily `+where+`
GROUP BY day_local ORDER BY day_local`, mp, from.Format(time.DateOnly), to.Format(time.DateOnly)); err != nil {
		return Overview{}, err
	}
	out := Overview{Days: ByDay(days, from, to)}
	if top == 0 {
		return out, nil
	}
	ranked := func(dst *[]Ranked, campaigns bool) error {
		cols, group := "vendor_id, '', ''", "vendor_id"
		if campaigns {
			cols, group = "vendor_id, campaign_id, any(campaign_name)", "vendor_id, campaign_id"
		}
		return r.scan(ctx, func(s scanner) (err error) {
			var x Ranked
			if err = s.Scan(&x.VendorID, &x.CampaignID, &x.Campaign, &x.Impressions, &x.Clicks, &x.SpendMicros, &x.SalesMicros); err == nil {
				*dst = append(*dst, x)
			}
			return err
		}, `SELECT `+cols+`, sum(impressions), sum(clicks), `+spendExpr+` AS spend, sum(total_purchase_amount_micros) AS sales
FROM rollup_daily `+where+`
GROUP BY `+group+`
ORDER BY spend DESC, sales DESC, `+group+`
LIMIT ?`, mp, topFrom.Format(time.DateOnly), to.Format(time.DateOnly), top)
	}
	if err := ranked(&out.Campaigns, true); err != nil {
		return Overview{}, err
	}
	if err := ranked(&out.Vendors, false); err != nil {
		return Overview{}, err
	}
	return out, nil
}

type scanner interface{ Scan(dest ...any) error }

// scan runs a query and calls row for each row of its answer; any failure
// is ErrUnavailable.
func (r *Reader) scan(ctx context.Context, row func(scanner) error, query string, args ...any) error {
	rows, err := r.ch.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}
