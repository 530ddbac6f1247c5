package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/clickhouse"
)

// AuctionsGroup is the consumer group of the auctions projector.
const AuctionsGroup = "endcap-projector-auctions"

// AuctionsProjector folds the auctions topic into ClickHouse tables
// auctions_raw (one row per auction) and auction_winners_raw (one row per
// winner), read through the views `auctions` and `auction_winners`.
//
// Unlike the events projector it claims no idempotency key in Redis. An
// event id comes from a client, which may send it again in a new, different
// record, and the first record must win. An auction id is a UUIDv7 the server
// makes once per auction and the record is produced once (the producer is
// idempotent), so the only way to see an auction twice is to consume the same
// Kafka record again (a crash or rebalance between insert and commit). Such a
// replay inserts byte-identical rows under the same sorting key, which the
// ReplacingMergeTree folds and the FINAL views never show twice: whichever
// copy survives is right.
type AuctionsProjector struct {
	b   *batcher
	ch  clickhouse.Conn
	log *slog.Logger
	// The column buffers, reused from one flush to the next (flush runs on
	// the batcher's goroutine only).
	rows auctionRows
	wins winnerRows
}

// AuctionsOptions configure an AuctionsProjector.
type AuctionsOptions struct {
	Brokers       []string
	Topic         string
	ClickHouse    clickhouse.Conn
	MaxRows       int // records (auctions) per batch; each brings its winners along
	FlushInterval time.Duration
	Group         GroupOptions
	Log           *slog.Logger
}

// NewAuctionsProjector joins the consumer group (it starts consuming on Run).
func NewAuctionsProjector(o AuctionsOptions) (*AuctionsProjector, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	p := &AuctionsProjector{ch: o.ClickHouse, log: o.Log}
	var err error
	if p.b, err = newBatcher(o.Brokers, AuctionsGroup, []string{o.Topic}, o.MaxRows, o.FlushInterval, o.Group, o.Log, p.flush); err != nil {
		return nil, err
	}
	return p, nil
}

// Health is the projector's consume loop, for readiness checks.
func (p *AuctionsProjector) Health() Health { return p.b }

// Run consumes until ctx ends (see batcher for the guarantees).
func (p *AuctionsProjector) Run(ctx context.Context) error { return p.b.run(ctx) }

// Close leaves the group. Uncommitted records are consumed again by the
// next owner of their partitions.
func (p *AuctionsProjector) Close() { p.b.client.Close() }

// flush inserts the batch's auctions and winners; the batcher commits the
// offsets afterwards. A failed insert is retried whole: rows the first try
// already wrote are replays that FINAL folds.
func (p *AuctionsProjector) flush(ctx context.Context, batch []*kgo.Record) error {
	a, w := &p.rows, &p.wins
	a.reset()
	w.reset()
	skipped := 0
	for _, r := range batch {
		var rec records.Auction
		err := json.Unmarshal(r.Value, &rec)
		if err == nil {
			err = a.add(&rec, w)
		}
		if err != nil {
			// A record this version cannot read is logged and skipped: it
			// can never become readable by retrying.
			skipped++
			p.log.Error("auctions projector: undecodable record skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
		}
	}
	if skipped > 0 {
		telemetry.AuctionRecordsSkipped.Add(float64(skipped))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := InsertColumns(ctx, p.ch, "auctions_raw", auctionColumns, a.n, a.columns()); err != nil {
		return err
	}
	return InsertColumns(ctx, p.ch, "auction_winners_raw", winnerColumns, w.n, w.columns())
}

// auctionColumns is the column list of auctions_raw, in the order of
// auctionRows.columns.
const auctionColumns = `auction_id, marketplace_id, at, at_ms, endpoint, kind, idx, slots, product_count,
	category, search_query, slot_id, device, placement_id, placement_name, locations, opaque_user_id,
	page_type, page_id, page_value, experiment_variant, candidates, error, winners`

// auctionRows holds auctions_raw rows column by column.
type auctionRows struct {
	n                                                     int
	id, marketplace                                       []uuid.UUID
	at                                                    []time.Time
	atMs                                                  []int64
	endpoint, kind                                        []string
	idx, placementID, failed                              []uint8
	slots, winners                                        []uint16
	productCount, candidates                              []uint32
	category, search, slotID, device, placementName, user []string
	pageType, pageID, variant                             []string
	locations, pageValue                                  [][]string
}

// reset empties a, keeping its buffers.
func (a *auctionRows) reset() {
	a.n = 0
	reuse(&a.id, &a.marketplace)
	reuse(&a.at)
	reuse(&a.atMs)
	reuse(&a.endpoint, &a.kind, &a.category, &a.search, &a.slotID, &a.device, &a.placementName, &a.user,
		&a.pageType, &a.pageID, &a.variant)
	reuse(&a.idx, &a.placementID, &a.failed)
	reuse(&a.slots, &a.winners)
	reuse(&a.productCount, &a.candidates)
	reuse(&a.locations, &a.pageValue)
}

// reset empties w, keeping its buffers.
func (w *winnerRows) reset() {
	w.n = 0
	reuse(&w.id, &w.marketplace)
	reuse(&w.at)
	reuse(&w.atMs, &w.bid, &w.price)
	reuse(&w.kind, &w.typ, &w.entity, &w.campaign, &w.vendor, &w.bidID, &w.target, &w.charge, &w.variation)
	reuse(&w.rank)
	reuse(&w.quality)
}

// reuse empties column buffers for the next batch, keeping their arrays
// but none of the values they held.
func reuse[T any](cols ...*[]T) {
	for _, c := range cols {
		clear(*c)
		*c = (*c)[:0]
	}
}

func (a *auctionRows) columns() []any {
	return []any{a.id, a.marketplace, a.at, a.atMs, a.endpoint, a.kind, a.idx, a.slots, a.productCount,
		a.category, a.search, a.slotID, a.device, a.placementID, a.placementName, a.locations, a.user,
		a.pageType, a.pageID, a.pageValue, a.variant, a.candidates, a.failed, a.winners}
}

// winnerColumns is the column list of auction_winners_raw, in the order of
// winnerRows.columns.
const winnerColumns = `auction_id, marketplace_id, at, at_ms, kind, rank, type, entity_id, campaign_id, vendor_id,
	bid_id, bid_target, charge_type, bid_micros, price_micros, quality_ppm, variation_id`

// winnerRows holds auction_winners_raw rows column by column.
type winnerRows struct {
	n                                                  int
	id, marketplace                                    []uuid.UUID
	at                                                 []time.Time
	atMs, bid, price                                   []int64
	kind, typ, entity, campaign, vendor, bidID, target []string
	charge, variation                                  []string
	rank                                               []uint16
	quality                                            []uint32
}

func (w *winnerRows) columns() []any {
	return []any{w.id, w.marketplace, w.at, w.atMs, w.kind, w.rank, w.typ, w.entity, w.campaign, w.vendor,
		w.bidID, w.target, w.charge, w.bid, w.price, w.quality, w.variation}
}

// DateTime holds seconds since the epoch in a UInt32.
var (
	minAt = time.Unix(0, 0)
	maxAt = time.Unix(math.MaxUint32, 0)
)

// fits reports whether v is in 0..max (the range of the column's type).
func fits(v int, max uint64) bool { return v >= 0 && uint64(v) <= max }

// validateAuction checks what the columns cannot hold, so that one bad record is
// skipped instead of failing its batch's insert forever.
func validateAuction(r *records.Auction) (id, mp uuid.UUID, err error) {
	if id, err = uuid.Parse(r.ID); err != nil {
		return id, mp, fmt.Errorf("auction id %q: %w", r.ID, err)
	}
	if mp, err = uuid.Parse(r.MarketplaceID); err != nil {
		return id, mp, fmt.Errorf("marketplace id %q: %w", r.MarketplaceID, err)
	}
	switch {
	case r.At.Before(minAt) || !r.At.Before(maxAt):
		return id, mp, fmt.Errorf("at %s is outside the DateTime range", r.At.Format(time.RFC3339Nano))
	case !fits(r.Index, math.MaxUint8) || !fits(r.PlacementID, math.MaxUint8):
		return id, mp, fmt.Errorf("index %d or placementId %d outside 0..255", r.Index, r.PlacementID)
	case !fits(r.Slots, math.MaxUint16) || !fits(len(r.Winners), math.MaxUint16):
		return id, mp, fmt.Errorf("slots %d or %d winners outside 0..65535", r.Slots, len(r.Winners))
	case !fits(r.ProductCount, math.MaxUint32) || !fits(r.Candidates, math.MaxUint32):
		return id, mp, fmt.Errorf("productCount %d or candidates %d outside the UInt32 range", r.ProductCount, r.Candidates)
	}
	for i := range r.Winners {
		wn := &r.Winners[i]
		if !fits(wn.Rank, math.MaxUint16) || wn.QualityPPM < 0 || wn.QualityPPM > math.MaxUint32 {
			return id, mp, fmt.Errorf("winner %d: rank %d or qualityPpm %d out of range", i, wn.Rank, wn.QualityPPM)
		}
	}
	return id, mp, nil
}

// add appends r to a and its winners to w, or returns why r cannot be
// stored (and appends nothing).
func (a *auctionRows) add(r *records.Auction, w *winnerRows) error {
	id, mp, err := validateAuction(r)
	if err != nil {
		return err
	}
	at := r.At.UTC()
	atMs := at.UnixMilli()
	var failed uint8
	if r.Error {
		failed = 1
	}
	a.n++
	a.id, a.marketplace = append(a.id, id), append(a.marketplace, mp)
	a.at, a.atMs = append(a.at, at), append(a.atMs, atMs)
	a.endpoint, a.kind = append(a.endpoint, r.Endpoint), append(a.kind, r.Kind)
	a.idx, a.slots = append(a.idx, uint8(r.Index)), append(a.slots, uint16(r.Slots))
	a.productCount = append(a.productCount, uint32(r.ProductCount))
	a.category, a.search = append(a.category, r.Category), append(a.search, r.SearchQuery)
	a.slotID, a.device = append(a.slotID, r.SlotID), append(a.device, r.Device)
	a.placementID, a.placementName = append(a.placementID, uint8(r.PlacementID)), append(a.placementName, r.PlacementName)
	a.locations, a.user = append(a.locations, nonNil(r.Locations)), append(a.user, r.OpaqueUserID)
	a.pageType, a.pageID, a.pageValue = append(a.pageType, r.PageType), append(a.pageID, r.PageID), append(a.pageValue, nonNil(r.PageValue))
	a.variant = append(a.variant, r.ExperimentVariant)
	a.candidates, a.failed = append(a.candidates, uint32(r.Candidates)), append(a.failed, failed)
	a.winners = append(a.winners, uint16(len(r.Winners)))
	for i := range r.Winners {
		wn := &r.Winners[i]
		w.n++
		w.id, w.marketplace = append(w.id, id), append(w.marketplace, mp)
		w.at, w.atMs, w.kind = append(w.at, at), append(w.atMs, atMs), append(w.kind, r.Kind)
		w.rank, w.typ = append(w.rank, uint16(wn.Rank)), append(w.typ, wn.Type)
		w.entity, w.campaign, w.vendor = append(w.entity, wn.EntityID), append(w.campaign, wn.CampaignID), append(w.vendor, wn.VendorID)
		w.bidID, w.target, w.charge = append(w.bidID, wn.BidID), append(w.target, wn.BidTarget), append(w.charge, wn.ChargeType)
		w.bid, w.price = append(w.bid, wn.BidMicros), append(w.price, wn.PriceMicros)
		w.quality, w.variation = append(w.quality, uint32(wn.QualityPPM)), append(w.variation, wn.VariationID)
	}
	return nil
}

// InsertColumns inserts n rows, given as whole columns (one typed slice per
// name of columns, in its order), into table in one block, and counts the
// batch in the insert metrics. Appending whole slices spares the boxing of
// every value that a row-by-row Append costs.
func InsertColumns(ctx context.Context, conn clickhouse.Conn, table, columns string, n int, cols []any) error {
	return insertColumns(clickhouse.Insert(ctx), conn, table, columns, n, cols)
}

// insertColumns is InsertColumns with the query's settings left to ctx.
func insertColumns(ctx context.Context, conn clickhouse.Conn, table, columns string, n int, cols []any) error {
	if n == 0 {
		return nil
	}
	if !telemetry.Tracing() { // the span's name and options cost allocations
		return insertBlock(ctx, conn, table, columns, n, cols)
	}
	ctx, span := telemetry.StartSpan(ctx, tracerName, "clickhouse insert "+table, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(telemetry.AttrTable.String(table), telemetry.AttrRows.Int(n)))
	defer span.End()
	err := insertBlock(ctx, conn, table, columns, n, cols)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// tracerName is the projectors' tracer (docs/operations/operations.md, Traces).
const tracerName = "github.com/endcap/endcap/projections"

// fillBatch appends the columns of an insert to its prepared batch. Each
// column is a unit of work the fold's batch may give way after
// (priority.Yield; a no-op outside a fold that shares its process with the
// API).
func fillBatch(ctx context.Context, b clickhouse.Batch, cols []any) error {
	return clickhouse.AppendColumns(b, cols, func() error { return priority.Yield(ctx) })
}

func insertBlock(ctx context.Context, conn clickhouse.Conn, table, columns string, n int, cols []any) error {
	start := time.Now()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+columns+")")
	if err != nil {
		telemetry.InsertBatches.WithLabelValues(table, "error").Inc()
		return fmt.Errorf("prepare %s insert: %w", table, err)
	}
	if err := fillBatch(ctx, b, cols); err != nil {
		_ = b.Abort()
		telemetry.InsertBatches.WithLabelValues(table, "error").Inc()
		return fmt.Errorf("%s insert: %w", table, err)
	}
	if err := b.Send(); err != nil {
		telemetry.InsertBatches.WithLabelValues(table, "error").Inc()
		return fmt.Errorf("send %s insert: %w", table, err)
	}
	telemetry.InsertBatches.WithLabelValues(table, "ok").Inc()
	telemetry.InsertRows.WithLabelValues(table).Add(float64(n))
	telemetry.InsertDuration.WithLabelValues(table).Observe(time.Since(start).Seconds())
	return nil
}
