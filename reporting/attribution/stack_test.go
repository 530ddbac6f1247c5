package attribution_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// stack is the real servers of one test: kfake with the topics, a migrated
// ClickHouse database, Redis (event-id claims), and the attribution
// projector, running until the test ends.
type stack struct {
	ctx     context.Context
	brokers []string
	topics  kafka.Topics
	cl      *kgo.Client
	conn    clickhouse.Conn
	rdb     redis.UniversalClient
	// window is the dedupe window of the fold's claims (an hour unless a
	// test shortens it before start).
	window time.Duration
	kr     *bidtoken.Keyring

	mu       sync.Mutex
	markets  map[string]attribution.Marketplace
	vendors  map[string]string // catalog: product → its only vendor
	produced int64

	// queryUsersBytes and maxRows, when set before start, configure the
	// projector's reads and the fold's batches.
	queryUsersBytes, maxRows int
}

func newStack(t *testing.T) *stack {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	cl, topics := testenv.Topics(t, ctx, cfg, brokers, 3)
	conn := testenv.ClickHouse(t, ctx, cfg)
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{1: []byte("endcap-test-key-0123456789abcdef")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &stack{ctx: ctx, brokers: brokers, topics: topics, cl: cl, conn: conn, rdb: rdb,
		window: time.Hour, kr: kr,
		markets: map[string]attribution.Marketplace{}, vendors: map[string]string{}}
}

// marketplace registers a marketplace (its zone and rules) and returns its id.
func (s *stack) marketplace(loc *time.Location, rules attribution.Rules) string {
	id := uuid.NewString()
	s.setMarketplace(id, loc, rules)
	return id
}

func (s *stack) setMarketplace(id string, loc *time.Location, rules attribution.Rules) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markets[id] = attribution.Marketplace{Currency: "EUR", Location: loc, Rules: rules}
}

func (s *stack) lookup(id string) (attribution.Marketplace, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.markets[id]
	return m, ok
}

// start runs the attribution projector until the test ends.
func (s *stack) start(t *testing.T) {
	t.Helper()
	sink, err := attribution.NewProjector(attribution.Options{ClickHouse: s.conn,
		Marketplace: s.lookup,
		ProductVendor: func(mp, id string) string {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.vendors[id]
		},
		QueryUsersBytes: s.queryUsersBytes,
		Log:             testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	maxRows := 1000
	if s.maxRows > 0 {
		maxRows = s.maxRows
	}
	ap := s.fold(t, sink, maxRows, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ap.Close()
		if err := ap.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// fold returns the events fold with the attribution sink only.
func (s *stack) fold(t testing.TB, sink projections.EventSink, maxRows int, flush time.Duration) *projections.EventFold {
	t.Helper()
	f, err := projections.NewEventFold(projections.EventFoldOptions{Brokers: s.brokers, Topic: s.topics.Events,
		Claims: openClaims(t, s.brokers, s.topics, s.window), Sinks: []projections.EventSink{sink},
		MaxRows: maxRows, FlushInterval: flush, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (s *stack) produce(t testing.TB, evs ...records.Event) {
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
	s.mu.Lock()
	s.produced += int64(len(evs))
	s.mu.Unlock()
}

// settle waits until the attribution group has committed every record
// produced so far.
func (s *stack) settle(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	want := s.produced
	s.mu.Unlock()
	adm := kadm.NewClient(s.cl)
	testenv.Eventually(t, 60*time.Second, func() error {
		offs, err := adm.FetchOffsets(s.ctx, projections.EventsGroup)
		if err != nil {
			return err
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		if n != want {
			return fmt.Errorf("attribution committed %d of %d records", n, want)
		}
		return nil
	})
}

// winner describes one auction winner to sign a token for.
type winner struct {
	format     bidtoken.AdFormat
	winnerType bidtoken.WinnerType
	winnerID   string
	vendor     string
	auctionAt  time.Time
	auctionID  uuid.UUID
	rank       uint8
}

// campaignOf is a vendor's campaign id (one per vendor in these tests).
func campaignOf(vendor string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(vendor)) }

func (s *stack) token(t testing.TB, mp string, w winner) string {
	t.Helper()
	if w.auctionID == uuid.Nil {
		w.auctionID = uuid.Must(uuid.NewV7())
	}
	if w.rank == 0 {
		w.rank = 1
	}
	ct := bidtoken.CPC
	if w.format == bidtoken.Banners {
		ct = bidtoken.CPM
	}
	tok, err := s.kr.Encode(bidtoken.Claims{MarketplaceID: uuid.MustParse(mp), AuctionID: w.auctionID, CampaignID: campaignOf(w.vendor),
		AuctionTimeMs: w.auctionAt.UnixMilli(), ChargeType: ct, AdFormat: w.format, Rank: w.rank, PriceMicros: 500_000,
		WinnerType: w.winnerType, WinnerID: w.winnerID, VendorID: w.vendor})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// interaction is a sponsored impression or click received a second after
// it occurred.
func interaction(kind records.Kind, mp, user, id, tok string, at time.Time) records.Event {
	return records.Event{Kind: kind, MarketplaceID: mp, ID: id, OccurredAtMs: at.UnixMilli(), ReceivedAtMs: at.UnixMilli() + 1000,
		OpaqueUserID: user, ResolvedBidID: tok}
}

// purchase is a purchase received a second after it occurred.
func purchase(mp, user, id string, at time.Time, items ...records.Item) records.Event {
	return records.Event{Kind: records.KindPurchase, MarketplaceID: mp, ID: id, OccurredAtMs: at.UnixMilli(), ReceivedAtMs: at.UnixMilli() + 1000,
		OpaqueUserID: user, Items: items}
}

// computed is one row of attributed_purchases_raw as FINAL shows it
// (attributed or not).
type computed struct {
	reason, interaction, campaign, vendor, adFormat, itemVendor string
	score                                                       float64
	amount                                                      int64
	day                                                         string
}

// results reads the current attribution of every item of mp, by
// "purchase/item".
func (s *stack) results(t testing.TB, mp string) map[string]computed {
	t.Helper()
	rows, err := s.conn.Query(s.ctx, `SELECT purchase_event_id, item_index, reason, interaction_event_id, campaign_id, vendor_id,
		ad_format, item_vendor_id, score, amount_micros, toString(day_local)
		FROM attributed_purchases_raw FINAL WHERE marketplace_id = toUUID(?)`, mp)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]computed{}
	for rows.Next() {
		var (
			id  string
			idx uint16
			c   computed
		)
		if err := rows.Scan(&id, &idx, &c.reason, &c.interaction, &c.campaign, &c.vendor, &c.adFormat, &c.itemVendor, &c.score, &c.amount, &c.day); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%d", id, idx)] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// openClaims opens the fold's claims in a directory of the test's (the
// fold closes them).
func openClaims(t testing.TB, brokers []string, topics kafka.Topics, window time.Duration) *projections.Claims {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := projections.OpenClaims(ctx, projections.ClaimsOptions{Dir: t.TempDir(), Brokers: brokers, EventsTopic: topics.Events,
		Topic: topics.Claims, Window: window, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
