package vendorcharges

import (
	"context"
	"fmt"
)

// One vendor's refused charges in a window (the console's refused charges
// page, docs/guide/console.md): the rows include_refused adds to the list
// (refused_reason set, amount 0), of the vendor's campaigns only, counted
// per reason, and the newest of them.

// ReasonCount is how many of a vendor's interactions one reason refused.
type ReasonCount struct {
	Reason              string
	Clicks, Impressions uint64
}

// RefusedCharge is a refused charge with its kind (click or impression).
type RefusedCharge struct {
	Charge
	Kind string
}

// Refused is a vendor's refused charges in a window.
type Refused struct {
	Counts []ReasonCount // by reason, in the reasons' order
	// Latest are the newest refused charges, newest first, at most the
	// limit asked for.
	Latest []RefusedCharge
}

// Total is the number of refused charges.
func (r Refused) Total() uint64 {
	var n uint64
	for _, c := range r.Counts {
		n += c.Clicks + c.Impressions
	}
	return n
}

// vendorRefusedWhere selects a vendor's refused rows of a window, on the
// sort key's seconds first (as chargesQuery does).
const vendorRefusedWhere = `
FROM charges_raw FINAL
WHERE marketplace_id = ?
  AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?)
  AND timestamp_ms >= ? AND timestamp_ms < ?
  AND vendor_id = ?
  AND refused_reason != ''`

const vendorRefusedCounts = `SELECT refused_reason, countIf(kind = 'click'), countIf(kind = 'impression')` + vendorRefusedWhere + `
GROUP BY refused_reason
ORDER BY refused_reason`

const vendorRefusedLatest = `SELECT toString(interaction_id), timestamp_ms, campaign_id, product_id, vendor_id,
       global_id, amount_micros, amount_sub_micros,
       toString(auction_id), rank, auction_at, refused_reason, toString(kind)` + vendorRefusedWhere + `
ORDER BY timestamp_ms DESC, toString(interaction_id) DESC
LIMIT %d`

// VendorRefused reads the refused charges of vendor (its catalog id) in w:
// their counts per reason and the newest limit of them, with their products
// resolved as the list resolves them. Each query has the store's deadline.
func (s *Store) VendorRefused(ctx context.Context, mp, vendor string, w Window, limit int) (Refused, error) {
	from, end := clampSec(floorDiv(w.StartMs, 1000)), clampSec(floorDiv(w.EndMs-1, 1000)+1)
	args := []any{mp, from, end, w.StartMs, w.EndMs, vendor}
	var out Refused
	if w.EndMs <= w.StartMs {
		return out, nil
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.conn.Query(qctx, vendorRefusedCounts, args...)
	if err != nil {
		return Refused{}, fmt.Errorf("%w: count refused charges: %w", ErrUnavailable, err)
	}
	for rows.Next() {
		var c ReasonCount
		if err := rows.Scan(&c.Reason, &c.Clicks, &c.Impressions); err != nil {
			rows.Close()
			return Refused{}, fmt.Errorf("%w: read refused charges: %w", ErrUnavailable, err)
		}
		out.Counts = append(out.Counts, c)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return Refused{}, fmt.Errorf("%w: read refused charges: %w", ErrUnavailable, err)
	}
	if limit <= 0 || len(out.Counts) == 0 {
		return out, nil
	}
	rows, err = s.conn.Query(qctx, fmt.Sprintf(vendorRefusedLatest, limit), args...)
	if err != nil {
		return Refused{}, fmt.Errorf("%w: query refused charges: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	var charges []Charge
	var kinds []string
	for rows.Next() {
		var c Charge
		var kind string
		if err := rows.Scan(&c.InteractionID, &c.TimestampMs, &c.CampaignID, &c.ProductID, &c.VendorID,
			&c.GlobalID, &c.Amount.Micros, &c.Amount.SubMicros,
			&c.auctionID, &c.rank, &c.auctionAt, &c.RefusedReason, &kind); err != nil {
			return Refused{}, fmt.Errorf("%w: read refused charges: %w", ErrUnavailable, err)
		}
		charges, kinds = append(charges, c), append(kinds, kind)
	}
	if err := rows.Err(); err != nil {
		return Refused{}, fmt.Errorf("%w: read refused charges: %w", ErrUnavailable, err)
	}
	if err := s.resolveProducts(qctx, mp, charges); err != nil {
		return Refused{}, err
	}
	out.Latest = make([]RefusedCharge, len(charges))
	for i, c := range charges {
		out.Latest[i] = RefusedCharge{Charge: c, Kind: kinds[i]}
	}
	return out, nil
}
