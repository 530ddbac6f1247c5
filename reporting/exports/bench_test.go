package exports

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

// The export target (docs/design/performance.md, Exports): 10 million fact rows at
// 200,000 rows/s or more end to end (ClickHouse to a file in S3), with the
// worker's memory under 200 MB throughout.
const (
	benchDefaultRows = 300_000 // ENDCAP_TEST_EXPORT_ROWS; CI stays quick
	benchDays        = 31      // the longest window a request may cover
	benchMaxHeap     = 200 << 20
	benchSampleEvery = 50 * time.Millisecond
)

// benchRequest is the exported shape: one row per (day, campaign, product,
// device), with counts, an amount summed, a ratio and a per-unit price.
func benchRequest(format string, first time.Time) Request {
	return Request{
		Dataset:     DatasetMonitoringMetrics,
		Dimensions:  []string{"day_local", "campaign_id", "entity_id", "device_type"},
		Metrics:     []string{"impressions", "clicks", "ad_spend", "ctr", "cpc"},
		Granularity: GranularityDayLocal,
		StartDate:   first.Format(time.DateOnly),
		EndDate:     first.AddDate(0, 0, benchDays-1).Format(time.DateOnly),
		Format:      format,
	}
}

// TestExportThroughput seeds rollup_daily with N rows of one marketplace
// over 31 days, every row its own (day_local, campaign_id, entity_id,
// device_type) group, and exports them as CSV and as Parquet with
// Service.produce, measuring wall time, rows/s, bytes and the process's
// peak memory (RSS and Go heap, sampled every 50 ms, nothing subtracted).
// Around the two exports it times the query in ClickHouse alone, the
// query's blocks sent and decoded, the rows read into cells with no file
// written, and the upload alone of as many bytes as the CSV file: the
// time splits between ClickHouse, the driver and scan, encoding, and the
// upload.
//
//	ENDCAP_TEST_EXPORT_ROWS=10000000 go test ./reporting/exports -run TestExportThroughput -count=1 -v -timeout 30m
//
// ENDCAP_TEST_EXPORT_MIN_RATE (rows/s), when set, also fails an export
// slower than that (off by default: shared CI machines are noisy).
// ENDCAP_TEST_EXPORT_HEAPPROFILE=<prefix> writes, per stage, the heap
// profile taken at the stage's peak of live heap to <prefix><stage>.heap.pb.gz
// (`go tool pprof -sample_index=inuse_space`).
func TestExportThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("throughput benchmark: not in -short")
	}
	n := benchEnvInt(t, "ENDCAP_TEST_EXPORT_ROWS", benchDefaultRows)
	minRate := benchEnvInt(t, "ENDCAP_TEST_EXPORT_MIN_RATE", 0)
	ctx, cancel := context.WithTimeout(t.Context(), 28*time.Minute)
	defer cancel()
	s := benchService(t, ctx)

	mp := uuid.NewString()
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -(benchDays + 5))
	t0 := time.Now()
	benchSeed(t, ctx, s.o.ClickHouse, mp, first, n)
	t.Logf("seeded %d rollup rows (marketplace %s, %s + %d days) in %s", n, mp, first.Format(time.DateOnly), benchDays, time.Since(t0).Round(time.Millisecond))

	var figs []benchFigures
	r := benchRequest(FormatCSV, first)
	if probs := r.Validate(time.Now()); len(probs) > 0 {
		t.Fatalf("benchmark request is invalid: %+v", probs)
	}
	p, err := newPlan(mp, "", &r)
	if err != nil {
		t.Fatal(err)
	}

	// ClickHouse alone: the statement's rows counted in the server (on
	// 18.16 the subquery's ORDER BY still runs; a current server may drop
	// it), then the statement with FORMAT Null, which the native protocol
	// ignores: the blocks still reach the driver and are decoded, not
	// scanned.
	figs = append(figs, benchMeasure(t, "server-count", func() (int64, int64, error) {
		var c uint64
		err := s.o.ClickHouse.QueryRow(ctx, "SELECT count() FROM ("+p.sql+")", p.args...).Scan(&c)
		if err == nil && c != uint64(n) {
			err = fmt.Errorf("the query has %d rows, want %d", c, n)
		}
		return int64(c), 0, err
	}))
	figs = append(figs, benchMeasure(t, "server+transfer", func() (int64, int64, error) {
		return int64(n), 0, s.o.ClickHouse.Exec(ctx, p.sql+"\nFORMAT Null", p.args...)
	}))

	// ClickHouse plus the driver's decoding and the scan into cells.
	var firstRow time.Duration
	figs = append(figs, benchMeasure(t, "query+scan", func() (int64, int64, error) {
		var rows int64
		start := time.Now()
		err := query(ctx, s.o.ClickHouse, p, func([]cell) error {
			if rows == 0 {
				firstRow = time.Since(start)
			}
			rows++
			return nil
		})
		return rows, 0, err
	}))
	figs[len(figs)-1].firstRow = firstRow

	sizes := map[string]int64{}
	for _, format := range []string{FormatCSV, FormatParquet} {
		e := &Export{ID: uuid.NewString(), Status: StatusRunning, Dataset: DatasetMonitoringMetrics,
			CreatedAt: time.Now().UTC(), Request: benchRequest(format, first)}
		var res result
		f := benchMeasure(t, "produce-"+format, func() (int64, int64, error) {
			var err error
			res, err = s.produce(ctx, mp, e, &WorkerOptions{})
			return res.rows, res.size, err
		})
		figs = append(figs, f)
		sizes[format] = res.size
		if res.rows != int64(n) {
			t.Errorf("%s: exported %d rows, want %d (one per seeded group)", format, res.rows, n)
		}
		info, ok, err := s.o.S3.Head(ctx, res.key)
		switch {
		case err != nil:
			t.Errorf("%s: head %s: %v", format, res.key, err)
		case !ok:
			t.Errorf("%s: object %s does not exist after produce", format, res.key)
		case info.Size != res.size || res.size <= 0:
			t.Errorf("%s: object %s is %d bytes, produce reported %d", format, res.key, info.Size, res.size)
		}
		if f.peak.heap >= benchMaxHeap {
			t.Errorf("%s: peak Go heap %s, want under %s (the pipeline streams: it must not grow with the rows)",
				format, benchMB(f.peak.heap), benchMB(benchMaxHeap))
		}
		if minRate > 0 && f.rate() < float64(minRate) {
			t.Errorf("%s: %.0f rows/s, want at least %d", format, f.rate(), minRate)
		}
	}

	// The upload alone: as many bytes as the CSV file, through the same
	// multipart upload, in the CSV writer's 256 KiB writes.
	figs = append(figs, benchMeasure(t, "upload-only-csv-bytes", func() (int64, int64, error) {
		size, err := benchUpload(ctx, s.o.S3, "bench/"+uuid.NewString(), sizes[FormatCSV])
		return int64(n), size, err
	}))
	benchLogTable(t, n, figs)
}

// benchUpload writes size bytes to key with an s3store.Upload.
func benchUpload(ctx context.Context, st *s3store.Store, key string, size int64) (int64, error) {
	up, err := st.NewUpload(ctx, key, "application/octet-stream", nil, 0)
	if err != nil {
		return 0, err
	}
	defer up.Abort()
	chunk := bytes.Repeat([]byte("2026-01-01,campaign-1234,product-123456,desktop,1234,56,7.654321,0.045,0.136\n"), 256<<10/78)
	for left := size; left > 0; {
		k := min(left, int64(len(chunk)))
		if _, err := up.Write(chunk[:k]); err != nil {
			return 0, err
		}
		left -= k
	}
	return up.Complete()
}

// benchService is a Service with only what produce needs: ClickHouse
// (migrated, a database of its own) and a bucket of its own. produce uses
// neither Redis, Kafka nor the entities log.
func benchService(t *testing.T, ctx context.Context) *Service {
	t.Helper()
	env := testenv.Get(t)
	cfg := env.Config(t, []string{"127.0.0.1:1"})
	conn := testenv.ClickHouse(t, ctx, cfg)
	st := s3store.Open(s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket,
		AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey})
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	return &Service{o: Options{ClickHouse: conn, S3: st, Log: testenv.Logger(t), Now: time.Now}}
}

// benchSeedSQL inserts the rows of one day, all built by the server from
// system.numbers. Row number n (0 ≤ n < N) goes to day n % 31; k =
// intDiv(n, 62) is its product, sold by campaign k % 5000 of vendor
// k % 5000 % 700; n % 2 picks the device. Within a block of 62 numbers
// (n = 62k + r) the pair (r % 31, r % 2) differs for every r because 31 is
// odd, so each product has exactly one row per day and device: N rows, N
// distinct (day_local, campaign_id, entity_id, device_type) groups. Every
// fourth product is CPM (charged impressions, sub-micro prices), the rest
// CPC; about one row in seven with clicks has attributed purchases.
const benchSeedSQL = `INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored, vendor_id,
	campaign_id, campaign_type, status, is_active, ad_format, charge_type, entity_type, entity_id, device_type,
	page_type, placement_page, impressions, clicks, charged_impressions, charged_clicks,
	ad_spent_impressions_micros, ad_spent_impressions_sub_micros, ad_spent_clicks_micros, ad_spent_clicks_sub_micros,
	attributed_items, purchases, quantity, total_purchase_amount_micros)
SELECT toUUID(?), toDate(?) + ?, 'USD', 1, concat('vendor-', toString(k % 5000 % 700)),
	concat('campaign-', toString(k % 5000)), 'sponsored_products', 'active', 1, 'listing',
	if(k % 4 = 0, 'CPM', 'CPC'), 'product', concat('product-', toString(k)), if(n % 2 = 0, 'desktop', 'mobile'),
	'search', toUInt32(1 + k % 5), imp, clk, if(k % 4 = 0, imp, 0), if(k % 4 = 0, 0, clk),
	if(k % 4 = 0, toInt64(imp * (1500 + n % 700)), 0), if(k % 4 = 0, n % 1000, 0),
	if(k % 4 = 0, 0, toInt64(clk * (150000 + n % 350000))), 0,
	qty, arrayReduce('uniqExactState', if(qty > 0, [concat('purchase-', toString(n))], emptyArrayString())),
	toInt64(qty), toInt64(qty * (4990000 + (k % 100) * 250000))
FROM (
	SELECT ? + 31 * number AS n, intDiv(n, 62) AS k, 1 + (n * 2654435761) % 2000 AS imp,
		(n * 40503) % (intDiv(imp, 25) + 1) AS clk, if(clk > 0 AND n % 7 = 0, 1 + n % 3, 0) AS qty
	FROM system.numbers LIMIT ?
)`

// benchSeed fills rollup_daily with n rows of marketplace mp over the 31
// days from first: one INSERT ... SELECT per day, as the rollup job swaps
// in whole days (one part per day up to about 1M rows a day).
func benchSeed(t *testing.T, ctx context.Context, ch clickhouse.Conn, mp string, first time.Time, n int) {
	t.Helper()
	for d := range benchDays {
		rows := (n - d + benchDays - 1) / benchDays // numbers below n with n % 31 == d
		if rows <= 0 {
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := ch.Exec(ictx, benchSeedSQL, mp, first.Format(time.DateOnly), d, d, rows)
		cancel()
		if err != nil {
			t.Fatalf("seed day %d: %v", d, err)
		}
	}
	var got uint64
	if err := ch.QueryRow(ctx, `SELECT count() FROM rollup_daily WHERE marketplace_id = toUUID(?)`, mp).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != uint64(n) {
		t.Fatalf("seeded %d rows, want %d", got, n)
	}
}

// benchFigures are the measurements of one stage.
type benchFigures struct {
	stage    string
	rows     int64
	bytes    int64
	took     time.Duration
	firstRow time.Duration
	start    benchMem // when the stage began
	peak     benchMem
}

func (f benchFigures) rate() float64 { return float64(f.rows) / f.took.Seconds() }

// benchMeasure runs one stage after a full GC (so a stage does not inherit
// the previous one's garbage) while sampling memory. The stage's CPU
// samples carry the pprof label stage=<stage>, inherited by the goroutines
// it starts (the driver's block reader): with -cpuprofile,
// `go tool pprof -tagfocus=stage=produce-csv` shows one stage.
func benchMeasure(t *testing.T, stage string, run func() (rows, bytes int64, err error)) benchFigures {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	heapPrefix := os.Getenv("ENDCAP_TEST_EXPORT_HEAPPROFILE")
	sm := benchStartSampler(benchSampleEvery, heapPrefix != "")
	t0 := time.Now()
	var rows, size int64
	var err error
	pprof.Do(context.Background(), pprof.Labels("stage", stage), func(context.Context) { rows, size, err = run() })
	took := time.Since(t0)
	start, peak := sm.stop()
	if err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	if heapPrefix != "" && sm.heap.Len() > 0 {
		if err := os.WriteFile(heapPrefix+stage+".heap.pb.gz", sm.heap.Bytes(), 0o644); err != nil {
			t.Errorf("write heap profile: %v", err)
		}
	}
	return benchFigures{stage: stage, rows: rows, bytes: size, took: took, start: start, peak: peak}
}

func benchLogTable(t *testing.T, n int, figs []benchFigures) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "export of %d rows (%d days, 4 dimensions, 5 metrics), GOMAXPROCS=%d\n", n, benchDays, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "%-26s %8s %9s %12s %8s %10s %10s %10s %10s %10s\n",
		"stage", "seconds", "rows/s", "bytes", "1st row", "RSS start", "peak RSS", "peak heap", "peak live", "peak Go")
	for _, f := range figs {
		first, size := "", ""
		if f.firstRow > 0 {
			first = fmt.Sprintf("%.2fs", f.firstRow.Seconds())
		}
		if f.bytes > 0 {
			size = strconv.FormatInt(f.bytes, 10)
		}
		fmt.Fprintf(&b, "%-26s %8.2f %9.0f %12s %8s %10s %10s %10s %10s %10s\n", f.stage, f.took.Seconds(), f.rate(), size, first,
			benchMB(f.start.rss), benchMB(f.peak.rss), benchMB(f.peak.heap), benchMB(f.peak.live), benchMB(f.peak.total))
	}
	b.WriteString("server-count: SELECT count() FROM (query), ClickHouse alone; server+transfer: the query with FORMAT Null (native\n" +
		"protocol: blocks still sent and decoded, not scanned); query+scan: rows read into cells, no file;\n" +
		"upload-only-csv-bytes: as many bytes as the CSV file through an s3store.Upload alone.\n")
	b.WriteString("RSS: VmRSS of /proc/self/status; heap: Go heap in use (objects + unused spans); live: heap live after the last GC;\n" +
		"Go: all memory the Go runtime mapped (/memory/classes/total:bytes). Peaks of samples every 50 ms; nothing subtracted.")
	t.Log("\n" + b.String())
}

func benchMB(v uint64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MB", float64(v)/(1<<20))
}

// benchMem is one memory sample of the process.
type benchMem struct {
	rss   uint64 // VmRSS (0 where /proc is missing)
	heap  uint64 // heap objects + unused heap spans (MemStats.HeapInuse)
	live  uint64 // heap marked live by the last GC: what the stage holds
	total uint64 // everything the Go runtime mapped
}

func (m *benchMem) max(o benchMem) {
	m.rss, m.heap, m.live, m.total = max(m.rss, o.rss), max(m.heap, o.heap), max(m.live, o.live), max(m.total, o.total)
}

// benchSampler records the peak of samples taken every interval.
type benchSampler struct {
	quit  chan struct{}
	done  sync.WaitGroup
	first benchMem
	peak  benchMem
	// heap, when profiling, is the heap profile (live objects as of the
	// last GC) taken when the live heap last reached a new peak.
	heap *bytes.Buffer
}

func benchStartSampler(every time.Duration, profile bool) *benchSampler {
	s := &benchSampler{quit: make(chan struct{})}
	if profile {
		s.heap = new(bytes.Buffer)
	}
	ms := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	take := func() benchMem {
		metrics.Read(ms)
		return benchMem{rss: benchRSS(), heap: ms[0].Value.Uint64() + ms[1].Value.Uint64(), total: ms[2].Value.Uint64(), live: ms[3].Value.Uint64()}
	}
	s.first = take()
	s.peak = s.first
	observe := func() {
		m := take()
		if s.heap != nil && m.live > s.peak.live {
			s.heap.Reset()
			_ = pprof.Lookup("heap").WriteTo(s.heap, 0)
		}
		s.peak.max(m)
	}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				observe()
				return
			case <-tick.C:
				observe()
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the first sample and the peak.
func (s *benchSampler) stop() (benchMem, benchMem) {
	close(s.quit)
	s.done.Wait()
	return s.first, s.peak
}

// benchRSS is the process's resident set (VmRSS), 0 when unknown.
func benchRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func benchEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}
