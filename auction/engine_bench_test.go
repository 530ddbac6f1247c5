package auction_test

// The auction engine at production scale: a catalog of 1,000,000 products
// and 100,000 campaigns, built on the real catalog and campaigns views over a
// kfake log (the same code the service runs), with the real budget cache.
//
//	go test ./auction -run '^$' -bench Engine -benchtime 20000x -timeout 30m
//
// ENDCAP_BENCH_PRODUCTS and ENDCAP_BENCH_CAMPAIGNS scale it down. Building
// the views takes about a minute at full size; every benchmark shares them.
// The budget cache reads a redis-server of the bench's own (testenv.OwnRedis)
// once, before the auctions.
//
// ENDCAP_BENCH_CAPPED_PERCENT=20 gives that share of the campaigns a
// frequency cap (3 impressions a day), and BenchmarkEngine500's auctions a
// shopper (one of 1,000, each at the cap of 20 capped campaigns): each
// auction then reads its shopper's counts from the bench's Redis.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const benchMP = "0193a5b0-0000-7000-8000-000000000001"

type benchWorld struct {
	engine   *auction.Engine
	market   *auction.Market
	products int
	build    time.Duration
	cat      *catalog.Service
	camps    *campaigns.Service
	cs       []campaigns.Campaign
	bs       []campaigns.Bid
}

var (
	worldOnce sync.Once
	world     *benchWorld
	worldErr  error
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchSetup(b *testing.B) *benchWorld {
	worldOnce.Do(func() {
		world, worldErr = buildWorld(b, envInt("ENDCAP_BENCH_PRODUCTS", 1_000_000), envInt("ENDCAP_BENCH_CAMPAIGNS", 100_000))
		if worldErr == nil {
			worldErr = world.loadSpend(b)
		}
		if worldErr == nil && benchCappedPercent() > 0 {
			worldErr = world.loadCaps(b, benchShoppers)
		}
		runtime.GC() // measure the auctions, not the collection of the build's garbage
	})
	if worldErr != nil {
		b.Fatal(worldErr)
	}
	return world
}

func strp(s string) *string { return &s }

// buildWorld: V vendors; product i belongs to vendor i mod V (30% also to
// the next vendor), to 1–2 of 2,000 leaf categories under 100 parents, with a
// quality score on 90%; campaign j belongs to vendor j mod V: 5% automated,
// the others listings (10% CPM) with 3 product bids on their vendor's
// products, a category bid on 20% and a keyword bid on 10%.
func buildWorld(tb testing.TB, nProducts, nCampaigns int) (*benchWorld, error) {
	start := time.Now()
	nVendors := max(1, nProducts/100)
	_, brokers := testenv.Kafka(tb)
	ctx := context.Background()
	var (
		cat   *catalog.Service
		camps *campaigns.Service
		ix    = index.New()
	)
	texts := testenv.SpillStore(tb)
	testenv.StateLog(tb, brokers, testenv.StateLogOptions{Prefix: "bench."}, func(l *statelog.Log) {
		cat = catalog.New(l, texts)
		camps = campaigns.New(l, cat, nil, nil, nil)
		ix.Register(cat, camps)
	})

	var cats []catalog.CategoryInput
	for p := 0; p < 100; p++ {
		cats = append(cats, catalog.CategoryInput{ID: strp(fmt.Sprintf("top-%d", p)), Name: strp("top")})
	}
	for c := 0; c < 2000; c++ {
		cats = append(cats, catalog.CategoryInput{ID: strp(fmt.Sprintf("cat-%d", c)), Name: strp("leaf"), ParentID: strp(fmt.Sprintf("top-%d", c%100))})
	}
	for i := 0; i < len(cats); i += catalog.MaxBatch {
		if _, err := cat.UpsertCategories(ctx, benchMP, cats[i:min(i+catalog.MaxBatch, len(cats))], true, statelog.MatchAny); err != nil {
			return nil, err
		}
	}
	vendorID := func(v int) string { return fmt.Sprintf("v-%d", v%nVendors) }
	productID := func(i int) string { return fmt.Sprintf("p-%07d", i) }
	active := true
	batch := make([]catalog.ProductInput, 0, catalog.MaxBatch)
	for i := 0; i < nProducts; i++ {
		vs := []string{vendorID(i)}
		if i%10 < 3 {
			vs = append(vs, vendorID(i+1))
		}
		cs := []string{fmt.Sprintf("cat-%d", i%2000)}
		if i%2 == 0 {
			cs = append(cs, fmt.Sprintf("cat-%d", (i/7)%2000))
		}
		in := catalog.ProductInput{ID: strp(productID(i)), Name: strp("Product " + strconv.Itoa(i)), Vendors: vs, Categories: cs, Active: &active}
		if i%10 != 0 {
			n := json.Number(fmt.Sprintf("0.%02d", 10+i%90))
			in.QualityScore = &n
		}
		batch = append(batch, in)
		if len(batch) == cap(batch) || i == nProducts-1 {
			if _, err := cat.UpsertProducts(ctx, benchMP, batch, true, statelog.MatchAny); err != nil {
				return nil, err
			}
			batch = batch[:0]
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	var cs []campaigns.Campaign
	var bs []campaigns.Bid
	for j := 0; j < nCampaigns; j++ {
		v := j % nVendors
		c := campaigns.Campaign{
			ID: uuid.Must(uuid.NewV7()).String(), VendorID: vendorID(v), Name: "c" + strconv.Itoa(j),
			Type: campaigns.TypeListings, ChargeType: campaigns.ChargeCPC, DailyBudgetMicros: 50_000_000,
			StartDate: past, Active: true, CreatedAt: past, UpdatedAt: past,
		}
		roll := rng.IntN(100) // not j's residues: those alias with the vendor (j mod V)
		switch {
		case roll < 5:
			c.Type = campaigns.TypeAutomated
		case roll < 15:
			c.ChargeType = campaigns.ChargeCPM
		}
		if p := benchCappedPercent(); p > 0 && (j*7919)%100 < p {
			c.Restrictions = []campaigns.Restriction{{ID: 1, TypeID: 1, Limit: 3, Active: true, CreatedAt: past, UpdatedAt: past}}
		}
		cs = append(cs, c)
		if c.Type == campaigns.TypeAutomated {
			continue
		}
		bid := func(typ, target string) {
			bs = append(bs, campaigns.Bid{ID: uuid.Must(uuid.NewV7()).String(), CampaignID: c.ID, TargetType: typ, Target: target,
				AmountMicros: int64(50_000 + rng.IntN(2_000_000)), Active: true, CreatedAt: past, UpdatedAt: past})
		}
		for k := 0; k < 3; k++ {
			bid(campaigns.TargetProduct, productID(v+nVendors*rng.IntN(max(1, nProducts/nVendors))))
		}
		if rng.IntN(5) == 0 {
			bid(campaigns.TargetCategory, fmt.Sprintf("top-%d", rng.IntN(100)))
		}
		if rng.IntN(10) == 0 {
			bid(campaigns.TargetKeyword, fmt.Sprintf("word%d shoes", rng.IntN(500)))
		}
	}
	if err := camps.Import(ctx, benchMP, cs, bs); err != nil {
		return nil, err
	}

	eng, m, err := benchEngine(tb, benchMP, cat, ix)
	if err != nil {
		return nil, err
	}
	return &benchWorld{engine: eng, market: m, products: nProducts, build: time.Since(start), cat: cat, camps: camps, cs: cs, bs: bs}, nil
}

// benchEngine is an engine on the views, and the marketplace mp. Its budget
// cache is read in memory; no Redis is reachable, as if every campaign had
// spent nothing (loadSpend gives it the service's).
func benchEngine(tb testing.TB, mp string, cat *catalog.Service, ix *index.Index) (*auction.Engine, *auction.Market, error) {
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{1: []byte("bench-key-bench-key-bench-key-32")}, 1)
	if err != nil {
		return nil, nil, err
	}
	nowhere := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	tb.Cleanup(func() { _ = nowhere.Close() })
	cache := spend.NewCache(nowhere, spend.Options{})
	eng := &auction.Engine{
		Catalog: cat, Index: ix, Budget: benchGate{cache},
		Keys: func() *bidtoken.Keyring { return kr },
	}
	m := &auction.Market{ID: mp, UUID: uuid.MustParse(mp), Loc: time.UTC, Reserve: auction.Reserve{CPCMicros: 10_000, CPMMicros: 100_000}}
	return eng, m, nil
}

// loadSpend gives the engine a budget cache as the service has one: every
// campaign registered and loaded (from a Redis of the bench's own, where no
// campaign has spent anything) before the first auction. The world of
// buildWorld reads spend from a cache that no refresh ever loads.
func (w *benchWorld) loadSpend(tb testing.TB) error {
	r := testenv.OwnRedis(tb)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	cache := spend.NewCache(rdb, spend.Options{Timeout: time.Minute})
	ids := make([]string, len(w.cs))
	for i, c := range w.cs {
		ids[i] = c.ID
	}
	cache.Register(w.market.ID, time.UTC, ids...)
	if err := cache.RefreshNow(context.Background()); err != nil {
		return err
	}
	w.engine.Budget = benchGate{cache}
	return nil
}

// benchCappedPercent is ENDCAP_BENCH_CAPPED_PERCENT: the share of the
// campaigns with a frequency cap (0: none, the default).
func benchCappedPercent() int { return envInt("ENDCAP_BENCH_CAPPED_PERCENT", 0) }

// benchShoppers is how many shoppers the capped auctions are for.
const benchShoppers = 1000

// loadCaps gives the engine the frequency cap counts of a Redis of the
// bench's own, where each of shoppers ("shopper-<i>") reached the cap of 20
// capped campaigns.
func (w *benchWorld) loadCaps(tb testing.TB, shoppers int) error {
	r := testenv.OwnRedis(tb)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	tb.Cleanup(func() { _ = rdb.Close() })
	var capped []string
	for _, c := range w.cs {
		if c.Capped() {
			capped = append(capped, c.ID)
		}
	}
	store := freqcap.New(rdb)
	rng := rand.New(rand.NewPCG(3, 3))
	now := time.Now()
	var hits []freqcap.Hit
	for u := range shoppers {
		for k := range 20 {
			f := freqcap.CampaignField(capped[rng.IntN(len(capped))], freqcap.Impression)
			for n := range 3 {
				hits = append(hits, freqcap.Hit{MP: benchMP, User: "shopper-" + strconv.Itoa(u), Offset: int64(k*3 + n), At: now, Loc: time.UTC, Fields: []string{f}})
			}
		}
	}
	if err := store.Count(context.Background(), hits, now); err != nil {
		return err
	}
	w.engine.Caps, w.engine.CapTimeout = store, time.Second
	return nil
}

// withShoppers gives the requests a shopper each when campaigns are capped.
func withShoppers(reqs [][]auction.Request) {
	if benchCappedPercent() == 0 {
		return
	}
	for i := range reqs {
		for j := range reqs[i] {
			reqs[i][j].OpaqueUserID = "shopper-" + strconv.Itoa(i%benchShoppers)
		}
	}
}

// benchGate is the service's budget gate (app's budgetGate).
type benchGate struct{ c *spend.Cache }

func (g benchGate) Check(m *auction.Market, slot *spend.Slot, campaignID string, l spend.Limits, at time.Time) auction.BudgetVerdict {
	if l.DailyMicros == 0 && l.WeeklyMicros == 0 && l.MonthlyMicros == 0 && l.TotalMicros == 0 {
		return auction.BudgetOK
	}
	switch g.c.CheckSlot(slot, m.ID, m.Loc, campaignID, l, at) {
	case spend.OK:
		return auction.BudgetOK
	case spend.TotalExhausted:
		return auction.BudgetTotalExhausted
	case spend.DailyExhausted:
		return auction.BudgetDailyExhausted
	case spend.WeeklyExhausted:
		return auction.BudgetWeeklyExhausted
	case spend.MonthlyExhausted:
		return auction.BudgetMonthlyExhausted
	}
	return auction.BudgetPaced
}

// randomRequest draws ids uniformly from the whole catalog: every product
// equally likely, the worst case for the CPU caches.
func randomRequest(rng *rand.Rand, products, ids, slots int) []auction.Request {
	r := auction.Request{Kind: auction.KindListings, Slots: slots, ProductIDs: make([]string, ids)}
	for i := range r.ProductIDs {
		r.ProductIDs[i] = fmt.Sprintf("p-%07d", rng.IntN(products))
	}
	return []auction.Request{r}
}

// zipfRequest draws ids by popularity (Zipf, s = 1.1), as search and
// category pages do: a few products appear in many auctions.
func zipfRequest(z *rand.Zipf, ids, slots int) []auction.Request {
	r := auction.Request{Kind: auction.KindListings, Slots: slots, ProductIDs: make([]string, ids)}
	for i := range r.ProductIDs {
		r.ProductIDs[i] = fmt.Sprintf("p-%07d", z.Uint64())
	}
	return []auction.Request{r}
}

// BenchmarkEngine500 runs listings auctions of 500 product ids, 5 slots:
// ns/op, the process's CPU time per auction, allocations, winners per
// auction and latency percentiles (of single-threaded runs). Uniform: ids drawn uniformly; Zipf: by popularity.
func BenchmarkEngine500(b *testing.B) {
	w := benchSetup(b)
	heap := liveHeap()
	b.Logf("world: %d products, built in %v; live heap %d MiB (%.0f B a product, with the campaigns and the bench's own), VmRSS %s",
		w.products, w.build.Round(time.Second), heap>>20, float64(heap)/float64(w.products), vmRSS())
	rng := rand.New(rand.NewPCG(7, 7))
	z := rand.NewZipf(rand.New(rand.NewPCG(8, 8)), 1.1, 1, uint64(w.products-1))
	uniform := make([][]auction.Request, 256)
	zipf := make([][]auction.Request, 256)
	for i := range uniform {
		uniform[i] = randomRequest(rng, w.products, 500, 5)
		zipf[i] = zipfRequest(z, 500, 5)
	}
	withShoppers(uniform)
	withShoppers(zipf)
	b.Run("Uniform", func(b *testing.B) { runEngine(b, w, uniform) })
	b.Run("Zipf", func(b *testing.B) { runEngine(b, w, zipf) })
}

// processCPU is the process's CPU time so far, user and system, of every
// thread (the auctions', the collector's, the frequency caps' reads'): per
// auction with -test.cpu 1, steadier than the wall clock on a shared machine
// (docs/design/performance.md, How the figures are made).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmRSS is the process's resident memory, as /proc/self/status says it.
func vmRSS() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func runEngine(b *testing.B, w *benchWorld, reqs [][]auction.Request) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	winners := 0
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := w.engine.Run(ctx, w.market, auction.Auctions, reqs[i%len(reqs)])
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		winners += len(res[0].Winners)
		auction.ReleaseResults(res) // as the API does, once it answered
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(winners)/float64(b.N), "winners/auction")
}

// BenchmarkEngine500Explain is what POST /v2/auctions/explain costs: the
// Uniform auctions of BenchmarkEngine500, explained (every candidate
// described; nothing signed).
func BenchmarkEngine500Explain(b *testing.B) {
	w := benchSetup(b)
	rng := rand.New(rand.NewPCG(7, 7))
	reqs := make([][]auction.Request, 256)
	for i := range reqs {
		reqs[i] = randomRequest(rng, w.products, 500, 5)
	}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	cands := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ex, _ := w.engine.Explain(ctx, w.market, auction.Auctions, reqs[i%len(reqs)], 0)
		lat = append(lat, time.Since(t0))
		cands += len(ex[0].Candidates)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(cands)/float64(b.N), "candidates/auction")
}

// BenchmarkEngine500Parallel is the saturation throughput: auctions of 500
// ids on every core.
func BenchmarkEngine500Parallel(b *testing.B) {
	w := benchSetup(b)
	ctx := context.Background()
	var seed sync.Mutex
	n := uint64(0)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		seed.Lock()
		n++
		rng := rand.New(rand.NewPCG(n, 99))
		seed.Unlock()
		reqs := make([][]auction.Request, 64)
		for i := range reqs {
			reqs[i] = randomRequest(rng, w.products, 500, 5)
		}
		i := 0
		for pb.Next() {
			res, err := w.engine.Run(ctx, w.market, auction.Auctions, reqs[i%len(reqs)])
			if err != nil {
				b.Error(err)
				return
			}
			auction.ReleaseResults(res)
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "auctions/s")
}

// BenchmarkCollect is what the entity state costs the garbage collector: the
// time of a full collection (runtime.GC) with the world loaded, and what it
// marks: the live heap, its objects and the part of it with pointers to
// scan. Run it with GOMAXPROCS=1, where the time is the marking's CPU: a
// cycle of the running service does the same work concurrently, and an
// auction served meanwhile competes with it for the cores
// (docs/design/performance.md).
//
//	GOMAXPROCS=1 go test ./auction -run '^$' -bench Collect -benchtime 5x -timeout 30m
func BenchmarkCollect(b *testing.B) {
	w := benchSetup(b)
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		runtime.GC()
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "median-ms")
	// What the collector has to mark, read after the last collection: it
	// does not vary with the machine's noise as the times do, so two
	// layouts compare by it in one run each.
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/objects:objects"}, {Name: "/gc/scan/heap:bytes"}}
	metrics.Read(live)
	b.ReportMetric(float64(live[0].Value.Uint64()>>20), "live-MB")
	b.ReportMetric(float64(live[1].Value.Uint64()), "objects")
	b.ReportMetric(float64(live[2].Value.Uint64()>>20), "scannable-MB")
	runtime.KeepAlive(w)
}
