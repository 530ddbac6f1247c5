package scoredfiles

import (
	"time"

	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/reporting/vendorcharges"
)

// SchemaVersion names the columns of Record; it is stored in every file
// (key-value metadata "endcap.schema") and object (x-amz-meta-schema).
const SchemaVersion = "1"

// Record is one row of a scored-attribution file: one attributed purchased
// item (docs/reference/scored-attribution.md has the meaning of every column). Money
// is exact: integer micro-units, plus the same amount as a decimal string
// in currency units. Instants are UTC milliseconds since the epoch with the
// Parquet TIMESTAMP(MILLIS, UTC) type.
type Record struct {
	MarketplaceID      string  `parquet:"marketplace_id,dict"`
	DayLocal           int32   `parquet:"day_local,date"`
	PurchaseEventID    string  `parquet:"purchase_event_id"`
	ItemIndex          int32   `parquet:"item_index"`
	PurchasedAt        int64   `parquet:"purchased_at,timestamp(millisecond:utc)"`
	PurchaseReceivedAt int64   `parquet:"purchase_received_at,timestamp(millisecond:utc)"`
	OpaqueUserID       string  `parquet:"opaque_user_id"`
	ProductID          string  `parquet:"product_id"`
	ItemVendorID       string  `parquet:"item_vendor_id,dict"`
	Quantity           int64   `parquet:"quantity"`
	CurrencyCode       string  `parquet:"currency_code,dict"`
	UnitPriceMicros    int64   `parquet:"unit_price_micros"`
	AmountMicros       int64   `parquet:"amount_micros"`
	Amount             string  `parquet:"amount"`
	Reason             string  `parquet:"reason,dict"`
	Score              float64 `parquet:"score"`
	WindowSeconds      int64   `parquet:"window_seconds"`
	InteractionID      string  `parquet:"interaction_id"`
	InteractionKind    string  `parquet:"interaction_kind,dict"`
	InteractionEventID string  `parquet:"interaction_event_id"`
	InteractionAt      int64   `parquet:"interaction_at,timestamp(millisecond:utc)"`
	AuctionID          string  `parquet:"auction_id"`
	AuctionAt          int64   `parquet:"auction_at,timestamp(millisecond:utc)"`
	Rank               int32   `parquet:"rank"`
	AdFormat           string  `parquet:"ad_format,dict"`
	CampaignID         string  `parquet:"campaign_id,dict"`
	VendorID           string  `parquet:"vendor_id,dict"`
	EntityType         string  `parquet:"entity_type,dict"`
	EntityID           string  `parquet:"entity_id"`
	ChargeType         string  `parquet:"charge_type,dict"`
	AttributionVersion uint64  `parquet:"attribution_version"`
}

// recordOf converts one attributed item. It keeps every value exact: the
// integer columns are copied, the decimal amount is formatted from the
// integer micro-units without a float.
func recordOf(r *attribution.Row) Record {
	return Record{
		MarketplaceID:      r.MarketplaceID.String(),
		DayLocal:           int32(r.DayLocal.Unix() / 86400),
		PurchaseEventID:    r.PurchaseEventID,
		ItemIndex:          int32(r.ItemIndex),
		PurchasedAt:        r.PurchasedAtMs,
		PurchaseReceivedAt: r.PurchaseReceivedAtMs,
		OpaqueUserID:       r.OpaqueUserID,
		ProductID:          r.ProductID,
		ItemVendorID:       r.ItemVendorID,
		Quantity:           r.Quantity,
		CurrencyCode:       r.CurrencyCode,
		UnitPriceMicros:    r.UnitPriceMicros,
		AmountMicros:       r.AmountMicros,
		Amount:             vendorcharges.Amount{Micros: r.AmountMicros}.String(),
		Reason:             r.Reason,
		Score:              r.Score,
		WindowSeconds:      int64(r.WindowSeconds),
		InteractionID:      r.InteractionID.String(),
		InteractionKind:    r.InteractionKind,
		InteractionEventID: r.InteractionEventID,
		InteractionAt:      r.InteractionAtMs,
		AuctionID:          r.AuctionID.String(),
		AuctionAt:          r.AuctionAtMs,
		Rank:               int32(r.Rank),
		AdFormat:           r.AdFormat,
		CampaignID:         r.CampaignID,
		VendorID:           r.VendorID,
		EntityType:         r.EntityType,
		EntityID:           r.EntityID,
		ChargeType:         r.ChargeType,
		AttributionVersion: r.Version,
	}
}

// Day is the date of a Record's day_local column.
func (r Record) Day() time.Time { return time.Unix(int64(r.DayLocal)*86400, 0).UTC() }
