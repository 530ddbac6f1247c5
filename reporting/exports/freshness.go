package exports

import (
	"context"
	"fmt"
	"time"

	"github.com/endcap/endcap/reporting/rollups"
)

// The freshness of an export (docs/reference/exports.md, Freshness): the rollup days
// of its window are recomputed first when their watermark is older than the
// request (less MaxStaleness), and the file says up to when its numbers are
// complete (dataAsOf) and whether its last day had ended by then.

// ensureFresh recomputes the rollup days of the export's window whose
// watermark is more than MaxStaleness before the export was requested, or
// unknown, unless they are final. The recomputation waits (boundedly) for
// the projectors to fold what was acknowledged before it started.
func (s *Service) ensureFresh(ctx context.Context, e *Export, wo *WorkerOptions) error {
	if wo.Refresh == nil {
		return nil
	}
	start, end, err := window(&e.Request)
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	known, err := rollups.ReadDays(ctx, s.o.ClickHouse, start, end)
	if err != nil {
		return err
	}
	stale := staleDays(known, start, end, e.CreatedAt.Add(-wo.MaxStaleness))
	if len(stale) == 0 {
		return nil
	}
	t0 := time.Now()
	if err := wo.Refresh(ctx, stale); err != nil {
		return fmt.Errorf("exports: refresh the rollup of %d days: %w", len(stale), err)
	}
	s.o.Log.Info("exports: rollup days recomputed before the export", "export", e.ID, "days", len(stale), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// staleDays are the days start..end that are not final and whose
// watermark is unknown or before need.
func staleDays(known map[time.Time]rollups.Day, start, end, need time.Time) []time.Time {
	var out []time.Time
	for d := start; !d.After(end); d = d.AddDate(0, 0, 1) {
		k, ok := known[d]
		if ok && k.Final(d) {
			continue
		}
		if !ok || k.DataAsOf.IsZero() || k.DataAsOf.Before(need) {
			out = append(out, d)
		}
	}
	return out
}

// freshness reads the watermark of the request's window and says whether
// its last day had not ended by then in the marketplace's zone.
func (s *Service) freshness(ctx context.Context, mp string, r *Request) (dataAsOf time.Time, partial bool, err error) {
	start, end, err := window(r)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%w: %w", errPermanent, err)
	}
	known, err := rollups.ReadDays(ctx, s.o.ClickHouse, start, end)
	if err != nil {
		return time.Time{}, false, err
	}
	var loc *time.Location
	if s.o.Location != nil {
		loc = s.o.Location(mp)
	}
	dataAsOf = rollups.DataAsOf(known, start, end)
	return dataAsOf, dataAsOf.IsZero() || dataAsOf.Before(WindowEnd(end, loc)), nil
}

// WindowEnd is the instant the local day end ends in loc (the start of the
// next day there); with no zone, in the westernmost one (UTC−12), the
// latest it can end anywhere.
func WindowEnd(end time.Time, loc *time.Location) time.Time {
	if loc == nil {
		return time.Date(end.Year(), end.Month(), end.Day()+1, 12, 0, 0, 0, time.UTC)
	}
	return time.Date(end.Year(), end.Month(), end.Day()+1, 0, 0, 0, 0, loc).UTC()
}

// window is a valid request's first and last day.
func window(r *Request) (start, end time.Time, err error) {
	if start, err = parseDate(r.StartDate); err == nil {
		end, err = parseDate(r.EndDate)
	}
	return start, end, err
}
