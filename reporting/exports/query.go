package exports

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
)

// partColumns are the aggregate expressions of each part, in the order the
// query selects them; the second, when present, goes to sums.u.
var partColumns = [numParts][]string{
	pImpressions:        {"sum(impressions)"},
	pClicks:             {"sum(clicks)"},
	pChargedImpressions: {"sum(charged_impressions)"},
	pChargedClicks:      {"sum(charged_clicks)"},
	pSpentImpressions:   {"sum(ad_spent_impressions_micros)", "sum(ad_spent_impressions_sub_micros)"},
	pSpentClicks:        {"sum(ad_spent_clicks_micros)", "sum(ad_spent_clicks_sub_micros)"},
	pPurchases:          {"uniqExactMerge(purchases)"},
	pQuantity:           {"sum(quantity)"},
	pPurchaseAmount:     {"sum(total_purchase_amount_micros)"},
	pRefusedImpressions: {"sum(budget_refused_impressions)"},
	pRefusedClicks:      {"sum(budget_refused_clicks)"},
	pInvalidClicks:      {"sum(invalid_clicks)"},
}

// signedParts are read into sums.i (Int64 sums); the others into sums.u.
var signedParts = [numParts]bool{pSpentImpressions: true, pSpentClicks: true, pQuantity: true, pPurchaseAmount: true}

// plan is a validated request turned into one query and the way to read
// its rows into the file's columns.
type plan struct {
	dims    []Dimension
	metrics []Metric
	parts   []part
	sql     string
	args    []any
}

// Columns are the file's columns: dimensions then metrics, as requested.
func (p *plan) Columns() []Column {
	out := make([]Column, 0, len(p.dims)+len(p.metrics))
	for _, d := range p.dims {
		out = append(out, Column{Name: d.Name, Kind: d.Kind})
	}
	for _, m := range p.metrics {
		out = append(out, Column{Name: m.Name, Kind: m.Kind})
	}
	return out
}

// Column is a column of an export file.
type Column struct {
	Name string
	Kind Kind
}

// newPlan builds the query of a valid request for a marketplace: one
// GROUP BY on rollup_daily over the requested dimensions, rows in the order
// of those dimensions. It reads the sponsored rows, and the organic rows
// that carry an external campaign id (the marketplace's own campaigns).
//
// With a vendor (its catalog id, as the rollup's vendor_id holds it), only
// the rows of that vendor's campaigns are read.
func newPlan(mp, vendor string, r *Request) (*plan, error) {
	ds, ok := DatasetByName(r.Dataset)
	if !ok {
		return nil, fmt.Errorf("exports: unknown dataset %q", r.Dataset)
	}
	p := &plan{}
	var need [numParts]bool
	for _, name := range r.Dimensions {
		d, ok := ds.Dimension(name)
		if !ok {
			return nil, fmt.Errorf("exports: unknown dimension %q", name)
		}
		p.dims = append(p.dims, d)
	}
	for _, name := range r.Metrics {
		m, ok := ds.Metric(name)
		if !ok {
			return nil, fmt.Errorf("exports: unknown metric %q", name)
		}
		p.metrics = append(p.metrics, m)
		for _, pt := range m.parts {
			need[pt] = true
		}
	}
	cols := make([]string, len(p.dims))
	for i, d := range p.dims {
		cols[i] = d.column
	}
	sel := append([]string(nil), cols...)
	for pt := range numParts {
		if need[pt] {
			p.parts = append(p.parts, pt)
			sel = append(sel, partColumns[pt]...)
		}
	}
	if len(p.parts) == 0 {
		// Only constant metrics: still one row per group.
		sel = append(sel, "count()")
	}
	dimList := strings.Join(cols, ", ")
	p.args = []any{mp, r.StartDate, r.EndDate}
	only := ""
	if vendor != "" {
		only = "\n  AND vendor_id = ?"
		p.args = append(p.args, vendor)
	}
	p.sql = "SELECT " + strings.Join(sel, ", ") + `
FROM rollup_daily
WHERE marketplace_id = toUUID(?) AND day_local >= toDate(?) AND day_local <= toDate(?)
  AND (sponsored = 1 OR external_campaign_id != '')` + only + `
GROUP BY ` + dimList + `
ORDER BY ` + dimList
	return p, nil
}

// scanner reads the rows of a plan's query into cells.
type scanner struct {
	p     *plan
	dest  []any
	str   []string
	strs  [][]string
	date  []time.Time
	u8    []uint8
	u32   []uint32
	s     sums
	extra uint64 // count() of a plan without parts
}

func newScanner(p *plan) *scanner {
	sc := &scanner{p: p, str: make([]string, len(p.dims)), strs: make([][]string, len(p.dims)),
		date: make([]time.Time, len(p.dims)), u8: make([]uint8, len(p.dims)), u32: make([]uint32, len(p.dims))}
	for i, d := range p.dims {
		switch d.Kind {
		case KindString:
			sc.dest = append(sc.dest, &sc.str[i])
		case KindStrings:
			sc.dest = append(sc.dest, &sc.strs[i])
		case KindDate:
			sc.dest = append(sc.dest, &sc.date[i])
		case KindBool:
			sc.dest = append(sc.dest, &sc.u8[i])
		case KindInt:
			sc.dest = append(sc.dest, &sc.u32[i])
		default:
			panic("exports: dimension kind " + d.Kind.String())
		}
	}
	for _, pt := range p.parts {
		if signedParts[pt] {
			sc.dest = append(sc.dest, &sc.s.i[pt])
		} else {
			sc.dest = append(sc.dest, &sc.s.u[pt])
		}
		if len(partColumns[pt]) == 2 {
			sc.dest = append(sc.dest, &sc.s.u[pt])
		}
	}
	if len(p.parts) == 0 {
		sc.dest = append(sc.dest, &sc.extra)
	}
	return sc
}

// fill sets row (one cell per column) from the scanned values.
func (sc *scanner) fill(row []cell) {
	for i, d := range sc.p.dims {
		c := &row[i]
		switch d.Kind {
		case KindString:
			c.s = sc.str[i]
		case KindStrings:
			c.ss = sc.strs[i]
		case KindDate:
			c.i = sc.date[i].Unix() / 86400
		case KindBool:
			c.b = sc.u8[i] != 0
		case KindInt:
			c.i = int64(sc.u32[i])
		}
	}
	n := len(sc.p.dims)
	for j, m := range sc.p.metrics {
		row[n+j] = m.value(&sc.s)
	}
}

// Server-side bounds of the export query: blocks of 16,384 rows (one
// decoded ahead) keep the worker's memory small; a GROUP BY or ORDER BY
// past 1 GiB spills to the server's disk instead of failing.
var querySettings = map[string]any{
	"max_bytes_before_external_group_by": 1 << 30,
	"max_bytes_before_external_sort":     1 << 30,
}

const queryBlockRows = 16_384

// query runs the plan and calls fn with each row (reused between calls).
func query(ctx context.Context, ch clickhouse.Conn, p *plan, fn func(row []cell) error) error {
	rows, err := ch.Query(clickhouse.Streaming(ctx, queryBlockRows, querySettings), p.sql, p.args...)
	if err != nil {
		return fmt.Errorf("exports: query: %w", err)
	}
	defer rows.Close()
	sc := newScanner(p)
	row := make([]cell, len(p.dims)+len(p.metrics))
	for rows.Next() {
		if err := rows.Scan(sc.dest...); err != nil {
			return fmt.Errorf("exports: read row: %w", err)
		}
		sc.fill(row)
		if err := fn(row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("exports: read rows: %w", err)
	}
	return nil
}
