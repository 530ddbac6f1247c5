package auction_test

// The memory an API process spends per product: the catalog, the campaigns
// and the auction index loaded cold from the entities topic, as a process
// loads them at start (docs/operations/operations.md, Memory).

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/perfbudget"
	"github.com/endcap/endcap/testkit/testenv"
)

// memProducts is how many products TestMemoryPerProduct loads.
const memProducts = 100_000

// appendTypicalProduct appends the log's record of product i: the catalog's
// typical product (docs/reference/catalog.md, Scale): a 60-character name, a
// 500-character description, one vendor of 1,000, 3 categories of 2,000,
// brand, image URL, price, quality score and GTIN.
func appendTypicalProduct(b []byte, mp string, i int) []byte {
	id := typicalID(i)
	h := typicalHash(i)
	const soup = "organic cotton shirt blue large steel bottle coffee beans roasted wireless headphones noise cancelling "
	text := func(n int, salt uint64) []byte {
		out := make([]byte, 0, n)
		for k := uint64(0); len(out) < n; k++ {
			w := (h + salt + k*7) % uint64(len(soup)-12)
			out = append(out, soup[w:w+12]...)
		}
		return out[:n]
	}
	b = append(b, `{"type":"product","id":`...)
	b = jsontext.AppendString(b, mp+"/"+id)
	b = append(b, `,"version":1,"writeId":"w`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","at":1,"state":{"name":`...)
	b = jsontext.AppendString(b, string(text(60, 1)))
	b = append(b, `,"active":true,"vendors":["v-`...)
	b = strconv.AppendUint(b, h%1000, 10)
	b = append(b, `"],"categories":[`...)
	for k := uint64(0); k < 3; k++ {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `"c-`...)
		b = strconv.AppendUint(b, (h/7+k)%2000, 10)
		b = append(b, '"')
	}
	b = append(b, `],"priceMicros":`...)
	b = strconv.AppendUint(b, 990_000+h%100_000_000, 10)
	b = append(b, `,"qualityScore":0.`...)
	b = strconv.AppendUint(b, 1+h%99, 10)
	b = append(b, `,"details":{"description":`...)
	b = jsontext.AppendString(b, string(text(500, 2)))
	b = append(b, `,"brand":{"id":"b-`...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `","name":"Brand `...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `"},"imageURL":"https://cdn.example.com/img/`...)
	b = append(b, id...)
	b = append(b, `.jpg","gtin":"4006381333931"}}}`...)
	return b
}

func typicalID(i int) string { return "p-" + strconv.Itoa(1_000_000_000 + i)[1:] }

// typicalHash draws product i's fields.
func typicalHash(i int) uint64 {
	h := uint64(i)*0x9e3779b97f4a7c15 + 12345
	return h ^ h>>31
}

// typicalVendor is product i's vendor (of 1,000).
func typicalVendor(i int) int { return int(typicalHash(i) % 1000) }

// typicalCampaigns are n campaigns on the typical products' vendors, as the
// engine benchmark's world has them (buildWorld): campaign j belongs to
// vendor j mod 1,000; 5 % automated, the others listings (10 % CPM) with
// 3 product bids on their vendor's products (of the first `products`) and a
// category bid on 20 %.
func typicalCampaigns(n, products int) ([]campaigns.Campaign, []campaigns.Bid) {
	rng := rand.New(rand.NewPCG(5, 6))
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	var cs []campaigns.Campaign
	var bs []campaigns.Bid
	for j := range n {
		v := j % 1000
		c := campaigns.Campaign{
			ID: uuid.Must(uuid.NewV7()).String(), VendorID: "v-" + strconv.Itoa(v), Name: "c" + strconv.Itoa(j),
			Type: campaigns.TypeListings, ChargeType: campaigns.ChargeCPC, DailyBudgetMicros: 50_000_000,
			StartDate: past, Active: true, CreatedAt: past, UpdatedAt: past,
		}
		switch roll := rng.IntN(100); {
		case roll < 5:
			c.Type = campaigns.TypeAutomated
		case roll < 15:
			c.ChargeType = campaigns.ChargeCPM
		}
		cs = append(cs, c)
		if c.Type == campaigns.TypeAutomated {
			continue
		}
		bid := func(typ, target string) {
			bs = append(bs, campaigns.Bid{ID: uuid.Must(uuid.NewV7()).String(), CampaignID: c.ID, TargetType: typ, Target: target,
				AmountMicros: int64(50_000 + rng.IntN(2_000_000)), Active: true, CreatedAt: past, UpdatedAt: past})
		}
		for range 3 {
			i := rng.IntN(products)
			for typicalVendor(i) != v {
				i = rng.IntN(products)
			}
			bid(campaigns.TargetProduct, typicalID(i))
		}
		if rng.IntN(5) == 0 {
			bid(campaigns.TargetCategory, "c-"+strconv.Itoa(rng.IntN(2000)))
		}
	}
	return cs, bs
}

// importCampaigns writes campaigns and bids to the entities topic of
// prefix through the campaigns service of a view of its own, stopped once
// they are written.
func importCampaigns(t *testing.T, brokers []string, prefix, mp string, cs []campaigns.Campaign, bs []campaigns.Bid) {
	t.Run("import campaigns", func(t *testing.T) {
		var camps *campaigns.Service
		testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: prefix}, func(l *statelog.Log) {
			camps = campaigns.New(l, catalog.New(l, nil), nil, nil, nil)
		})
		ctx, cancel := stepContext(t)
		defer cancel()
		if err := camps.Import(ctx, mp, cs, bs); err != nil {
			t.Fatalf("importing %d campaigns and %d bids: %v", len(cs), len(bs), err)
		}
	})
}

// stepContext is the context of one step of the test (import, produce,
// load): it ends a minute before the test's deadline (go test -timeout;
// a tenth of the time left when that is less than ten minutes), so that a
// step that runs out of time fails saying which step it was and how far it
// got, where the deadline's panic says neither.
func stepContext(t *testing.T) (context.Context, context.CancelFunc) {
	dl, ok := t.Deadline()
	if !ok {
		return context.WithCancel(t.Context())
	}
	return context.WithDeadline(t.Context(), dl.Add(-min(time.Minute, time.Until(dl)/10)))
}

// produceProducts writes n typical products of mp to the entities topic of
// prefix, as the catalog's writes would have. The records are produced
// without waiting for each batch (the client holds at most 200,000 of
// them: kafka.NewClient), so that the generator and the compression run
// side by side; every 1,000,000 products it logs how far it got.
func produceProducts(t *testing.T, brokers []string, prefix, mp string, n int) {
	t.Helper()
	// Compressed, as kfake keeps the batches it is given: the broker's
	// copy of the topic, in this process, is then a fraction of the texts
	// (about 0.1 KB a product instead of 0.9).
	cl, err := kafka.NewClient(brokers, testenv.Logger(t), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := stepContext(t)
	defer cancel()
	topics := kafka.TopicNames(prefix)
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 1, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	start := time.Now()
	for i := 0; i < n && failed.Load() == nil; i++ {
		v := appendTypicalProduct(nil, mp, i)
		cl.Produce(ctx, &kgo.Record{Topic: topics.Entities, Key: []byte("product/" + mp + "/" + typicalID(i)), Value: v}, done)
		if (i+1)%1_000_000 == 0 && i+1 < n {
			t.Logf("%d of %d products handed to the producer in %v (load average %s)", i+1, n, time.Since(start).Round(time.Second), loadAvg())
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("producing %d products: %v", n, err)
	}
	if err := failed.Load(); err != nil {
		t.Fatalf("producing %d products: %v", n, *err)
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// settledHeap is the live heap once kfake has let go of a closed
// connection's buffers (it does so on its own goroutines): the least of
// readings taken until one is not lower than the one before, for at most
// five seconds.
func settledHeap() uint64 {
	low := liveHeap()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		h := liveHeap()
		if h+64<<10 >= low {
			return min(h, low)
		}
		low = h
	}
	return low
}

// loadedView is what apiView loaded, and what it took.
type loadedView struct {
	heap  uint64        // live heap of the view
	took  time.Duration // the load, from the view's start to ready
	cpu   time.Duration // the process's CPU over the load (the broker's and the disk store's too)
	cat   *catalog.Service
	camps *campaigns.Service
	ix    *index.Index
}

// apiView loads, cold from the topic, what an API process holds of the
// entities: the catalog, the campaigns and the auction index. It returns
// them, the heap they take once loaded and the load's time. With every > 0
// it logs the load's progress at that interval (watchLoad); with
// cpuProfile it writes a CPU profile of the load alone there.
func apiView(t *testing.T, brokers []string, prefix string, every time.Duration, cpuProfile string) loadedView {
	t.Helper()
	before := liveHeap()
	start, cpu0 := time.Now(), processCPU()
	texts := testenv.SpillStore(t)
	cl, err := kafka.NewClient(brokers, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	l, err := statelog.New(kafka.TopicNames(prefix).Entities, brokers, cl, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.New(l, texts)
	camps := campaigns.New(l, cat, nil, nil, nil)
	ix := index.New()
	ix.Register(cat, camps)
	stopProfile := func() {}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			t.Fatal(err)
		}
		var once sync.Once
		stopProfile = func() { once.Do(func() { pprof.StopCPUProfile(); _ = f.Close() }) }
		defer stopProfile()
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done; l.Close() })
	stopWatch := watchLoad(t, l, every)
	// Wait as long as the load takes (a few seconds at 100,000 products),
	// until a minute before the test's deadline.
	wctx, cancel := stepContext(t)
	err = l.WaitReady(wctx)
	cancel()
	stopWatch()
	stopProfile()
	if err != nil {
		t.Fatalf("the view applied %d records in %v, then the test's time ran out (go test -timeout): %v",
			l.Applied(), time.Since(start).Round(time.Second), err)
	}
	took, cpu := time.Since(start), processCPU()-cpu0
	// The view stays in memory; its consumer's connection goes, and with it
	// the fetch buffers kfake (the broker, in this process) keeps for it:
	// they are the broker's, not the API process's.
	stop()
	<-done
	l.Close()
	heap := settledHeap() - before
	return loadedView{heap: heap, took: took, cpu: cpu, cat: cat, camps: camps, ix: ix}
}

// watchLoad logs, every interval until the returned function is called,
// the records the view applied, their rate since the line before, the live
// heap (at the last collection), VmRSS and the machine's load average: a
// rate that falls as the view grows, at a steady load average, is a load
// whose cost grows faster than the catalog.
func watchLoad(t *testing.T, l *statelog.Log, every time.Duration) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		start := time.Now()
		last, lastAt := int64(0), start
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				n := l.Applied()
				rate := float64(n-last) / now.Sub(lastAt).Seconds()
				last, lastAt = n, now
				t.Logf("load: %d records applied in %v, %.0f a second over the last %v; live heap %d MiB, VmRSS %d MiB; load average %s",
					n, now.Sub(start).Round(time.Second), rate, every, liveHeapMetric()>>20, procKB("VmRSS")>>10, loadAvg())
			}
		}
	}()
	return func() { close(quit); <-done }
}

// liveHeapMetric is the live heap as the last collection marked it
// (runtime/metrics: no collection and no stop of the world).
func liveHeapMetric() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes
// (/proc/loadavg; "?" when unreadable).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// loadRange samples the machine's 1-minute load average every interval
// until stopped, and reports the least and the most it read: the load the
// figures of a long run were measured at.
type loadRange struct {
	mu     sync.Mutex
	lo, hi float64
	quit   chan struct{}
	done   chan struct{}
}

func sampleLoad(every time.Duration) *loadRange {
	r := &loadRange{lo: -1, quit: make(chan struct{}), done: make(chan struct{})}
	r.sample()
	go func() {
		defer close(r.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-r.quit:
				return
			case <-tick.C:
				r.sample()
			}
		}
	}()
	return r
}

func (r *loadRange) sample() {
	v, err := strconv.ParseFloat(strings.Fields(loadAvg())[0], 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lo < 0 || v < r.lo {
		r.lo = v
	}
	r.hi = max(r.hi, v)
}

// stop ends the sampling and returns the range ("lo–hi").
func (r *loadRange) stop() string {
	close(r.quit)
	<-r.done
	r.sample()
	r.mu.Lock()
	defer r.mu.Unlock()
	return strconv.FormatFloat(r.lo, 'f', 1, 64) + "–" + strconv.FormatFloat(r.hi, 'f', 1, 64)
}

func writeHeapProfile(t testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryPerProduct: the live heap an API process's entity state takes
// per product, loaded cold from the topic, within 10 % of its budget
// (testkit/perfbudget/budgets.txt, catalog.heap-bytes-per-product). It
// counts bytes allocated (after a full collection), which do not depend on
// how busy the machine is.
//
// ENDCAP_TEST_PRODUCTS=n loads n products instead (the 10 M measurement of
// docs/design/performance.md, Catalog in memory): then also the campaigns of
// the engine benchmark's world (ENDCAP_TEST_CAMPAIGNS, 100,000 by default,
// imported before the products), and after the load auctions of 500 ids
// drawn uniformly from the n, then by popularity (Zipf), single-threaded.
// It prints the load's time, the peak and steady RSS the load added to the
// process, the live heap per product, the auctions' p50 and p99, the load's
// progress every minute and the machine's load average over the run
// (ENDCAP_TEST_CPU_PROFILE=file writes a CPU profile of the load). Such a
// run needs a -timeout of its size (minTimeout). The broker (kfake) runs in
// the test's process: its copy of the topic is there before the view starts
// (compressed, as produced), so the view's heap is the heap's growth from
// that point, and its RSS the growth of VmRSS, the peak (VmHWM) reset when
// the load starts (/proc/self/clear_refs). What the test's generators hold
// (the campaigns it made, kept for the auctions' budget cache) is in the
// heap before that point, and counts neither.
func TestMemoryPerProduct(t *testing.T) {
	n := memProducts
	if v, err := strconv.Atoi(os.Getenv("ENDCAP_TEST_PRODUCTS")); err == nil && v > 0 {
		n = v
	}
	large := n != memProducts
	var every time.Duration
	var machine *loadRange
	if large {
		if dl, ok := t.Deadline(); ok && time.Until(dl) < minTimeout(n) {
			t.Fatalf("%d products need a -timeout of at least %v (the time left is %v): go test -timeout %dm ...",
				n, minTimeout(n), time.Until(dl).Round(time.Second), int(minTimeout(n).Minutes())+1)
		}
		every = time.Minute
		machine = sampleLoad(10 * time.Second)
		defer func() { t.Logf("the machine's 1-minute load average during the run: %s", machine.stop()) }()
	}
	// kfake compacts a compacted topic every log.cleaner.backoff.ms (an
	// hour by default), all of it at once, on the broker's one goroutine: a
	// long run would then measure the broker's compaction of millions of
	// records in the middle of the view's load.
	_, brokers := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": strconv.FormatInt((24 * time.Hour).Milliseconds(), 10)}))
	const mp = "0193a5b0-0000-7000-8000-0000000000aa"
	var cs []campaigns.Campaign
	if large {
		var bs []campaigns.Bid
		cs, bs = typicalCampaigns(envInt("ENDCAP_TEST_CAMPAIGNS", 100_000), n)
		t0 := time.Now()
		importCampaigns(t, brokers, "mem.", mp, cs, bs)
		t.Logf("%d campaigns and %d bids imported in %v (load average %s)", len(cs), len(bs), time.Since(t0).Round(time.Millisecond), loadAvg())
	}
	t0 := time.Now()
	produceProducts(t, brokers, "mem.", mp, n)
	t.Logf("%d products produced in %v (load average %s)", n, time.Since(t0).Round(time.Millisecond), loadAvg())
	liveHeap()
	debug.FreeOSMemory()
	rssBefore := procKB("VmRSS")
	resetPeakRSS(t)
	v := apiView(t, brokers, "mem.", every, os.Getenv("ENDCAP_TEST_CPU_PROFILE"))
	peak := procKB("VmHWM") - rssBefore
	debug.FreeOSMemory() // what the runtime keeps of the load's garbage goes back
	steady := procKB("VmRSS") - rssBefore
	if got := v.cat.ProductCount(mp); got != n {
		t.Fatalf("the view holds %d products, want %d", got, n)
	}
	if path := os.Getenv("ENDCAP_TEST_HEAP_PROFILE"); path != "" {
		writeHeapProfile(t, path) // where the bytes are: go tool pprof -sample_index=inuse_space
		runtime.KeepAlive(v)
	}
	perProduct := float64(v.heap) / float64(n)
	t.Logf("loaded %d products in %v (%v of the process's CPU, the broker's and the disk store's with the view's): live heap %d MiB, %.0f B a product (with the campaigns, if any); RSS the load added: peak %d MiB, steady %d MiB (VmRSS %d MiB with kfake's copy of the topic; load average %s)",
		n, v.took.Round(time.Millisecond), v.cpu.Round(time.Millisecond), v.heap>>20, perProduct, peak>>10, steady>>10, procKB("VmRSS")>>10, loadAvg())
	if !large {
		perfbudget.Check(t, "catalog.heap-bytes-per-product", perProduct)
		return
	}
	auctionsOverView(t, mp, n, v, cs)
}

// minTimeout is the least time left a run of n products starts with: 0.4
// ms a product (the campaigns' import, the products' production and the
// load together took about that at 2,000,000 products on the shared
// two-core machine, at a load average of 17–28).
func minTimeout(n int) time.Duration { return time.Duration(n) * 400 * time.Microsecond }

// auctionsOverView runs listings auctions of 500 ids, 5 slots, over the
// loaded view (the budget cache loaded from a Redis of the test's own, as
// loadSpend): ids drawn uniformly from the n typical products, then by
// popularity (Zipf, s = 1.1, as BenchmarkEngine500), and prints their
// latency.
func auctionsOverView(t *testing.T, mp string, n int, v loadedView, cs []campaigns.Campaign) {
	eng, m, err := benchEngine(t, mp, v.cat, v.ix)
	if err != nil {
		t.Fatal(err)
	}
	w := &benchWorld{engine: eng, market: m, products: n, cat: v.cat, camps: v.camps, cs: cs}
	if err := w.loadSpend(t); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	z := rand.NewZipf(rand.New(rand.NewPCG(8, 8)), 1.1, 1, uint64(n-1))
	uniform := make([][]auction.Request, 256)
	zipf := make([][]auction.Request, 256)
	for i := range uniform {
		u := auction.Request{Kind: auction.KindListings, Slots: 5, ProductIDs: make([]string, 500)}
		p := auction.Request{Kind: auction.KindListings, Slots: 5, ProductIDs: make([]string, 500)}
		for k := range u.ProductIDs {
			u.ProductIDs[k] = typicalID(rng.IntN(n))
			p.ProductIDs[k] = typicalID(int(z.Uint64()))
		}
		uniform[i], zipf[i] = []auction.Request{u}, []auction.Request{p}
	}
	runtime.GC()
	count := envInt("ENDCAP_TEST_AUCTIONS", 3000)
	runAuctions(t, eng, m, "uniform", n, count, uniform)
	runAuctions(t, eng, m, "Zipf", n, count, zipf)
}

// runAuctions runs count auctions of reqs (in turn) after 200 that warm
// up, one at a time, and prints their p50 and p99, the process's CPU an
// auction and the winners an auction.
func runAuctions(t *testing.T, eng *auction.Engine, m *auction.Market, name string, n, count int, reqs [][]auction.Request) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, count)
	winners := 0
	var cpu0 time.Duration
	for i := range count + 200 { // the first 200 warm up
		if i == 200 {
			cpu0 = processCPU()
		}
		t0 := time.Now()
		res, err := eng.Run(ctx, m, auction.Auctions, reqs[i%len(reqs)])
		d := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 200 {
			lat = append(lat, d)
			winners += len(res[0].Winners)
		}
		auction.ReleaseResults(res)
	}
	cpu := (processCPU() - cpu0) / time.Duration(count)
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	t.Logf("%d auctions of 500 %s ids over %d products: p50 %v, p99 %v, process CPU %v an auction, %.1f winners an auction (load average %s)",
		count, name, n, pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), cpu.Round(time.Microsecond), float64(winners)/float64(count), loadAvg())
}

// procKB is a field of /proc/self/status in KiB (0 when absent).
func procKB(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

// resetPeakRSS sets the process's VmHWM to its VmRSS (Linux 4.0 and later).
func resetPeakRSS(t testing.TB) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("the peak RSS could not be reset (%v): VmHWM counts the produce step too", err)
	}
}
