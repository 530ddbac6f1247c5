package attribution

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/storage/clickhouse"
)

// Row is one attributed purchased item: a row of the view
// attributed_purchases (docs/design/attribution.md has the meaning of every field).
type Row struct {
	MarketplaceID        uuid.UUID
	PurchaseEventID      string
	ItemIndex            uint16
	PurchasedAt          time.Time // UTC, whole seconds; PurchasedAtMs is exact
	PurchasedAtMs        int64
	PurchaseReceivedAtMs int64
	DayLocal             time.Time // the marketplace-local date of the purchase, as a UTC midnight
	CurrencyCode         string
	OpaqueUserID         string
	ProductID            string
	ItemVendorID         string
	Quantity             int64
	UnitPriceMicros      int64
	AmountMicros         int64 // UnitPriceMicros × Quantity
	Reason               string
	Score                float64
	WindowSeconds        uint32
	InteractionID        uuid.UUID
	InteractionKind      string
	InteractionEventID   string
	InteractionAtMs      int64
	AuctionID            uuid.UUID
	AuctionAtMs          int64
	Rank                 uint8
	AdFormat             string
	CampaignID           string
	VendorID             string
	EntityType           string
	EntityID             string
	ChargeType           string // of the winner: CPC (its click is billable) or CPM (its impression)
	Version              uint64
}

// rowColumns are the columns Row is scanned from, in order.
const rowColumns = `marketplace_id, purchase_event_id, item_index, purchased_at, purchased_at_ms, purchase_received_at_ms,
	day_local, currency_code, opaque_user_id, product_id, item_vendor_id, quantity, unit_price_micros, amount_micros,
	reason, score, window_seconds, interaction_id, interaction_kind, interaction_event_id, interaction_at_ms,
	auction_id, auction_at_ms, rank, ad_format, campaign_id, vendor_id, entity_type, entity_id, charge_type, version`

func (r *Row) scan(rows interface{ Scan(...any) error }) error {
	return rows.Scan(&r.MarketplaceID, &r.PurchaseEventID, &r.ItemIndex, &r.PurchasedAt, &r.PurchasedAtMs, &r.PurchaseReceivedAtMs,
		&r.DayLocal, &r.CurrencyCode, &r.OpaqueUserID, &r.ProductID, &r.ItemVendorID, &r.Quantity, &r.UnitPriceMicros, &r.AmountMicros,
		&r.Reason, &r.Score, &r.WindowSeconds, &r.InteractionID, &r.InteractionKind, &r.InteractionEventID, &r.InteractionAtMs,
		&r.AuctionID, &r.AuctionAtMs, &r.Rank, &r.AdFormat, &r.CampaignID, &r.VendorID, &r.EntityType, &r.EntityID, &r.ChargeType,
		&r.Version)
}

// ErrStop, returned by a Rows callback, ends the iteration without error.
var ErrStop = errors.New("stop")

// Rows calls fn for every attributed item of a marketplace whose purchase
// occurred in [from, to) (UTC instants), in the order of purchased_at_ms,
// purchase_event_id, item_index. It reads attributed_purchases_raw with
// FINAL (the current attribution of each item) and its own filters, which
// on 18.16 is much cheaper than filtering the view: the purchase's
// marketplace and time, the same in every version of an item, in PREWHERE
// (dropped as read, before the FINAL merge); attributed, which a later
// version can change, in WHERE (after it). fn must not keep r.
func Rows(ctx context.Context, conn clickhouse.Conn, marketplaceID string, from, to time.Time, fn func(r *Row) error) error {
	if _, err := uuid.Parse(marketplaceID); err != nil {
		return fmt.Errorf("attribution: marketplace id %q: %w", marketplaceID, err)
	}
	if !from.Before(to) {
		return nil
	}
	fromMs, toMs := from.UnixMilli(), to.UnixMilli()
	return query(ctx, conn, `SELECT `+rowColumns+` FROM attributed_purchases_raw FINAL
		PREWHERE marketplace_id = toUUID(?) AND purchased_at >= toDateTime(?) AND purchased_at <= toDateTime(?)
		  AND purchased_at_ms >= ? AND purchased_at_ms < ?
		WHERE attributed = 1
		ORDER BY purchased_at_ms, purchase_event_id, item_index`,
		fn, marketplaceID, floorSec(fromMs), floorSec(toMs), fromMs, toMs)
}

// LocalDay calls fn for every attributed item of a marketplace purchased on
// one marketplace-local date (day: its year, month and day are used), in
// the order of Rows.
func LocalDay(ctx context.Context, conn clickhouse.Conn, marketplaceID string, day time.Time, fn func(r *Row) error) error {
	if _, err := uuid.Parse(marketplaceID); err != nil {
		return fmt.Errorf("attribution: marketplace id %q: %w", marketplaceID, err)
	}
	// A local date spans at most [date − 14 h, date + 1 day + 12 h] in UTC:
	// those bounds prune partitions; day_local decides.
	d := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
	return query(ctx, conn, `SELECT `+rowColumns+` FROM attributed_purchases_raw FINAL
		PREWHERE marketplace_id = toUUID(?) AND purchased_at >= toDateTime(?) AND purchased_at < toDateTime(?)
		WHERE day_local = toDate(?) AND attributed = 1
		ORDER BY purchased_at_ms, purchase_event_id, item_index`,
		fn, marketplaceID, d.Add(-15*time.Hour).Unix(), d.Add(39*time.Hour).Unix(), d.Format(time.DateOnly))
}

func query(ctx context.Context, conn clickhouse.Conn, q string, fn func(*Row) error, args ...any) error {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("attribution: read attributed purchases: %w", err)
	}
	defer rows.Close()
	var r Row
	for rows.Next() {
		r = Row{}
		if err := r.scan(rows); err != nil {
			return fmt.Errorf("attribution: scan attributed purchase: %w", err)
		}
		if err := fn(&r); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("attribution: read attributed purchases: %w", err)
	}
	return nil
}

// FinalAfter is when the attribution of purchases that occurred before t
// can no longer change: every event that can still be counted for them
// (received at most Horizon after it occurred) has been received. Once the
// attribution projector has also caught up with the events topic
// (endcap_kafka_consumer_lag_records{group="endcap-projector-events"}
// at 0), rows of purchases before t are final.
func FinalAfter(t time.Time) time.Time { return t.Add(Horizon) }
