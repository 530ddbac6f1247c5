package scoredfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type fixture struct {
	ctx  context.Context
	conn clickhouse.Conn
	s3   *s3store.Store
	rdb  redis.UniversalClient
	svc  *Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Get(t)
	cfg := env.Config(t, []string{"127.0.0.1:1"})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	conn := testenv.ClickHouse(t, ctx, cfg)
	st := s3store.Open(s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey})
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	return &fixture{ctx: ctx, conn: conn, s3: st, rdb: rdb, svc: New(conn, st, rdb, quiet)}
}

// item is one row of attributed_purchases_raw.
type item struct {
	mp         string
	event      string
	index      uint16
	at         time.Time
	day        string
	user       string
	unitMicros int64
	qty        int64
	attributed uint8
	reason     string
	score      float64
	version    uint64
	vendor     string // the campaign's; "" is vend-1
}

func (f *fixture) insert(t *testing.T, items []item) {
	t.Helper()
	b, err := f.conn.PrepareBatch(f.ctx, `INSERT INTO attributed_purchases_raw (marketplace_id, purchase_event_id, item_index,
		purchased_at, purchased_at_ms, purchase_received_at_ms, day_local, currency_code, opaque_user_id, product_id, item_vendor_id,
		quantity, unit_price_micros, amount_micros, attributed, reason, score, window_seconds, interaction_id, interaction_kind,
		interaction_event_id, interaction_at, interaction_at_ms, auction_id, auction_at, auction_at_ms, rank, ad_format,
		campaign_id, vendor_id, entity_type, entity_id, charge_type, version, computed_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		vendor := it.vendor
		if vendor == "" {
			vendor = "vend-1"
		}
		day, _ := time.Parse(time.DateOnly, it.day)
		ia := it.at.Add(-time.Hour)
		if err := b.Append(uuid.MustParse(it.mp), it.event, it.index, it.at.Truncate(time.Second), it.at.UnixMilli(), it.at.UnixMilli()+250,
			day, "USD", it.user, "p-"+it.event, "v-1", it.qty, it.unitMicros, it.unitMicros*it.qty, it.attributed, it.reason, it.score,
			uint32(7*86400), uuid.New(), "click", "ev-"+it.event, ia.Truncate(time.Second), ia.UnixMilli(), uuid.New(),
			ia.Add(-time.Second).Truncate(time.Second), ia.Add(-time.Second).UnixMilli(), uint8(1), "listing", "camp-1", vendor,
			"product", "p-"+it.event, "CPC", it.version, time.Now().UTC().Truncate(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// read downloads and decodes a day's file.
func (f *fixture) read(t *testing.T, mp string, day time.Time) ([]Record, map[string]string) {
	t.Helper()
	out, err := f.s3.Client.GetObject(f.ctx, &s3.GetObjectInput{Bucket: aws.String(f.s3.Bucket), Key: aws.String(Key(mp, day))})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

func decode(t *testing.T, data []byte) ([]Record, map[string]string) {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, m := range pf.Metadata().KeyValueMetadata {
		kv[m.Key] = m.Value
	}
	r := parquet.NewGenericReader[Record](bytes.NewReader(data))
	defer r.Close()
	recs := make([]Record, r.NumRows())
	n, err := r.Read(recs)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return recs[:n], kv
}

// chDay is what ClickHouse says of a day: the current attribution of each
// attributed item, by purchase event id.
func (f *fixture) chDay(t *testing.T, mp, day string) (map[string][3]int64, map[string]float64, int64) {
	t.Helper()
	rows, err := f.conn.Query(f.ctx, `SELECT purchase_event_id, quantity, unit_price_micros, amount_micros, score
		FROM attributed_purchases WHERE marketplace_id = toUUID(?) AND day_local = toDate(?)`, mp, day)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	money := map[string][3]int64{}
	scores := map[string]float64{}
	var sum int64
	for rows.Next() {
		var id string
		var q, u, a int64
		var s float64
		if err := rows.Scan(&id, &q, &u, &a, &s); err != nil {
			t.Fatal(err)
		}
		money[id], scores[id] = [3]int64{q, u, a}, s
		sum += a
	}
	return money, scores, sum
}

func TestProduceMatchesClickHouse(t *testing.T) {
	f := newFixture(t)
	mp, other := uuid.NewString(), uuid.NewString()
	ny, _ := time.LoadLocation("America/New_York")
	day := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
	// 2026-03-07 in New York: 05:00Z on the 7th to 05:00Z on the 8th.
	at := func(h, m int) time.Time { return time.Date(2026, 3, 7, h, m, 0, 123e6, time.UTC) }
	items := []item{
		{mp: mp, event: "e1", at: at(5, 0), day: "2026-03-07", user: "u1", unitMicros: 19_990_000, qty: 3, attributed: 1, reason: "click_same_product", score: 1, version: 10},
		// e2: two versions, the higher one is current and attributes a different price.
		{mp: mp, event: "e2", at: at(12, 30), day: "2026-03-07", user: "u2", unitMicros: 1, qty: 1, attributed: 1, reason: "impression", score: 0.5, version: 1},
		{mp: mp, event: "e2", at: at(12, 30), day: "2026-03-07", user: "u2", unitMicros: 9_223_372_036, qty: 1_000, attributed: 1, reason: "click_halo", score: 0.25, version: 2},
		// e3: its current version is not attributed: not in the file.
		{mp: mp, event: "e3", at: at(13, 0), day: "2026-03-07", user: "u3", unitMicros: 5, qty: 1, attributed: 1, reason: "impression", score: 0.5, version: 1},
		{mp: mp, event: "e3", at: at(13, 0), day: "2026-03-07", user: "u3", unitMicros: 5, qty: 1, attributed: 0, reason: "none", version: 2},
		{mp: mp, event: "e4", at: time.Date(2026, 3, 8, 4, 59, 59, 999e6, time.UTC), day: "2026-03-07", user: "u4", unitMicros: 1_000_001, qty: 7, attributed: 1, reason: "click_same_product", score: 1, version: 3},
		// Other days and another marketplace.
		{mp: mp, event: "e5", at: time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), day: "2026-03-08", user: "u5", unitMicros: 1, qty: 1, attributed: 1, reason: "impression", score: 0.5, version: 1},
		{mp: mp, event: "e6", at: at(4, 59), day: "2026-03-06", user: "u6", unitMicros: 1, qty: 1, attributed: 1, reason: "impression", score: 0.5, version: 1},
		{mp: other, event: "e7", at: at(12, 0), day: "2026-03-07", user: "u7", unitMicros: 1, qty: 1, attributed: 1, reason: "impression", score: 0.5, version: 1},
	}
	f.insert(t, items)

	if files, err := f.svc.Files(f.ctx, mp, day); err != nil || len(files) != 0 {
		t.Fatalf("before production: files %v, err %v; want none", files, err)
	}
	res, err := f.svc.Produce(f.ctx, Marketplace{ID: mp, Location: ny}, day)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3 || !res.Final {
		t.Fatalf("result %+v: want 3 rows, final (the day is long past)", res)
	}
	recs, kv := f.read(t, mp, day)
	if kv["endcap.day_local"] != "2026-03-07" || kv["endcap.marketplace_id"] != mp || kv["endcap.schema"] != SchemaVersion {
		t.Errorf("key-value metadata %v", kv)
	}
	money, scores, sum := f.chDay(t, mp, "2026-03-07")
	if len(recs) != len(money) {
		t.Fatalf("file has %d rows, ClickHouse %d", len(recs), len(money))
	}
	var fileSum int64
	var order []string
	for _, r := range recs {
		order = append(order, r.PurchaseEventID)
		want, ok := money[r.PurchaseEventID]
		if !ok {
			t.Errorf("row %s is not attributed on that day in ClickHouse", r.PurchaseEventID)
			continue
		}
		if got := [3]int64{r.Quantity, r.UnitPriceMicros, r.AmountMicros}; got != want {
			t.Errorf("%s: quantity, unit price, amount %v; ClickHouse %v", r.PurchaseEventID, got, want)
		}
		if r.Score != scores[r.PurchaseEventID] {
			t.Errorf("%s: score %v; ClickHouse %v", r.PurchaseEventID, r.Score, scores[r.PurchaseEventID])
		}
		if r.MarketplaceID != mp || r.Day().Format(time.DateOnly) != "2026-03-07" || r.CurrencyCode != "USD" {
			t.Errorf("%s: marketplace %s day %s currency %s", r.PurchaseEventID, r.MarketplaceID, r.Day(), r.CurrencyCode)
		}
		fileSum += r.AmountMicros
	}
	if fileSum != sum {
		t.Errorf("sum of amount_micros: file %d, ClickHouse %d", fileSum, sum)
	}
	if got := strings.Join(order, ","); got != "e1,e2,e4" {
		t.Errorf("row order %s, want e1,e2,e4 (purchase time)", got)
	}
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.PurchaseEventID] = r
	}
	// Exact decimal amounts and exact instants.
	for id, want := range map[string]string{"e1": "59.97", "e2": "9223372.036", "e4": "7.000007"} {
		if byID[id].Amount != want {
			t.Errorf("%s: amount %q, want %q", id, byID[id].Amount, want)
		}
	}
	if e2 := byID["e2"]; e2.AttributionVersion != 2 || e2.Reason != "click_halo" || e2.PurchasedAt != at(12, 30).UnixMilli() || e2.PurchaseReceivedAt != e2.PurchasedAt+250 {
		t.Errorf("e2: %+v", e2)
	}

	// The endpoint's listing: one file, with its size.
	files, err := f.svc.Files(f.ctx, mp, day)
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v, err %v", files, err)
	}
	if files[0].SizeBytes != res.SizeBytes || !files[0].Final || !files[0].ProducedAt.Equal(res.ProducedAt) || files[0].Date != "2026-03-07" {
		t.Errorf("file %+v, result %+v", files[0], res)
	}
	// A day with no attributed item still gets a (empty) file.
	empty := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if res, err := f.svc.Produce(f.ctx, Marketplace{ID: mp, Location: ny}, empty); err != nil || res.Rows != 0 {
		t.Fatalf("empty day: %+v, %v", res, err)
	}
	if recs, _ := f.read(t, mp, empty); len(recs) != 0 {
		t.Errorf("empty day has %d rows", len(recs))
	}
}

// bulk inserts n attributed items of random users (incompressible text) on day.
func (f *fixture) bulk(t *testing.T, mp string, n int, version uint64) {
	t.Helper()
	items := make([]item, n)
	for i := range items {
		items[i] = item{mp: mp, event: fmt.Sprintf("b%06d", i), at: time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond),
			day: "2026-02-02", user: fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()), unitMicros: int64(i) + 1, qty: 1, attributed: 1,
			reason: "click_same_product", score: 1, version: version}
	}
	f.insert(t, items)
}

func TestRerunReplacesAndCrashLeavesNothing(t *testing.T) {
	f := newFixture(t)
	mp := Marketplace{ID: uuid.NewString(), Location: time.UTC}
	day := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	f.bulk(t, mp.ID, 20_000, 1)

	// A run cancelled after its first part: the upload is aborted and the
	// key never appears.
	f.svc.PartSize, f.svc.RowGroupRows = 64<<10, 2_000
	cancelAfterFirstPart := func() (context.Context, *int) {
		ctx, cancel := context.WithCancel(f.ctx)
		parts := new(int)
		f.svc.afterPart = func(n int) {
			*parts = n
			cancel()
		}
		return ctx, parts
	}
	ctx, parts := cancelAfterFirstPart()
	if _, err := f.svc.Produce(ctx, mp, day); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: err %v, want context.Canceled", err)
	}
	if *parts != 1 {
		t.Fatalf("the cancelled run uploaded %d parts before stopping; the test needs one", *parts)
	}
	f.noObjectNorUpload(t, mp.ID, day, false)

	// A complete run publishes the file.
	f.svc.afterPart, f.svc.PartSize = nil, s3store.MinPartSize
	first, err := f.svc.Produce(f.ctx, mp, day)
	if err != nil || first.Rows != 20_000 {
		t.Fatalf("first run: %+v, %v", first, err)
	}

	// New attributions; a re-run cancelled mid-upload leaves the first file.
	f.bulk(t, mp.ID, 25_000, 2) // 20,000 replaced items and 5,000 new ones
	f.svc.PartSize = 64 << 10
	ctx, _ = cancelAfterFirstPart()
	if _, err := f.svc.Produce(ctx, mp, day); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled re-run: err %v", err)
	}
	f.noObjectNorUpload(t, mp.ID, day, true)
	if files, err := f.svc.Files(f.ctx, mp.ID, day); err != nil || len(files) != 1 || files[0].SizeBytes != first.SizeBytes || !files[0].ProducedAt.Equal(first.ProducedAt) {
		t.Fatalf("after a cancelled re-run: %+v, %v; want the first file (%d bytes)", files, err, first.SizeBytes)
	}
	if recs, _ := f.read(t, mp.ID, day); len(recs) != 20_000 {
		t.Fatalf("after a cancelled re-run the file has %d rows, want the first run's 20000", len(recs))
	}

	// A complete re-run replaces it.
	f.svc.afterPart, f.svc.PartSize = nil, s3store.MinPartSize
	second, err := f.svc.Produce(f.ctx, mp, day)
	if err != nil || second.Rows != 25_000 {
		t.Fatalf("re-run: %+v, %v", second, err)
	}
	recs, _ := f.read(t, mp.ID, day)
	_, _, sum := f.chDay(t, mp.ID, "2026-02-02")
	var fileSum int64
	for _, r := range recs {
		fileSum += r.AmountMicros
		if r.AttributionVersion != 2 {
			t.Fatalf("row %s has version %d after the re-run", r.PurchaseEventID, r.AttributionVersion)
		}
	}
	if len(recs) != 25_000 || fileSum != sum || sum != 25_000*25_001/2 {
		t.Errorf("re-run file: %d rows, sum %d; ClickHouse sum %d", len(recs), fileSum, sum)
	}
}

// noObjectNorUpload checks that no unfinished upload of the day is left and
// that the key holds an object only when want says so.
func (f *fixture) noObjectNorUpload(t *testing.T, mp string, day time.Time, want bool) {
	t.Helper()
	key := Key(mp, day)
	if _, ok, err := f.s3.Head(f.ctx, key); err != nil || ok != want {
		t.Fatalf("object %s exists: %v (err %v), want %v", key, ok, err, want)
	}
	ups, err := f.s3.Client.ListMultipartUploads(f.ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(f.s3.Bucket), Prefix: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Fatalf("%d unfinished uploads left for %s", len(ups.Uploads), key)
	}
}

func TestProduceBusy(t *testing.T) {
	f := newFixture(t)
	mp := Marketplace{ID: uuid.NewString()}
	day := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	_, release, err := redisstore.Lease(f.ctx, f.rdb, "ec:lock:scored-attribution:"+mp.ID+":2026-01-05", lockTTL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Produce(f.ctx, mp, day); !errors.Is(err, ErrBusy) {
		t.Fatalf("while locked: err %v, want ErrBusy", err)
	}
	release()
	if _, err := f.svc.Produce(f.ctx, mp, day); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// TestUploadSeveralParts: an upload larger than a part is stored whole, and
// the key shows the previous object until Complete.
func TestUploadSeveralParts(t *testing.T) {
	f := newFixture(t)
	key := "test/" + uuid.NewString()
	data := make([]byte, 2*s3store.MinPartSize+12345)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	up, err := f.s3.NewUpload(f.ctx, key, "application/octet-stream", map[string]string{"k": "v"}, s3store.MinPartSize)
	if err != nil {
		t.Fatal(err)
	}
	var parts atomic.Int32 // parts are sent in the background
	up.AfterPart = func(n int) { parts.Store(int32(n)) }
	for i := 0; i < len(data); i += 1 << 20 {
		if _, err := up.Write(data[i:min(i+1<<20, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := f.s3.Head(f.ctx, key); ok || parts.Load() > 2 {
		t.Fatalf("before Complete: object visible %v, %d parts sent (want at most 2)", ok, parts.Load())
	}
	size, err := up.Complete()
	if err != nil || size != int64(len(data)) || parts.Load() != 3 {
		t.Fatalf("complete: size %d, %d parts, %v", size, parts.Load(), err)
	}
	out, err := f.s3.Client.GetObject(f.ctx, &s3.GetObjectInput{Bucket: aws.String(f.s3.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	got, _ := io.ReadAll(out.Body)
	if !bytes.Equal(got, data) || out.Metadata["k"] != "v" {
		t.Fatalf("stored %d bytes (equal %v), metadata %v", len(got), bytes.Equal(got, data), out.Metadata)
	}
}

func TestDueDays(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	tests := []struct {
		name     string
		now      time.Time
		loc      *time.Location
		grace    time.Duration
		closed   []string // provisional candidates, newest first
		finalDay string   // newest day that must be final
	}{
		{"utc after grace", time.Date(2026, 3, 10, 3, 0, 0, 0, time.UTC), time.UTC, 2 * time.Hour, []string{"2026-03-09", "2026-03-08"}, "2026-02-07"},
		{"utc within grace", time.Date(2026, 3, 10, 1, 59, 0, 0, time.UTC), time.UTC, 2 * time.Hour, []string{"2026-03-08", "2026-03-07"}, "2026-02-06"},
		// 2026-03-10 02:00Z is 22:00 on the 9th in New York: the 9th has not closed.
		{"new york", time.Date(2026, 3, 10, 2, 0, 0, 0, time.UTC), ny, time.Hour, []string{"2026-03-08", "2026-03-07"}, "2026-02-06"},
		{"new york after midnight plus grace", time.Date(2026, 3, 10, 5, 0, 0, 0, time.UTC), ny, time.Hour, []string{"2026-03-09", "2026-03-08"}, "2026-02-06"}, // 30 days before 04:00Z is 23:00 on 02-07 in New York
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due := dueDays(tt.now, tt.loc, tt.grace, 2)
			var closed []string
			final := ""
			for _, x := range due {
				if x.final {
					if final == "" {
						final = x.day.Format(time.DateOnly)
					}
					continue
				}
				closed = append(closed, x.day.Format(time.DateOnly))
				if DayEnd(x.day, tt.loc).Add(tt.grace).After(tt.now) {
					t.Errorf("%s is due before its end plus grace", x.day.Format(time.DateOnly))
				}
			}
			if fmt.Sprint(closed) != fmt.Sprint(tt.closed) || final != tt.finalDay {
				t.Errorf("closed %v final %s, want %v %s", closed, final, tt.closed, tt.finalDay)
			}
		})
	}
}

// TestSchedule: the scheduler writes a closed day's provisional file after
// the grace, and replaces it with the final one once the day is final.
func TestSchedule(t *testing.T) {
	f := newFixture(t)
	mp := Marketplace{ID: uuid.NewString(), Location: time.UTC}
	day := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	f.insert(t, []item{{mp: mp.ID, event: "s1", at: day.Add(10 * time.Hour), day: "2026-02-02", user: "u", unitMicros: 7, qty: 2,
		attributed: 1, reason: "click_same_product", score: 1, version: 1}})
	sch := Schedule{Grace: 3 * time.Hour, Tick: 50 * time.Millisecond, Marketplaces: func() []Marketplace { return []Marketplace{mp} }}
	runUntil := func(now time.Time, cond func() error) {
		t.Helper()
		svc := New(f.conn, f.s3, f.rdb, quiet)
		svc.now = func() time.Time { return now }
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx, sch) }()
		testenv.Eventually(t, 30*time.Second, cond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	}
	state := func(d time.Time) (bool, bool) {
		exists, final, err := f.svc.produced(f.ctx, mp.ID, d)
		if err != nil {
			t.Fatal(err)
		}
		return exists, final
	}
	// Within the grace: nothing for 02-02 (02-01 is due).
	runUntil(time.Date(2026, 2, 3, 2, 59, 0, 0, time.UTC), func() error {
		if ok, _ := state(day.AddDate(0, 0, -1)); !ok {
			return fmt.Errorf("02-01 not produced")
		}
		return nil
	})
	if ok, _ := state(day); ok {
		t.Fatal("02-02 produced within its grace")
	}
	runUntil(time.Date(2026, 2, 3, 3, 0, 0, 0, time.UTC), func() error {
		if ok, final := state(day); !ok || final {
			return fmt.Errorf("02-02: exists %v final %v; want provisional", ok, final)
		}
		return nil
	})
	runUntil(time.Date(2026, 3, 5, 3, 0, 0, 0, time.UTC), func() error {
		if ok, final := state(day); !ok || !final {
			return fmt.Errorf("02-02: exists %v final %v; want final", ok, final)
		}
		return nil
	})
	if recs, kv := f.read(t, mp.ID, day); len(recs) != 1 || recs[0].AmountMicros != 14 || kv["endcap.final"] != "true" {
		t.Fatalf("final file: %+v %v", recs, kv)
	}
}
