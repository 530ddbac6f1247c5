package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/testkit/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// recordCounts reads endcap_auction_records_total; tests compare deltas
// (the counters are process-wide).
type recordCounts struct{ ok, dropped, failed float64 }

func readCounts() recordCounts {
	v := func(result string) float64 {
		var m dto.Metric
		if err := telemetry.AuctionRecords.WithLabelValues(result).(prometheus.Metric).Write(&m); err != nil {
			panic(err)
		}
		return m.GetCounter().GetValue()
	}
	return recordCounts{ok: v("ok"), dropped: v("dropped"), failed: v("error")}
}

func (c recordCounts) minus(d recordCounts) recordCounts {
	return recordCounts{ok: c.ok - d.ok, dropped: c.dropped - d.dropped, failed: c.failed - d.failed}
}

func fullRecord() *auction.Record {
	return &auction.Record{
		ID: "01920000-0000-7000-8000-000000000001", MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001",
		At: time.Date(2025, 3, 4, 5, 6, 7, 890e6, time.UTC), Endpoint: "auctions", Kind: "listings", Index: 2, Slots: 3,
		ProductCount: 120, Category: "c1|c2", SearchQuery: "red shoes", SlotID: "slot-1", Device: "mobile",
		PlacementID: 4, Locations: []string{"8928308280fffff", "8928308280bffff"}, OpaqueUserID: "u-1",
		PageType: "search", PageID: "p-9", PageValue: []string{"shoes", "red"}, ExperimentVariant: "B",
		Candidates: 17,
		Winners: []auction.RecordWinner{
			{Rank: 1, Type: "product", EntityID: "sku-1", CampaignID: "c-1", VendorID: "v-1", BidID: "b-1", BidTarget: "product",
				ChargeType: "CPC", BidMicros: 1_500_000, PriceMicros: 1_230_000, QualityPPM: 850_000, VariationID: "var-1"},
			{Rank: 2, Type: "product", EntityID: "sku-2", CampaignID: "c-2", VendorID: "v-2", BidTarget: "automated",
				ChargeType: "CPM", BidMicros: 4_000_000, PriceMicros: 3_999_999, QualityPPM: 1_000_000},
		},
	}
}

// TestAuctionPublisherLandsOnTopic: every record reaches the auctions topic
// intact, keyed by its marketplace, and is counted ok.
func TestAuctionPublisherLandsOnTopic(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cl, err := kafka.NewClient(brokers, quiet, kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics := kafka.TopicNames("t.")
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 3, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}

	records := []*auction.Record{
		fullRecord(),
		{ID: "01920000-0000-7000-8000-000000000002", MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000002",
			At: time.Date(2025, 3, 4, 5, 6, 8, 0, time.UTC), Endpoint: "sponsored-brand", Kind: "sponsored_brand",
			Slots: 1, PlacementName: "home-top", Error: true},
		{ID: "01920000-0000-7000-8000-000000000003", MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001",
			At: time.Date(2025, 3, 4, 5, 6, 9, 0, time.UTC), Endpoint: "travel", Kind: "hotels", Slots: 5,
			Winners: []auction.RecordWinner{}},
	}
	pub := ingest.NewAuctionPublisher(cl, topics.Auctions, quiet)
	before := readCounts()
	for _, r := range records {
		pub.Record(r)
	}
	pub.Record(nil) // ignored
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if d := readCounts().minus(before); d != (recordCounts{ok: float64(len(records))}) {
			return testenv.Errorf("counts %+v, want %d ok", d, len(records))
		}
		return nil
	})

	got := consumeAll(t, ctx, brokers, topics.Auctions, len(records))
	for _, want := range records {
		rec, ok := got[want.ID]
		if !ok {
			t.Errorf("auction %s not on the topic", want.ID)
			continue
		}
		if string(rec.Key) != want.MarketplaceID {
			t.Errorf("auction %s key %q, want the marketplace id", want.ID, rec.Key)
		}
		var dec auction.Record
		if err := json.Unmarshal(rec.Value, &dec); err != nil {
			t.Fatalf("auction %s: %v", want.ID, err)
		}
		if !dec.At.Equal(want.At) {
			t.Errorf("auction %s at %v, want %v", want.ID, dec.At, want.At)
		}
		dec.At = want.At
		if !reflect.DeepEqual(&dec, want) {
			t.Errorf("auction %s decoded\n %+v\nwant\n %+v", want.ID, dec, *want)
		}
	}
}

// TestAuctionPublisherReusesRecords: records and their buffers are reused
// once their promises ran; under concurrent auctions of every size, each
// record on the topic is still exactly the one published, under its key.
func TestAuctionPublisherReusesRecords(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cl, err := kafka.NewClient(brokers, quiet, kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics := kafka.TopicNames("reuse.")
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 3, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}
	pub := ingest.NewAuctionPublisher(cl, topics.Auctions, quiet)
	const workers, each = 8, 300
	want := map[string]*auction.Record{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				r := fullRecord()
				r.ID = fmt.Sprintf("01920000-0000-7000-8000-%06d%06d", w, i)
				r.MarketplaceID = fmt.Sprintf("6f1c3b5e-0000-4000-8000-%012d", (w*each+i)%7)
				r.SearchQuery = strings.Repeat("q", (w*each+i)%3000) // buffers of every size
				r.Winners = r.Winners[:i%(len(r.Winners)+1)]
				mu.Lock()
				want[r.ID] = r
				mu.Unlock()
				pub.Record(r)
			}
		})
	}
	wg.Wait()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, ctx, brokers, topics.Auctions, workers*each)
	for id, r := range want {
		rec, ok := got[id]
		if !ok {
			t.Fatalf("auction %s not on the topic", id)
		}
		if string(rec.Key) != r.MarketplaceID {
			t.Fatalf("auction %s key %q, want %q", id, rec.Key, r.MarketplaceID)
		}
		var dec auction.Record
		if err := json.Unmarshal(rec.Value, &dec); err != nil {
			t.Fatalf("auction %s: %v", id, err)
		}
		dec.At = r.At
		if !reflect.DeepEqual(&dec, r) {
			t.Fatalf("auction %s decoded\n %+v\nwant\n %+v", id, dec, *r)
		}
	}
}

// consumeAll reads n records of topic from the start, by auction id.
func consumeAll(t *testing.T, ctx context.Context, brokers []string, topic string, n int) map[string]*kgo.Record {
	t.Helper()
	cons, err := kafka.NewClient(brokers, quiet, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	out := map[string]*kgo.Record{}
	total := 0
	for total < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d of %d records consumed: %v", total, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			total++
			var id struct{ ID string }
			_ = json.Unmarshal(r.Value, &id)
			out[id.ID] = r
		})
	}
	if total != n {
		t.Errorf("%d records on the topic, want %d", total, n)
	}
	return out
}

// blackhole accepts connections and never answers: a broker that is
// reachable but does not make progress, so a buffered record stays buffered.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// countingHandler counts log records at WARN and above.
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h countingHandler) Handle(context.Context, slog.Record) error    { h.n.Add(1); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h countingHandler) WithGroup(string) slog.Handler                { return h }

// TestAuctionPublisherDropsWhenFull: with a broker that never answers and
// room for one buffered record, the first record waits in the buffer and
// every further one is dropped at once (counted, logged once), and Record
// never blocks.
func TestAuctionPublisherDropsWhenFull(t *testing.T) {
	cl, err := kafka.NewClient([]string{blackhole(t)}, quiet, kgo.MaxBufferedRecords(1))
	if err != nil {
		t.Fatal(err)
	}
	var logs atomic.Int64
	pub := ingest.NewAuctionPublisher(cl, "t.auctions", slog.New(countingHandler{&logs}))
	before := readCounts()

	const n = 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			pub.Record(fullRecord())
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked on a full producer buffer")
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if d := readCounts().minus(before); d != (recordCounts{dropped: n - 1}) {
			return testenv.Errorf("counts %+v, want %d dropped", d, n-1)
		}
		return nil
	})
	if got := logs.Load(); got != 1 {
		t.Errorf("%d log lines for %d drops, want 1 (rate-limited)", got, n-1)
	}

	// Closing the client fails the record that was waiting: an error.
	cl.Close()
	testenv.Eventually(t, 5*time.Second, func() error {
		if d := readCounts().minus(before); d != (recordCounts{dropped: n - 1, failed: 1}) {
			return testenv.Errorf("after close: counts %+v, want %d dropped and 1 error", d, n-1)
		}
		return nil
	})
}

// TestAuctionPublisherUnencodable: a record that cannot be encoded (a time
// JSON cannot write) is counted as an error and never produced.
func TestAuctionPublisherUnencodable(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	cl, err := kafka.NewClient(brokers, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pub := ingest.NewAuctionPublisher(cl, "t.auctions", quiet)
	before := readCounts()
	r := fullRecord()
	r.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	pub.Record(r)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := readCounts().minus(before); d != (recordCounts{failed: 1}) {
		t.Errorf("counts %+v, want 1 error", d)
	}
}
