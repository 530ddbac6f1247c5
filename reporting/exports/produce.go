package exports

import (
	"context"
	"fmt"
	"time"

	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/storage/clickhouse"
)

// result is a produced file.
type result struct {
	key  string
	rows int64
	size int64
}

// ObjectKey is where an export's file is stored.
func ObjectKey(mp string, e *Export) string {
	return "exports/" + mp + "/" + e.ID + extension(e.Request.Format)
}

// produce writes the export's file: one query on the rollup, streamed row
// by row into the format's writer, into a multipart upload that publishes
// the object only when complete. On any failure, cancellation included,
// the upload is aborted: no object, or none that looks complete, is left.
func (s *Service) produce(ctx context.Context, mp string, e *Export, wo *WorkerOptions) (result, error) {
	start := s.o.Now().UTC()
	p, err := newPlan(mp, &e.Request)
	if err != nil {
		return result{}, fmt.Errorf("%w: %w", errPermanent, err)
	}
	if err := s.ensureFresh(ctx, e, wo); err != nil {
		return result{}, err
	}
	res := result{key: ObjectKey(mp, e)}
	// A dead attempt's unfinished upload of this key is invisible; remove
	// its parts.
	if err := s.o.S3.AbortStale(ctx, res.key, start); err != nil {
		s.o.Log.Warn("exports: stale uploads not aborted", "key", res.key, "err", err)
	}
	meta := map[string]string{
		"endcap.export_id": e.ID, "endcap.marketplace_id": mp, "endcap.dataset": e.Dataset,
		"endcap.start_date": e.Request.StartDate, "endcap.end_date": e.Request.EndDate,
	}
	up, err := s.o.S3.NewUpload(ctx, res.key, contentType(e.Request.Format), map[string]string{"export-id": e.ID}, wo.PartSize)
	if err != nil {
		return result{}, err
	}
	up.AfterPart = wo.afterPart
	defer up.Abort() // no-op after Complete
	fw, err := newFileWriter(e.Request.Format, up, p.Columns(), meta)
	if err != nil {
		return result{}, fmt.Errorf("%w: %w", errPermanent, err)
	}
	err = query(ctx, s.o.ClickHouse, p, func(row []cell) error {
		res.rows++
		return fw.Write(row)
	})
	if err == nil {
		err = fw.Close()
	}
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx) // never publish a read that may have been cut short
	}
	if err != nil {
		return result{}, err
	}
	if res.size, err = up.Complete(); err != nil {
		return result{}, err
	}
	return res, nil
}

// ensureFresh recomputes the rollup days of the export's window whose last
// recomputation started more than MaxStaleness before the export was
// requested (or never ran), unless that recomputation was final: the file
// then holds everything folded into the raw tables up to then.
func (s *Service) ensureFresh(ctx context.Context, e *Export, wo *WorkerOptions) error {
	if wo.Refresh == nil {
		return nil
	}
	computed, err := computedAt(ctx, s.o.ClickHouse, e.Request.StartDate, e.Request.EndDate)
	if err != nil {
		return err
	}
	start, _ := parseDate(e.Request.StartDate)
	end, _ := parseDate(e.Request.EndDate)
	var stale []time.Time
	for d := start; !d.After(end); d = d.AddDate(0, 0, 1) {
		at, ok := computed[d]
		switch {
		case ok && !at.Before(rollups.FinalAfter(d)):
			// Recomputed after it could no longer change: final.
		case !ok || at.Before(e.CreatedAt.Add(-wo.MaxStaleness)):
			stale = append(stale, d)
		}
	}
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

// computedAt reads when each day of [from, to] was last recomputed.
func computedAt(ctx context.Context, ch clickhouse.Conn, from, to string) (map[time.Time]time.Time, error) {
	rows, err := ch.Query(ctx, `SELECT day_local, max(computed_at) FROM rollup_days
		WHERE day_local >= toDate(?) AND day_local <= toDate(?) GROUP BY day_local`, from, to)
	if err != nil {
		return nil, fmt.Errorf("exports: read rollup_days: %w", err)
	}
	defer rows.Close()
	out := map[time.Time]time.Time{}
	for rows.Next() {
		var d, at time.Time
		if err := rows.Scan(&d, &at); err != nil {
			return nil, fmt.Errorf("exports: read rollup_days: %w", err)
		}
		out[dateOf(d)] = at
	}
	return out, rows.Err()
}
