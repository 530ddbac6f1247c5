package exports

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/endcap/endcap/internal/timestamp"
)

// result is a produced file.
type result struct {
	key  string
	rows int64
	size int64
	// dataAsOf is the data's watermark (zero: unknown); partial says the
	// window's last day had not ended by then.
	dataAsOf time.Time
	partial  bool
}

// ObjectKey is where an export's file is stored.
func ObjectKey(mp string, e *Export) string {
	return "exports/" + mp + "/" + e.ID + extension(e.Request.Format)
}

// produce writes the export's file: one query on the rollup (or the
// balance ledger's rows), streamed row by row into the format's writer, into a multipart upload that publishes
// the object only when complete. On any failure, cancellation included,
// the upload is aborted: no object, or none that looks complete, is left.
func (s *Service) produce(ctx context.Context, mp string, e *Export, wo *WorkerOptions) (result, error) {
	start := s.o.Now().UTC()
	res := result{key: ObjectKey(mp, e)}
	var cols []Column
	var rows func(fn func(row []cell) error) error
	if e.Dataset == DatasetBalanceLedger {
		lp, err := newLedgerPlan(&e.Request)
		if err != nil {
			return result{}, fmt.Errorf("%w: %w", errPermanent, err)
		}
		// Read before the query: the charges folded by then are in it.
		if res.dataAsOf, res.partial, err = s.ledgerFreshness(ctx, mp, &e.Request, wo); err != nil {
			return result{}, err
		}
		cols = lp.cols
		rows = func(fn func(row []cell) error) error { return s.ledgerRows(ctx, mp, e.VendorID, &e.Request, lp, fn) }
	} else {
		p, err := newPlan(mp, e.VendorID, &e.Request)
		if err != nil {
			return result{}, fmt.Errorf("%w: %w", errPermanent, err)
		}
		if err := s.ensureFresh(ctx, e, wo); err != nil {
			return result{}, err
		}
		// Read before the query: a later recomputation of a day (under the
		// rollups' lock, one at a time) only adds what it counts.
		if res.dataAsOf, res.partial, err = s.freshness(ctx, mp, &e.Request); err != nil {
			return result{}, err
		}
		cols = p.Columns()
		rows = func(fn func(row []cell) error) error { return query(ctx, s.o.ClickHouse, p, fn) }
	}
	// A dead attempt's unfinished upload of this key is invisible; remove
	// its parts.
	if err := s.o.S3.AbortStale(ctx, res.key, start); err != nil {
		s.o.Log.Warn("exports: stale uploads not aborted", "key", res.key, "err", err)
	}
	meta := map[string]string{
		"endcap.export_id": e.ID, "endcap.marketplace_id": mp, "endcap.dataset": e.Dataset,
		"endcap.start_date": e.Request.StartDate, "endcap.end_date": e.Request.EndDate,
		"endcap.partial": strconv.FormatBool(res.partial),
	}
	if !res.dataAsOf.IsZero() {
		meta["endcap.data_as_of"] = timestamp.Format(res.dataAsOf)
	}
	up, err := s.o.S3.NewUpload(ctx, res.key, contentType(e.Request.Format), map[string]string{"export-id": e.ID}, wo.PartSize)
	if err != nil {
		return result{}, err
	}
	up.AfterPart = wo.afterPart
	defer up.Abort() // no-op after Complete
	fw, err := newFileWriter(e.Request.Format, up, cols, meta)
	if err != nil {
		return result{}, fmt.Errorf("%w: %w", errPermanent, err)
	}
	err = rows(func(row []cell) error {
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
