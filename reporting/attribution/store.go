package attribution

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
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
		additional_attribution_type, additional_attribution_id, kafka_partition, kafka_offset, invalid
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
		user    string
		t       Touch
		hashed  bool
		key     copyKey
		invalid uint8
	}
	first := map[[2]string]*copied{}
	for rows.Next() {
		var (
			c      copied
			hashed uint8
		)
		if err := rows.Scan(&c.user, &c.t.Kind, &c.t.EventID, &c.t.InteractionID, &c.t.OccurredMs, &c.t.ReceivedMs,
			&c.t.AuctionID, &c.t.AuctionMs, &c.t.Rank, &c.t.AdFormat, &c.t.ChargeType, &c.t.CampaignID, &c.t.VendorID,
			&c.t.EntityType, &c.t.EntityID, &hashed, &c.t.AAType, &c.t.AAID, &c.key.partition, &c.key.offset, &c.invalid); err != nil {
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
		if c.invalid == 1 {
			continue // a click refused as invalid is never credited
		}
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
// id: it can then match by vendor only (docs/design/attribution.md).
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

// resultCols returns rows as the columns of resultColumns, computed at now.
func resultCols(rows []resultRow, now time.Time) []any {
	n := len(rows)
	strs := func() []string { return make([]string, n) }
	times := func() []time.Time { return make([]time.Time, n) }
	i64s := func() []int64 { return make([]int64, n) }
	uuids := func() []uuid.UUID { return make([]uuid.UUID, n) }
	var (
		mp, interaction, auction                      = uuids(), uuids(), uuids()
		purchase, currency, user, product, itemVendor = strs(), strs(), strs(), strs(), strs()
		reason, kind, touchEvent, adFormat, campaign  = strs(), strs(), strs(), strs(), strs()
		vendor, entType, entID, chargeType            = strs(), strs(), strs(), strs()
		purchased, day, touchAt, auctionAt, computed  = times(), times(), times(), times(), times()
		purchasedMs, receivedMs, qty, price, amount   = i64s(), i64s(), i64s(), i64s(), i64s()
		touchMs, auctionMs                            = i64s(), i64s()
		itemIndex                                     = make([]uint16, n)
		attributed, rank                              = make([]uint8, n), make([]uint8, n)
		score                                         = make([]float64, n)
		window                                        = make([]uint32, n)
		version                                       = make([]uint64, n)
		none                                          Touch
	)
	for i := range rows {
		r := &rows[i]
		t := r.res.Touch
		if t == nil {
			t = &none
		}
		if r.res.Attributed() {
			attributed[i] = 1
		}
		mp[i], purchase[i], itemIndex[i] = r.mp, r.p.EventID, uint16(r.res.ItemIndex)
		purchased[i], purchasedMs[i], receivedMs[i] = time.UnixMilli(r.p.OccurredMs).UTC(), r.p.OccurredMs, r.p.ReceivedMs
		day[i], currency[i], user[i] = r.day, r.currency, r.p.UserID
		product[i], itemVendor[i], qty[i], price[i] = r.item.ProductID, r.item.VendorID, r.item.Quantity, r.item.UnitPriceMicros
		amount[i] = r.item.UnitPriceMicros * r.item.Quantity
		reason[i], score[i], window[i] = r.res.Reason, r.res.Score, uint32(r.res.Window/time.Second)
		interaction[i], kind[i], touchEvent[i] = t.InteractionID, t.Kind, t.EventID
		touchAt[i], touchMs[i] = time.UnixMilli(t.OccurredMs).UTC(), t.OccurredMs
		auction[i], auctionAt[i], auctionMs[i], rank[i] = t.AuctionID, time.UnixMilli(t.AuctionMs).UTC(), t.AuctionMs, t.Rank
		adFormat[i], campaign[i], vendor[i] = t.AdFormat, t.CampaignID, t.VendorID
		entType[i], entID[i], chargeType[i] = t.EntityType, t.EntityID, t.ChargeType
		version[i], computed[i] = r.res.Version, now
	}
	return []any{mp, purchase, itemIndex, purchased, purchasedMs, receivedMs,
		day, currency, user, product, itemVendor, qty, price, amount,
		attributed, reason, score, window, interaction, kind, touchEvent,
		touchAt, touchMs, auction, auctionAt, auctionMs, rank, adFormat, campaign, vendor,
		entType, entID, chargeType, version, computed}
}

// insertResults writes result rows in one block.
func insertResults(ctx context.Context, conn clickhouse.Conn, rows []resultRow) error {
	now := time.Now().UTC().Truncate(time.Second)
	return insert(ctx, conn, "attributed_purchases_raw", resultColumns, len(rows), func() []any { return resultCols(rows, now) })
}

// touchColumns and purchaseColumns are the columns the projector writes to
// its copies, in the order of touchRow.values and purchaseRow.values.
const (
	touchColumns = `marketplace_id, opaque_user_id, kind, event_id, interaction_id, occurred_at, occurred_at_ms, received_at_ms,
	auction_id, auction_at_ms, rank, ad_format, charge_type, campaign_id, vendor_id, entity_type, entity_id, entity_id_hashed,
	additional_attribution_type, additional_attribution_id, kafka_partition, kafka_offset, invalid`
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
	// invalid: a click refused as invalid (never credited).
	invalid bool
}

// touchCols returns rows as the columns of touchColumns, in the order of
// the table's sorting key (projections.SortedOrder: ClickHouse then writes
// the block without sorting it).
func touchCols(rows []touchRow) []any {
	n := len(rows)
	order := projections.SortedOrder(n, func(a, b int) int { return compareTouchKey(&rows[a], &rows[b]) })
	i64s := func() []int64 { return make([]int64, n) }
	// The String columns are built value by value as the insert sends them
	// (clickhouse.Strings: each value copied once, while its row is at hand).
	var user, kind, event, adFormat, chargeType, campaign, vendor, entType, entID, aaType, aaID clickhouse.Strings
	strs := []*clickhouse.Strings{&user, &kind, &event, &adFormat, &chargeType, &campaign, &vendor, &entType, &entID, &aaType, &aaID}
	for _, c := range strs {
		c.Grow(n, 0)
	}
	var (
		mp, interaction, auction                  = make([]uuid.UUID, n), make([]uuid.UUID, n), make([]uuid.UUID, n)
		occurred                                  = make([]time.Time, n)
		occurredMs, receivedMs, auctionMs, offset = i64s(), i64s(), i64s(), i64s()
		rank, hashed                              = make([]uint8, n), make([]uint8, n)
		partition                                 = make([]int32, n)
		invalid                                   = make([]uint8, n)
	)
	for i, k := range order {
		r := &rows[k]
		t := &r.t
		if t.EntityHashed {
			hashed[i] = 1
		}
		mp[i], interaction[i] = r.mp, t.InteractionID
		user.Append(r.user)
		kind.Append(t.Kind)
		event.Append(t.EventID)
		occurred[i], occurredMs[i], receivedMs[i] = time.UnixMilli(t.OccurredMs).UTC(), t.OccurredMs, t.ReceivedMs
		auction[i], auctionMs[i], rank[i] = t.AuctionID, t.AuctionMs, t.Rank
		adFormat.Append(t.AdFormat)
		chargeType.Append(t.ChargeType)
		campaign.Append(t.CampaignID)
		vendor.Append(t.VendorID)
		entType.Append(t.EntityType)
		entID.Append(t.EntityID)
		aaType.Append(t.AAType)
		aaID.Append(t.AAID)
		partition[i], offset[i] = r.partition, r.offset
		if r.invalid {
			invalid[i] = 1
		}
	}
	return []any{mp, &user, &kind, &event, interaction, occurred, occurredMs, receivedMs,
		auction, auctionMs, rank, &adFormat, &chargeType, &campaign, &vendor, &entType, &entID, hashed,
		&aaType, &aaID, partition, offset, invalid}
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

// purchaseCols returns rows as the columns of purchaseColumns, in the order
// of the table's sorting key (as touchCols).
func purchaseCols(rows []purchaseRow) []any {
	n := len(rows)
	order := projections.SortedOrder(n, func(a, b int) int { return comparePurchaseKey(&rows[a], &rows[b]) })
	var (
		mp                          = make([]uuid.UUID, n)
		user, event                 = make([]string, n), make([]string, n)
		occurred                    = make([]time.Time, n)
		occurredMs, receivedMs, off = make([]int64, n), make([]int64, n), make([]int64, n)
		countable                   = make([]uint8, n)
		products, vendors           = make([][]string, n), make([][]string, n)
		prices, quantities          = make([][]int64, n), make([][]int64, n)
		partition                   = make([]int32, n)
	)
	for i, o := range order {
		r := &rows[o]
		k := len(r.p.Items)
		products[i], vendors[i] = make([]string, k), make([]string, k)
		prices[i], quantities[i] = make([]int64, k), make([]int64, k)
		for j, it := range r.p.Items {
			products[i][j], vendors[i][j], prices[i][j], quantities[i][j] = it.ProductID, it.VendorID, it.UnitPriceMicros, it.Quantity
		}
		if r.countable {
			countable[i] = 1
		}
		mp[i], user[i], event[i] = r.mp, r.p.UserID, r.p.EventID
		occurred[i], occurredMs[i], receivedMs[i] = time.UnixMilli(r.p.OccurredMs).UTC(), r.p.OccurredMs, r.p.ReceivedMs
		partition[i], off[i] = r.partition, r.offset
	}
	return []any{mp, user, event, occurred, occurredMs, receivedMs, countable,
		products, prices, quantities, vendors, partition, off}
}

// kindOrder is the value of a kind in the tables' kind Enum8, by which
// ClickHouse sorts them.
func kindOrder(kind string) int {
	switch kind {
	case "impression":
		return 1
	case "click":
		return 2
	}
	return 0
}

// compareTouchKey orders touch rows by attribution_touches_raw's sorting
// key: (marketplace_id, opaque_user_id, kind, event_id, kafka_partition,
// kafka_offset).
func compareTouchKey(a, b *touchRow) int {
	if c := projections.CompareUUID(a.mp, b.mp); c != 0 {
		return c
	}
	if c := strings.Compare(a.user, b.user); c != 0 {
		return c
	}
	if c := cmp.Compare(kindOrder(a.t.Kind), kindOrder(b.t.Kind)); c != 0 {
		return c
	}
	if c := strings.Compare(a.t.EventID, b.t.EventID); c != 0 {
		return c
	}
	if c := cmp.Compare(a.partition, b.partition); c != 0 {
		return c
	}
	return cmp.Compare(a.offset, b.offset)
}

// comparePurchaseKey orders purchase rows by attribution_purchases_raw's
// sorting key: (marketplace_id, opaque_user_id, event_id, kafka_partition,
// kafka_offset).
func comparePurchaseKey(a, b *purchaseRow) int {
	if c := projections.CompareUUID(a.mp, b.mp); c != 0 {
		return c
	}
	if c := strings.Compare(a.p.UserID, b.p.UserID); c != 0 {
		return c
	}
	if c := strings.Compare(a.p.EventID, b.p.EventID); c != 0 {
		return c
	}
	if c := cmp.Compare(a.partition, b.partition); c != 0 {
		return c
	}
	return cmp.Compare(a.offset, b.offset)
}

// insertCopies writes the batch's copies, both at once: the recomputations
// read them.
func (d *decoded) insertCopies(ctx context.Context, conn clickhouse.Conn) error {
	var terr error
	var wg sync.WaitGroup
	wg.Go(func() {
		terr = insert(ctx, conn, "attribution_touches_raw", touchColumns, len(d.touches), func() []any { return touchCols(d.touches) })
	})
	perr := insert(ctx, conn, "attribution_purchases_raw", purchaseColumns, len(d.purchases), func() []any { return purchaseCols(d.purchases) })
	wg.Wait()
	return errors.Join(terr, perr)
}

// insert writes n rows into table in one block, the columns built only
// when there are rows.
func insert(ctx context.Context, conn clickhouse.Conn, table, columns string, n int, cols func() []any) error {
	if n == 0 {
		return nil
	}
	if err := projections.InsertColumns(ctx, conn, table, columns, n, cols()); err != nil {
		return fmt.Errorf("attribution: %w", err)
	}
	return nil
}
