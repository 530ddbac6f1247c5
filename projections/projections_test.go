package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testRedis is a client of the test stack's Redis, closed with the test.
func testRedis(t testing.TB) redis.UniversalClient { return testenv.Get(t).Redis(t) }

// TestLegacyClaimsUntil: the first start of the hashed format records
// whether there are old claims to read; later starts read the record.
func TestLegacyClaimsUntil(t *testing.T) {
	rdb := testRedis(t)
	ctx := t.Context()
	base := fmt.Sprintf("test:claimformat:%d:", time.Now().UnixNano())
	const window = 72 * time.Hour

	// No old claim: nothing to read, now and at every later start, even
	// once an old-looking key appears.
	until, err := projections.LegacyClaimsUntil(ctx, rdb, base+"fresh", base+"old1:", window)
	if err != nil || !until.IsZero() {
		t.Fatalf("fresh: %v, %v; want the zero time", until, err)
	}
	if v := rdb.Get(ctx, base+"fresh").Val(); v != "0" {
		t.Errorf("fresh: record %q, want 0", v)
	}
	rdb.Set(ctx, base+"old1:x", "0:1", time.Hour)
	if until, err = projections.LegacyClaimsUntil(ctx, rdb, base+"fresh", base+"old1:", window); err != nil || !until.IsZero() {
		t.Errorf("fresh, restarted: %v, %v; want the zero time", until, err)
	}

	// Old claims: read for one window from the first start.
	rdb.Set(ctx, base+"old2:e", "0:1", time.Hour)
	start := time.Now()
	until, err = projections.LegacyClaimsUntil(ctx, rdb, base+"upgrade", base+"old2:", window)
	if err != nil || until.Before(start.Add(window).Add(-time.Second)) || until.After(time.Now().Add(window)) {
		t.Fatalf("upgrade: %v, %v; want about %v", until, err, start.Add(window))
	}
	again, err := projections.LegacyClaimsUntil(ctx, rdb, base+"upgrade", base+"old2:", window)
	if err != nil || !again.Equal(until) {
		t.Errorf("upgrade, restarted: %v, %v; want %v", again, err, until)
	}

	rdb.Set(ctx, base+"bad", "soon", 0)
	if _, err := projections.LegacyClaimsUntil(ctx, rdb, base+"bad", base+"old2:", window); err == nil {
		t.Error("a record that is not a time: no error")
	}
	rdb.Del(ctx, base+"fresh", base+"upgrade", base+"bad")
}

// TestProjectorExactlyOnce: a replay of already inserted records (offsets
// rewound, as after a crash between insert and commit) and a duplicate record
// with a claimed id leave exactly one visible row per event.
func TestProjectorExactlyOnce(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx := t.Context()

	cl, topics := testenv.Topics(t, ctx, cfg, brokers, 3)
	conn := testenv.ClickHouse(t, ctx, cfg)
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	defer rdb.Close()

	produce := func(ids ...string) {
		t.Helper()
		var recs []*kgo.Record
		for _, id := range ids {
			// A client's retry is the same event: the same user, so the same
			// partition (claims are per partition).
			e := records.Event{Kind: records.KindClick, MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001", ID: id,
				OccurredAtMs: time.Now().UnixMilli(), ReceivedAtMs: time.Now().UnixMilli(), OpaqueUserID: "u-" + id,
				Entity: &records.Entity{Type: "product", ID: "p"}}
			v, _ := json.Marshal(e)
			recs = append(recs, &kgo.Record{Topic: topics.Events, Key: records.EventKey(&e), Value: v})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	runProjector := func(until func() bool) {
		t.Helper()
		p, err := projections.NewEventFold(projections.EventFoldOptions{Brokers: brokers, Topic: topics.Events,
			Claims: openClaims(t, brokers, topics, time.Hour), Sinks: []projections.EventSink{projections.NewEventsRaw(conn, nil)},
			MaxRows: 1000, FlushInterval: 100 * time.Millisecond, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(pctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		}()
		testenv.Eventually(t, 15*time.Second, func() error {
			if !until() {
				return errors.New("projector has not caught up")
			}
			return nil
		})
		cancel()
		wg.Wait()
		p.Close()
	}
	count := func(q string) uint64 {
		var n uint64
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	committed := func() int64 {
		adm := kadm.NewClient(cl)
		offs, err := adm.FetchOffsets(ctx, projections.EventsGroup)
		if err != nil {
			return 0
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		return n
	}

	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("ev-%03d", i)
	}
	produce(ids...)
	runProjector(func() bool { return committed() == 100 })
	if n := count("SELECT count() FROM events"); n != 100 {
		t.Fatalf("first pass: %d rows", n)
	}

	// Rewind the group to the start: every record is processed again, as
	// after a crash between the insert and the commit.
	adm := kadm.NewClient(cl)
	var rewind kadm.Offsets
	for p := int32(0); p < 3; p++ {
		rewind.Add(kadm.Offset{Topic: topics.Events, Partition: p, At: 0, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(ctx, projections.EventsGroup, rewind); err != nil {
		t.Fatal(err)
	}
	// Plus client retries: the same ids in new records, and one new event.
	produce("ev-000", "ev-050", "ev-099", "ev-new")
	runProjector(func() bool { return committed() == 104 })

	if n := count("SELECT count() FROM events"); n != 101 {
		t.Errorf("visible rows %d, want 101", n)
	}
	t.Logf("physical rows after the replay: %d (replays insert identical rows that FINAL folds)", count("SELECT count() FROM events_raw"))
	if n := count("SELECT uniqExact(event_id) FROM events_raw"); n != 101 {
		t.Errorf("distinct ids %d, want 101", n)
	}
	// The retried ids were dropped as duplicates: no physical row comes from
	// the new records' offsets (they are in 100..103 of some partition, but
	// a replayed row keeps the offset of the record that first claimed it).
	if n := count("SELECT count() FROM (SELECT event_id, uniqExact(kafka_partition, kafka_offset) AS o FROM events_raw GROUP BY event_id HAVING o > 1)"); n != 0 {
		t.Errorf("%d events have rows from two different records", n)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	env := testenv.Get(t)
	cfg := env.Config(t, []string{"unused:1"})
	ctx := t.Context()
	o := clickhouse.Options{Addr: cfg.ClickHouseAddr, Database: cfg.ClickHouseDatabase, User: "default"}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := clickhouse.EnsureDatabase(ctx, o); err != nil {
				t.Error(err)
				return
			}
			c, err := clickhouse.Open(o)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if _, err := clickhouse.Migrate(ctx, c, quiet); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	c, _ := clickhouse.Open(o)
	defer c.Close()
	if v, err := clickhouse.SchemaVersion(ctx, c); err != nil || v != clickhouse.LatestVersion() {
		t.Errorf("schema version %d (%v), want %d", v, err, clickhouse.LatestVersion())
	}
	if n, err := clickhouse.Migrate(ctx, c, quiet); err != nil || n != 0 {
		t.Errorf("migrating an up-to-date schema applied %d (%v)", n, err)
	}
}
