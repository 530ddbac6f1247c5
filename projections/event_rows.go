package projections

import (
	"context"
	"time"

	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/storage/clickhouse"
)

// eventColumns is the column list of events_raw, in the order of eventRows.
const eventColumns = `marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at, received_at_ms, countable,
	opaque_user_id, resolved_bid_id, entity_type, entity_id, additional_attribution_type, additional_attribution_id,
	placement_path, placement_position, placement_page, placement_page_size, placement_product_id,
	placement_category_ids, placement_search_query, page_type, page_id, page_value,
	object_type, object_asset_id, object_click_type, external_campaign_id, external_vendor_id,
	device_type, channel, click_type,
	items.product_id, items.unit_price_micros, items.quantity, items.vendor_id,
	kafka_partition, kafka_offset`

// eventRows holds a batch column by column, so that the insert appends whole
// columns instead of converting row by row; the String columns are built
// value by value as the insert sends them (clickhouse.Strings).
type eventRows struct {
	n                                                int
	marketplace, kind, id                            clickhouse.Strings
	occurred, received                               []time.Time
	occurredMs, receivedMs                           []int64
	countable                                        []uint8
	user, rbid, entType, entID, aaType, aaID         clickhouse.Strings
	plPath                                           clickhouse.Strings
	plPos, plPage, plPageSize                        []uint32
	plProduct                                        clickhouse.Strings
	plCategories                                     [][]string
	plSearch, pgType, pgID                           clickhouse.Strings
	pgValue                                          [][]string
	obType, obAsset, obClick, extCampaign, extVendor clickhouse.Strings
	device, channel, clickType                       clickhouse.Strings
	itProduct, itVendor                              [][]string
	itPrice, itQty                                   [][]int64
	partition                                        []int32
	offset                                           []int64
}

func newEventRows(capacity int) *eventRows {
	u := func() []uint32 { return make([]uint32, 0, capacity) }
	r := &eventRows{
		occurred: make([]time.Time, 0, capacity), received: make([]time.Time, 0, capacity),
		occurredMs: make([]int64, 0, capacity), receivedMs: make([]int64, 0, capacity),
		countable: make([]uint8, 0, capacity),
		plPos:     u(), plPage: u(), plPageSize: u(), plCategories: make([][]string, 0, capacity), pgValue: make([][]string, 0, capacity),
		itProduct: make([][]string, 0, capacity), itVendor: make([][]string, 0, capacity),
		itPrice: make([][]int64, 0, capacity), itQty: make([][]int64, 0, capacity),
		partition: make([]int32, 0, capacity), offset: make([]int64, 0, capacity),
	}
	for _, c := range []*clickhouse.Strings{&r.marketplace, &r.kind, &r.id, &r.user, &r.rbid, &r.entType, &r.entID,
		&r.aaType, &r.aaID, &r.plPath, &r.plProduct, &r.plSearch, &r.pgType, &r.pgID, &r.obType, &r.obAsset, &r.obClick,
		&r.extCampaign, &r.extVendor, &r.device, &r.channel, &r.clickType} {
		c.Grow(capacity, 0)
	}
	return r
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (r *eventRows) add(e *records.Event, partition int32, offset int64) {
	r.n++
	r.marketplace.Append(e.MarketplaceID)
	r.kind.Append(e.Kind.String())
	r.id.Append(e.ID)
	r.occurred = append(r.occurred, time.UnixMilli(e.OccurredAtMs).UTC())
	r.occurredMs = append(r.occurredMs, e.OccurredAtMs)
	r.received = append(r.received, time.UnixMilli(e.ReceivedAtMs).UTC())
	r.receivedMs = append(r.receivedMs, e.ReceivedAtMs)
	var countable uint8
	if e.Countable() {
		countable = 1
	}
	r.countable = append(r.countable, countable)
	r.user.Append(e.OpaqueUserID)
	r.rbid.Append(e.ResolvedBidID)
	var et, ei, at, ai string
	if e.Entity != nil {
		et, ei = e.Entity.Type, e.Entity.ID
	}
	if e.AdditionalAttribution != nil {
		at, ai = e.AdditionalAttribution.Type, e.AdditionalAttribution.ID
	}
	r.entType.Append(et)
	r.entID.Append(ei)
	r.aaType.Append(at)
	r.aaID.Append(ai)
	pl := e.Placement
	if pl == nil {
		pl = &records.Placement{}
	}
	r.plPath.Append(pl.Path)
	r.plPos = append(r.plPos, uint32(pl.Position))
	r.plPage = append(r.plPage, uint32(pl.Page))
	r.plPageSize = append(r.plPageSize, uint32(pl.PageSize))
	r.plProduct.Append(pl.ProductID)
	r.plCategories = append(r.plCategories, nonNil(pl.CategoryIDs))
	r.plSearch.Append(pl.SearchQuery)
	pg := e.Page
	if pg == nil {
		pg = &records.Page{}
	}
	r.pgValue = append(r.pgValue, nonNil(pg.Value))
	r.pgType.Append(pg.Type)
	r.pgID.Append(pg.ID)
	ob := e.Object
	if ob == nil {
		ob = &records.Object{}
	}
	r.obType.Append(ob.Type)
	r.obAsset.Append(ob.AssetID)
	r.obClick.Append(ob.ClickType)
	r.extCampaign.Append(e.ExternalCampaignID)
	r.extVendor.Append(e.ExternalVendorID)
	r.device.Append(e.DeviceType)
	r.channel.Append(e.Channel)
	r.clickType.Append(e.ClickType)
	products := make([]string, len(e.Items))
	vendors := make([]string, len(e.Items))
	prices := make([]int64, len(e.Items))
	qty := make([]int64, len(e.Items))
	for i, it := range e.Items {
		products[i], vendors[i], prices[i], qty[i] = it.ProductID, it.VendorID, it.UnitPriceMicros, it.Quantity
	}
	r.itProduct, r.itVendor, r.itPrice, r.itQty = append(r.itProduct, products), append(r.itVendor, vendors), append(r.itPrice, prices), append(r.itQty, qty)
	r.partition = append(r.partition, partition)
	r.offset = append(r.offset, offset)
}

func (r *eventRows) insert(ctx context.Context, conn clickhouse.Conn) error {
	return InsertColumns(ctx, conn, "events_raw", eventColumns, r.n, r.columns())
}

func (r *eventRows) columns() []any {
	return []any{
		&r.marketplace, &r.kind, &r.id, r.occurred, r.occurredMs, r.received, r.receivedMs, r.countable,
		&r.user, &r.rbid, &r.entType, &r.entID, &r.aaType, &r.aaID,
		&r.plPath, r.plPos, r.plPage, r.plPageSize, &r.plProduct,
		r.plCategories, &r.plSearch, &r.pgType, &r.pgID, r.pgValue,
		&r.obType, &r.obAsset, &r.obClick, &r.extCampaign, &r.extVendor,
		&r.device, &r.channel, &r.clickType,
		r.itProduct, r.itPrice, r.itQty, r.itVendor,
		r.partition, r.offset,
	}
}
