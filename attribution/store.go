package attribution

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/telemetry"
)

// The ClickHouse side: reading one set of users' purchases and sponsored
// interactions (tables of migration 0005, ordered by marketplace and user),
// and writing attributed_purchases_raw.

// copyKey orders the physical copies of one event: every copy of an event id
// is read, and the one with the smallest key is the event. Copies of one
// Kafka record are identical; a copy from another record (a client retry
// after the dedupe window) was received later, so the first copy keeps
// winning whatever is added or merged later.
type copyKey struct {
	receivedMs int64
	partition  int32
	offset     int64
}

func (a copyKey) less(b copyKey) bool {
	if a.receivedMs != b.receivedMs {
		return a.receivedMs < b.receivedMs
	}
	if a.partition != b.partition {
		return a.partition < b.partition
	}
	return a.offset < b.offset
}

// usersIn is the IN clause of a user list: a subquery over a bound array
// (18.16 accepts no array after IN; the subquery still uses the primary key).
// The reads put it in PREWHERE: neither 18.16 nor a current ClickHouse moves
// a condition with a subquery there by itself, and a batch's users are a few
// percent of those in the granules it reads, so the other columns are then
// read only for the granules with one of them (and filtered before anything
// else is evaluated).
const usersIn = `opaque_user_id IN (SELECT arrayJoin(?))`

// loadPurchases returns the countable purchases of users (one copy per
// event id) that occurred in [fromMs, toMs], by user.
func loadPurchases(ctx context.Context, conn clickhouse.Conn, mp string, users []string, fromMs, toMs int64) (map[string][]Purchase, error) {
	rows, err := conn.Query(ctx, `SELECT opaque_user_id, event_id, occurred_at_ms, received_at_ms, countable,
		items.product_id, items.unit_price_micros, items.quantity, items.vendor_id, kafka_partition, kafka_offset
		FROM attribution_purchases_raw
		PREWHERE `+usersIn+`
		WHERE marketplace_id = toUUID(?)
		  AND occurred_at >= toDateTime(?) AND occurred_at <= toDateTime(?) AND occurred_at_ms >= ? AND occurred_at_ms <= ?`,
		users, mp, floorSec(fromMs), floorSec(toMs), fromMs, toMs)
	if err != nil {
		return nil, fmt.Errorf("attribution: read purchases: %w", err)
	}
	defer rows.Close()
	type copied struct {
		p         Purchase
		countable bool
		key       copyKey
	}
	first := map[string]*copied{}
	for rows.Next() {
		var (
			c                  copied
			products, vendors  []string
			prices, quantities []int64
		)
		var countable uint8
		if err := rows.Scan(&c.p.UserID, &c.p.EventID, &c.p.OccurredMs, &c.p.ReceivedMs, &countable,
			&products, &prices, &quantities, &vendors, &c.key.partition, &c.key.offset); err != nil {
			return nil, fmt.Errorf("attribution: scan purchase: %w", err)
		}
		c.key.receivedMs, c.countable = c.p.ReceivedMs, countable == 1
		if len(prices) != len(products) || len(quantities) != len(products) || len(vendors) != len(products) {
			return nil, fmt.Errorf("attribution: purchase %s has items of unequal lengths", c.p.EventID)
		}
		c.p.Items = make([]Item, len(products))
		for i := range products {
			c.p.Items[i] = Item{ProductID: products[i], UnitPriceMicros: prices[i], Quantity: quantities[i], VendorID: vendors[i]}
		}
		if f := first[c.p.EventID]; f == nil || c.key.less(f.key) {
			first[c.p.EventID] = &c
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attribution: read purchases: %w", err)
	}
	out := map[string][]Purchase{}
	for _, c := range first {
		if c.countable { // older than Horizon on arrival: never attributed
			out[c.p.UserID] = append(out[c.p.UserID], c.p)
		}
	}
	return out, nil
}

// loadTouches returns the sponsored interactions of users (one copy per
// event id and kind) that occurred in [fromMs, toMs], by user. A winner whose
// id the token carried hashed gets its id from auction_winners.
func loadTouches(ctx context.Context, conn clickhouse.Conn, mp string, users []string, fromMs, toMs int64) (map[string][]Touch, error) {
	rows, err := conn.Query(ctx, `SELECT opaque_user_id, kind, event_id, interaction_id, occurred_at_ms,
		received_at_ms, auction_id, auction_at_ms, rank, ad_format, charge_type,
		campaign_id, vendor_id, entity_type, entity_id, entity_id_hashed,
		additional_attribution_type, additional_attribution_id, kafka_partition, kafka_offset
		FROM attribution_touches_raw
		PREWHERE `+usersIn+`
		WHERE marketplace_id = toUUID(?)
		  AND occurred_at >= toDateTime(?) AND occurred_at <= toDateTime(?) AND occurred_at_ms >= ? AND occurred_at_ms <= ?`,
		users, mp, floorSec(fromMs), floorSec(toMs), fromMs, toMs)
	if err != nil {
		return nil, fmt.Errorf("attribution: read interactions: %w", err)
	}
	defer rows.Close()
	type copied struct {
		user   string
		t      Touch
		hashed bool
		key    copyKey
	}
	first := map[[2]string]*copied{}
	for rows.Next() {
		var (
			c      copied
			hashed uint8
		)
		if err := rows.Scan(&c.user, &c.t.Kind, &c.t.EventID, &c.t.InteractionID, &c.t.OccurredMs, &c.t.ReceivedMs,
			&c.t.AuctionID, &c.t.AuctionMs, &c.t.Rank, &c.t.AdFormat, &c.t.ChargeType, &c.t.CampaignID, &c.t.VendorID,
			&c.t.EntityType, &c.t.EntityID, &hashed, &c.t.AAType, &c.t.AAID, &c.key.partition, &c.key.offset); err != nil {
			return nil, fmt.Errorf("attribution: scan interaction: %w", err)
		}
		c.hashed = hashed == 1
		c.key.receivedMs = c.t.ReceivedMs
		k := [2]string{c.t.Kind, c.t.EventID}
		if f := first[k]; f == nil || c.key.less(f.key) {
			first[k] = &c
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attribution: read interactions: %w", err)
	}
	out := map[string][]Touch{}
	anyHashed := false
	for _, c := range first {
		c.t.EntityHashed = c.hashed && c.t.EntityID == ""
		anyHashed = anyHashed || c.t.EntityHashed
		out[c.user] = append(out[c.user], c.t)
	}
	if anyHashed {
		if err := resolveHashed(ctx, conn, mp, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// resolveHashed fills in the entity id of touches whose token carried the
// winner's id hashed (entity_id empty), from auction_winners (the auction
// record). A winner whose auction record is not folded yet keeps an empty
// id: it can then match by vendor only (docs/attribution.md).
func resolveHashed(ctx context.Context, conn clickhouse.Conn, mp string, byUser map[string][]Touch) error {
	type winnerKey struct {
		auction uuid.UUID
		rank    uint8
	}
	want := map[winnerKey]bool{}
	var auctions []string
	for _, ts := range byUser {
		for i := range ts {
			if ts[i].EntityHashed {
				k := winnerKey{ts[i].AuctionID, ts[i].Rank}
				if !want[k] {
					want[k] = true
					auctions = append(auctions, ts[i].AuctionID.String())
				}
			}
		}
	}
	if len(auctions) == 0 {
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT auction_id, rank, any(entity_id) FROM auction_winners_raw
		WHERE marketplace_id = toUUID(?) AND auction_id IN (SELECT toUUID(arrayJoin(?)))
		GROUP BY auction_id, rank`, mp, auctions)
	if err != nil {
		return fmt.Errorf("attribution: read auction winners: %w", err)
	}
	defer rows.Close()
	ids := map[winnerKey]string{}
	for rows.Next() {
		var (
			k  winnerKey
			r  uint16
			id string
		)
		if err := rows.Scan(&k.auction, &r, &id); err != nil {
			return fmt.Errorf("attribution: scan auction winner: %w", err)
		}
		k.rank = uint8(r)
		ids[k] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("attribution: read auction winners: %w", err)
	}
	for _, ts := range byUser {
		for i := range ts {
			if ts[i].EntityHashed {
				ts[i].EntityID = ids[winnerKey{ts[i].AuctionID, ts[i].Rank}]
			}
		}
	}
	return nil
}

func floorSec(ms int64) int64 {
	if ms < 0 {
		return 0
	}
	return ms / 1000
}

// resultColumns is the column list of attributed_purchases_raw.
const resultColumns = `marketplace_id, purchase_event_id, item_index, purchased_at, purchased_at_ms, purchase_received_at_ms,
	day_local, currency_code, opaque_user_id, product_id, item_vendor_id, quantity, unit_price_micros, amount_micros,
	attributed, reason, score, window_seconds, interaction_id, interaction_kind, interaction_event_id,
	interaction_at, interaction_at_ms, auction_id, auction_at, auction_at_ms, rank, ad_format, campaign_id, vendor_id,
	entity_type, entity_id, charge_type, version, computed_at`

// resultRow is one row of attributed_purchases_raw.
type resultRow struct {
	mp       uuid.UUID
	p        *Purchase
	res      Result
	day      time.Time
	currency string
	item     Item
}

func (r *resultRow) values(now time.Time) []any {
	t := r.res.Touch
	if t == nil {
		t = &Touch{}
	}
	var attributed uint8
	if r.res.Attributed() {
		attributed = 1
	}
	return []any{r.mp, r.p.EventID, uint16(r.res.ItemIndex), time.UnixMilli(r.p.OccurredMs).UTC(), r.p.OccurredMs, r.p.ReceivedMs,
		r.day, r.currency, r.p.UserID, r.item.ProductID, r.item.VendorID, r.item.Quantity, r.item.UnitPriceMicros,
		r.item.UnitPriceMicros * r.item.Quantity,
		attributed, r.res.Reason, r.res.Score, uint32(r.res.Window / time.Second), t.InteractionID, t.Kind, t.EventID,
		time.UnixMilli(t.OccurredMs).UTC(), t.OccurredMs, t.AuctionID, time.UnixMilli(t.AuctionMs).UTC(), t.AuctionMs, t.Rank,
		t.AdFormat, t.CampaignID, t.VendorID, t.EntityType, t.EntityID, t.ChargeType, r.res.Version, now}
}

// insertResults writes result rows in one batch.
func insertResults(ctx context.Context, conn clickhouse.Conn, rows []resultRow) error {
	now := time.Now().UTC().Truncate(time.Second)
	return insertRows(ctx, conn, "attributed_purchases_raw", resultColumns, len(rows), func(i int) []any { return rows[i].values(now) })
}

// touchColumns and purchaseColumns are the columns the projector writes to
// its copies, in the order of touchRow.values and purchaseRow.values.
const (
	touchColumns = `marketplace_id, opaque_user_id, kind, event_id, interaction_id, occurred_at, occurred_at_ms, received_at_ms,
	auction_id, auction_at_ms, rank, ad_format, charge_type, campaign_id, vendor_id, entity_type, entity_id, entity_id_hashed,
	additional_attribution_type, additional_attribution_id, kafka_partition, kafka_offset`
	purchaseColumns = `marketplace_id, opaque_user_id, event_id, occurred_at, occurred_at_ms, received_at_ms, countable,
	items.product_id, items.unit_price_micros, items.quantity, items.vendor_id, kafka_partition, kafka_offset`
)

// touchRow is one row of attribution_touches_raw.
type touchRow struct {
	mp        uuid.UUID
	mpID      string // as the event has it (claim keys, views)
	user      string
	t         Touch
	partition int32
	offset    int64
}

func (r *touchRow) values() []any {
	var hashed uint8
	if r.t.EntityHashed {
		hashed = 1
	}
	return []any{r.mp, r.user, r.t.Kind, r.t.EventID, r.t.InteractionID, time.UnixMilli(r.t.OccurredMs).UTC(), r.t.OccurredMs,
		r.t.ReceivedMs, r.t.AuctionID, r.t.AuctionMs, r.t.Rank, r.t.AdFormat, r.t.ChargeType, r.t.CampaignID, r.t.VendorID,
		r.t.EntityType, r.t.EntityID, hashed, r.t.AAType, r.t.AAID, r.partition, r.offset}
}

// purchaseRow is one row of attribution_purchases_raw.
type purchaseRow struct {
	mp        uuid.UUID
	mpID      string // as the event has it (claim keys, views)
	p         Purchase
	countable bool
	partition int32
	offset    int64
}

func (r *purchaseRow) values() []any {
	n := len(r.p.Items)
	products, vendors := make([]string, n), make([]string, n)
	prices, quantities := make([]int64, n), make([]int64, n)
	for i, it := range r.p.Items {
		products[i], vendors[i], prices[i], quantities[i] = it.ProductID, it.VendorID, it.UnitPriceMicros, it.Quantity
	}
	var countable uint8
	if r.countable {
		countable = 1
	}
	return []any{r.mp, r.p.UserID, r.p.EventID, time.UnixMilli(r.p.OccurredMs).UTC(), r.p.OccurredMs, r.p.ReceivedMs, countable,
		products, prices, quantities, vendors, r.partition, r.offset}
}

// insertRows writes rows (each given as its values) into table in one batch.
func insertRows(ctx context.Context, conn clickhouse.Conn, table, columns string, n int, values func(i int) []any) error {
	if n == 0 {
		return nil
	}
	start := time.Now()
	fail := func(err error) error {
		telemetry.InsertBatches.WithLabelValues(table, "error").Inc()
		return fmt.Errorf("attribution: insert into %s: %w", table, err)
	}
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+columns+")")
	if err != nil {
		return fail(err)
	}
	for i := range n {
		if err := b.Append(values(i)...); err != nil {
			_ = b.Abort()
			return fail(err)
		}
	}
	if err := b.Send(); err != nil {
		return fail(err)
	}
	telemetry.InsertBatches.WithLabelValues(table, "ok").Inc()
	telemetry.InsertRows.WithLabelValues(table).Add(float64(n))
	telemetry.InsertDuration.WithLabelValues(table).Observe(time.Since(start).Seconds())
	return nil
}
