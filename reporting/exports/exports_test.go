package exports

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// stack is the real servers one test needs: ClickHouse (migrated), Redis,
// S3, kfake with the topics, and the entities log.
type stack struct {
	ctx     context.Context
	ch      clickhouse.Conn
	s3      *s3store.Store
	brokers []string
	kcl     *kgo.Client
	topics  kafka.Topics
	log     *statelog.Log
	svc     *Service
	opts    Options
}

func newStack(t *testing.T) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("needs ClickHouse, Redis, S3 and Kafka")
	}
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	st := &stack{ctx: ctx, brokers: brokers}
	st.ch = testenv.ClickHouse(t, ctx, cfg)
	st.kcl, st.topics = testenv.Topics(t, ctx, cfg, brokers, 2)
	st.s3 = s3store.Open(s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey})
	if err := st.s3.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	st.opts = Options{ClickHouse: st.ch, S3: st.s3, Redis: rdb, Kafka: st.kcl, JobsTopic: st.topics.Exports, DailyQuota: 100,
		Log: testenv.Logger(t)}
	st.log = testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: cfg.KafkaTopicPrefix, Log: testenv.Logger(t)},
		func(l *statelog.Log) { st.svc = New(l, st.opts) })
	return st
}

// workers runs export workers until the returned stop is called.
func (st *stack) workers(t *testing.T, wo WorkerOptions) (stop func()) {
	wo.Brokers = st.brokers
	ctx, cancel := context.WithCancel(st.ctx)
	done := make(chan error, 1)
	go func() { done <- st.svc.RunWorkers(ctx, wo) }()
	var once atomic.Bool
	stop = func() {
		if once.Swap(true) {
			return
		}
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("workers did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// rollupRow is one row of rollup_daily with the columns the tests vary.
type rollupRow struct {
	mp, day, campaign, name, device, ext string
	sponsored                            uint8
	pageValue                            []string
	imps, clicks, cImps, cClicks         uint64
	spImp, spClk                         int64 // micros
	spImpSub, spClk2Sub                  uint64
	purchases                            []string
	qty, amount                          int64
	rImps, rClicks                       uint64 // refused for a budget
	vendor                               string // "" is v1
}

func (st *stack) insert(t *testing.T, rows ...rollupRow) {
	t.Helper()
	for _, r := range rows {
		ids := make([]string, len(r.purchases))
		for i, p := range r.purchases {
			ids[i] = "'" + p + "'"
		}
		pv := make([]string, len(r.pageValue))
		for i, p := range r.pageValue {
			pv[i] = "'" + p + "'"
		}
		vendor := r.vendor
		if vendor == "" {
			vendor = "v1"
		}
		q := fmt.Sprintf(`INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored, vendor_id, campaign_id, campaign_name,
			external_campaign_id, device_type, page_value, impressions, clicks, charged_impressions, charged_clicks,
			ad_spent_impressions_micros, ad_spent_impressions_sub_micros, ad_spent_clicks_micros, ad_spent_clicks_sub_micros,
			purchases, quantity, total_purchase_amount_micros, budget_refused_impressions, budget_refused_clicks)
			SELECT toUUID('%s'), toDate('%s'), 'USD', %d, '%s', '%s', '%s', '%s', '%s', [%s], %d, %d, %d, %d, %d, %d, %d, %d,
			arrayReduce('uniqExactState', arrayFilter(x -> x != '', ['' %s])), %d, %d, %d, %d`,
			r.mp, r.day, r.sponsored, vendor, r.campaign, r.name, r.ext, r.device, strings.Join(pv, ","), r.imps, r.clicks, r.cImps, r.cClicks,
			r.spImp, r.spImpSub, r.spClk, r.spClk2Sub, prefixComma(ids), r.qty, r.amount, r.rImps, r.rClicks)
		if err := st.ch.Exec(st.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

func prefixComma(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return "," + strings.Join(ss, ",")
}

// waitDone polls an export until it is completed or failed.
func (st *stack) waitDone(t *testing.T, mp, id string) View {
	t.Helper()
	var v View
	testenv.Eventually(t, 60*time.Second, func() error {
		var err error
		if v, err = st.svc.Get(st.ctx, mp, id); err != nil {
			return err
		}
		if !v.Status.Terminal() {
			return fmt.Errorf("export %s is %s", id, v.Status)
		}
		return nil
	})
	return v
}

func download(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("download: %d %v %.200s", resp.StatusCode, err, b)
	}
	return b
}

// The rows of an export are the hand-computed sums of the rollup rows of
// the marketplace's window, grouped by the requested dimensions in the
// order sent, identical in CSV and Parquet.
func TestExportRows(t *testing.T) {
	st := newStack(t)
	st.workers(t, WorkerOptions{Workers: 2})
	mp, other := uuid.NewString(), uuid.NewString()
	today := time.Now().UTC()
	d1, d2, before := today.AddDate(0, 0, -2).Format(time.DateOnly), today.AddDate(0, 0, -1).Format(time.DateOnly), today.AddDate(0, 0, -9).Format(time.DateOnly)
	st.insert(t,
		// c1 on d1: a CPC interaction row and an attributed-purchase row of the same grain.
		rollupRow{mp: mp, day: d1, campaign: "c1", name: "Spring, \"best\"", device: "mobile", sponsored: 1, pageValue: []string{"shoes"},
			imps: 10, clicks: 4, cClicks: 3, spClk: 1_666_668, rClicks: 1},
		rollupRow{mp: mp, day: d1, campaign: "c1", name: "Spring, \"best\"", device: "mobile", sponsored: 1, pageValue: []string{"shoes"},
			purchases: []string{"pur-1", "pur-2"}, qty: 3, amount: 60_000_000},
		// c1 on d1 on desktop: the same purchase pur-1 (another of its items).
		rollupRow{mp: mp, day: d1, campaign: "c1", name: "Spring, \"best\"", device: "desktop", sponsored: 1,
			imps: 5, purchases: []string{"pur-1"}, qty: 1, amount: 2_500_000},
		// c2 (CPM) on d2: sub-micro spend.
		rollupRow{mp: mp, day: d2, campaign: "c2", name: "Autumn", device: "mobile", sponsored: 1,
			imps: 3, cImps: 3, spImp: 7_036, spImpSub: 2_010},
		// c2 on d2 on desktop: impressions refused for its budget.
		rollupRow{mp: mp, day: d2, campaign: "c2", name: "Autumn", device: "desktop", sponsored: 1, imps: 2, rImps: 2},
		// Organic with the marketplace's own campaign id: exported.
		rollupRow{mp: mp, day: d2, ext: "ext-9", device: "mobile", imps: 100, clicks: 1},
		// Names and ids a spreadsheet would run as formulas.
		rollupRow{mp: mp, day: before, campaign: "=c9", name: `=HYPERLINK("https://evil.example","x")`, device: "-mobile", sponsored: 1, imps: 1, vendor: "@v9"},
		rollupRow{mp: mp, day: before, campaign: "+c8", name: "\t=1+1", device: "\r=2", sponsored: 1, imps: 1},
		// Organic without a campaign, another marketplace, a day outside the window: not exported.
		rollupRow{mp: mp, day: d2, device: "mobile", imps: 1000, clicks: 50},
		rollupRow{mp: other, day: d1, campaign: "c1", sponsored: 1, imps: 77, clicks: 7},
		rollupRow{mp: mp, day: before, campaign: "c1", sponsored: 1, imps: 88, clicks: 8},
	)
	start, end := today.AddDate(0, 0, -7).Format(time.DateOnly), today.Format(time.DateOnly)
	// Text cells beginning with =, +, -, @, a tab or CR get an apostrophe
	// in the CSV file; Parquet keeps them as they are. csvRows: the CSV's
	// first rows where they differ from want (Parquet's); starts: a window
	// that starts earlier.
	csvRows := map[string][][]string{"formulas": {
		{"", "", "mobile", "v1", "100"},
		{"'+c8", "'\t=1+1", "'\r=2", "v1", "1"},
		{"'=c9", `'=HYPERLINK("https://evil.example","x")`, "'-mobile", "'@v9", "1"},
	}}
	starts := map[string]string{"formulas": before}
	for _, tc := range []struct {
		name       string
		dims, mets []string
		want       [][]string
	}{
		{"formulas", []string{"campaign_id", "campaign_name", "device_type", "vendor_id"}, []string{"impressions"},
			[][]string{
				{"", "", "mobile", "v1", "100"},
				{"+c8", "\t=1+1", "\r=2", "v1", "1"},
				{"=c9", `=HYPERLINK("https://evil.example","x")`, "-mobile", "@v9", "1"},
				{"c1", "", "", "v1", "88"},
				{"c1", "Spring, \"best\"", "desktop", "v1", "5"},
				{"c1", "Spring, \"best\"", "mobile", "v1", "10"},
				{"c2", "Autumn", "desktop", "v1", "2"},
				{"c2", "Autumn", "mobile", "v1", "3"},
			}},
		{"campaign and day", []string{"campaign_id", "day_local"},
			[]string{"impressions", "clicks", "charged_clicks", "ad_spend", "cpc", "ctr", "purchase_count", "quantity", "total_purchase_amount", "roas"},
			[][]string{
				{"", d2, "100", "1", "0", "0", "", "0.01", "0", "0", "0", ""},
				// 1,666,668 µ / 3 clicks = 0.555556; pur-1 and pur-2 once each although pur-1 is in two rows.
				{"c1", d1, "15", "4", "3", "1.666668", "0.555556", "0.26666666666666666", "2", "4", "62.5", "37.49997000002400"},
				{"c2", d2, "5", "0", "0", "0.00703801", "", "0", "0", "0", "0", "0"},
			}},
		{"metrics first in another order", []string{"day_local", "campaign_name", "device_type", "page_value"},
			[]string{"cpm", "ad_spent_impressions", "ad_spent_clicks", "charged_impressions", "ad_spent_attributed_purchases", "charged_attributed_purchases", "acos"},
			[][]string{
				{d1, `Spring, "best"`, "desktop", "[]", "", "0", "0", "0", "0", "0", "0"},
				{d1, `Spring, "best"`, "mobile", `["shoes"]`, "", "0", "1.666668", "0", "0", "0", "0.0277778"},
				{d2, "", "mobile", "[]", "", "0", "0", "0", "0", "0", ""},
				{d2, "Autumn", "desktop", "[]", "", "0", "0", "0", "0", "0", ""},
				// 7,036 µ + 2,010 thousandths = 7.03801 ... per 3 impressions × 1000 = 2.346003333
				{d2, "Autumn", "mobile", "[]", "2.346003333", "0.00703801", "0", "3", "0", "0", ""},
			}},
		{"external campaign", []string{"external_campaign_id"}, []string{"impressions"},
			[][]string{{"", "20"}, {"ext-9", "100"}}},
		// The Endcap extension metrics: what the budget cap refused.
		{"refused for budgets", []string{"campaign_id"},
			[]string{"impressions", "charged_impressions", "budget_refused_impressions", "clicks", "charged_clicks", "budget_refused_clicks", "ad_spend"},
			[][]string{
				{"", "100", "0", "0", "1", "0", "0", "0"},
				{"c1", "15", "0", "0", "4", "3", "1", "1.666668"},
				{"c2", "5", "3", "2", "0", "0", "0", "0.00703801"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2][][]string
			for i, format := range []string{FormatCSV, FormatParquet} {
				from := start
				if s, ok := starts[tc.name]; ok {
					from = s
				}
				e, err := st.svc.Create(st.ctx, mp, Request{Dataset: DatasetMonitoringMetrics, Dimensions: tc.dims, Metrics: tc.mets,
					Granularity: GranularityDayLocal, StartDate: from, EndDate: end, Format: format})
				if err != nil {
					t.Fatal(err)
				}
				v := st.waitDone(t, mp, e.ID)
				if v.Status != StatusCompleted || v.URL == "" || v.RowCount == nil || *v.RowCount != int64(len(tc.want)) {
					t.Fatalf("%s export: %+v", format, v)
				}
				data := download(t, v.URL)
				if int64(len(data)) != *v.SizeBytes {
					t.Errorf("%s: downloaded %d bytes, record says %d", format, len(data), *v.SizeBytes)
				}
				header, rows, err := ReadFile(format, data)
				if err != nil {
					t.Fatal(err)
				}
				if want := append(append([]string{}, tc.dims...), tc.mets...); !reflect.DeepEqual(header, want) {
					t.Errorf("%s header %q, want %q", format, header, want)
				}
				got[i] = rows
			}
			wantCSV := slices.Clone(tc.want)
			copy(wantCSV, csvRows[tc.name])
			fixRatios(tc.want, got[1])
			fixRatios(wantCSV, got[0])
			if !reflect.DeepEqual(got[1], tc.want) {
				t.Errorf("parquet rows\n%q\nwant\n%q", got[1], tc.want)
			}
			if !reflect.DeepEqual(got[0], wantCSV) {
				t.Errorf("csv rows\n%q\nwant\n%q", got[0], wantCSV)
			}
		})
	}
}

// fixRatios: the float ratios in want are written to the precision a
// person computes them; a got value equal to it at 1e-9 relative is taken.
func fixRatios(want, got [][]string) {
	for i := range want {
		for j := range want[i] {
			if i < len(got) && j < len(got[i]) && want[i][j] != got[i][j] {
				var a, b float64
				if _, err := fmt.Sscan(want[i][j], &a); err != nil {
					continue
				}
				if _, err := fmt.Sscan(got[i][j], &b); err != nil {
					continue
				}
				if d := a - b; d < 1e-9*max(a, -a) && d > -1e-9*max(a, -a) && strings.Contains(want[i][j], ".") {
					want[i][j] = got[i][j]
				}
			}
		}
	}
}

// A worker stopped mid-export (after its first uploaded part) leaves no
// object; the job is taken again by the next worker of the group, which
// writes the whole file once.
func TestExportWorkerStoppedMidway(t *testing.T) {
	st := newStack(t)
	mp := uuid.NewString()
	day := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	const n = 120_000 // about 7 MB of CSV: two parts of 5 MiB
	if err := st.ch.Exec(st.ctx, fmt.Sprintf(`INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored, campaign_id, entity_id,
		campaign_name, impressions, clicks, ad_spent_clicks_micros)
		SELECT toUUID('%s'), toDate('%s'), 'USD', 1, concat('campaign-', toString(number %% 1000)), concat('product-', toString(number)),
		'a campaign with a rather long name', number %% 97, number %% 7, (number %% 7) * 123457 FROM system.numbers LIMIT %d`, mp, day, n)); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	var parts atomic.Int32
	stop := st.workers(t, WorkerOptions{Workers: 1, PartSize: s3store.MinPartSize, afterPart: func(int) {
		if parts.Add(1) == 1 {
			close(stopped)
		}
	}})
	e, err := st.svc.Create(st.ctx, mp, Request{Dataset: DatasetMonitoringMetrics, Dimensions: []string{"campaign_name", "entity_id"},
		Metrics: []string{"impressions", "clicks", "ad_spend"}, Granularity: GranularityDayLocal, StartDate: day, EndDate: day})
	if err != nil {
		t.Fatal(err)
	}
	<-stopped
	stop() // the first part is stored, the upload is not complete
	v, err := st.svc.Get(st.ctx, mp, e.ID)
	if err != nil || v.Status != StatusRunning {
		t.Fatalf("after the stop: %+v %v, want running", v, err)
	}
	key := ObjectKey(mp, &Export{ID: e.ID, Request: Request{Format: FormatCSV}})
	if _, ok, err := st.s3.Head(st.ctx, key); err != nil || ok {
		t.Fatalf("an object exists after the stop (%v, %v)", ok, err)
	}
	st.workers(t, WorkerOptions{Workers: 1})
	v = st.waitDone(t, mp, e.ID)
	if v.Status != StatusCompleted || *v.RowCount != n {
		t.Fatalf("after the restart: %+v", v)
	}
	rec, _, _ := st.svc.items.Get(mp, e.ID)
	if rec.Attempts != 2 {
		t.Errorf("attempts %d, want 2", rec.Attempts)
	}
	_, rows, err := ReadFile(FormatCSV, download(t, v.URL))
	if err != nil || len(rows) != n {
		t.Fatalf("file: %d rows, %v", len(rows), err)
	}
}

var _ = slog.Default

// The sweep requeues an export whose job was lost (it then completes), and
// deletes the records of exports finished more than RecordRetention ago.
func TestExportSweep(t *testing.T) {
	st := newStack(t)
	mp := uuid.NewString()
	day := time.Now().UTC().Format(time.DateOnly)
	req := Request{Dataset: DatasetMonitoringMetrics, Dimensions: []string{"day_local"}, Metrics: []string{"clicks"},
		Granularity: GranularityDayLocal, StartDate: day, EndDate: day, Format: FormatCSV}
	// A pending record without a job (the job append failed after it).
	lost := Export{ID: uuid.NewString(), Status: StatusPending, Dataset: req.Dataset, CreatedAt: time.Now().UTC().Add(-time.Hour), Request: req}
	if _, err := st.svc.items.Put(st.ctx, mp, lost.ID, 0, lost); err != nil {
		t.Fatal(err)
	}
	// A completed export, finished 31 days ago.
	fin := time.Now().UTC().Add(-RecordRetention - 24*time.Hour)
	old := Export{ID: uuid.NewString(), Status: StatusCompleted, Dataset: req.Dataset, CreatedAt: fin, FinishedAt: &fin, StartedAt: &fin, Request: req, Key: "exports/x"}
	if _, err := st.svc.items.Put(st.ctx, mp, old.ID, 0, old); err != nil {
		t.Fatal(err)
	}
	// A recent pending export is left alone (its job may just be queued).
	recent, err := st.svc.Create(st.ctx, mp, req)
	if err != nil {
		t.Fatal(err)
	}
	st.svc.sweepOnce(st.ctx)
	if _, err := st.svc.Get(st.ctx, mp, old.ID); err != ErrNotFound {
		t.Errorf("expired record: %v, want ErrNotFound", err)
	}
	st.svc.sweepOnce(st.ctx) // a second sweep within requeueAfter appends no second job
	st.workers(t, WorkerOptions{Workers: 1})
	for _, id := range []string{lost.ID, recent.ID} {
		if v := st.waitDone(t, mp, id); v.Status != StatusCompleted {
			t.Errorf("export %s: %+v", id, v)
		}
	}
	// Jobs on the topic: the recent export's and one requeue of the lost one.
	end, err := kafka.EndOffsets(st.ctx, st.kcl, st.topics.Exports)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, o := range end {
		n += o
	}
	if n != 2 {
		t.Errorf("%d jobs appended, want 2", n)
	}
}

// Before its query an export recomputes the days of its window that were
// never computed, whose watermark is unknown or more than MaxStaleness
// before the request, and never a final day.
func TestExportFreshness(t *testing.T) {
	st := newStack(t)
	// Recent days (their watermarks are not final), the first one marked
	// final.
	old := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -8)
	record := func(day, computed, asOf time.Time) {
		var ms int64
		if !asOf.IsZero() {
			ms = asOf.UnixMilli()
		}
		if err := st.ch.Exec(st.ctx, `INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms) SELECT toDate(?), toDateTime(?), 0, toUInt64(?)`,
			day.Format(time.DateOnly), computed.Unix(), ms); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now().UTC()
	record(old, created, rollups.FinalAfter(old))                                                    // final
	record(old.AddDate(0, 0, 1), created, time.Time{})                                               // recomputed, watermark unknown: stale
	record(old.AddDate(0, 0, 2), created.Add(-time.Minute), created.Add(-time.Minute))               // within MaxStaleness: fresh
	record(old.AddDate(0, 0, 3), created.Add(-time.Minute), created.Add(-3*time.Minute))             // started recently, folded long before: stale
	record(old.AddDate(0, 0, 5), created.Add(-10*time.Minute), created.Add(-10*time.Minute))         // stale
	record(old.AddDate(0, 0, 5), created.Add(-30*time.Second), created.Add(-31*time.Second))         // recomputed again since: fresh
	record(old.AddDate(0, 0, 6), created.Add(-30*time.Second), old.AddDate(0, 0, 6).Add(-time.Hour)) // watermark before the day: stale
	// old+4 never computed.
	var got []string
	wo := WorkerOptions{MaxStaleness: 2 * time.Minute, Refresh: func(_ context.Context, days []time.Time) error {
		for _, d := range days {
			got = append(got, d.Format(time.DateOnly))
		}
		return nil
	}}
	e := &Export{ID: uuid.NewString(), CreatedAt: created, Request: Request{StartDate: old.Format(time.DateOnly), EndDate: old.AddDate(0, 0, 6).Format(time.DateOnly)}}
	if err := st.svc.ensureFresh(st.ctx, e, &wo); err != nil {
		t.Fatal(err)
	}
	want := []string{old.AddDate(0, 0, 1).Format(time.DateOnly), old.AddDate(0, 0, 3).Format(time.DateOnly),
		old.AddDate(0, 0, 4).Format(time.DateOnly), old.AddDate(0, 0, 6).Format(time.DateOnly)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recomputed %v, want %v", got, want)
	}

	// With MaxStaleness 0, every day that is not final and whose
	// watermark is before the request.
	got = nil
	wo.MaxStaleness = 0
	if err := st.svc.ensureFresh(st.ctx, e, &wo); err != nil {
		t.Fatal(err)
	}
	want = []string{old.AddDate(0, 0, 1).Format(time.DateOnly), old.AddDate(0, 0, 2).Format(time.DateOnly), old.AddDate(0, 0, 3).Format(time.DateOnly),
		old.AddDate(0, 0, 4).Format(time.DateOnly), old.AddDate(0, 0, 5).Format(time.DateOnly), old.AddDate(0, 0, 6).Format(time.DateOnly)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MaxStaleness 0: recomputed %v, want %v", got, want)
	}
}

// A completed export carries its window's watermark: the earliest of the
// days that can still change (every day's when all are final), with
// partial when the window's last day had not ended by then or a day's
// watermark is unknown; the Parquet file says the same in its metadata.
func TestExportDataAsOf(t *testing.T) {
	st := newStack(t)
	st.workers(t, WorkerOptions{Workers: 1})
	mp := uuid.NewString()
	now := time.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	old := today.AddDate(0, 0, -100)
	record := func(day time.Time, asOf time.Time) {
		if err := st.ch.Exec(st.ctx, `INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms) SELECT toDate(?), toDateTime(?), 0, toUInt64(?)`,
			day.Format(time.DateOnly), asOf.Unix(), asOf.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	ms := func(t time.Time) time.Time { return t.Truncate(time.Millisecond) }
	record(today.AddDate(0, 0, -3), ms(now.Add(-5*time.Minute)))
	record(today.AddDate(0, 0, -2), ms(now.Add(-7*time.Minute))) // the earliest
	record(today.AddDate(0, 0, -1), ms(now.Add(-2*time.Minute)))
	record(today, ms(now.Add(-time.Minute)))
	record(old, old.AddDate(0, 0, 40))                  // final
	record(old.AddDate(0, 0, 1), old.AddDate(0, 0, 50)) // final, the latest
	record(old.AddDate(0, 0, 3), old.AddDate(0, 0, 20)) // not final

	for _, tc := range []struct {
		name       string
		start, end time.Time
		asOf       time.Time // zero: none
		partial    bool
	}{
		{"today is not over", today.AddDate(0, 0, -3), today, ms(now.Add(-7 * time.Minute)), true},
		{"closed days", today.AddDate(0, 0, -3), today.AddDate(0, 0, -2), ms(now.Add(-7 * time.Minute)), false},
		{"final days", old, old.AddDate(0, 0, 1), old.AddDate(0, 0, 50), false},
		{"a final day and one that is not", old.AddDate(0, 0, 1), old.AddDate(0, 0, 3), time.Time{}, true}, // old+2 never computed
		{"not final", old.AddDate(0, 0, 3), old.AddDate(0, 0, 3), old.AddDate(0, 0, 20), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := st.svc.Create(st.ctx, mp, Request{Dataset: DatasetMonitoringMetrics, Dimensions: []string{"day_local"}, Metrics: []string{"clicks"},
				Granularity: GranularityDayLocal, StartDate: tc.start.Format(time.DateOnly), EndDate: tc.end.Format(time.DateOnly), Format: FormatParquet})
			if err != nil {
				t.Fatal(err)
			}
			v := st.waitDone(t, mp, e.ID)
			if v.Status != StatusCompleted || v.Partial == nil || *v.Partial != tc.partial {
				t.Fatalf("export %+v, want partial %v", v, tc.partial)
			}
			if (v.DataAsOf == nil) != tc.asOf.IsZero() || (v.DataAsOf != nil && !v.DataAsOf.Equal(tc.asOf)) {
				t.Fatalf("dataAsOf %v, want %v", v.DataAsOf, tc.asOf)
			}
			f, err := parquet.OpenFile(bytes.NewReader(download(t, v.URL)), *v.SizeBytes)
			if err != nil {
				t.Fatal(err)
			}
			meta, _ := f.Lookup("endcap.data_as_of")
			if p, _ := f.Lookup("endcap.partial"); p != strconv.FormatBool(tc.partial) || (meta != "") != !tc.asOf.IsZero() ||
				(meta != "" && meta != timestamp.Format(tc.asOf)) {
				t.Errorf("metadata endcap.partial %q endcap.data_as_of %q", p, meta)
			}
		})
	}
}
