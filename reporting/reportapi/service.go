package reportapi

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/storage/clickhouse"
)

// ErrUnavailable wraps a failure to read ClickHouse (down, slow, or the
// query's deadline passed): 503 with Retry-After.
var ErrUnavailable = errkind.New(errkind.Unavailable, "reports cannot be read right now; retry later")

// Service reads the reports from the rollup.
type Service struct {
	ch clickhouse.Conn
	// Timeout bounds the reads of one request.
	Timeout time.Duration
}

// New returns a Service over conn.
func New(conn clickhouse.Conn) *Service { return &Service{ch: conn, Timeout: 20 * time.Second} }

// Filter narrows a report to a vendor (its catalog id), a campaign and a
// product; empty fields do not filter. A vendor-scoped caller's vendor is
// always set.
type Filter struct {
	VendorID, CampaignID, ProductID string
}

// metricCols are the sums every report reads, in the order of scan.
const metricCols = `sum(impressions), sum(charged_impressions),
       sum(ad_spent_impressions_micros), sum(ad_spent_impressions_sub_micros),
       sum(clicks), sum(charged_clicks),
       sum(ad_spent_clicks_micros), sum(ad_spent_clicks_sub_micros),
       uniqExactMerge(purchases), sum(quantity), sum(total_purchase_amount_micros)`

// where is the condition of a filter over days [from, to] and its
// arguments: a PREWHERE on the scope's own column (empty for the whole
// marketplace), then the WHERE. Only sponsored rows of a campaign count
// (organic rows are in the rollup for the exports). The sort key starts
// (marketplace_id, vendor_id, campaign_id): a vendor's or a campaign's
// report reads that part of each day's partition only, one granule of a
// day at least; the PREWHERE reads the scope's column first, so that the
// other columns, the purchase sets above all, are read only for the
// granules that hold the scope's rows (ClickHouse 18.16 moves another
// condition to PREWHERE when left to itself).
func where(mp string, f Filter, from, to time.Time) (prewhere string, args []any) {
	var pre, b strings.Builder
	var preArgs []any
	b.WriteString(` WHERE marketplace_id = toUUID(?) AND day_local >= toDate(?) AND day_local <= toDate(?) AND sponsored = 1 AND campaign_id != ''`)
	args = []any{mp, from.Format(time.DateOnly), to.Format(time.DateOnly)}
	switch {
	case f.CampaignID != "":
		pre.WriteString(` PREWHERE campaign_id = ?`)
		preArgs = append(preArgs, f.CampaignID)
	case f.ProductID != "":
		pre.WriteString(` PREWHERE entity_id = ?`)
		preArgs = append(preArgs, f.ProductID)
	case f.VendorID != "":
		pre.WriteString(` PREWHERE vendor_id = ?`)
		preArgs = append(preArgs, f.VendorID)
	}
	if f.VendorID != "" {
		b.WriteString(` AND vendor_id = ?`)
		args = append(args, f.VendorID)
	}
	if f.CampaignID != "" {
		b.WriteString(` AND campaign_id = ?`)
		args = append(args, f.CampaignID)
	}
	if f.ProductID != "" {
		b.WriteString(` AND entity_type = 'product' AND entity_id = ?`)
		args = append(args, f.ProductID)
	}
	return pre.String() + b.String(), append(preArgs, args...)
}

type scanner interface{ Scan(dest ...any) error }

// scanMetrics scans metricCols after the leading destinations.
func scanMetrics(r scanner, lead ...any) (Metrics, error) {
	var m Metrics
	var impMicros, clickMicros, amount int64
	var impSub, clickSub uint64
	dest := append(lead, &m.Impressions, &m.ChargedImpressions, &impMicros, &impSub,
		&m.Clicks, &m.ChargedClicks, &clickMicros, &clickSub,
		&m.PurchaseCount, &m.PurchaseQuantity, &amount)
	if err := r.Scan(dest...); err != nil {
		return Metrics{}, err
	}
	m.SpentImpressions = exact(impMicros, impSub)
	m.SpentClicks = exact(clickMicros, clickSub)
	m.PurchaseAmount = money.Micros(amount)
	return m, nil
}

func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

// Totals reads the results of f in marketplace mp over the window.
func (s *Service) Totals(ctx context.Context, mp string, f Filter, w Window) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cond, args := where(mp, f, w.From, w.To)
	row := s.ch.QueryRow(ctx, `SELECT `+metricCols+` FROM rollup_daily`+cond, args...)
	if err := row.Err(); err != nil {
		return Metrics{}, unavailable("read the report", err)
	}
	m, err := scanMetrics(row)
	if err != nil {
		return Metrics{}, unavailable("read the report", err)
	}
	return m, nil
}

// Day is the results of one local day.
type Day struct {
	Date time.Time
	Metrics
}

// Daily reads the results of f per day of the window: every day, zeros
// where the rollup has no row.
func (s *Service) Daily(ctx context.Context, mp string, f Filter, w Window) ([]Day, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cond, args := where(mp, f, w.From, w.To)
	rows, err := s.ch.Query(ctx, `SELECT day_local, `+metricCols+` FROM rollup_daily`+cond+` GROUP BY day_local`, args...)
	if err != nil {
		return nil, unavailable("read the daily report", err)
	}
	defer rows.Close()
	out := make([]Day, w.Days())
	for i := range out {
		out[i].Date = w.From.AddDate(0, 0, i)
	}
	for rows.Next() {
		var d time.Time
		m, err := scanMetrics(rows, &d)
		if err != nil {
			return nil, unavailable("read the daily report", err)
		}
		if i := int(dateOf(d).Sub(w.From) / (24 * time.Hour)); i >= 0 && i < len(out) {
			out[i].Metrics = m
		}
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("read the daily report", err)
	}
	return out, nil
}

// Interaction is one row of the interactions report: a group's results of
// one day. VendorID is set when grouped by vendor or campaign, CampaignID
// by campaign, ProductID by product.
type Interaction struct {
	Date                            time.Time
	VendorID, CampaignID, ProductID string
	Metrics
}

// Position is the row's place in the report's order.
func (i Interaction) Position(g GroupBy) Position {
	switch g {
	case ByVendor:
		return Position{Day: i.Date, Key: i.VendorID}
	case ByProduct:
		return Position{Day: i.Date, Key: i.ProductID}
	}
	return Position{Day: i.Date, Key: i.CampaignID}
}

// Interactions reads a page of the interactions report: the rows of the
// window's days in order of day then the group's id, after r.After, at
// most r.Limit of them; more says whether rows follow. Each day is one
// query on that day's partition (GROUP BY the group's id, ORDER BY it,
// LIMIT): a page reads the days it covers and no more.
func (s *Service) Interactions(ctx context.Context, mp string, f Filter, r InteractionsRequest) (rows []Interaction, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	var key, extra, sel string
	switch r.GroupBy {
	case ByVendor:
		key, sel = "vendor_id", "vendor_id, ''"
	case ByProduct:
		key, sel, extra = "entity_id", "'', entity_id", " AND entity_type = 'product'"
	default:
		key, sel = "campaign_id", "any(vendor_id), campaign_id"
	}
	day := r.Window.From
	if !r.After.Day.IsZero() {
		day = r.After.Day
	}
	for ; !day.After(r.Window.To); day = day.AddDate(0, 0, 1) {
		want := r.Limit - len(rows) + 1 // one more says whether rows follow
		cond, args := where(mp, f, day, day)
		cond += extra
		if day.Equal(r.After.Day) {
			cond += ` AND ` + key + ` > ?`
			args = append(args, r.After.Key)
		}
		q := `SELECT ` + sel + `, ` + metricCols + ` FROM rollup_daily` + cond +
			` GROUP BY ` + key + ` ORDER BY ` + key + ` LIMIT ` + fmt.Sprint(want)
		got, err := s.interactionsOf(ctx, q, args, day, r.GroupBy)
		if err != nil {
			return nil, false, err
		}
		rows = append(rows, got...)
		if len(rows) > r.Limit {
			return rows[:r.Limit], true, nil
		}
	}
	return rows, false, nil
}

func (s *Service) interactionsOf(ctx context.Context, q string, args []any, day time.Time, g GroupBy) ([]Interaction, error) {
	rows, err := s.ch.Query(ctx, q, args...)
	if err != nil {
		return nil, unavailable("read the interactions report", err)
	}
	defer rows.Close()
	var out []Interaction
	for rows.Next() {
		x := Interaction{Date: day}
		var a, b string
		m, err := scanMetrics(rows, &a, &b)
		if err != nil {
			return nil, unavailable("read the interactions report", err)
		}
		x.Metrics = m
		switch g {
		case ByVendor:
			x.VendorID = a
		case ByProduct:
			x.ProductID = b
		default:
			x.VendorID, x.CampaignID = a, b
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("read the interactions report", err)
	}
	return out, nil
}

// DataAsOf is the watermark of the window's days (rollups.DataAsOf): every
// event acknowledged before it is counted. Zero when unknown (a day never
// computed, or computed before the projectors' progress could be read).
func (s *Service) DataAsOf(ctx context.Context, w Window) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	known, err := rollups.ReadDays(ctx, s.ch, w.From, w.To)
	if err != nil {
		return time.Time{}, unavailable("read the rollup's watermark", err)
	}
	return rollups.DataAsOf(known, w.From, w.To), nil
}

func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
