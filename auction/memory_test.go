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
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
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
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := camps.Import(ctx, mp, cs, bs); err != nil {
			t.Fatal(err)
		}
	})
}

// produceProducts writes n typical products of mp to the entities topic of
// prefix, as the catalog's writes would have.
func produceProducts(t testing.TB, brokers []string, prefix, mp string, n int) {
	t.Helper()
	// Compressed, as kfake keeps the batches it is given: the broker's
	// copy of the topic, in this process, is then a fraction of the texts
	// (about 0.1 KB a product instead of 0.9).
	cl, err := kafka.NewClient(brokers, testenv.Logger(t), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	topics := kafka.TopicNames(prefix)
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 1, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}
	const batch = 2000
	recs := make([]*kgo.Record, 0, batch)
	for i := 0; i < n; i++ {
		v := appendTypicalProduct(nil, mp, i)
		recs = append(recs, &kgo.Record{Topic: topics.Entities, Key: []byte("product/" + mp + "/" + typicalID(i)), Value: v})
		if len(recs) == batch || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			recs = recs[:0]
		}
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
	cat   *catalog.Service
	camps *campaigns.Service
	ix    *index.Index
}

// apiView loads, cold from the topic, what an API process holds of the
// entities: the catalog, the campaigns and the auction index. It returns
// them, the heap they take once loaded and the load's time.
func apiView(t testing.TB, brokers []string, prefix string) loadedView {
	t.Helper()
	before := liveHeap()
	start := time.Now()
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
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done; l.Close() })
	// Wait as long as the load takes (a few seconds at 100,000 products;
	// the test's own deadline bounds it).
	if err := l.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// The view stays in memory; its consumer's connection goes, and with it
	// the fetch buffers kfake (the broker, in this process) keeps for it:
	// they are the broker's, not the API process's.
	stop()
	<-done
	l.Close()
	heap := settledHeap() - before
	return loadedView{heap: heap, took: took, cat: cat, camps: camps, ix: ix}
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
// drawn uniformly from the n, single-threaded. It prints the load's time,
// the peak and steady RSS the load added to the process, the live heap per
// product and the auctions' p50 and p99. The broker (kfake) runs in the
// test's process: its copy of the topic is there before the view starts
// (compressed, as produced), so the view's heap is the heap's growth from
// that point, and its RSS the growth of VmRSS, the peak (VmHWM) reset when
// the load starts (/proc/self/clear_refs).
func TestMemoryPerProduct(t *testing.T) {
	n := memProducts
	if v, err := strconv.Atoi(os.Getenv("ENDCAP_TEST_PRODUCTS")); err == nil && v > 0 {
		n = v
	}
	large := n != memProducts
	_, brokers := testenv.Kafka(t)
	const mp = "0193a5b0-0000-7000-8000-0000000000aa"
	var cs []campaigns.Campaign
	if large {
		var bs []campaigns.Bid
		cs, bs = typicalCampaigns(envInt("ENDCAP_TEST_CAMPAIGNS", 100_000), n)
		t0 := time.Now()
		importCampaigns(t, brokers, "mem.", mp, cs, bs)
		t.Logf("%d campaigns and %d bids imported in %v", len(cs), len(bs), time.Since(t0).Round(time.Millisecond))
	}
	t0 := time.Now()
	produceProducts(t, brokers, "mem.", mp, n)
	t.Logf("%d products produced in %v", n, time.Since(t0).Round(time.Millisecond))
	liveHeap()
	debug.FreeOSMemory()
	rssBefore := procKB("VmRSS")
	resetPeakRSS(t)
	v := apiView(t, brokers, "mem.")
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
	t.Logf("loaded %d products in %v: live heap %d MiB, %.0f B a product (with the campaigns, if any); RSS the load added: peak %d MiB, steady %d MiB (VmRSS %d MiB with kfake's copy of the topic)",
		n, v.took.Round(time.Millisecond), v.heap>>20, perProduct, peak>>10, steady>>10, procKB("VmRSS")>>10)
	if !large {
		perfbudget.Check(t, "catalog.heap-bytes-per-product", perProduct)
		return
	}
	auctionsOverView(t, mp, n, v, cs)
}

// auctionsOverView runs listings auctions of 500 ids drawn uniformly from
// the n typical products, 5 slots, over the loaded view (the budget cache
// loaded from a Redis of the test's own, as loadSpend), and prints their
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
	reqs := make([][]auction.Request, 256)
	for i := range reqs {
		r := auction.Request{Kind: auction.KindListings, Slots: 5, ProductIDs: make([]string, 500)}
		for k := range r.ProductIDs {
			r.ProductIDs[k] = typicalID(rng.IntN(n))
		}
		reqs[i] = []auction.Request{r}
	}
	runtime.GC()
	ctx := context.Background()
	count := envInt("ENDCAP_TEST_AUCTIONS", 3000)
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
	t.Logf("%d auctions of 500 ids over %d products: p50 %v, p99 %v, process CPU %v an auction, %.1f winners an auction",
		count, n, pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), cpu.Round(time.Microsecond), float64(winners)/float64(count))
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
