// Package retention removes data older than the operator keeps it
// (docs/operations/operations.md, Data retention): the month partitions of ClickHouse's
// raw tables, and old export and report files in the bucket. The exporter
// runs both on a schedule, each under a Redis lease.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/storage/clickhouse"
)

// Group is a set of raw tables kept for one bound. Every table is
// partitioned by toYYYYMM of its time column.
type Group struct {
	Name   string
	Tables []string
	Keep   config.Age
}

// Groups are the raw tables by what they hold; each holds shoppers' ids.
func Groups(events, auctions, interactions config.Age) []Group {
	return []Group{
		{"events", []string{"events_raw", "attribution_purchases_raw", "attributed_purchases_raw"}, events},
		{"auctions", []string{"auctions_raw"}, auctions},
		{"interactions", []string{"interactions_raw", "attribution_touches_raw"}, interactions},
	}
}

// Kept are the tables no group has, kept for ever: the money history and
// what invoices read (charges_raw; auction_winners_raw, which the vendor
// charges read for a charge's product and which holds no shopper), the
// aggregates (rollup_daily, rollup_days), the entities' copy and the
// migrations' record.
var Kept = []string{"charges_raw", "auction_winners_raw", "rollup_daily", "rollup_days", "entity_state_raw", "schema_migrations"}

// statementTimeout bounds each query and drop.
const statementTimeout = time.Minute

// Partitions drops the month partitions of the groups' tables once the
// whole month is older than the group's bound.
type Partitions struct {
	ClickHouse clickhouse.Conn
	Groups     []Group
	// CatchUpDays: how far back the rollups recompute days that are not
	// final (rollups.DefaultCatchUpDays when 0). A month is dropped only
	// when every day within it whose rollup rows read it is final.
	CatchUpDays int
	Log         *slog.Logger
	Now         func() time.Time
}

// Partition names a month partition of a table.
type Partition struct {
	Table string
	Month string // YYYYMM, the partition's id
}

// Result is what one run did.
type Result struct {
	Dropped []Partition
	// Held: old enough, but kept because a day of the rollups that reads it
	// is not final yet (the rollup job recomputes it from the raw rows).
	Held []Partition
}

// Once drops, in every table of a group with a bound, each month partition
// whose month ended before the bound's cut-off.
func (p *Partitions) Once(ctx context.Context) (Result, error) {
	now := time.Now().UTC()
	if p.Now != nil {
		now = p.Now().UTC()
	}
	var res Result
	final := map[string]bool{} // month → its rollup days are final
	for _, g := range p.Groups {
		if g.Keep.Forever() {
			continue
		}
		cutoff := g.Keep.Cutoff(now)
		for _, table := range g.Tables {
			months, err := p.months(ctx, table)
			if err != nil {
				return res, err
			}
			for _, m := range months {
				start, _ := monthOf(m)
				if start.AddDate(0, 1, 0).After(cutoff) {
					continue
				}
				ok, seen := final[m]
				if !seen {
					if ok, err = p.rollupsFinal(ctx, start, now); err != nil {
						return res, err
					}
					final[m] = ok
				}
				if !ok {
					res.Held = append(res.Held, Partition{table, m})
					continue
				}
				qctx, cancel := context.WithTimeout(ctx, statementTimeout)
				// Replicated tables carry a partition's drop to the other
				// replicas through ZooKeeper: no ON CLUSTER
				// (docs/design/clickhouse.md, Run time).
				err := p.ClickHouse.Exec(qctx, "ALTER TABLE "+table+" DROP PARTITION ID '"+m+"'")
				cancel()
				if err != nil {
					return res, fmt.Errorf("retention: drop partition %s of %s: %w", m, table, err)
				}
				p.Log.Info("retention: dropped a month of a raw table", "table", table, "month", m, "group", g.Name, "cutoff", cutoff.Format(time.DateOnly))
				res.Dropped = append(res.Dropped, Partition{table, m})
			}
		}
	}
	if len(res.Held) > 0 {
		p.Log.Warn("retention: months past their bound kept until the rollup days that read them are final (docs/design/rollups.md)", "held", fmt.Sprint(res.Held))
	}
	return res, nil
}

// rollupsFinal says whether every local day whose rollup rows may read the
// month starting at start (its days and a day either side for the zones,
// and the 31 days after it, whose interactions read their auctions) is
// final, among the days the rollups still recompute (CatchUpDays back).
func (p *Partitions) rollupsFinal(ctx context.Context, start, now time.Time) (bool, error) {
	catchUp := p.CatchUpDays
	if catchUp <= 0 {
		catchUp = rollups.DefaultCatchUpDays
	}
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	lo := start.AddDate(0, 0, -1)
	if earliest := today.AddDate(0, 0, -catchUp); lo.Before(earliest) {
		lo = earliest
	}
	hi := start.AddDate(0, 1, 32)
	if hi.Before(lo) {
		return true, nil
	}
	qctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	days, err := rollups.ReadDays(qctx, p.ClickHouse, lo, hi)
	if err != nil {
		return false, fmt.Errorf("retention: %w", err)
	}
	for d := lo; !d.After(hi); d = d.AddDate(0, 0, 1) {
		if !days[d].Final(d) {
			return false, nil
		}
	}
	return true, nil
}

// months lists the month partitions of table that have active parts.
func (p *Partitions) months(ctx context.Context, table string) ([]string, error) {
	qctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	rows, err := p.ClickHouse.Query(qctx, `SELECT DISTINCT partition_id FROM system.parts
		WHERE database = currentDatabase() AND table = ? AND active ORDER BY partition_id`, table)
	if err != nil {
		return nil, fmt.Errorf("retention: partitions of %s: %w", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("retention: partitions of %s: %w", table, err)
		}
		if _, ok := monthOf(id); ok {
			out = append(out, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retention: partitions of %s: %w", table, err)
	}
	return out, nil
}

// monthOf reads a YYYYMM partition id as the first instant of its month.
func monthOf(id string) (time.Time, bool) {
	n, err := strconv.Atoi(id)
	if len(id) != 6 || err != nil || n%100 < 1 || n%100 > 12 {
		return time.Time{}, false
	}
	return time.Date(n/100, time.Month(n%100), 1, 0, 0, 0, 0, time.UTC), true
}
