package privacy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/management/segments"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// tableRows are a table's rows as the test compares them: marketplace,
// user, the row's id, and its received time in ms.
var tableRows = map[string]string{
	"events_raw":                "toString(marketplace_id), opaque_user_id, event_id, received_at_ms",
	"attribution_touches_raw":   "toString(marketplace_id), opaque_user_id, event_id, received_at_ms",
	"attribution_purchases_raw": "toString(marketplace_id), opaque_user_id, event_id, received_at_ms",
	"interactions_raw":          "toString(marketplace_id), opaque_user_id, event_id, received_at_ms",
	"auctions_raw":              "toString(marketplace_id), opaque_user_id, toString(auction_id), at_ms",
	"attributed_purchases_raw":  "toString(marketplace_id), opaque_user_id, purchase_event_id, purchase_received_at_ms",
}

type row struct {
	mp, user, id string
	ms           int64
}

func dump(t *testing.T, ctx context.Context, conn clickhouse.Conn, table string) []row {
	t.Helper()
	rows, err := conn.Query(ctx, "SELECT "+tableRows[table]+" FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.mp, &r.user, &r.id, &r.ms); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

func insert(t *testing.T, ctx context.Context, conn clickhouse.Conn, stmt string, rows [][]any) {
	t.Helper()
	b, err := conn.PrepareBatch(ctx, stmt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// shopperRows writes one row of user in every table of marketplace mp,
// received at `at`, its ids ending in tag.
func shopperRows(t *testing.T, ctx context.Context, conn clickhouse.Conn, mp, user, tag string, at time.Time, day time.Time) {
	t.Helper()
	ms := at.UnixMilli()
	auction := uuid.New()
	insert(t, ctx, conn, "INSERT INTO events_raw (marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at, received_at_ms, opaque_user_id)",
		[][]any{{mp, "purchase", "pur-" + tag, at, ms, at, ms, user}, {mp, "pageview", "pv-" + tag, at, ms, at, ms, user}})
	insert(t, ctx, conn, "INSERT INTO attribution_touches_raw (marketplace_id, opaque_user_id, kind, event_id, occurred_at, occurred_at_ms, received_at_ms, auction_id)",
		[][]any{{mp, user, "click", "clk-" + tag, at, ms, ms, auction}})
	insert(t, ctx, conn, "INSERT INTO attribution_purchases_raw (marketplace_id, opaque_user_id, event_id, occurred_at, occurred_at_ms, received_at_ms, countable)",
		[][]any{{mp, user, "pur-" + tag, at, ms, ms, uint8(1)}})
	insert(t, ctx, conn, "INSERT INTO interactions_raw (marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at, received_at_ms, day_local, opaque_user_id, sponsored, auction_id, in_events_raw)",
		[][]any{{mp, "click", "clk-" + tag, at, ms, at, ms, day, user, uint8(1), auction, uint8(0)}, {mp, "impression", "imp-" + tag, at, ms, at, ms, day, user, uint8(1), auction, uint8(0)}})
	insert(t, ctx, conn, "INSERT INTO auctions_raw (auction_id, marketplace_id, at, at_ms, opaque_user_id)",
		[][]any{{auction, mp, at, ms, user}})
	insert(t, ctx, conn, `INSERT INTO attributed_purchases_raw (marketplace_id, purchase_event_id, item_index, purchased_at, purchased_at_ms,
		purchase_received_at_ms, day_local, currency_code, opaque_user_id, product_id, quantity, unit_price_micros, amount_micros, attributed,
		reason, score, interaction_kind, interaction_event_id, auction_id, campaign_id, vendor_id, charge_type, version, computed_at)`,
		[][]any{{mp, "pur-" + tag, uint16(0), at, ms, ms, day, "USD", user, "p1", int64(1), int64(5_000_000), int64(5_000_000), uint8(1),
			"click", 1.0, "click", "clk-" + tag, auction, "c1", "v1", "CPC", uint64(1), at}})
}

// scoredUsers reads a stored scored-attribution file's rows: their
// purchase event ids and users.
func scoredUsers(t *testing.T, ctx context.Context, st *s3store.Store, key string) map[string]string {
	t.Helper()
	obj, ok, err := st.Get(ctx, key)
	if err != nil || !ok {
		t.Fatalf("get %s: %v %v", key, ok, err)
	}
	b, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := parquet.Read[scoredfiles.Record](strings.NewReader(string(b)), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range recs {
		out[r.PurchaseEventID] = r.OpaqueUserID
	}
	return out
}

// TestErase builds data of two shoppers (and of the erased one's id in
// another marketplace) in every store, erases one shopper of one
// marketplace, and checks table by table, segment by segment and file by
// file that nothing of it received before the request remains, that what
// came after stays, and that nothing else changed.
func TestErase(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
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
	mp, other := uuid.NewString(), uuid.NewString()
	const erased, kept = "shopper-erased", "shopper-kept"

	// Before the request: both shoppers in mp, the erased id in other.
	before := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	day := time.Date(before.Year(), before.Month(), before.Day(), 0, 0, 0, 0, time.UTC)
	shopperRows(t, ctx, conn, mp, erased, "e1", before, day)
	shopperRows(t, ctx, conn, mp, kept, "k1", before, day)
	shopperRows(t, ctx, conn, other, erased, "o1", before, day)
	for _, m := range []string{mp, other} {
		if _, err := segs.Upload(ctx, m, "s1", segments.ActionReplace, strings.NewReader("opaqueUserId\n"+erased+"\n"+kept+"\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := segs.Upload(ctx, mp, "s2", segments.ActionReplace, strings.NewReader(erased+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	sf := scoredfiles.New(conn, st, rdb, quiet)
	for _, m := range []string{mp, other} {
		if _, err := sf.Produce(ctx, scoredfiles.Marketplace{ID: m}, day); err != nil {
			t.Fatal(err)
		}
	}
	key, otherKey := scoredfiles.Key(mp, day), scoredfiles.Key(other, day)
	otherInfo, _, err := st.Head(ctx, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	keyInfo, _, err := st.Head(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	d, err := svc.Create(ctx, mp, privacy.Input{OpaqueUserIDs: &[]string{erased, erased, "never-seen"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != privacy.StatusPending || d.IDCount != 2 {
		t.Fatalf("created %+v", d)
	}
	// After the request: the erased shopper comes back; that stays.
	after := d.RequestedAt.Add(time.Second)
	shopperRows(t, ctx, conn, mp, erased, "e2", after, day)

	want := map[string][]row{}
	for table := range tableRows {
		blank := privacy.Tables()[table]
		for _, r := range dump(t, ctx, conn, table) {
			if r.mp == mp && r.user == erased && r.ms <= d.RequestedAt.UnixMilli() {
				if !blank {
					continue
				}
				r.user = ""
			}
			want[table] = append(want[table], r)
		}
		slices.SortFunc(want[table], func(a, b row) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	}

	job := svc.Eraser(privacy.EraserOptions{ClickHouse: conn, Redis: rdb, Segments: segs, Scored: sf, Log: quiet,
		MutationTimeout: 30 * time.Second, LockKey: "ec:lock:privacy:" + cfg.KafkaTopicPrefix})
	res, err := job.RunPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res != (privacy.RunResult{Completed: 1}) {
		t.Fatalf("run: %+v", res)
	}

	// Table by table: the erased shopper's rows received before the request
	// are gone (or kept without the id); the rest is as it was.
	for table := range tableRows {
		if got := dump(t, ctx, conn, table); !slices.Equal(got, want[table]) {
			t.Errorf("%s after the erasure:\n got %v\nwant %v", table, got, want[table])
		}
	}
	// The mutations ClickHouse keeps name the id only by its hash.
	var mutations, naming uint64
	if err := conn.QueryRow(ctx, "SELECT toUInt64(count()), toUInt64(countIf(position(command, ?) > 0)) FROM system.mutations WHERE database = currentDatabase()", erased).Scan(&mutations, &naming); err != nil {
		t.Fatal(err)
	}
	if mutations != uint64(len(tableRows)) || naming != 0 {
		t.Errorf("%d mutations, %d of them name the erased id", mutations, naming)
	}
	// Segments: the erased shopper is in no segment of mp; the other
	// marketplace's and the kept shopper's memberships stay.
	for _, c := range []struct {
		mp, seg, user string
		want          bool
	}{{mp, "s1", erased, false}, {mp, "s2", erased, false}, {mp, "s1", kept, true}, {other, "s1", erased, true}, {other, "s1", kept, true}} {
		if in, err := segs.IsMember(ctx, c.mp, c.seg, c.user); err != nil || in != c.want {
			t.Errorf("%s %s %s: member %v (%v), want %v", c.mp, c.seg, c.user, in, err, c.want)
		}
	}
	// Files: mp's day rewritten with the erased purchase's user blanked;
	// the other marketplace's file not touched.
	if got, want := scoredUsers(t, ctx, st, key), map[string]string{"pur-e1": "", "pur-k1": kept}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scored file of %s: %v, want %v", mp, got, want)
	}
	info, _, err := st.Head(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag == keyInfo.ETag || info.Metadata["produced-at"] != keyInfo.Metadata["produced-at"] || info.Metadata["final"] != keyInfo.Metadata["final"] {
		t.Errorf("rewritten file: %+v, before %+v", info, keyInfo)
	}
	if info, _, err := st.Head(ctx, otherKey); err != nil || info.ETag != otherInfo.ETag {
		t.Errorf("the other marketplace's file changed: %+v %v", info, err)
	}
	if got := scoredUsers(t, ctx, st, otherKey); got["pur-o1"] != erased {
		t.Errorf("other marketplace's file: %v", got)
	}

	// The request: completed, what was removed per store, no ids left.
	got, err := svc.Get(mp, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantCH := map[string]int64{"events_raw": 2, "attribution_touches_raw": 1, "attribution_purchases_raw": 1,
		"interactions_raw": 2, "auctions_raw": 1, "attributed_purchases_raw": 1}
	if got.Status != privacy.StatusCompleted || got.OpaqueUserIDs != nil || got.Removed == nil ||
		fmt.Sprint(got.Removed.ClickHouse) != fmt.Sprint(wantCH) || got.Removed.Redis.SegmentMemberships != 2 ||
		got.Removed.S3 != (privacy.S3Removed{ScoredAttributionFiles: 1, ScoredAttributionRows: 1}) || got.FinishedAt == nil {
		t.Errorf("deletion after the run: %+v removed %+v", got, got.Removed)
	}
	// Nothing pending: a second run does nothing.
	if res, err := job.RunPending(ctx); err != nil || res != (privacy.RunResult{}) {
		t.Errorf("second run: %+v %v", res, err)
	}
}

// TestEraseWaitsForTheFold: a request newer than what the projectors have
// folded waits for a later run.
func TestEraseWaitsForTheFold(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, cfg)
	rdb := env.Redis(t)
	var svc *privacy.Service
	var segs *segments.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: cfg.KafkaTopicPrefix}, func(l *statelog.Log) {
		svc = privacy.New(l)
		segs = segments.New(l, rdb)
	})
	mp := uuid.NewString()
	d, err := svc.Create(ctx, mp, privacy.Input{OpaqueUserIDs: &[]string{"u1"}})
	if err != nil {
		t.Fatal(err)
	}
	folded := d.RequestedAt.Add(-time.Second)
	job := svc.Eraser(privacy.EraserOptions{ClickHouse: conn, Redis: rdb, Segments: segs, Scored: scoredfiles.New(conn, nil, rdb, quiet), Log: quiet,
		LockKey: "ec:lock:privacy:" + cfg.KafkaTopicPrefix, Folded: func(context.Context) (time.Time, error) { return folded, nil }})
	if res, err := job.RunPending(ctx); err != nil || res != (privacy.RunResult{Waiting: 1}) {
		t.Fatalf("run before the fold: %+v %v", res, err)
	}
	if got, _ := svc.Get(mp, d.ID); got.Status != privacy.StatusPending {
		t.Fatalf("status %s", got.Status)
	}
	folded = d.RequestedAt
	if res, err := job.RunPending(ctx); err != nil || res != (privacy.RunResult{Completed: 1}) {
		t.Fatalf("run after the fold: %+v %v", res, err)
	}
	// Another process holding the job's lock: this one does nothing.
	_, release, err := redisstore.Lease(ctx, rdb, "ec:lock:privacy:"+cfg.KafkaTopicPrefix, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := job.RunPending(ctx); !errors.Is(err, privacy.ErrBusy) {
		t.Fatalf("run under another's lock: %v", err)
	}
}
