package auction_test

// The auction's cache misses on uniform ids, counted: the cost of an
// auction whose products are cold is its loads that wait for memory, which
// instructions do not show and a busy machine's wall clock blurs. Counted
// by callgrind's cache simulation (perfbudget.CacheSim: a 4 MiB last level,
// the same on every machine) over a world a few times larger than it.
//
//	ENDCAP_TEST_REQUIRE_STACK=1 go test -count=1 -run TestPerfBudgetMisses -v ./auction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/testkit/perfbudget"
)

// The workload: missAuctions listings auctions of 500 ids drawn uniformly
// from missProducts products (missProducts/10 campaigns, as
// BenchmarkEngine500's world, with its budget cache loaded from a Redis of
// the test's own), after an auction of every product (unsimulated) and
// missWarmup others (pools filled, the code and the hot part of the state
// in the simulated caches). ENDCAP_PERF_MISS_PRODUCTS
// scales the world (the figures of docs/design/performance.md are of the
// default).
const (
	missProducts = 100_000
	missAuctions = 40
	missWarmup   = 20
)

// TestPerfBudgetMisses: last-level misses per auction of the workload
// above, within 10 % of their budget; the first-level misses and the
// instructions are logged.
func TestPerfBudgetMisses(t *testing.T) {
	n := envInt("ENDCAP_PERF_MISS_PRODUCTS", missProducts)
	if perfbudget.InCallgrind() {
		// The world is built in a subtest, whose end stops the log's
		// consumers and the broker: the index and the catalog stay in
		// memory, and no other goroutine runs among the counted auctions.
		var w *benchWorld
		t.Run("world", func(t *testing.T) {
			var err error
			if w, err = buildWorld(t, n, n/10); err != nil {
				t.Fatal(err)
			}
			// The spend of every campaign loaded, as an API process's
			// budget cache is before it serves.
			if err := w.loadSpend(t); err != nil {
				t.Fatal(err)
			}
		})
		if w == nil {
			t.Fatal("no world")
		}
		rng := rand.New(rand.NewPCG(11, 11))
		var warm, reqs [][]auction.Request
		for range missWarmup {
			warm = append(warm, randomRequest(rng, n, 500, 5))
		}
		for range missAuctions {
			reqs = append(reqs, randomRequest(rng, n, 500, 5))
		}
		run := func(reqs [][]auction.Request) {
			for _, r := range reqs {
				res, err := w.engine.Run(context.Background(), w.market, auction.Auctions, r)
				if err != nil {
					t.Fatal(err)
				}
				auction.ReleaseResults(res)
			}
		}
		// Every product once, before the simulation starts: every campaign
		// is met, and finds its place in the budget cache (spend.Slot), as
		// in a process that has served for a while.
		for lo := 0; lo < n; lo += 500 {
			r := auction.Request{Kind: auction.KindListings, Slots: 5}
			for i := lo; i < min(lo+500, n); i++ {
				r.ProductIDs = append(r.ProductIDs, fmt.Sprintf("p-%07d", i))
			}
			run([][]auction.Request{{r}})
		}
		runtime.GC()
		debug.SetGCPercent(-1) // no collection among the counted loads
		perfbudget.Instrument()
		run(warm)
		perfbudget.Measure(func() { run(reqs) })
		return
	}
	c := perfbudget.Misses(t, "TestPerfBudgetMisses", []string{"ENDCAP_PERF_MISS_PRODUCTS=" + strconv.Itoa(n)})
	per := func(v uint64) float64 { return float64(v) / missAuctions }
	t.Logf("an auction, %d products: %.0f instructions, %.0f data reads, %.0f D1 misses, %.0f LL misses",
		n, per(c.Total), per(c.Events["Dr"]), per(c.D1()), per(c.LL()))
	if n == missProducts {
		perfbudget.Check(t, "auction.uniform-ll-misses-per-auction", per(c.LL()))
	}
}
