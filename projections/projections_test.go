package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testRedis is a client of the test stack's Redis, closed with the test.
func testRedis(t testing.TB) redis.UniversalClient { return testenv.Get(t).Redis(t) }

func TestClaimer(t *testing.T) {
	rdb := testRedis(t)
	prefix := fmt.Sprintf("test:claim:%d:", time.Now().UnixNano())
	c := projections.NewClaimer(rdb, prefix, time.Second)
	ctx := t.Context()

	got, err := c.Claim(ctx, []projections.ClaimKey{
		{Key: "a", Partition: 0, Offset: 1},
		{Key: "b", Partition: 0, Offset: 2},
		{Key: "a", Partition: 1, Offset: 7}, // the same key in the same batch: a duplicate
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []projections.Claim{projections.ClaimFirst, projections.ClaimFirst, projections.ClaimDuplicate}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("first batch [%d] = %v, want %v", i, got[i], want[i])
		}
	}
	got, err = c.Claim(ctx, []projections.ClaimKey{{Key: "a", Partition: 0, Offset: 1}, {Key: "b", Partition: 3, Offset: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != projections.ClaimReplay || got[1] != projections.ClaimDuplicate {
		t.Errorf("second batch = %v, want [replay duplicate]", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if got, _ = c.Claim(ctx, []projections.ClaimKey{{Key: "a", Partition: 9, Offset: 9}}); got[0] != projections.ClaimFirst {
		t.Errorf("after the window = %v, want first", got)
	}
	if got, err = c.Claim(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("empty claim: %v %v", got, err)
	}
}

// TestClaimerKeys: a claim is stored under the prefix and 16 bytes of hash,
// whatever the length of the claim key, and with the window as its TTL.
func TestClaimerKeys(t *testing.T) {
	rdb := testRedis(t)
	ctx := t.Context()
	prefix := fmt.Sprintf("test:claimkeys:%d:", time.Now().UnixNano())
	c := projections.NewClaimer(rdb, prefix, time.Hour)
	long := strings.Repeat("x", 500)
	if _, err := c.Claim(ctx, []projections.ClaimKey{{Key: "a"}, {Key: long, Offset: 1}, {Key: "é☃:\x00*?", Offset: 2}}); err != nil {
		t.Fatal(err)
	}
	keys := testenv.Keys(t, rdb, prefix+"*")
	if len(keys) != 3 {
		t.Fatalf("keys %q; want 3", keys)
	}
	for _, k := range keys {
		if len(k) != len(prefix)+16 {
			t.Errorf("key %q: %d bytes, want the prefix and 16", k, len(k))
		}
		if ttl := rdb.TTL(ctx, k).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
			t.Errorf("key %q: TTL %s, want the window (1h)", k, ttl)
		}
	}
}

// TestClaimerLegacy: during the upgrade window, a claim stored by the
// previous version under the whole key decides: its record is a replay,
// any other a duplicate, even one that took the hashed key first. Keys it
// does not hold are decided by the hashed claims. Past the window the old
// claims are no longer read.
func TestClaimerLegacy(t *testing.T) {
	rdb := testRedis(t)
	ctx := t.Context()
	base := fmt.Sprintf("test:claimlegacy:%d:", time.Now().UnixNano())
	legacy := base + "old:"
	for k, owner := range map[string]string{"a": "0:1", "b": "0:2", "late": "3:3"} {
		if err := rdb.Set(ctx, legacy+k, owner, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	until := time.Now().Add(1500 * time.Millisecond)
	c := projections.NewClaimer(rdb, base+"new:", time.Hour).WithLegacy(legacy, until)
	steps := []struct {
		keys []projections.ClaimKey
		want []projections.Claim
	}{
		{ // a: the old claim's record is a replay, another a duplicate; c is new
			[]projections.ClaimKey{{Key: "a", Partition: 0, Offset: 1}, {Key: "a", Partition: 1, Offset: 7}, {Key: "c", Partition: 0, Offset: 3}},
			[]projections.Claim{projections.ClaimReplay, projections.ClaimDuplicate, projections.ClaimFirst},
		},
		{ // b: a duplicate takes the hashed key first; the owner's replay is still a replay
			[]projections.ClaimKey{{Key: "b", Partition: 5, Offset: 5}, {Key: "b", Partition: 0, Offset: 2}},
			[]projections.Claim{projections.ClaimDuplicate, projections.ClaimReplay},
		},
		{ // c: decided by the hashed claims alone
			[]projections.ClaimKey{{Key: "c", Partition: 0, Offset: 3}, {Key: "c", Partition: 0, Offset: 4}},
			[]projections.Claim{projections.ClaimReplay, projections.ClaimDuplicate},
		},
	}
	for i, st := range steps {
		got, err := c.Claim(ctx, st.keys)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, st.want) {
			t.Errorf("step %d: %v, want %v", i, got, st.want)
		}
	}
	time.Sleep(time.Until(until) + 50*time.Millisecond)
	got, err := c.Claim(ctx, []projections.ClaimKey{{Key: "late", Partition: 9, Offset: 9}})
	if err != nil || got[0] != projections.ClaimFirst {
		t.Errorf("after the upgrade window: %v, %v; want first (the old claim no longer read)", got, err)
	}
}

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
		for i, id := range ids {
			e := records.Event{Kind: records.KindClick, MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001", ID: id,
				OccurredAtMs: time.Now().UnixMilli(), ReceivedAtMs: time.Now().UnixMilli(), OpaqueUserID: fmt.Sprint("u", i),
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
			Claimer: projections.NewClaimer(rdb, "test:"+cfg.KafkaTopicPrefix, time.Hour), Sinks: []projections.EventSink{projections.NewEventsRaw(conn, nil)},
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
