package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

// chargeStack is the real servers of one interactions test: kfake with the
// topics, a migrated ClickHouse database, Redis, and marketplace ids of the
// test's own (Redis is shared between tests).
type chargeStack struct {
	ctx     context.Context
	brokers []string
	topics  kafka.Topics
	cl      *kgo.Client
	conn    clickhouse.Conn
	rdb     redis.UniversalClient
	prefix  string // Redis claim prefix of this test
	mp      string
	kr      *bidtoken.Keyring
	// onRefused, when set, is the sinks' OnRefused.
	onRefused func(ctx context.Context, rs []projections.BudgetRefusal) error
	// upgradedAt, when set, is the sinks' UpgradedAt.
	upgradedAt time.Time
	// invalid are the sinks' invalid-click rules.
	invalid spend.InvalidRules
}

func newChargeStack(t *testing.T) *chargeStack {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	cl, topics := testenv.Topics(t, ctx, cfg, brokers, 3)
	conn := testenv.ClickHouse(t, ctx, cfg)
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{1: []byte("endcap-test-key-0123456789abcdef")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &chargeStack{ctx: ctx, brokers: brokers, topics: topics, cl: cl, conn: conn, rdb: rdb,
		prefix: "test:claim:" + cfg.KafkaTopicPrefix, mp: uuid.NewString(), kr: kr}
}

// views answers for s.mp only, in loc; campaigns and vendors get names
// derived from their ids.
func (s *chargeStack) views(loc *time.Location) projections.Views {
	return projections.Views{
		Marketplace: func(id string) (projections.MarketplaceDims, bool) {
			return projections.MarketplaceDims{Currency: "EUR", Location: loc}, id == s.mp
		},
		Campaign: func(mp, id string, at time.Time) (projections.CampaignDims, bool) {
			return projections.CampaignDims{Name: "name of " + id[:8], Type: "listings", Status: "running", Active: true}, true
		},
		Vendor: func(mp, id string) (projections.VendorDims, bool) {
			return projections.VendorDims{Name: "vendor " + id, GlobalID: "global-" + id}, true
		},
	}
}

// budgets are the campaigns' budgets a test's views answer with, changed
// while the test runs.
type budgets struct {
	mu sync.Mutex
	m  map[string]spend.Limits // campaign id → budgets
}

func (b *budgets) set(campaign string, l spend.Limits) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]spend.Limits{}
	}
	b.m[campaign] = l
}

// budgetViews are views(loc) whose campaigns have the budgets of b.
func (s *chargeStack) budgetViews(loc *time.Location, b *budgets) projections.Views {
	v := s.views(loc)
	campaign := v.Campaign
	v.Campaign = func(mp, id string, at time.Time) (projections.CampaignDims, bool) {
		d, ok := campaign(mp, id, at)
		b.mu.Lock()
		l := b.m[id]
		b.mu.Unlock()
		d.DailyBudgetMicros, d.TotalBudgetMicros = l.DailyMicros, l.TotalMicros
		d.WeeklyBudgetMicros, d.MonthlyBudgetMicros = l.WeeklyMicros, l.MonthlyMicros
		return d, ok
	}
	return v
}

// winner signs a token for one auction winner.
func (s *chargeStack) winner(t testing.TB, auctionID uuid.UUID, at time.Time, rank uint8, campaign uuid.UUID, ct bidtoken.ChargeType, price int64) string {
	t.Helper()
	tok, err := s.kr.Encode(bidtoken.Claims{
		MarketplaceID: uuid.MustParse(s.mp), AuctionID: auctionID, CampaignID: campaign, AuctionTimeMs: at.UnixMilli(),
		ChargeType: ct, AdFormat: bidtoken.Listings, Rank: rank, PriceMicros: price, WinnerType: bidtoken.WinnerProduct,
		WinnerID: "sku-" + strconv.Itoa(int(rank)), VendorID: "v-" + campaign.String()[:4],
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (s *chargeStack) produce(t testing.TB, evs ...records.Event) {
	t.Helper()
	recs := make([]*kgo.Record, len(evs))
	for i := range evs {
		v, err := json.Marshal(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: s.topics.Events, Key: records.EventKey(&evs[i]), Value: v}
	}
	if err := s.cl.ProduceSync(s.ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func (s *chargeStack) projector(t testing.TB, conn clickhouse.Conn, views projections.Views, flush time.Duration) *projections.EventFold {
	t.Helper()
	return s.projectorWindow(t, conn, views, flush, time.Hour)
}

// projectorWindow returns the events fold with the interactions sink only.
func (s *chargeStack) projectorWindow(t testing.TB, conn clickhouse.Conn, views projections.Views, flush, dedupe time.Duration) *projections.EventFold {
	t.Helper()
	sink, err := projections.NewInteractions(projections.InteractionsOptions{ClickHouse: conn, Redis: s.rdb, Views: views, Log: quiet,
		OnRefused: s.onRefused, Replicas: replicas(), UpgradedAt: s.upgradedAt, InvalidClicks: s.invalid})
	if err != nil {
		t.Fatal(err)
	}
	p, err := projections.NewEventFold(projections.EventFoldOptions{
		Brokers: s.brokers, Topic: s.topics.Events, Claims: openClaims(t, s.brokers, s.topics, dedupe),
		Sinks: []projections.EventSink{sink}, MaxRows: 50_000, FlushInterval: flush, Log: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs p until until() holds, then stops it (without committing
// anything it has not committed yet) and leaves the group.
func (s *chargeStack) run(t testing.TB, p *projections.EventFold, timeout time.Duration, until func() error) {
	t.Helper()
	pctx, cancel := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.Run(pctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
		p.Close()
	}()
	testenv.Eventually(t, timeout, until)
}

func (s *chargeStack) committed(group string) int64 {
	offs, err := kadm.NewClient(s.cl).FetchOffsets(s.ctx, group)
	if err != nil {
		return -1
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) { n += o.At })
	return n
}

func (s *chargeStack) committedIs(group string, want int64) func() error {
	return func() error {
		if n := s.committed(group); n != want {
			return fmt.Errorf("committed %d of %d records", n, want)
		}
		return nil
	}
}

// rewind sets the group's offsets back to the start, as after a crash
// between the writes and the commit.
func (s *chargeStack) rewind(t testing.TB, group, topic string) {
	t.Helper()
	var o kadm.Offsets
	for p := int32(0); p < 3; p++ {
		o.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	if _, err := kadm.NewClient(s.cl).CommitOffsets(s.ctx, group, o); err != nil {
		t.Fatal(err)
	}
}

func (s *chargeStack) uint64(t testing.TB, q string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := s.conn.QueryRow(s.ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (s *chargeStack) int64(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.conn.QueryRow(s.ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// spend reads a campaign's spend in Redis: of one local day, and in total.
func (s *chargeStack) spend(t testing.TB, campaign, day string) (int64, int64) {
	t.Helper()
	d, total, err := spend.ReadSpend(s.ctx, s.rdb, s.mp, campaign, day)
	if err != nil {
		t.Fatal(err)
	}
	return d, total
}

// replicas is what the sinks of the tests ask the charge step to wait for:
// a replica of every master on the test cluster, none on one server.
func replicas() int {
	if testenv.RedisClusterMode() {
		return 1
	}
	return 0
}

// chargedSum is the sum of amount_micros of a campaign's visible charges.
func (s *chargeStack) chargedSum(t testing.TB, campaign string) int64 {
	return s.int64(t, "SELECT toInt64(sum(amount_micros)) FROM charges WHERE marketplace_id = ? AND campaign_id = ?", s.mp, campaign)
}

// TestInteractionsExactlyOnce folds a mix of sponsored and organic
// interactions and checks every charge rule, then rewinds the group (a crash
// between the writes and the commit) and adds client retries and
// duplicates: the visible rows, the charges and the Redis spend come out
// the same, plus what is really new.
func TestInteractionsExactlyOnce(t *testing.T) {
	s := newChargeStack(t)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	now := time.Now().UTC().Truncate(time.Millisecond)
	c1, c2 := uuid.New(), uuid.New()
	a1, a2 := uuid.New(), uuid.New()
	a1At := now.Add(-time.Hour)
	w1 := s.winner(t, a1, a1At, 1, c1, bidtoken.CPC, 1_250_000)
	w2 := s.winner(t, a1, a1At, 2, c2, bidtoken.CPM, 2_345_678)
	w3 := s.winner(t, a1, a1At, 3, c1, bidtoken.CPC, 700_000)
	w4 := s.winner(t, a2, now.Add(-31*24*time.Hour), 1, c1, bidtoken.CPC, 900_000) // auction 31 days ago
	// w1 again, as a token carries a winner id too long to fit: hashed.
	w1h, err := s.kr.Encode(bidtoken.Claims{MarketplaceID: uuid.MustParse(s.mp), AuctionID: a1, CampaignID: c1, AuctionTimeMs: a1At.UnixMilli(),
		ChargeType: bidtoken.CPC, AdFormat: bidtoken.Listings, Rank: 1, PriceMicros: 1_250_000, WinnerType: bidtoken.WinnerProduct,
		WinnerIDHashed: true, WinnerIDHash: bidtoken.IDHash("sku-1"), VendorID: "v-" + c1.String()[:4]})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(kind records.Kind, id, tok string, occurred time.Time) records.Event {
		e := records.Event{Kind: kind, MarketplaceID: s.mp, ID: id, OccurredAtMs: occurred.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
			OpaqueUserID: "user-" + id, ResolvedBidID: tok, DeviceType: "mobile",
			Placement: &records.Placement{Path: "/search", Page: 1}}
		if tok == "" {
			e.Entity = &records.Entity{Type: "product", ID: "organic-sku"}
		}
		return e
	}
	at := a1At.Add(time.Minute)
	s.produce(t,
		ev(records.KindClick, "c-1", w1, at),                          // c-1 and c-2 click the same winner:
		ev(records.KindClick, "c-2", w1, at.Add(time.Second)),         // one of them is charged 1,250,000 (c1)
		ev(records.KindImpression, "i-1", w1, at),                     // CPC winner's impression: not charged
		ev(records.KindImpression, "i-2", w2, at),                     // charged 2,345.678 (c2)
		ev(records.KindClick, "c-3", w2, at),                          // CPM winner's click: not charged
		ev(records.KindClick, "c-4", w3, a1At.Add(-10*time.Minute)),   // before its auction: not charged
		ev(records.KindClick, "c-5", "", at),                          // organic
		ev(records.KindClick, "c-6", w4, now.Add(-20*24*time.Hour)),   // received 31 days after its auction: not charged
		ev(records.KindClick, "c-old", w3, now.Add(-31*24*time.Hour)), // 31 days old on arrival: neither counted nor charged
		ev(records.KindClick, "c-7", w3, at),                          // charged 700,000 (c1)
		ev(records.KindImpression, "i-3", w1h, at),                    // not charged (CPC); its entity id comes from auction_winners
		records.Event{Kind: records.KindPageView, MarketplaceID: s.mp, ID: "pv-1", OccurredAtMs: at.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
			Page: &records.Page{Type: "home", ID: "h"}},
	)
	p := s.projector(t, s.conn, s.views(berlin), 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, 12))

	day := spend.DayOf(at, berlin)
	type totals struct {
		interactions, charged, charges uint64
		c1Day, c1Total, c2Day, c1CH    int64
	}
	read := func() totals {
		var r totals
		r.interactions = s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ?", s.mp)
		r.charged = s.uint64(t, "SELECT countIf(charged = 1) FROM interactions WHERE marketplace_id = ?", s.mp)
		r.charges = s.uint64(t, "SELECT count() FROM charges WHERE marketplace_id = ?", s.mp)
		r.c1Day, r.c1Total = s.spend(t, c1.String(), day)
		r.c2Day, _ = s.spend(t, c2.String(), day)
		r.c1CH = s.chargedSum(t, c1.String())
		return r
	}
	want := totals{interactions: 10, charged: 3, charges: 3, c1Day: 1_950_000, c1Total: 1_950_000, c2Day: 2_345, c1CH: 1_950_000}
	if got := read(); got != want {
		t.Fatalf("first pass\n got %+v\nwant %+v", got, want)
	}

	// Every column of one charge, and the exact CPM amount.
	var (
		interaction, campaign, product, vendor, extVendor, global, chargeType, currency, kind string
		ts                                                                                    time.Time
		amount                                                                                int64
		sub                                                                                   uint16
		dayLocal                                                                              time.Time
	)
	if err := s.conn.QueryRow(s.ctx, `SELECT toString(interaction_id), timestamp, campaign_id, product_id, vendor_id, external_vendor_id,
		global_id, amount_micros, amount_sub_micros, charge_type, currency_code, toString(kind), day_local
		FROM charges WHERE marketplace_id = ? AND event_id = 'i-2'`, s.mp).Scan(
		&interaction, &ts, &campaign, &product, &vendor, &extVendor, &global, &amount, &sub, &chargeType, &currency, &kind, &dayLocal); err != nil {
		t.Fatal(err)
	}
	wantVendor := "v-" + c2.String()[:4]
	if interaction != projections.InteractionID(s.mp, records.KindImpression, "i-2").String() || !ts.Equal(at.Truncate(time.Second)) ||
		campaign != c2.String() || product != "sku-2" || vendor != wantVendor || extVendor != wantVendor ||
		global != "global-"+wantVendor || amount != 2_345 || sub != 678 || chargeType != "CPM" || currency != "EUR" ||
		kind != "impression" || dayLocal.Format("2006-01-02") != day {
		t.Errorf("charge row: %s %s %s %s %s %s %s %d %d %s %s %s %s", interaction, ts, campaign, product, vendor, extVendor, global,
			amount, sub, chargeType, currency, kind, dayLocal)
	}
	// The dimensions of the fact table. c-1 and c-2 click the same winner
	// (on different partitions): whichever came first is charged.
	var sponsored, charged uint8
	var campName, entity, device string
	if err := s.conn.QueryRow(s.ctx, `SELECT min(sponsored), toUInt8(sum(charged)), any(campaign_name), any(entity_id), any(device_type)
		FROM interactions WHERE marketplace_id = ? AND event_id IN ('c-1', 'c-2')`, s.mp).Scan(&sponsored, &charged, &campName, &entity, &device); err != nil {
		t.Fatal(err)
	}
	if sponsored != 1 || charged != 1 || campName != "name of "+c1.String()[:8] || entity != "sku-1" || device != "mobile" {
		t.Errorf("interactions c-1, c-2: sponsored %d, charged %d, %q %q %q", sponsored, charged, campName, entity, device)
	}
	if n := s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND event_id = 'c-5' AND sponsored = 0 AND entity_id = 'organic-sku'", s.mp); n != 1 {
		t.Errorf("organic click: %d rows", n)
	}
	// Why each uncharged row is not charged (c-1 and c-2: one of them).
	reasons := map[string]string{}
	rrows, err := s.conn.Query(s.ctx, "SELECT event_id, refused_reason FROM interactions WHERE marketplace_id = ?", s.mp)
	if err != nil {
		t.Fatal(err)
	}
	for rrows.Next() {
		var id, r string
		if err := rrows.Scan(&id, &r); err != nil {
			t.Fatal(err)
		}
		reasons[id] = r
	}
	rrows.Close()
	if reasons["c-1"]+reasons["c-2"] != "duplicate" {
		t.Errorf("c-1 %q, c-2 %q: want one duplicate", reasons["c-1"], reasons["c-2"])
	}
	delete(reasons, "c-1")
	delete(reasons, "c-2")
	if want := map[string]string{"i-1": "kind", "i-2": "", "c-3": "kind", "c-4": "before_auction", "c-5": "", "c-6": "after_window",
		"c-7": "", "i-3": "kind"}; !maps.Equal(reasons, want) {
		t.Errorf("reasons %v, want %v", reasons, want)
	}

	// Crash between the writes and the commit: everything is read again.
	// Plus client retries (same ids, new records), another click on a
	// charged winner, and one new chargeable click.
	s.rewind(t, projections.EventsGroup, s.topics.Events)
	a3 := uuid.New()
	w5 := s.winner(t, a3, a1At, 1, c1, bidtoken.CPC, 50_000)
	s.produce(t,
		ev(records.KindClick, "c-1", w1, at),
		ev(records.KindImpression, "i-2", w2, at),
		ev(records.KindClick, "c-8", w1, at.Add(2*time.Second)),
		ev(records.KindClick, "c-9", w5, at),
	)
	p = s.projector(t, s.conn, s.views(berlin), 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, 16))

	want = totals{interactions: 12, charged: 4, charges: 4, c1Day: 2_000_000, c1Total: 2_000_000, c2Day: 2_345, c1CH: 2_000_000}
	if got := read(); got != want {
		t.Errorf("after the replay\n got %+v\nwant %+v", got, want)
	}
	t.Logf("physical rows after the replay: interactions_raw %d, charges_raw %d (identical replayed rows, folded by FINAL)",
		s.uint64(t, "SELECT count() FROM interactions_raw"), s.uint64(t, "SELECT count() FROM charges_raw"))
	if n := s.uint64(t, "SELECT count() FROM (SELECT interaction_id, uniqExact(kafka_partition, kafka_offset) AS o FROM charges_raw GROUP BY interaction_id HAVING o > 1)"); n != 0 {
		t.Errorf("%d charges have rows from two different records", n)
	}

	// The auction's context comes from `auctions` at query time; a missing
	// auction record (a2) leaves it empty.
	rec := records.Auction{ID: a1.String(), MarketplaceID: s.mp, At: a1At, Endpoint: "auctions", Kind: "listings", Slots: 3,
		Device: "desktop", Locations: []string{"8928308280fffff"}, PageType: "search", PageID: "pg", PageValue: []string{"shoes"},
		SearchQuery: "red shoes", Category: "c1", Winners: []records.AuctionWinner{
			{Rank: 1, Type: "product", EntityID: "sku-1", CampaignID: c1.String(), VendorID: "v", ChargeType: "CPC", PriceMicros: 1_250_000}}}
	v, _ := json.Marshal(rec)
	if err := s.cl.ProduceSync(s.ctx, &kgo.Record{Topic: s.topics.Auctions, Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ap, err := projections.NewAuctionsProjector(projections.AuctionsOptions{Brokers: s.brokers, Topic: s.topics.Auctions,
		ClickHouse: s.conn, MaxRows: 100, FlushInterval: 100 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(s.ctx)
	go func() { _ = ap.Run(actx) }()
	testenv.Eventually(t, 20*time.Second, func() error {
		if s.uint64(t, "SELECT count() FROM auctions") != 1 || s.uint64(t, "SELECT count() FROM auction_winners") != 1 {
			return errors.New("auction not projected yet")
		}
		return nil
	})
	stop()
	ap.Close()
	rows, err := s.conn.Query(s.ctx, auctionJoinQuery, s.mp, s.mp, s.mp, s.mp, s.mp)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var id, dev, pt, q, cat, entity string
		var locs, pv []string
		if err := rows.Scan(&id, &dev, &locs, &pt, &pv, &q, &cat, &entity); err != nil {
			t.Fatal(err)
		}
		got[id] = fmt.Sprint(dev, locs, pt, pv, q, cat, "|", entity)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got["c-1"] != "desktop[8928308280fffff]search[shoes]red shoesc1|sku-1" || got["c-6"] != "[][]|sku-1" || got["c-5"] != "[][]|organic-sku" || got["i-3"] != "desktop[8928308280fffff]search[shoes]red shoesc1|sku-1" {
		t.Errorf("auction dimensions: c-1 %q, c-6 %q, c-5 %q, i-3 %q", got["c-1"], got["c-6"], got["c-5"], got["i-3"])
	}
}

// TestInteractionsBudgetCap: clicks and impressions on winners collected
// before any of them was charged. A CPC campaign with a daily budget and a
// CPM campaign with a total budget are charged up to their budgets and no
// further; the rest are stored as interactions not charged, with the
// reason, and as refused rows of charges_raw (amount 0) that the view
// `charges` leaves out. Then the budgets are raised and the group rewound
// (a replay), with a second click on a refused winner and a new click: the
// replay decides as before (refused stays refused), the second click is a
// duplicate, the new click is charged under the new budget. Redis spend
// equals the sum of the charges throughout.
func TestInteractionsBudgetCap(t *testing.T) {
	s := newChargeStack(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	cpc, cpm, wk := uuid.New(), uuid.New(), uuid.New()
	var bs budgets
	bs.set(cpc.String(), spend.Limits{DailyMicros: 1_000_000})
	bs.set(cpm.String(), spend.Limits{TotalMicros: 5_000})
	bs.set(wk.String(), spend.Limits{WeeklyMicros: 600_000})
	const clickPrice, cpmPrice = 300_000, 2_345_678 // an impression: 2,345 micro-units and 678 thousandths
	var evs []records.Event
	for i := range 10 {
		evs = append(evs, records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-" + strconv.Itoa(i), OccurredAtMs: now.UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u" + strconv.Itoa(i),
			ResolvedBidID: s.winner(t, uuid.New(), now.Add(-time.Minute), 1, cpc, bidtoken.CPC, clickPrice)})
	}
	for i := range 5 { // a weekly budget: 2 clicks fit
		evs = append(evs, records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "w-" + strconv.Itoa(i), OccurredAtMs: now.UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u" + strconv.Itoa(i),
			ResolvedBidID: s.winner(t, uuid.New(), now.Add(-time.Minute), 1, wk, bidtoken.CPC, clickPrice)})
	}
	for i := range 5 {
		evs = append(evs, records.Event{Kind: records.KindImpression, MarketplaceID: s.mp, ID: "i-" + strconv.Itoa(i), OccurredAtMs: now.UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u" + strconv.Itoa(i),
			ResolvedBidID: s.winner(t, uuid.New(), now.Add(-time.Minute), 2, cpm, bidtoken.CPM, cpmPrice)})
	}
	s.produce(t, evs...)
	views := s.budgetViews(time.UTC, &bs)
	// The refusals reported for budget.exhausted (docs/reference/webhooks.md): each
	// campaign and budget once per batch.
	var rmu sync.Mutex
	reported := map[string]int{}
	s.onRefused = func(_ context.Context, rs []projections.BudgetRefusal) error {
		rmu.Lock()
		defer rmu.Unlock()
		for _, r := range rs {
			reported[fmt.Sprintf("%s/%v/%s/%s/%d/%d", r.CampaignID, r.Total, r.Budget, r.Day, r.DailyMicros, r.TotalMicros)]++
		}
		return nil
	}
	p := s.projector(t, s.conn, views, 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, int64(len(evs))))
	s.onRefused = nil

	day := spend.DayOf(now, time.UTC)
	rmu.Lock()
	if len(reported) != 3 || reported[fmt.Sprintf("%s/false/daily/%s/1000000/0", cpc, day)] == 0 ||
		reported[fmt.Sprintf("%s/true/total/%s/0/5000", cpm, day)] == 0 || reported[fmt.Sprintf("%s/false/weekly/%s/0/0", wk, day)] == 0 {
		t.Errorf("refusals reported: %v", reported)
	}
	rmu.Unlock()
	type state struct {
		charged, refused, refusedRows uint64 // interactions charged / refused for a budget; refused rows of charges_raw
		sum, daySpend, totalSpend     int64
	}
	read := func(camp uuid.UUID, reason string) state {
		var st state
		st.charged = s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND campaign_id = ? AND charged = 1", s.mp, camp.String())
		st.refused = s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND campaign_id = ? AND charged = 0 AND refused_reason = ?",
			s.mp, camp.String(), reason)
		st.refusedRows = s.uint64(t, `SELECT count() FROM charges_raw FINAL WHERE marketplace_id = ? AND campaign_id = ? AND refused_reason = ?
			AND amount_micros = 0 AND amount_sub_micros = 0`, s.mp, camp.String(), reason)
		if n := s.uint64(t, "SELECT count() FROM charges WHERE marketplace_id = ? AND campaign_id = ?", s.mp, camp.String()); n != st.charged {
			t.Errorf("campaign %s: %d rows in charges, %d charged interactions", camp, n, st.charged)
		}
		st.sum = s.chargedSum(t, camp.String())
		st.daySpend, st.totalSpend = s.spend(t, camp.String(), day)
		return st
	}
	check := func(when string, camp uuid.UUID, reason string, want state) {
		t.Helper()
		if got := read(camp, reason); got != want {
			t.Errorf("%s, campaign %s\n got %+v\nwant %+v", when, reason, got, want)
		}
	}
	// 3 clicks fit in 1.00 (0.90); 2 impressions in 5,000 micro-units (4,690).
	check("first pass", cpc, "daily_budget", state{charged: 3, refused: 7, refusedRows: 7, sum: 900_000, daySpend: 900_000, totalSpend: 900_000})
	check("first pass", cpm, "total_budget", state{charged: 2, refused: 3, refusedRows: 3, sum: 4_690, daySpend: 4_690, totalSpend: 4_690})
	check("first pass", wk, "weekly_budget", state{charged: 2, refused: 3, refusedRows: 3, sum: 600_000, daySpend: 600_000, totalSpend: 600_000})

	// A refused click and its winner's token.
	var refusedID, refusedTok string
	if err := s.conn.QueryRow(s.ctx, `SELECT event_id, resolved_bid_id FROM interactions WHERE marketplace_id = ? AND refused_reason = 'daily_budget'
		ORDER BY event_id LIMIT 1`, s.mp).Scan(&refusedID, &refusedTok); err != nil {
		t.Fatal(err)
	}

	// The budgets are raised; the group replays everything, plus a second
	// click on the refused winner and a click on a new winner.
	bs.set(cpc.String(), spend.Limits{DailyMicros: 10_000_000})
	bs.set(cpm.String(), spend.Limits{TotalMicros: 1_000_000})
	s.rewind(t, projections.EventsGroup, s.topics.Events)
	s.produce(t,
		records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-again", OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
			OpaqueUserID: "u", ResolvedBidID: refusedTok},
		records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-new", OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
			OpaqueUserID: "u", ResolvedBidID: s.winner(t, uuid.New(), now.Add(-time.Minute), 1, cpc, bidtoken.CPC, clickPrice)},
	)
	p = s.projector(t, s.conn, views, 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, int64(len(evs)+2)))

	check("after the replay", cpc, "daily_budget", state{charged: 4, refused: 7, refusedRows: 7, sum: 1_200_000, daySpend: 1_200_000, totalSpend: 1_200_000})
	check("after the replay", cpm, "total_budget", state{charged: 2, refused: 3, refusedRows: 3, sum: 4_690, daySpend: 4_690, totalSpend: 4_690})
	check("after the replay", wk, "weekly_budget", state{charged: 2, refused: 3, refusedRows: 3, sum: 600_000, daySpend: 600_000, totalSpend: 600_000})
	var reason string
	var charged uint8
	if err := s.conn.QueryRow(s.ctx, "SELECT refused_reason, charged FROM interactions WHERE marketplace_id = ? AND event_id = 'c-again'", s.mp).Scan(&reason, &charged); err != nil {
		t.Fatal(err)
	}
	if reason != "duplicate" || charged != 0 {
		t.Errorf("second click on the refused winner of %s: charged %d, reason %q; want a duplicate", refusedID, charged, reason)
	}
	if n := s.uint64(t, "SELECT count() FROM (SELECT interaction_id, uniqExact(kafka_partition, kafka_offset, refused_reason) AS o FROM charges_raw GROUP BY interaction_id HAVING o > 1)"); n != 0 {
		t.Errorf("%d charges have rows that differ", n)
	}
	// The reasons of the other rows.
	rows, err := s.conn.Query(s.ctx, "SELECT refused_reason, count() FROM interactions WHERE marketplace_id = ? GROUP BY refused_reason ORDER BY refused_reason", s.mp)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var r string
		var n uint64
		if err := rows.Scan(&r, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%d", r, n))
	}
	rows.Close()
	if g := strings.Join(got, " "); g != ":8 daily_budget:7 duplicate:1 total_budget:3 weekly_budget:3" {
		t.Errorf("reasons %s", g)
	}
}

// TestInteractionsInvalidClicks: a shopper's impressions and clicks on a
// CPC campaign, one click for each invalid-click rule, through the fold
// with real Redis and ClickHouse: the invalid clicks are stored not
// charged with their reasons, in interactions and as refused rows of
// charges_raw, and move no spend. Then the group replays every record,
// with a new click of the shopper that the rate rule refuses: every earlier
// decision comes out the same although the shopper's counters have moved
// on, and spend has moved once.
func TestInteractionsInvalidClicks(t *testing.T) {
	s := newChargeStack(t)
	s.invalid = spend.InvalidRules{RequireImpression: true, MinClickDelay: 250 * time.Millisecond, RepeatWindow: time.Second, MaxClicksPerHour: 5}
	// All in the middle of the previous UTC hour (the rate rule counts a
	// UTC hour).
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-30 * time.Minute)
	camp := uuid.New()
	const price = 70_000
	win := map[string]string{}
	for i, w := range []string{"A", "B", "C", "D", "E", "F", "G", "H"} {
		win[w] = s.winner(t, uuid.New(), t0.Add(-time.Minute), uint8(i+1), camp, bidtoken.CPC, price)
	}
	ev := func(kind records.Kind, id, user, w string, at time.Duration) records.Event {
		return records.Event{Kind: kind, MarketplaceID: s.mp, ID: id, OccurredAtMs: t0.Add(at).UnixMilli(), ReceivedAtMs: t0.Add(at).UnixMilli(),
			OpaqueUserID: user, ResolvedBidID: win[w]}
	}
	imp, click := records.KindImpression, records.KindClick
	evs := []records.Event{
		ev(imp, "i-a", "u1", "A", 0), ev(click, "c-a", "u1", "A", 2*time.Second), // charged
		ev(click, "c-b", "u1", "B", 10*time.Second),                                                    // no impression of B
		ev(imp, "i-c", "u1", "C", 20*time.Second), ev(click, "c-c", "u1", "C", 20100*time.Millisecond), // 100 ms after it
		ev(imp, "i-d", "u1", "D", 30*time.Second), ev(click, "c-d", "u1", "D", 32*time.Second), // charged
		ev(imp, "i-e", "u1", "E", 31*time.Second), ev(click, "c-e", "u1", "E", 32500*time.Millisecond), // 500 ms after c-d
		ev(imp, "i-f", "u1", "F", 60*time.Second), ev(click, "c-f", "u1", "F", 62*time.Second), // the 6th click of the hour
		ev(click, "c-a2", "u1", "A", 70*time.Second),                             // a second click on A
		ev(imp, "i-g", "u2", "G", 0), ev(click, "c-g", "u2", "G", 2*time.Second), // another shopper: charged
	}
	s.produce(t, evs...)
	p := s.projector(t, s.conn, s.views(time.UTC), 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, int64(len(evs))))

	day := spend.DayOf(t0, time.UTC)
	want := map[string]string{"c-a": "", "c-b": "invalid_no_impression", "c-c": "invalid_too_fast", "c-d": "",
		"c-e": "invalid_repeat_click", "c-f": "invalid_click_rate", "c-a2": "duplicate", "c-g": ""}
	check := func(when string, want map[string]string, charged int64) {
		t.Helper()
		rows, err := s.conn.Query(s.ctx, "SELECT event_id, charged, refused_reason FROM interactions WHERE marketplace_id = ? AND kind = 'click'", s.mp)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var id, reason string
			var c uint8
			if err := rows.Scan(&id, &c, &reason); err != nil {
				t.Fatal(err)
			}
			if (c == 1) != (reason == "") {
				t.Errorf("%s: click %s charged=%d with reason %q", when, id, c, reason)
			}
			got[id] = reason
		}
		rows.Close()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: clicks\n got %v\nwant %v", when, got, want)
		}
		invalid := uint64(0)
		for _, r := range want {
			if strings.HasPrefix(r, "invalid_") {
				invalid++
			}
		}
		if n := s.uint64(t, `SELECT count() FROM charges_raw FINAL WHERE marketplace_id = ? AND refused_reason LIKE 'invalid%' AND amount_micros = 0`, s.mp); n != invalid {
			t.Errorf("%s: %d refused rows of invalid clicks in charges_raw, want %d", when, n, invalid)
		}
		if n := s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND kind = 'impression' AND refused_reason != 'kind'", s.mp); n != 0 {
			t.Errorf("%s: %d impressions of CPC winners with another reason than kind", when, n)
		}
		if d, total := s.spend(t, camp.String(), day); d != charged || total != charged || s.chargedSum(t, camp.String()) != charged {
			t.Errorf("%s: spend %d/%d, charges %d, want %d", when, d, total, s.chargedSum(t, camp.String()), charged)
		}
	}
	check("first pass", want, 3*price)

	// The replay, and one more click of u1 with its impression: the 7th
	// click of its hour.
	s.rewind(t, projections.EventsGroup, s.topics.Events)
	s.produce(t, ev(imp, "i-h", "u1", "H", 90*time.Second), ev(click, "c-h", "u1", "H", 95*time.Second))
	p = s.projector(t, s.conn, s.views(time.UTC), 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, int64(len(evs)+2)))
	want["c-h"] = "invalid_click_rate"
	check("after the replay", want, 3*price)
	if n := s.uint64(t, "SELECT count() FROM (SELECT interaction_id, uniqExact(kafka_partition, kafka_offset, refused_reason) AS o FROM charges_raw GROUP BY interaction_id HAVING o > 1)"); n != 0 {
		t.Errorf("%d charges have rows that differ", n)
	}
}

// TestInteractionsLateDuplicate: a client retries a charged click after the
// dedupe window forgot its id. The retry is inserted as a new row (same
// key) that is not charged (the winner's marker belongs to the first
// record); the view still shows one row, the charged one, and spend moved
// once.
func TestInteractionsLateDuplicate(t *testing.T) {
	s := newChargeStack(t)
	now := time.Now().UTC()
	camp := uuid.New()
	e := records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-1", OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
		OpaqueUserID: "u", ResolvedBidID: s.winner(t, uuid.New(), now.Add(-time.Second), 1, camp, bidtoken.CPC, 40_000)}
	s.produce(t, e)
	p := s.projectorWindow(t, s.conn, s.views(time.UTC), 100*time.Millisecond, time.Second)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, 1))
	time.Sleep(1500 * time.Millisecond) // the claim expires
	s.produce(t, e)
	p = s.projectorWindow(t, s.conn, s.views(time.UTC), 100*time.Millisecond, time.Second)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, 2))

	if n := s.uint64(t, "SELECT count() FROM interactions_raw"); n != 2 {
		t.Errorf("%d physical rows, want 2 (the retry was not recognised)", n)
	}
	if n := s.uint64(t, "SELECT count() FROM interactions WHERE charged = 1"); n != 1 || s.uint64(t, "SELECT count() FROM interactions") != 1 {
		t.Errorf("the view shows %d charged of %d rows, want 1 of 1", n, s.uint64(t, "SELECT count() FROM interactions"))
	}
	if d, total := s.spend(t, camp.String(), spend.DayOf(now, time.UTC)); d != 40_000 || total != 40_000 || s.uint64(t, "SELECT count() FROM charges") != 1 {
		t.Errorf("spend %d/%d, %d charges", d, total, s.uint64(t, "SELECT count() FROM charges"))
	}
}

// TestInteractionsLegacyMarkers: a Redis upgraded from builds that kept the
// charge markers in other layouts: one string key per marker (before
// 2026-11-22), then hashes per marketplace (before 2026-11-26). A winner an
// earlier build charged is not charged again by a second event, in either
// layout; another winner of the same auction is; a winner whose auction is
// newer than the layout's end (plus its grace) is not looked up there at
// all.
func TestInteractionsLegacyMarkers(t *testing.T) {
	if testenv.RedisClusterMode() {
		t.Skip("a cluster never held the earlier layouts")
	}
	s := newChargeStack(t)
	now := time.Now().UTC()
	camp := uuid.New()
	// The string keys ended 3 hours ago (the marketplace's first charge in
	// hashes), the marketplace's hashes 90 minutes ago (spend.Upgrade).
	since := now.Add(-3 * time.Hour)
	if err := s.rdb.Set(s.ctx, "ec:cm:{"+s.mp+"}:since", since.UnixMilli(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.upgradedAt = now.Add(-90 * time.Minute)
	strings1 := since.Add(-time.Minute)                               // an auction of the string keys
	hashes1 := since.Add(projections.LegacyMarkerGrace + time.Minute) // one of the marketplace hashes
	campaignKeys := s.upgradedAt.Add(projections.LegacyMarkerGrace + time.Minute)

	// What the old builds left: rank 1's click of an auction charged by
	// record 2:17 (a string key), rank 1's of another by 2:19 (the
	// marketplace's hash of the auction's hour, one bucket).
	auction := uuid.MustParse("0197afbb-a67b-7718-991a-1b1c1d1e1f20")
	old := "ec:charged:{" + s.mp + "}:0197afbba67b7718991a1b1c1d1e1f20:1:c"
	if err := s.rdb.Set(s.ctx, old, "2:17", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	hashed := uuid.New()
	hour := strconv.FormatInt(hashes1.UnixMilli()/time.Hour.Milliseconds(), 10)
	if err := s.rdb.HSet(s.ctx, "ec:cm:{"+s.mp+"}:"+hour+":m", "b", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.HSet(s.ctx, "ec:cm:{"+s.mp+"}:"+hour+":0", string(hashed[:])+"\x01c", "2:19").Err(); err != nil {
		t.Fatal(err)
	}
	// The same for auctions after each layout's end: ignored (they cannot exist).
	later := uuid.New()
	if err := s.rdb.Set(s.ctx, "ec:charged:{"+s.mp+"}:"+strings.ReplaceAll(later.String(), "-", "")+":1:c", "2:18", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	newest := uuid.New()
	newHour := strconv.FormatInt(campaignKeys.UnixMilli()/time.Hour.Milliseconds(), 10)
	if err := s.rdb.HSet(s.ctx, "ec:cm:{"+s.mp+"}:"+newHour+":m", "b", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.HSet(s.ctx, "ec:cm:{"+s.mp+"}:"+newHour+":0", string(newest[:])+"\x01c", "2:20").Err(); err != nil {
		t.Fatal(err)
	}
	click := func(id string, auctionID uuid.UUID, at time.Time, rank uint8) records.Event {
		return records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: id, OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
			OpaqueUserID: "u", ResolvedBidID: s.winner(t, auctionID, at, rank, camp, bidtoken.CPC, 40_000)}
	}
	s.produce(t, click("c-1", auction, strings1, 1), click("c-2", auction, strings1, 2), click("c-3", later, hashes1, 1),
		click("c-4", hashed, hashes1, 1), click("c-5", hashed, hashes1, 2), click("c-6", newest, campaignKeys, 1))
	p := s.projector(t, s.conn, s.views(time.UTC), 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, 6))

	rows, err := s.conn.Query(s.ctx, "SELECT event_id FROM charges WHERE marketplace_id = ? ORDER BY event_id", s.mp)
	if err != nil {
		t.Fatal(err)
	}
	var charged []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		charged = append(charged, id)
	}
	rows.Close()
	if got, want := strings.Join(charged, ","), "c-2,c-3,c-5,c-6"; got != want {
		t.Errorf("charged %s, want %s (c-1's and c-4's winners were charged by the old builds)", got, want)
	}
	if _, total := s.spend(t, camp.String(), spend.DayOf(now, time.UTC)); total != 160_000 {
		t.Errorf("spend %d, want 160000", total)
	}
}

// auctionJoinQuery is docs/design/charges.md's recipe for the auction dimensions
// (and for a winner id the token carried hashed). Arguments: marketplace
// id, then the interactions filter's (here the marketplace id again) once
// per join.
const auctionJoinQuery = `
SELECT event_id, auction_device, auction_location, auction_page_type, auction_page_value, auction_search_query, auction_category,
       if(entity_id_hashed = 1, winner_entity_id, entity_id) AS entity
FROM (
    SELECT * FROM (
        SELECT marketplace_id, auction_id, toUInt16(rank) AS rank, event_id, entity_id, entity_id_hashed
        FROM interactions WHERE marketplace_id = ?
    ) AS i ANY LEFT JOIN (
        SELECT marketplace_id, auction_id, device AS auction_device, locations AS auction_location, page_type AS auction_page_type,
               page_id AS auction_page_id, page_value AS auction_page_value, search_query AS auction_search_query,
               category AS auction_category
        FROM auctions
        WHERE marketplace_id = ? AND auction_id IN (SELECT auction_id FROM interactions WHERE marketplace_id = ?)
    ) AS a USING (marketplace_id, auction_id)
) AS ia ANY LEFT JOIN (
    SELECT marketplace_id, auction_id, rank, entity_id AS winner_entity_id
    FROM auction_winners
    WHERE marketplace_id = ? AND auction_id IN (SELECT auction_id FROM interactions WHERE marketplace_id = ?)
) AS w USING (marketplace_id, auction_id, rank)`

// failingConn fails every insert into one table, after the inserts before
// it in the batch succeeded: a crash in the middle of a batch.
type failingConn struct {
	clickhouse.Conn
	table string
}

func (c failingConn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if len(query) > 12 && query[:12+len(c.table)] == "INSERT INTO "+c.table {
		return nil, errors.New("injected failure")
	}
	return c.Conn.PrepareBatch(ctx, query, opts...)
}

// TestInteractionsCrashMidBatch: a projector whose charges insert fails
// after Redis moved the spend and the interactions were inserted is
// stopped without committing (a crash); the next one replays the batch.
// Spend moves once, and the charges are all there.
func TestInteractionsCrashMidBatch(t *testing.T) {
	s := newChargeStack(t)
	now := time.Now().UTC()
	camp := uuid.New()
	const clicks, price = 300, 10_000
	var evs []records.Event
	for i := range clicks {
		tok := s.winner(t, uuid.New(), now.Add(-time.Minute), 1, camp, bidtoken.CPC, price)
		evs = append(evs, records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-" + strconv.Itoa(i),
			OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u" + strconv.Itoa(i%17), ResolvedBidID: tok})
	}
	s.produce(t, evs...)
	day := spend.DayOf(now, time.UTC)

	p := s.projector(t, failingConn{Conn: s.conn, table: "charges_raw"}, s.views(time.UTC), 100*time.Millisecond)
	s.run(t, p, 30*time.Second, func() error {
		if d, _ := s.spend(t, camp.String(), day); d != clicks*price {
			return fmt.Errorf("spend %d", d)
		}
		if n := s.uint64(t, "SELECT count() FROM interactions"); n != clicks {
			return fmt.Errorf("%d interactions", n)
		}
		return nil
	})
	if n := s.committed(projections.EventsGroup); n > 0 {
		t.Fatalf("the failing projector committed %d offsets", n)
	}
	if n := s.uint64(t, "SELECT count() FROM charges"); n != 0 {
		t.Fatalf("%d charges inserted through the failing connection", n)
	}

	p = s.projector(t, s.conn, s.views(time.UTC), 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, clicks))
	d, total := s.spend(t, camp.String(), day)
	if d != clicks*price || total != clicks*price || s.chargedSum(t, camp.String()) != clicks*price {
		t.Errorf("after the replay: day %d total %d charges %d, want %d each", d, total, s.chargedSum(t, camp.String()), clicks*price)
	}
	if n := s.uint64(t, "SELECT count() FROM charges"); n != clicks {
		t.Errorf("%d charges, want %d", n, clicks)
	}
	if n := s.uint64(t, "SELECT count() FROM interactions WHERE charged = 1"); n != clicks {
		t.Errorf("%d charged interactions, want %d", n, clicks)
	}
}

// overspendCase is one run of the overspend measurement.
type overspendCase struct {
	name        string
	auctionsPS  int           // auctions a second that the campaign wins while it has budget
	clickDelay  time.Duration // each served ad is clicked after a uniform delay in [0, clickDelay)
	refresh     time.Duration // budget cache refresh (ENDCAP_BUDGET_REFRESH)
	flush       time.Duration // projector flush interval (ENDCAP_PROJECTOR_FLUSH_INTERVAL)
	dailyBudget int64
	price       int64 // CPC
}

// TestOverspend measures how many ads a campaign is served past its daily
// budget when every ad it wins is clicked, and checks that none of them is
// charged: an "auction" loop serves the campaign while spend.Check passes
// on the spend read through a real spend.Cache (as the auction's budget
// gate does), each served ad is clicked later, and the clicks go through
// Kafka and the interactions projector into Redis. The projector's view has
// the campaign's budget: spend stops exactly at it, and the clicks on the
// ads served too late are stored as refused (daily_budget). The
// marketplace's zone is picked so that it is between 23:00 and 24:00 there:
// pacing then allows the whole daily budget and only the budget acts.
func TestOverspend(t *testing.T) {
	cases := []overspendCase{
		{"defaults, 100 clicks/s, clicks within 1s", 100, time.Second, time.Second, time.Second, 5_000_000, 10_000},
	}
	if os.Getenv("ENDCAP_TEST_LOAD") == "1" {
		cases = append(cases,
			overspendCase{"defaults again", 100, time.Second, time.Second, time.Second, 5_000_000, 10_000},
			overspendCase{"defaults, immediate clicks", 100, 10 * time.Millisecond, time.Second, time.Second, 5_000_000, 10_000},
			overspendCase{"defaults, 400 clicks/s", 400, time.Second, time.Second, time.Second, 20_000_000, 10_000},
			overspendCase{"refresh and flush 200ms", 100, time.Second, 200 * time.Millisecond, 200 * time.Millisecond, 5_000_000, 10_000},
			overspendCase{"clicks within 5s", 100, 5 * time.Second, time.Second, time.Second, 5_000_000, 10_000},
		)
	}
	if testing.Short() {
		t.Skip("measurement")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { measureOverspend(t, tc) })
	}
}

func measureOverspend(t *testing.T, tc overspendCase) {
	s := newChargeStack(t)
	now := time.Now().UTC()
	// A zone where it is 23:05 now.
	sinceMidnight := now.Sub(now.Truncate(24 * time.Hour))
	offset := (23*time.Hour + 5*time.Minute - sinceMidnight + 24*time.Hour) % (24 * time.Hour)
	loc := time.FixedZone("test", int(offset/time.Second))
	camp := uuid.New().String()
	limits := spend.Limits{DailyMicros: tc.dailyBudget}

	cache := spend.NewCache(s.rdb, spend.Options{Refresh: tc.refresh})
	cache.Register(s.mp, loc)
	if err := cache.RefreshNow(s.ctx); err != nil {
		t.Fatal(err)
	}
	cctx, stopCache := context.WithCancel(s.ctx)
	defer stopCache()
	go func() { _ = cache.Run(cctx) }()

	var bs budgets
	bs.set(camp, limits)
	p := s.projector(t, s.conn, s.budgetViews(loc, &bs), tc.flush)
	pctx, stopProjector := context.WithCancel(s.ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		if err := p.Run(pctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	defer func() { stopProjector(); pwg.Wait(); p.Close() }()

	// Watch Redis for the moment the spend reaches the budget.
	var crossed time.Time
	var crossMu sync.Mutex
	wctx, stopWatch := context.WithCancel(s.ctx)
	go func() {
		for wctx.Err() == nil {
			if d, _, _ := spend.ReadSpend(wctx, s.rdb, s.mp, camp, spend.DayOf(time.Now(), loc)); d >= tc.dailyBudget {
				crossMu.Lock()
				crossed = time.Now()
				crossMu.Unlock()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer stopWatch()

	var (
		clicks    sync.WaitGroup
		produced  = int64(0)
		prodMu    sync.Mutex
		served    int
		firstStop time.Time
		lastServe time.Time
	)
	tick := time.NewTicker(time.Second / time.Duration(tc.auctionsPS))
	defer tick.Stop()
	start := time.Now()
	for time.Since(start) < 2*time.Minute {
		<-tick.C
		at := time.Now()
		d, tot := cache.Spend(s.mp, loc, camp, at)
		if spend.Check(limits, spend.Spent{Day: d, Total: tot}, at, loc) != spend.OK {
			if firstStop.IsZero() {
				firstStop = at
			}
			if at.Sub(firstStop) > 3*time.Second {
				break
			}
			continue
		}
		if !firstStop.IsZero() {
			t.Logf("served again %s after the first stop (spend read %d)", at.Sub(firstStop), d)
		}
		served++
		lastServe = at
		tok := s.winner(t, uuid.New(), at, 1, uuid.MustParse(camp), bidtoken.CPC, tc.price)
		id := "c-" + strconv.Itoa(served)
		clicks.Add(1)
		time.AfterFunc(time.Duration(rand.Int64N(int64(tc.clickDelay))), func() {
			defer clicks.Done()
			clickAt := time.Now()
			e := records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: id, OccurredAtMs: clickAt.UnixMilli(),
				ReceivedAtMs: clickAt.UnixMilli(), OpaqueUserID: id, ResolvedBidID: tok}
			v, _ := json.Marshal(&e)
			if err := s.cl.ProduceSync(s.ctx, &kgo.Record{Topic: s.topics.Events, Key: records.EventKey(&e), Value: v}).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			prodMu.Lock()
			produced++
			prodMu.Unlock()
		})
	}
	clicks.Wait()
	testenv.Eventually(t, 30*time.Second, s.committedIs(projections.EventsGroup, produced))
	stopWatch()

	day, total := s.spend(t, camp, spend.DayOf(time.Now(), loc))
	charged := s.uint64(t, "SELECT count() FROM charges WHERE marketplace_id = ? AND campaign_id = ?", s.mp, camp)
	refused := s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND campaign_id = ? AND refused_reason = 'daily_budget'", s.mp, camp)
	if day != total || day != int64(charged)*tc.price || s.chargedSum(t, camp) != day {
		t.Errorf("spend: day %d, total %d, charges %d (%d of %d)", day, total, s.chargedSum(t, camp), charged, tc.price)
	}
	if day != tc.dailyBudget || charged+refused != uint64(served) {
		t.Errorf("spend %d of a budget of %d; %d served = %d charged + %d refused?", day, tc.dailyBudget, served, charged, refused)
	}
	crossMu.Lock()
	blind := lastServe.Sub(crossed)
	crossMu.Unlock()
	over := int64(served)*tc.price - tc.dailyBudget // what the ads served would have cost beyond the budget
	rate := int64(tc.auctionsPS) * tc.price         // micro-units a second while serving, as asked
	bound := rate * int64(tc.refresh+tc.flush+tc.clickDelay+time.Second) / int64(time.Second)
	actual := float64(served) * float64(tc.price) / lastServe.Sub(start).Seconds() // the loop may run slower
	t.Logf("budget %d, spent %d (%d clicks charged) at %.0f micro-units/s; served past the budget: %d ads, worth %d micro-units = %.1f%% of the budget "+
		"= %.2f s of the charge rate, all refused; last ad served %s after Redis spend reached the budget; bound used: rate × (refresh + flush + click delay + 1 s) = %d",
		tc.dailyBudget, day, charged, actual, refused, over, 100*float64(over)/float64(tc.dailyBudget), float64(over)/actual, blind, bound)
	if over < 0 || over > bound {
		t.Errorf("served past the budget: worth %d, outside [0, %d]", over, bound)
	}
}

// TestInteractionsLoad measures the fold rate and the click-to-charge
// latency (run with ENDCAP_TEST_LOAD=1; figures in docs/design/charges.md).
//
// Fold rate: 300,000 events (60% sponsored CPM impressions, 15% sponsored
// CPC clicks, 25% organic) are produced first; the clock runs from the
// projector's start (production settings: 50,000 rows a batch, 1 s flush)
// until its group has committed them all.
//
// Latency: then, with the projector caught up, 20 s of steady traffic
// (2,000 impressions and 500 clicks a second); each click's latency is from
// its production (its ReceivedAt) to the moment a poll of charges_raw
// (every 100 ms) first sees it.
func TestInteractionsLoad(t *testing.T) {
	if os.Getenv("ENDCAP_TEST_LOAD") != "1" {
		t.Skip("load measurement: ENDCAP_TEST_LOAD=1")
	}
	s := newChargeStack(t)
	camps := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	mk := func(i int, now time.Time) records.Event {
		e := records.Event{MarketplaceID: s.mp, ID: "e-" + strconv.Itoa(i), OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
			OpaqueUserID: "u-" + strconv.Itoa(i%5000), DeviceType: "mobile",
			Placement: &records.Placement{Path: "/search", Position: int32(i%20 + 1), Page: 1, PageSize: 20},
			Page:      &records.Page{Type: "search", ID: "s", Value: []string{"shoes"}}}
		switch r := i % 20; {
		case r < 12:
			e.Kind = records.KindImpression
			e.ResolvedBidID = s.winner(t, uuid.New(), now.Add(-time.Second), uint8(r%5+1), camps[i%4], bidtoken.CPM, 2_500_000)
		case r < 15:
			e.Kind = records.KindClick
			e.ResolvedBidID = s.winner(t, uuid.New(), now.Add(-time.Second), 1, camps[i%4], bidtoken.CPC, 350_000)
		default:
			e.Kind = records.KindImpression
			e.Entity = &records.Entity{Type: "product", ID: "sku-" + strconv.Itoa(i%1000)}
		}
		return e
	}
	const n = 300_000
	now := time.Now().UTC()
	for off := 0; off < n; off += 10_000 {
		evs := make([]records.Event, 10_000)
		for i := range evs {
			evs[i] = mk(off+i, now)
		}
		s.produce(t, evs...)
	}
	p := s.projector(t, s.conn, s.views(time.UTC), time.Second)
	pctx, stop := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.Run(pctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	defer func() { stop(); wg.Wait(); p.Close() }()
	start := time.Now()
	testenv.Eventually(t, 3*time.Minute, s.committedIs(projections.EventsGroup, n))
	took := time.Since(start)
	t.Logf("fold: %d events in %s = %.0f events/s (%d interactions, %d charges)", n, took.Round(time.Millisecond),
		float64(n)/took.Seconds(), s.uint64(t, "SELECT count() FROM interactions_raw"), s.uint64(t, "SELECT count() FROM charges_raw"))

	// Steady traffic: 2,000 impressions + 500 clicks a second, in 10 ms ticks.
	produced := map[string]time.Time{}
	var mu sync.Mutex
	next := n
	tick := time.NewTicker(10 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
			<-tick.C
			at := time.Now().UTC()
			evs := make([]records.Event, 0, 25)
			for range 20 {
				e := mk(next, at)
				e.Kind, e.ResolvedBidID = records.KindImpression, s.winner(t, uuid.New(), at, 1, camps[0], bidtoken.CPM, 2_500_000)
				evs = append(evs, e)
				next++
			}
			for range 5 {
				e := mk(next, at)
				e.Kind, e.Entity, e.ResolvedBidID = records.KindClick, nil, s.winner(t, uuid.New(), at, 1, camps[1], bidtoken.CPC, 350_000)
				evs = append(evs, e)
				next++
			}
			s.produce(t, evs...)
			mu.Lock()
			for _, e := range evs[20:] {
				produced[e.ID] = at
			}
			mu.Unlock()
		}
		tick.Stop()
	}()
	var lat []time.Duration
	seen := map[string]bool{}
	poll := func() {
		rows, err := s.conn.Query(s.ctx, "SELECT event_id FROM charges_raw WHERE kind = 'click' AND campaign_id = ?", camps[1].String())
		if err != nil {
			t.Fatal(err)
		}
		seenAt := time.Now()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				continue
			}
			mu.Lock()
			at, ok := produced[id]
			mu.Unlock()
			if ok {
				seen[id] = true
				lat = append(lat, seenAt.Sub(at))
			}
		}
		rows.Close()
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(100 * time.Millisecond):
			poll()
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(seen) < len(produced) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		poll()
	}
	if len(seen) != len(produced) {
		t.Fatalf("%d of %d clicks charged", len(seen), len(produced))
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Millisecond) }
	t.Logf("click → visible in charges_raw: %d clicks, p50 %s, p95 %s, p99 %s, max %s", len(lat), q(.5), q(.95), q(.99), q(1))
	if q(.95) > 5*time.Second {
		t.Errorf("p95 %s over 5 s", q(.95))
	}
}

// TestChargesThroughTheAPI runs the whole path in one Endcap process
// (target all): catalog and a CPC campaign with a small daily budget over
// the management API, auctions over /v2/auctions, a click on each winner
// over /v2/events. Each click's charge must be in `charges` (with the
// catalog's attributes) and in the Redis spend within 5 s; a retried click
// and a second click on the same winner charge nothing; the auction stops
// serving the campaign once its budget is spent, a few ads over at most
// (the cache refresh), and the clicks on those are stored refused
// (total_budget): spend ends exactly at the budget.
func TestChargesThroughTheAPI(t *testing.T) {
	// A marketplace where it is noon: the clicks' local day is today's to
	// the end, whose spend is compared with the total.
	a := testapp.Start(t, testapp.WithMarketplace("Charges", "EUR", testenv.NoonZone(time.Now())), testapp.Configure(func(c *config.Config, _ []string) {
		c.RateLimitDefault, c.RateLimitCatalog = "5000/1s", "5000/1s"
		testenv.InvalidClicksDefault(c) // the process as deployed: each click is judged, and valid
	}))
	cfg, ctx, mkKey, advKey := a.Cfg, t.Context(), a.MarketplaceKey, a.AdvancedKey
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	// A lone bidder pays the reserve: 0.02 a click, 5 clicks in all.
	m, err := a.Accounts.SetReserve(wctx, a.Marketplace.ID, 20_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := a.URL
	call := func(method, path, key, body string, want int) []byte {
		t.Helper()
		var b []byte
		testenv.Eventually(t, 10*time.Second, func() error { // the first calls may race the key's arrival in the view
			req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != want {
				return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
			}
			return nil
		})
		return b
	}
	call("PUT", "/public/v1/catalog-search-service/catalogs/vendors", advKey, `{"vendors":[{"id":"v1","name":"Vendor One","globalId":"G-1"}]}`, 200)
	call("PUT", "/public/v1/catalog-search-service/catalogs/products", advKey, `{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, 200)
	var camp struct{ ID string }
	if err := json.Unmarshal(call("POST", "/public/v1/campaign-service/vendors/v1/campaigns", advKey,
		`{"name":"Small","type":"listings","chargeType":"CPC","totalBudget":0.1,"startDate":"2020-01-01T00:00:00Z"}`, 201), &camp); err != nil {
		t.Fatal(err)
	}
	call("POST", "/public/v1/campaign-service/campaigns/"+camp.ID+"/bids", advKey, `{"targetType":"product","target":"p1","bidAmount":0.03}`, 201)
	const budgetMicros = 100_000

	auctionWinner := func() string {
		var out struct {
			Results []struct {
				Winners []struct{ ResolvedBidID, CampaignID string }
			}
		}
		if err := json.Unmarshal(call("POST", "/v2/auctions", mkKey, `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]},"device":"mobile"}]}`, 201), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 1 || len(out.Results[0].Winners) == 0 {
			return ""
		}
		return out.Results[0].Winners[0].ResolvedBidID
	}
	// A shopper of its own sees each winner a second before clicking it:
	// a click the invalid-click rules (on by default) accept.
	click := func(id, tok string) {
		now := time.Now().UTC()
		call("POST", "/v2/events", mkKey, fmt.Sprintf(`{"impressions":[{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}],
			"clicks":[{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}]}`,
			"imp-"+id, now.Add(-time.Second).Format(time.RFC3339Nano), "u-"+id, tok, id, now.Format(time.RFC3339Nano), "u-"+id, tok), 200)
	}
	conn, err := clickhouse.Open(clickhouse.Options{Addr: cfg.ClickHouseAddr, Database: cfg.ClickHouseDatabase, User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	count := func(q string, args ...any) uint64 {
		var n uint64
		if err := conn.QueryRow(ctx, q, append([]any{m.ID}, args...)...).Scan(&n); err != nil {
			return 0 // the schema may not be there yet
		}
		return n
	}
	charges := func() uint64 { return count("SELECT count() FROM charges WHERE marketplace_id = ?") }
	totalSpent := func() int64 {
		_, n, _ := spend.ReadSpend(ctx, a.Redis, m.ID, camp.ID, spend.DayOf(time.Now(), m.Location()))
		return n
	}

	var (
		clicks, overBudget int
		price              int64
		latencies          []time.Duration
		spentAt            time.Time     // when the spend was first seen at the budget
		servedAfter        time.Duration // the latest auction that still served the campaign, after spentAt
	)
	for clicks < 100 {
		auctionAt := time.Now()
		tok := auctionWinner()
		if tok == "" {
			break
		}
		c, err := bidtoken.DecodeUnverified(tok)
		if err != nil {
			t.Fatal(err)
		}
		price = c.PriceMicros
		if !spentAt.IsZero() {
			overBudget++
			servedAfter = auctionAt.Sub(spentAt)
		}
		clicks++
		id := "click-" + strconv.Itoa(clicks)
		start := time.Now()
		click(id, tok)
		// Folded (the interaction and the charge rows are inserted at once,
		// on two connections: wait for both).
		testenv.Eventually(t, 5*time.Second, func() error {
			if count("SELECT count() FROM interactions WHERE marketplace_id = ? AND event_id = ?", id) != 1 {
				return fmt.Errorf("click %s not folded", id)
			}
			if n, want := charges(), uint64(min(clicks, budgetMicros/20_000)); n != want {
				return fmt.Errorf("after %d clicks: %d charges, want %d", clicks, n, want)
			}
			return nil
		})
		latencies = append(latencies, time.Since(start))
		if spentAt.IsZero() && totalSpent() >= budgetMicros {
			spentAt = time.Now()
		}
		if clicks == 1 {
			click(id, tok)              // a client retry
			click(id+"-again", tok)     // the same ad clicked twice
			time.Sleep(2 * time.Second) // well past a flush: nothing more may be charged
			if n := charges(); n != 1 {
				t.Fatalf("a retry or a second click on one winner was charged: %d charges", n)
			}
		}
	}
	if clicks == 100 {
		t.Fatalf("the auction still serves the campaign after %d clicks at %d (total budget %d)", clicks, price, budgetMicros)
	}
	slices.Sort(latencies)
	t.Logf("%d clicks at %d micro-units, %d of them served after the spend in Redis had reached the budget (the last %s after); spend %d (budget %d); "+
		"click accepted → charge visible: median %s, max %s", clicks, price, overBudget, servedAfter.Round(time.Millisecond), totalSpent(), budgetMicros,
		latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	if got := totalSpent(); got != budgetMicros || price != 20_000 {
		t.Errorf("spend %d at %d a click, want exactly the budget, %d", got, price, budgetMicros)
	}
	if n := count("SELECT count() FROM interactions WHERE marketplace_id = ? AND charged = 0 AND refused_reason = 'total_budget'"); n != uint64(clicks-5) {
		t.Errorf("%d clicks refused for the total budget, want %d", n, clicks-5)
	}
	// Each click waits for its charge, so the auction's copy of spend (re-read
	// every BudgetRefresh) is the only lag: no auction may serve the campaign
	// later than about one refresh after the spend reached the budget. How
	// many auctions that is depends on the machine's speed, so the bound is
	// on time (with a second of slack for a loaded machine), not on a count.
	if limit := cfg.BudgetRefresh + time.Second; servedAfter > limit {
		t.Errorf("%d ads served with the budget already spent, the last %s after the spend reached it (limit %s)",
			overBudget, servedAfter.Round(time.Millisecond), limit)
	}
	day, _, _ := spend.ReadSpend(ctx, a.Redis, m.ID, camp.ID, spend.DayOf(time.Now(), m.Location()))
	if day != totalSpent() {
		t.Errorf("day spend %d, total %d", day, totalSpent())
	}

	var campaign, product, vendor, extVendor, global, currency, vendorName, campName, device string
	var amount int64
	if err := conn.QueryRow(ctx, `SELECT c.campaign_id, c.product_id, c.vendor_id, c.external_vendor_id, c.global_id, c.currency_code, c.amount_micros
		FROM charges AS c WHERE marketplace_id = ? AND event_id = 'click-1'`, m.ID).Scan(
		&campaign, &product, &vendor, &extVendor, &global, &currency, &amount); err != nil {
		t.Fatal(err)
	}
	if campaign != camp.ID || product != "p1" || vendor != "v1" || extVendor != "v1" || global != "G-1" || currency != "EUR" || amount != price {
		t.Errorf("charge: %s %s %s %s %s %s %d", campaign, product, vendor, extVendor, global, currency, amount)
	}
	if err := conn.QueryRow(ctx, `SELECT vendor_name, campaign_name, device_type FROM interactions WHERE marketplace_id = ? AND event_id = 'click-1'`,
		m.ID).Scan(&vendorName, &campName, &device); err != nil {
		t.Fatal(err)
	}
	if vendorName != "Vendor One" || campName != "Small" {
		t.Errorf("interaction: vendor %q, campaign %q", vendorName, campName)
	}
}
