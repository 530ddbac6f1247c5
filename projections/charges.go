package projections

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
)

// Upgrading from earlier layouts of the charge markers (docs/design/charges.md,
// Upgrading), on one Redis server (a cluster never held them):
//
//   - builds before 2026-11-26 kept the markers of a marketplace in hashes
//     of the marketplace (ec:cm:{mp}:<epoch>:<bucket>). spend.Upgrade
//     recorded when this layout began (InteractionsOptions.UpgradedAt):
//     auctions up to LegacyMarkerGrace after it may have been charged in
//     the marketplace's hashes, so their charges also honour those;
//   - builds before 2026-11-22 kept one string key per marker;
//     ec:cm:{mp}:since holds when the first build with marker hashes
//     charged in the marketplace (Unix milliseconds): auctions up to
//     LegacyMarkerGrace after it (after the upgrade above when it was
//     never set) also honour a string key.
//
// Later auctions never had an old marker and are not looked up; auctions
// leave the charge window 30 days after the upgrade, so the extra reads end
// by themselves.
const LegacyMarkerGrace = time.Hour

// legacyCutoffs are, for one marketplace, the auction times (Unix ms)
// before which a charge honours the marketplace's marker hashes and the
// string markers (0: never).
type legacyCutoffs struct{ hashes, strings int64 }

// legacyBefore returns marketplace mp's legacyCutoffs, reading its since
// key once per process.
func (p *Interactions) legacyBefore(ctx context.Context, mp string) (legacyCutoffs, error) {
	if p.upgradedAt.IsZero() {
		return legacyCutoffs{}, nil // a new installation, or a cluster
	}
	if v, ok := p.legacyBeforeMs.Load(mp); ok {
		return v.(legacyCutoffs), nil
	}
	c := legacyCutoffs{hashes: p.upgradedAt.Add(LegacyMarkerGrace).UnixMilli()}
	c.strings = c.hashes
	key := "ec:cm:{" + mp + "}:since"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := p.rdb.Get(ctx, key).Result()
	switch {
	case err == nil:
		since, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return legacyCutoffs{}, fmt.Errorf("interactions sink: %s holds %q, not Unix milliseconds", key, v)
		}
		c.strings = min(c.hashes, since+LegacyMarkerGrace.Milliseconds())
	case err != redis.Nil:
		return legacyCutoffs{}, fmt.Errorf("interactions sink: read %s: %w", key, err)
	}
	p.legacyBeforeMs.Store(mp, c)
	return c, nil
}

// legacyMarkerKey is the string key under which builds before 2026-11-22
// kept the marker of charge key k (chargeKey: auction id, rank, kind) in
// marketplace mp: ec:charged:{mp}:<auction id hex>:<rank>:<i|c>.
func legacyMarkerKey(mp, k string) string {
	return "ec:charged:{" + mp + "}:" + hex.EncodeToString([]byte(k[:16])) + ":" + strconv.Itoa(int(k[16])) + ":" + k[17:]
}

// interactionNamespace is the UUIDv5 namespace of interaction ids.
var interactionNamespace = uuid.MustParse("6b8f2d4a-93c1-4f0e-8a57-2e1d9c3b7f60")

// InteractionID is the UUID of an impression or click: UUIDv5 (SHA-1) in a
// fixed namespace of "<marketplace id>/<kind>/<event id>", the event's
// idempotency key. Client event ids are any string; this gives the spec's
// vendor-charge interactionId a stable UUID form, the same on every replay.
// It is uuid.NewSHA1's, without its allocations (the fold computes one per
// impression and click).
func InteractionID(marketplaceID string, kind records.Kind, eventID string) uuid.UUID {
	var buf [256]byte // holds the usual namespace + key; a longer key grows it on the heap
	b := append(buf[:0], interactionNamespace[:]...)
	b = append(b, marketplaceID...)
	b = append(b, '/')
	b = append(b, kind.String()...)
	b = append(b, '/')
	b = append(b, eventID...)
	sum := sha1.Sum(b)
	var id uuid.UUID
	copy(id[:], sum[:])
	id[6] = (id[6] & 0x0f) | 0x50 // version 5
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 4122 variant
	return id
}

// chargeColumns is the column list of charges_raw, in the order of
// chargeRows.columns.
const chargeColumns = `marketplace_id, interaction_id, timestamp, timestamp_ms, day_local, kind, event_id, received_at,
	currency_code, campaign_id, product_id, vendor_id, external_vendor_id, global_id, charge_type,
	price_micros, amount_micros, amount_sub_micros, auction_id, rank, auction_at, kafka_partition, kafka_offset,
	refused_reason, drawn`

// chargeRows holds charges_raw rows column by column: one per charge
// applied (refused_reason empty) and one per charge refused for a budget
// (amounts 0, refused_reason daily_budget, weekly_budget, monthly_budget or total_budget; the view
// `charges` leaves them out). drawn is 1 for a charge that drew its amount
// on its vendor's balance.
type chargeRows struct {
	n                                       int
	mp, interaction, auction                []uuid.UUID
	at, day, received, auctionAt            []time.Time
	atMs, price, amount, offset             []int64
	kind                                    []string
	eventID, currency, campaign, product    []string
	vendor, extVendor, globalID, chargeType []string
	refused                                 []string
	sub                                     []uint16
	rank, drawn                             []uint8
	partition                               []int32
	// Not a column: the outcome of each charge of the batch, in order.
	outcomes []spend.ChargeOutcome
	// Not columns: for the latency metric.
	receivedMs []int64
	first      []bool // applied by this batch (not a replay)
	// refusals: each campaign, budget and day refused in the batch, once.
	refusals    []BudgetRefusal
	refusalSeen map[string]bool
	// vendors: each vendor whose funds the batch drew on, once.
	vendors []VendorDrawn
}

// noteRefusal remembers a refusal for a budget (once per campaign, budget
// and day).
func (c *chargeRows) noteRefusal(r BudgetRefusal) {
	k := r.MarketplaceID + "/" + r.CampaignID + "/" + r.Budget + "/" + r.Day
	if r.Total {
		k = r.MarketplaceID + "/" + r.CampaignID + "/total"
	}
	if c.refusalSeen[k] {
		return
	}
	if c.refusalSeen == nil {
		c.refusalSeen = map[string]bool{}
	}
	c.refusalSeen[k] = true
	c.refusals = append(c.refusals, r)
}

// noteVendor remembers a vendor whose funds the batch drew on (once).
func (c *chargeRows) noteVendor(v VendorDrawn) {
	k := "v\x00" + v.MarketplaceID + "/" + v.VendorID
	if c.refusalSeen[k] {
		return
	}
	if c.refusalSeen == nil {
		c.refusalSeen = map[string]bool{}
	}
	c.refusalSeen[k] = true
	c.vendors = append(c.vendors, v)
}

// add appends the charge of interaction row i of r (its amounts, and its
// refusal reason when refused); first says whether this batch applied it
// (false: a replay, or a refusal).
func (c *chargeRows) add(r *interactionRows, i int, first, drawn bool) {
	c.n++
	var d uint8
	if drawn {
		d = 1
	}
	c.drawn = append(c.drawn, d)
	c.refused = append(c.refused, r.refused[i])
	c.first = append(c.first, first)
	c.mp, c.interaction, c.auction = append(c.mp, r.mp[i]), append(c.interaction, r.interaction[i]), append(c.auction, r.auction[i])
	c.at, c.atMs, c.day = append(c.at, r.occurred[i]), append(c.atMs, r.occurredMs[i]), append(c.day, r.day[i])
	c.kind, c.eventID, c.received = append(c.kind, r.kind.At(i)), append(c.eventID, r.eventID.At(i)), append(c.received, r.received[i])
	c.currency, c.campaign = append(c.currency, r.currency.At(i)), append(c.campaign, r.campaign.At(i))
	product := ""
	if r.entType.At(i) == "product" {
		product = r.entID.At(i)
	}
	c.product = append(c.product, product)
	c.vendor, c.extVendor, c.globalID = append(c.vendor, r.vendor[i]), append(c.extVendor, r.extVendor.At(i)), append(c.globalID, r.vendorGlobal.At(i))
	c.chargeType, c.price = append(c.chargeType, r.chargeType.At(i)), append(c.price, r.price[i])
	c.amount, c.sub = append(c.amount, r.amount[i]), append(c.sub, r.sub[i])
	c.rank, c.auctionAt = append(c.rank, r.rank[i]), append(c.auctionAt, r.auctionAt[i])
	c.partition, c.offset = append(c.partition, r.partition[i]), append(c.offset, r.offset[i])
	c.receivedMs = append(c.receivedMs, r.receivedMs[i])
}

func (c *chargeRows) columns() []any {
	return []any{c.mp, c.interaction, c.at, c.atMs, c.day, c.kind, c.eventID, c.received,
		c.currency, c.campaign, c.product, c.vendor, c.extVendor, c.globalID, c.chargeType,
		c.price, c.amount, c.sub, c.auction, c.rank, c.auctionAt, c.partition, c.offset,
		c.refused, c.drawn}
}

func (c *chargeRows) insert(ctx context.Context, conn clickhouse.Conn) error {
	return InsertColumns(ctx, conn, "charges_raw", chargeColumns, c.n, c.columns())
}
