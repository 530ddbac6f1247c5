package privacy_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/management/segments"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestEraseFigure measures a batch of 10,000 ids (ten requests of 1,000)
// against 10 million events of a million shoppers, on a ClickHouse of its
// own (docs/operations/privacy.md, Figures). It runs only when
// ENDCAP_PRIVACY_FIGURE_CLICKHOUSE names that server (host:port of its
// native protocol); it writes about 17.5 million rows there, in a database it
// drops at its end.
func TestEraseFigure(t *testing.T) {
	addr := os.Getenv("ENDCAP_PRIVACY_FIGURE_CLICKHOUSE")
	if addr == "" {
		t.Skip("ENDCAP_PRIVACY_FIGURE_CLICKHOUSE is not set")
	}
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.ClickHouseAddr = addr
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Hour)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, cfg)
	rdb := env.Redis(t)
	st := s3store.Open(s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey})
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	var svc *privacy.Service
	var segs *segments.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: cfg.KafkaTopicPrefix}, func(l *statelog.Log) {
		l.SetLocker(redisstore.NewLocker(rdb, "ec:lock:"+cfg.KafkaTopicPrefix, 10*time.Second))
		svc = privacy.New(l)
		segs = segments.New(l, rdb)
	})
	mp := uuid.NewString()
	now := time.Now().UTC()
	start := now.Add(-90 * 24 * time.Hour).Unix()
	const span = 90 * 24 * 3600
	// 10 million events of a million shoppers over 90 days: 7 million
	// impressions and clicks (interactions_raw), 3 million purchases and
	// page views (events_raw); 5 million auctions; the attribution
	// projector's copies (1 million touches, 1 million purchases) and half
	// a million attributed items.
	user := "concat('user-', toString(cityHash64(number) % 1000000))"
	at := func(n int) string { return fmt.Sprintf("toDateTime(%d + intDiv(number * %d, %d))", start, span, n) }
	ms := func(n int) string { return "toInt64(toUInt32(" + at(n) + ")) * 1000" }
	gen := []struct{ table, stmt string }{
		{"interactions_raw", fmt.Sprintf(`INSERT INTO interactions_raw (marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at, received_at_ms, day_local, opaque_user_id, sponsored, campaign_id, in_events_raw)
			SELECT toUUID('%s'), if(number %% 20 = 0, 'click', 'impression'), concat('i', toString(number)), %s, %s, %s, %s, toDate(%s), %s, 1, 'c1', 0 FROM numbers(7000000)`,
			mp, at(7e6), ms(7e6), at(7e6), ms(7e6), at(7e6), user)},
		{"events_raw", fmt.Sprintf(`INSERT INTO events_raw (marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at, received_at_ms, opaque_user_id, page_id)
			SELECT toUUID('%s'), if(number %% 3 = 0, 'purchase', 'pageview'), concat('e', toString(number)), %s, %s, %s, %s, %s, 'home' FROM numbers(3000000)`,
			mp, at(3e6), ms(3e6), at(3e6), ms(3e6), user)},
		{"auctions_raw", fmt.Sprintf(`INSERT INTO auctions_raw (auction_id, marketplace_id, at, at_ms, endpoint, opaque_user_id, winners)
			SELECT generateUUIDv4(), toUUID('%s'), %s, %s, 'v2/auctions', %s, 2 FROM numbers(5000000)`, mp, at(5e6), ms(5e6), user)},
		{"attribution_touches_raw", fmt.Sprintf(`INSERT INTO attribution_touches_raw (marketplace_id, opaque_user_id, kind, event_id, occurred_at, occurred_at_ms, received_at_ms)
			SELECT toUUID('%s'), %s, 'click', concat('i', toString(number)), %s, %s, %s FROM numbers(1000000)`, mp, user, at(1e6), ms(1e6), ms(1e6))},
		{"attribution_purchases_raw", fmt.Sprintf(`INSERT INTO attribution_purchases_raw (marketplace_id, opaque_user_id, event_id, occurred_at, occurred_at_ms, received_at_ms, countable)
			SELECT toUUID('%s'), %s, concat('e', toString(number)), %s, %s, %s, 1 FROM numbers(1000000)`, mp, user, at(1e6), ms(1e6), ms(1e6))},
		{"attributed_purchases_raw", fmt.Sprintf(`INSERT INTO attributed_purchases_raw (marketplace_id, purchase_event_id, item_index, purchased_at, purchased_at_ms, purchase_received_at_ms, day_local, currency_code, opaque_user_id, product_id, quantity, attributed, version)
			SELECT toUUID('%s'), concat('e', toString(number)), 0, %s, %s, %s, toDate(%s), 'USD', %s, 'p1', 1, 1, 1 FROM numbers(500000)`, mp, at(5e5), ms(5e5), ms(5e5), at(5e5), user)},
	}
	for _, g := range gen {
		t0 := time.Now()
		if err := conn.Exec(ctx, g.stmt); err != nil {
			t.Fatalf("%s: %v", g.table, err)
		}
		t.Logf("generated %s in %s", g.table, time.Since(t0).Round(time.Millisecond))
	}
	for _, g := range gen {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+g.table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	var ds []privacy.Deletion
	for r := range 10 {
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = fmt.Sprint("user-", r*1000+i)
		}
		d, err := svc.Create(ctx, mp, privacy.Input{OpaqueUserIDs: &ids})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	job := svc.Eraser(privacy.EraserOptions{ClickHouse: conn, Redis: rdb, Segments: segs, Scored: scoredfiles.New(conn, st, rdb, log), Log: log,
		LockKey: "ec:lock:privacy:" + cfg.KafkaTopicPrefix})
	t0 := time.Now()
	res, err := job.RunPending(ctx)
	took := time.Since(t0)
	if err != nil || res.Completed != 10 {
		t.Fatalf("run: %+v %v", res, err)
	}
	total := map[string]int64{}
	for _, d := range ds {
		got, _ := svc.Get(mp, d.ID)
		for k, v := range got.Removed.ClickHouse {
			total[k] += v
		}
	}
	t.Logf("a batch of 10,000 ids against 10 million events: %s; rows per table %v", took.Round(time.Millisecond), total)
	for _, g := range gen {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT toUInt64(count()) FROM "+g.table+" WHERE opaque_user_id IN (SELECT concat('user-', toString(number)) FROM numbers(10000))").Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows of the erased users left (%v)", g.table, n, err)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
