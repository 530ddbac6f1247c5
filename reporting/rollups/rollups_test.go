package rollups_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/google/uuid"

	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// db opens a migrated database of its own for one test.
func db(t testing.TB) (context.Context, clickhouse.Conn) {
	t.Helper()
	env := testenv.Get(t)
	cfg := env.Config(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	conn := testenv.ClickHouse(t, ctx, cfg)
	return ctx, conn
}

func job(t testing.TB, conn clickhouse.Conn) *rollups.Job {
	t.Helper()
	j, err := rollups.New(rollups.Options{ClickHouse: conn, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// interaction is one interactions_raw row (the columns the rollup reads).
type interaction struct {
	mp, kind, event              string
	at                           time.Time
	sponsored                    uint8
	auction                      uuid.UUID
	rank                         uint8
	format, chargeType, campaign string
	vendor, entityType, entity   string
	hashed                       uint8
	device, pageID, extCampaign  string
	charged                      uint8
	micros                       int64
	sub                          uint16
	refused                      string // refused_reason
}

func insertInteractions(t *testing.T, ctx context.Context, conn clickhouse.Conn, rows ...interaction) {
	t.Helper()
	b, err := conn.PrepareBatch(ctx, `INSERT INTO interactions_raw (marketplace_id, kind, event_id, interaction_id,
		occurred_at, occurred_at_ms, received_at, day_local, currency_code, sponsored, auction_id, auction_at, rank,
		ad_format, charge_type, campaign_id, campaign_name, campaign_status, campaign_active, external_campaign_id,
		vendor_id, vendor_name, external_vendor_id, entity_type, entity_id, entity_id_hashed, device_type, page_id,
		page_value, placement_page, charged, amount_micros, amount_sub_micros, refused_reason)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		name := ""
		if r.campaign != "" {
			name = "name of " + r.campaign
		}
		err := b.Append(uuid.MustParse(r.mp), r.kind, r.event, uuid.NewSHA1(uuid.NameSpaceOID, []byte(r.kind+r.event)),
			r.at, r.at.UnixMilli(), r.at, dateOf(r.at), "EUR", r.sponsored, r.auction, r.at.Add(-time.Minute), r.rank,
			r.format, r.chargeType, r.campaign, name, "active", uint8(1), r.extCampaign,
			r.vendor, "vendor "+r.vendor, r.vendor, r.entityType, r.entity, r.hashed, r.device, r.pageID,
			[]string{"v1", "v2"}, uint32(2), r.charged, r.micros, r.sub, r.refused)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// item is one attributed_purchases_raw row (one version of one item).
type item struct {
	mp, purchase           string
	index                  uint16
	at                     time.Time
	qty, micros            int64
	attributed             uint8
	kind, event            string
	auction                uuid.UUID
	campaign, vendor, prod string
	version                uint64
}

func insertItems(t *testing.T, ctx context.Context, conn clickhouse.Conn, rows ...item) {
	t.Helper()
	b, err := conn.PrepareBatch(ctx, `INSERT INTO attributed_purchases_raw (marketplace_id, purchase_event_id, item_index,
		purchased_at, purchased_at_ms, day_local, currency_code, product_id, quantity, unit_price_micros, amount_micros,
		attributed, interaction_kind, interaction_event_id, auction_id, ad_format, campaign_id, vendor_id,
		entity_type, entity_id, charge_type, version)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(uuid.MustParse(r.mp), r.purchase, r.index, r.at, r.at.UnixMilli(), dateOf(r.at), "EUR",
			r.prod, r.qty, r.micros/r.qty, r.micros, r.attributed, r.kind, r.event, r.auction, "listings",
			r.campaign, r.vendor, "product", r.prod, "CPM", r.version); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func insertAuction(t *testing.T, ctx context.Context, conn clickhouse.Conn, mp string, id uuid.UUID, at time.Time,
	device, query string, winners map[uint16]string) {
	t.Helper()
	b, err := conn.PrepareBatch(ctx, `INSERT INTO auctions_raw (auction_id, marketplace_id, at, at_ms, device,
		search_query, category, locations, page_type, page_id, page_value)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(id, uuid.MustParse(mp), at, at.UnixMilli(), device, query, "cat", []string{"here"},
		"search", "p1", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	w, err := conn.PrepareBatch(ctx, `INSERT INTO auction_winners_raw (auction_id, marketplace_id, at, at_ms, rank, entity_id)`)
	if err != nil {
		t.Fatal(err)
	}
	for rank, e := range winners {
		if err := w.Append(id, uuid.MustParse(mp), at, at.UnixMilli(), rank, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Send(); err != nil {
		t.Fatal(err)
	}
}

func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// sums is a row of the rollup grouped by (marketplace, day, campaign,
// entity, sponsored, external campaign), as an export would.
type sums struct {
	Impressions, Clicks, ChargedImpressions, ChargedClicks uint64
	SpentImpressions, SpentClicks                          int64 // exact micros (sub-micros folded in)
	SubImpressions                                         uint64
	Items, Purchases                                       uint64
	Quantity, Amount                                       int64
}

func readSums(t *testing.T, ctx context.Context, conn clickhouse.Conn) map[string]sums {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT toString(marketplace_id), toString(day_local), campaign_id, entity_id, sponsored,
		external_campaign_id, sum(impressions), sum(clicks), sum(charged_impressions), sum(charged_clicks),
		sum(ad_spent_impressions_micros) + toInt64(intDiv(sum(ad_spent_impressions_sub_micros), 1000)),
		sum(ad_spent_clicks_micros) + toInt64(intDiv(sum(ad_spent_clicks_sub_micros), 1000)),
		sum(ad_spent_impressions_sub_micros),
		sum(attributed_items), uniqExactMerge(purchases), sum(quantity), sum(total_purchase_amount_micros)
		FROM rollup_daily GROUP BY marketplace_id, day_local, campaign_id, entity_id, sponsored, external_campaign_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]sums{}
	for rows.Next() {
		var mp, day, campaign, entity, ext string
		var sponsored uint8
		var s sums
		if err := rows.Scan(&mp, &day, &campaign, &entity, &sponsored, &ext, &s.Impressions, &s.Clicks,
			&s.ChargedImpressions, &s.ChargedClicks, &s.SpentImpressions, &s.SpentClicks, &s.SubImpressions,
			&s.Items, &s.Purchases, &s.Quantity, &s.Amount); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%s/%s/%s/%d/%s", mp[len(mp)-1:], day, campaign, entity, sponsored, ext)] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dump renders every rollup row (all columns) of the days, sorted: equal
// dumps mean equal tables.
func dump(t *testing.T, ctx context.Context, conn clickhouse.Conn, days ...string) string {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT concat(toString(marketplace_id), '|', toString(day_local), '|', arrayStringConcat(
		[currency_code, toString(sponsored), vendor_id, external_vendor_id, vendor_name, campaign_id, external_campaign_id,
		 campaign_name, campaign_type, status, toString(is_active), ad_format, charge_type, entity_type, entity_id,
		 device_type, page_type, page_id, arrayStringConcat(page_value, ','), toString(placement_page), auction_device,
		 arrayStringConcat(auction_location, ','), auction_page_type, auction_page_id, arrayStringConcat(auction_page_value, ','),
		 auction_search_query, auction_category, toString(impressions), toString(clicks), toString(charged_impressions),
		 toString(charged_clicks), toString(ad_spent_impressions_micros), toString(ad_spent_impressions_sub_micros),
		 toString(ad_spent_clicks_micros), toString(ad_spent_clicks_sub_micros), toString(attributed_items),
		 toString(finalizeAggregation(purchases)), toString(quantity), toString(total_purchase_amount_micros)], '|'))
		FROM rollup_daily WHERE has(splitByChar(',', ?), toString(day_local))`, strings.Join(days, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, s)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

const (
	mpA = "0196a000-0000-7000-8000-00000000000a"
	mpB = "0196a000-0000-7000-8000-00000000000b"
)

var (
	d1 = time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	d2 = d1.AddDate(0, 0, 1)
	a1 = uuid.MustParse("0196a000-0000-7000-8000-0000000000a1")
	a2 = uuid.MustParse("0196a000-0000-7000-8000-0000000000a2")
	a3 = uuid.MustParse("0196a000-0000-7000-8000-0000000000a3")
)

// seed inserts the raw rows of the scenario, replays and versions included.
func seed(t *testing.T, ctx context.Context, conn clickhouse.Conn) {
	t.Helper()
	insertAuction(t, ctx, conn, mpA, a1, d1.Add(9*time.Hour), "mobile", "shoes", map[uint16]string{1: "P1"})
	insertAuction(t, ctx, conn, mpA, a2, d1.Add(9*time.Hour), "desktop", "", map[uint16]string{2: "P2"})
	insertAuction(t, ctx, conn, mpB, a3, d1.Add(9*time.Hour), "mobile", "", map[uint16]string{1: "P9"})
	cpm := func(ev string, at time.Time, charged uint8) interaction {
		r := interaction{mp: mpA, kind: "impression", event: ev, at: at, sponsored: 1, auction: a1, rank: 1,
			format: "listings", chargeType: "CPM", campaign: "C1", vendor: "V1", entityType: "product", entity: "P1",
			device: "mobile", pageID: "home", charged: charged}
		if charged == 1 {
			r.micros, r.sub = 1, 500 // 1.5 micro-units: a CPM price of 1,500 micros
		}
		return r
	}
	click := interaction{mp: mpA, kind: "click", event: "c1", at: d1.Add(10 * time.Hour), sponsored: 1, auction: a2,
		rank: 2, format: "listings", chargeType: "CPC", campaign: "C2", vendor: "V2", entityType: "product",
		hashed: 1, device: "desktop", pageID: "search", charged: 1, micros: 250_000}
	c2imp := click
	c2imp.kind, c2imp.event, c2imp.charged, c2imp.micros = "impression", "i-c2", 0, 0
	organic := interaction{mp: mpA, kind: "impression", event: "o1", at: d1.Add(11 * time.Hour), entityType: "product",
		entity: "P7", extCampaign: "X1", device: "mobile"}
	other := interaction{mp: mpB, kind: "click", event: "c1", at: d1.Add(12 * time.Hour), sponsored: 1, auction: a3,
		rank: 1, format: "listings", chargeType: "CPC", campaign: "C9", vendor: "V9", entityType: "product",
		entity: "P9", charged: 1, micros: 70_000}
	insertInteractions(t, ctx, conn,
		cpm("i1", d1.Add(9*time.Hour), 1), cpm("i2", d1.Add(10*time.Hour), 1), cpm("i3", d1.Add(23*time.Hour), 1),
		click, c2imp, organic, other)
	// Replays (identical rows, another insert) and a retry after the dedupe
	// window stored uncharged: FINAL keeps one charged copy of each.
	insertInteractions(t, ctx, conn, cpm("i1", d1.Add(9*time.Hour), 1), click, other)
	insertInteractions(t, ctx, conn, cpm("i2", d1.Add(10*time.Hour), 0))

	// Purchase U1 on d1: item 0 first credited to C2's click (v1), then to
	// C1's impression (v2); item 1 credited to C1 (v1), then not attributed
	// (v2). Purchase U2 on d1: one item credited to C1, inserted twice.
	// Purchase U3 on d2 credited to C1's impression of d1.
	pAt := d1.Add(15 * time.Hour)
	toC1 := func(p string, idx uint16, at time.Time, qty, micros int64, v uint64) item {
		return item{mp: mpA, purchase: p, index: idx, at: at, qty: qty, micros: micros, attributed: 1,
			kind: "impression", event: "i1", auction: a1, campaign: "C1", vendor: "V1", prod: "P1", version: v}
	}
	insertItems(t, ctx, conn,
		item{mp: mpA, purchase: "U1", index: 0, at: pAt, qty: 2, micros: 20_000_000, attributed: 1, kind: "click",
			event: "c1", auction: a2, campaign: "C2", vendor: "V2", prod: "P2", version: 1},
		toC1("U1", 1, pAt, 1, 5_000_000, 1),
		toC1("U2", 0, pAt.Add(time.Hour), 3, 3_000_000, 1),
	)
	insertItems(t, ctx, conn,
		toC1("U1", 0, pAt, 2, 20_000_000, 2),
		item{mp: mpA, purchase: "U1", index: 1, at: pAt, qty: 1, micros: 5_000_000, version: 2},
		toC1("U2", 0, pAt.Add(time.Hour), 3, 3_000_000, 1),
		toC1("U3", 0, d2.Add(2*time.Hour), 1, 1_000_000, 1),
	)
}

func TestRefreshExactSums(t *testing.T) {
	ctx, conn := db(t)
	seed(t, ctx, conn)
	j := job(t, conn)
	st, err := j.Refresh(ctx, []time.Time{d1, d2})
	if err != nil {
		t.Fatal(err)
	}
	got := readSums(t, ctx, conn)
	want := map[string]sums{
		// 3 impressions charged 1.5 micros each (i2's uncharged retry ignored);
		// U1 item 0 (v2) and U2 (replayed): 2 items, 2 purchases.
		"a/2026-10-05/C1/P1/1/": {Impressions: 3, ChargedImpressions: 3, SpentImpressions: 4, SubImpressions: 1500,
			Items: 2, Purchases: 2, Quantity: 5, Amount: 23_000_000},
		// Hashed winner resolved from auction_winners; U1 item 0 moved away.
		"a/2026-10-05/C2/P2/1/": {Impressions: 1, Clicks: 1, ChargedClicks: 1, SpentClicks: 250_000},
		"a/2026-10-05//P7/0/X1": {Impressions: 1},
		"a/2026-10-06/C1/P1/1/": {Items: 1, Purchases: 1, Quantity: 1, Amount: 1_000_000},
		"b/2026-10-05/C9/P9/1/": {Clicks: 1, ChargedClicks: 1, SpentClicks: 70_000},
	}
	if len(got) != len(want) {
		t.Errorf("got %d groups, want %d: %+v", len(got), len(want), got)
	}
	for k, w := range want {
		if g := got[k]; g != w {
			t.Errorf("%s: got %+v, want %+v", k, g, w)
		}
	}
	if st.Days != 2 || st.Rows == 0 {
		t.Errorf("stats %+v", st)
	}

	// The dimensions of the purchase rows come from the credited interaction
	// and its auction; those of the interaction rows from the auction joins.
	var device, search string
	var loc []string
	if err := conn.QueryRow(ctx, `SELECT any(device_type), any(auction_search_query), any(auction_location)
		FROM rollup_daily WHERE day_local = '2026-10-06' AND campaign_id = 'C1'`).Scan(&device, &search, &loc); err != nil {
		t.Fatal(err)
	}
	if device != "mobile" || search != "shoes" || len(loc) != 1 || loc[0] != "here" {
		t.Errorf("purchase row dims: device %q search %q locations %v", device, search, loc)
	}
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM rollup_daily
		WHERE marketplace_id = toUUID(?) AND campaign_id = 'C9'`, mpB).Scan(&n); err != nil || n != 1 {
		t.Errorf("marketplace B rows: %d, %v", n, err)
	}
}

// TestRefreshBudgetRefused: interactions refused for a budget are counted
// per kind once (replayed rows folded), and so are the clicks refused as
// invalid; other reasons are not, and an event whose charged copy exists
// counts as charged, whatever its uncharged copy says.
func TestRefreshBudgetRefused(t *testing.T) {
	ctx, conn := db(t)
	row := func(kind, ev string, charged uint8, refused string) interaction {
		r := interaction{mp: mpA, kind: kind, event: ev, at: d1.Add(9 * time.Hour), sponsored: 1, auction: a1, rank: 1,
			format: "listings", chargeType: "CPC", campaign: "C1", vendor: "V1", entityType: "product", entity: "P1",
			device: "mobile", pageID: "home", charged: charged, refused: refused}
		if kind == "impression" {
			r.chargeType = "CPM"
		}
		if charged == 1 {
			r.micros = 10_000
		}
		return r
	}
	insertInteractions(t, ctx, conn,
		row("click", "c1", 1, ""),
		row("click", "c2", 0, "daily_budget"),
		row("click", "c3", 0, "total_budget"),
		row("click", "c4", 0, "duplicate"),
		row("impression", "i1", 0, "daily_budget"),
		row("impression", "i2", 0, "kind"),
		row("click", "c5", 1, ""),
		row("click", "c6", 0, "invalid_no_impression"),
		row("click", "c7", 0, "invalid_repeat_click"),
	)
	insertInteractions(t, ctx, conn,
		row("click", "c6", 0, "invalid_no_impression"), // a replay
		row("click", "c2", 0, "daily_budget"),          // a replay
		row("click", "c5", 0, "duplicate"),             // a retry after the dedupe window: the charged copy wins
	)
	if _, err := job(t, conn).Refresh(ctx, []time.Time{d1}); err != nil {
		t.Fatal(err)
	}
	var clicks, charged, refusedClicks, refusedImps, invalid uint64
	if err := conn.QueryRow(ctx, `SELECT sum(clicks), sum(charged_clicks), sum(budget_refused_clicks), sum(budget_refused_impressions), sum(invalid_clicks)
		FROM rollup_daily WHERE marketplace_id = toUUID(?)`, mpA).Scan(&clicks, &charged, &refusedClicks, &refusedImps, &invalid); err != nil {
		t.Fatal(err)
	}
	if clicks != 7 || charged != 2 || refusedClicks != 2 || refusedImps != 1 || invalid != 2 {
		t.Errorf("clicks %d, charged %d, refused for a budget: %d clicks, %d impressions, %d invalid clicks; want 7, 2, 2, 1, 2",
			clicks, charged, refusedClicks, refusedImps, invalid)
	}
}

func TestRefreshIdempotentAndLateEvents(t *testing.T) {
	ctx, conn := db(t)
	seed(t, ctx, conn)
	j := job(t, conn)
	days := []time.Time{d1, d2}
	if _, err := j.Refresh(ctx, days); err != nil {
		t.Fatal(err)
	}
	first1, first2 := dump(t, ctx, conn, "2026-10-05"), dump(t, ctx, conn, "2026-10-06")
	if first1 == "" || first2 == "" {
		t.Fatal("empty rollup")
	}
	// A re-run on the same data, and one after the raw parts merged, give
	// the same rows.
	if _, err := j.Refresh(ctx, days); err != nil {
		t.Fatal(err)
	}
	if g := dump(t, ctx, conn, "2026-10-05"); g != first1 {
		t.Fatalf("re-run changed day 1:\n%s\nvs\n%s", g, first1)
	}
	for _, tb := range []string{"interactions_raw", "attributed_purchases_raw"} {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+tb+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Refresh(ctx, days); err != nil {
		t.Fatal(err)
	}
	if g1, g2 := dump(t, ctx, conn, "2026-10-05"), dump(t, ctx, conn, "2026-10-06"); g1 != first1 || g2 != first2 {
		t.Fatalf("re-run after merges changed the rollup:\n%s\n%s", g1, g2)
	}

	// A late impression of d1 (and a replay of an old one): only d1 changes,
	// by exactly one impression.
	before := readSums(t, ctx, conn)
	late := interaction{mp: mpA, kind: "impression", event: "late", at: d1.Add(20 * time.Hour), sponsored: 1,
		auction: a1, rank: 1, format: "listings", chargeType: "CPM", campaign: "C1", vendor: "V1",
		entityType: "product", entity: "P1", device: "mobile", pageID: "home"}
	replay := late
	replay.event = "i3"
	replay.at, replay.charged, replay.micros, replay.sub = d1.Add(23*time.Hour), 1, 1, 500
	insertInteractions(t, ctx, conn, late, replay)
	if _, err := j.Refresh(ctx, days); err != nil {
		t.Fatal(err)
	}
	if g := dump(t, ctx, conn, "2026-10-06"); g != first2 {
		t.Errorf("day 2 changed:\n%s\nvs\n%s", g, first2)
	}
	after := readSums(t, ctx, conn)
	for k, b := range before {
		want := b
		if k == "a/2026-10-05/C1/P1/1/" {
			want.Impressions++
		}
		if after[k] != want {
			t.Errorf("%s: got %+v, want %+v", k, after[k], want)
		}
	}

	// An attribution moved to another campaign: the old campaign's row
	// disappears from the day (not left behind as a stale key).
	insertItems(t, ctx, conn, item{mp: mpA, purchase: "U3", index: 0, at: d2.Add(2 * time.Hour), qty: 1,
		micros: 1_000_000, attributed: 1, kind: "click", event: "c1", auction: a2, campaign: "C2", vendor: "V2",
		prod: "P2", version: 2})
	if _, err := j.Refresh(ctx, []time.Time{d2}); err != nil {
		t.Fatal(err)
	}
	got := readSums(t, ctx, conn)
	if _, ok := got["a/2026-10-06/C1/P1/1/"]; ok {
		t.Errorf("C1 still has day 2: %+v", got)
	}
	if g := got["a/2026-10-06/C2/P2/1/"]; g.Items != 1 || g.Purchases != 1 {
		t.Errorf("C2 day 2: %+v", g)
	}
	// Days with no data at all are emptied too.
	if err := conn.Exec(ctx, "ALTER TABLE attributed_purchases_raw DELETE WHERE purchase_event_id = 'U3'"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM attributed_purchases_raw WHERE purchase_event_id = 'U3'").Scan(&n); err != nil || n != 0 {
			return testenv.Errorf("mutation pending: %d %v", n, err)
		}
		return nil
	})
	if _, err := j.Refresh(ctx, []time.Time{d2}); err != nil {
		t.Fatal(err)
	}
	if g := dump(t, ctx, conn, "2026-10-06"); g != "" {
		t.Errorf("day 2 not emptied: %s", g)
	}
	var computed uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM rollup_days FINAL WHERE day_local = '2026-10-06'").Scan(&computed); err != nil || computed != 1 {
		t.Errorf("rollup_days: %d %v", computed, err)
	}
}

// TestRun: the loop's first (full) run covers the full window and backfills
// the older days up to 121 days back; the lock is taken around every run, and
// a run is skipped while the lock is held elsewhere.
func TestRun(t *testing.T) {
	ctx, conn := db(t)
	seed(t, ctx, conn)
	now := d1.AddDate(0, 0, 33).Add(5 * time.Hour) // d1 is the full window's first day
	var locks, held atomic.Int32
	j, err := rollups.New(rollups.Options{ClickHouse: conn, Log: testenv.Logger(t), Interval: 100 * time.Millisecond, MaxShare: 1,
		Now: func() time.Time { return now },
		Lock: func(context.Context) (func(), error) {
			if locks.Add(1) == 2 {
				held.Add(1)
				return nil, errors.New("held elsewhere")
			}
			return func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- j.Run(rctx) }()
	testenv.Eventually(t, time.Minute, func() error {
		if locks.Load() < 4 {
			return testenv.Errorf("%d runs", locks.Load())
		}
		return nil
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if g := readSums(t, ctx, conn)["a/2026-10-05/C1/P1/1/"]; g.Impressions != 3 || g.Purchases != 2 {
		t.Errorf("d1 after Run: %+v", g)
	}
	var days uint64
	var oldest time.Time
	if err := conn.QueryRow(ctx, "SELECT uniqExact(day_local), min(day_local) FROM rollup_days").Scan(&days, &oldest); err != nil {
		t.Fatal(err)
	}
	if want := dateOf(now).AddDate(0, 0, -121); days != 121+2 || !oldest.Equal(want) {
		t.Errorf("rollup_days: %d days from %s, want 123 from %s", days, oldest, want)
	}
}

func TestFinalAfter(t *testing.T) {
	for _, tc := range []struct{ day, want string }{
		{"2026-10-05", "2026-11-05T12:00:00Z"},
		{"2026-02-28", "2026-03-31T12:00:00Z"},
	} {
		d, _ := time.Parse(time.DateOnly, tc.day)
		if got := rollups.FinalAfter(d.Add(7 * time.Hour)).Format(time.RFC3339); got != tc.want {
			t.Errorf("FinalAfter(%s) = %s, want %s", tc.day, got, tc.want)
		}
	}
}

func TestNextRunAfter(t *testing.T) {
	for _, tc := range []struct {
		name           string
		interval, took time.Duration
		share          float64
		want           time.Duration
	}{
		{"quick run: the rest of the interval", time.Minute, 5 * time.Second, 0.25, 55 * time.Second},
		{"slow run: three times its length at a quarter", time.Minute, 20 * time.Second, 0.25, time.Minute},
		{"longer than the interval: paced, not back to back", time.Minute, 90 * time.Second, 0.25, 270 * time.Second},
		{"half", time.Minute, 40 * time.Second, 0.5, 40 * time.Second},
		{"share 1: back to back after a long run", time.Minute, 90 * time.Second, 1, 0},
		{"share 1: the rest of the interval", time.Minute, 10 * time.Second, 1, 50 * time.Second},
		{"no time taken", time.Minute, 0, 0.25, time.Minute},
	} {
		if got := rollups.NextRunAfter(tc.interval, tc.took, tc.share); got != tc.want {
			t.Errorf("%s: NextRunAfter(%s, %s, %v) = %s, want %s", tc.name, tc.interval, tc.took, tc.share, got, tc.want)
		}
	}
}

// watermarkOf reads a day's recorded watermark (zero: unknown).
func watermarkOf(t *testing.T, ctx context.Context, conn clickhouse.Conn, day time.Time) time.Time {
	t.Helper()
	days, err := rollups.ReadDays(ctx, conn, day, day)
	if err != nil {
		t.Fatal(err)
	}
	return days[day].DataAsOf
}

// TestRefreshWatermark: a recomputation records as the days' watermark the
// instant it started once the projectors' groups have committed what their
// topics held then (a real broker and group commits); when they have not
// within FoldWait, the latest instant known, and never earlier than the
// day's previous watermark.
func TestRefreshWatermark(t *testing.T) {
	ctx, conn := db(t)
	seed(t, ctx, conn)
	_, brokers := testenv.Kafka(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	produce := func(p int32, n int) {
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(p0, p1 int64) {
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: "events", Partition: 0, At: p0, LeaderEpoch: -1})
		o.Add(kadm.Offset{Topic: "events", Partition: 1, At: p1, LeaderEpoch: -1})
		if _, err := adm.CommitOffsets(ctx, "fold", o); err != nil {
			t.Fatal(err)
		}
	}
	fold := rollups.NewWatermark(kafka.NewProgress(cl, kafka.Fold{Group: "fold", Topic: "events"}), 20*time.Millisecond)
	j, err := rollups.New(rollups.Options{ClickHouse: conn, Log: testenv.Logger(t), Fold: fold, FoldWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	days := []time.Time{d1, d2}

	// Records the group has not folded: no watermark known.
	produce(0, 3)
	produce(1, 2)
	commit(3, 1)
	s, err := j.Refresh(ctx, days)
	if err != nil || !s.DataAsOf.IsZero() || !watermarkOf(t, ctx, conn, d1).IsZero() {
		t.Fatalf("behind: %+v %v, recorded %s", s, err, watermarkOf(t, ctx, conn, d1))
	}

	// Folded while the run waits: the run's start.
	go func() {
		time.Sleep(100 * time.Millisecond)
		commit(3, 2)
	}()
	before := time.Now()
	s, err = j.Refresh(ctx, days)
	after := time.Now()
	w := watermarkOf(t, ctx, conn, d1)
	if err != nil || s.DataAsOf.Before(before.Truncate(time.Millisecond)) || s.DataAsOf.After(after) || !w.Equal(s.DataAsOf.Truncate(time.Millisecond)) ||
		!watermarkOf(t, ctx, conn, d2).Equal(w) {
		t.Fatalf("caught up: %+v %v, recorded %s, want between %s and %s", s, err, w, before, after)
	}

	// Behind again: the days keep the watermark known.
	produce(1, 1)
	if s, err = j.Refresh(ctx, days); err != nil || !s.DataAsOf.Equal(w) && !s.DataAsOf.Truncate(time.Millisecond).Equal(w) || !watermarkOf(t, ctx, conn, d1).Equal(w) {
		t.Fatalf("behind again: %+v %v, recorded %s, want %s", s, err, watermarkOf(t, ctx, conn, d1), w)
	}
	// A job that knows no watermark never takes a day's back.
	if _, err := job(t, conn).Refresh(ctx, []time.Time{d1}); err != nil || !watermarkOf(t, ctx, conn, d1).Equal(w) {
		t.Fatalf("without a watermark: %v, recorded %s, want %s", err, watermarkOf(t, ctx, conn, d1), w)
	}
	// A day whose watermark is at or after FinalAfter is final.
	fa := rollups.FinalAfter(d1)
	if !(rollups.Day{DataAsOf: fa}).Final(d1) || (rollups.Day{DataAsOf: fa.Add(-time.Millisecond)}).Final(d1) ||
		(rollups.Day{ComputedAt: fa.AddDate(1, 0, 0)}).Final(d1) {
		t.Error("Final does not follow the watermark")
	}
}

// TestRefreshWaitsForTheLock: Refresh waits for a run of another process
// to end, within its context.
func TestRefreshWaitsForTheLock(t *testing.T) {
	ctx, conn := db(t)
	seed(t, ctx, conn)
	var calls, held atomic.Int32
	held.Store(3)
	j, err := rollups.New(rollups.Options{ClickHouse: conn, Log: testenv.Logger(t), Lock: func(context.Context) (func(), error) {
		calls.Add(1)
		if held.Add(-1) >= 0 {
			return nil, errors.New("held elsewhere")
		}
		return func() {}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := j.Refresh(ctx, []time.Time{d1}); err != nil || s.Days != 1 || calls.Load() != 4 {
		t.Fatalf("refresh after the lock was freed: %+v %v, %d calls", s, err, calls.Load())
	}
	held.Store(1 << 20)
	sctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	if _, err := j.Refresh(sctx, []time.Time{d1}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "held elsewhere") {
		t.Fatalf("lock held throughout: %v", err)
	}
}
