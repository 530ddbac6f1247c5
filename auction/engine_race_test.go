package auction_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/google/uuid"
)

// smallWorld is the benchmark's world at 2,000 products and 200 campaigns,
// for tests (skipped with -short: it needs kfake).
func smallWorld(t *testing.T) *benchWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("needs kfake")
	}
	w, err := buildWorld(t, 2_000, 200)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestReleaseResultsReuse: results released by one Run are reused by the
// next ones, and results not released are never touched by them.
func TestReleaseResultsReuse(t *testing.T) {
	w := smallWorld(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	summary := func(res []auction.Result) string {
		s := ""
		for _, r := range res {
			for _, w := range r.Winners {
				s += fmt.Sprintf("%d %s %s %s %d|", w.Rank, w.ID, w.CampaignID, w.ResolvedBidID, len(r.Record.Winners))
			}
			s += fmt.Sprintf("%v %s;", r.Error, r.Record.ID)
		}
		return s
	}
	var kept [][]auction.Result
	var want []string
	for i := range 200 {
		res, err := w.engine.Run(ctx, w.market, auction.Auctions, randomRequest(rng, w.products, 200, 5))
		if err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			kept, want = append(kept, res), append(want, summary(res))
			continue
		}
		auction.ReleaseResults(res)
	}
	if len(want[0]) < 50 {
		t.Fatalf("no winners to check: %q", want[0])
	}
	for i, res := range kept {
		if got := summary(res); got != want[i] {
			t.Fatalf("kept results %d changed:\n%s\nwant\n%s", i, got, want[i])
		}
	}
}

// TestAuctionsDuringChanges runs auctions on two goroutines while campaigns,
// bids and products change under them (run it with -race): no race, no
// panic, and every winner is a campaign that was running with a live bid at
// some moment of the auction (here: never one of the campaigns paused for
// good before the auctions start).
func TestAuctionsDuringChanges(t *testing.T) {
	w := smallWorld(t)
	ctx := context.Background()
	// Pause a tenth of the campaigns for good: they must never win.
	paused := map[string]bool{}
	var pause []campaigns.Campaign
	for i, c := range w.cs {
		if i%10 == 0 {
			c.Active = false
			pause = append(pause, c)
			paused[c.ID] = true
		}
	}
	if err := w.camps.Import(ctx, benchMP, pause, nil); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var auctions, winners atomic.Int64
	var mu sync.Mutex
	var failures []string
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := w.engine.Run(ctx, w.market, auction.Auctions, randomRequest(rng, w.products, 200, 5))
				if err != nil {
					t.Error(err)
					return
				}
				auctions.Add(1)
				for _, win := range res[0].Winners {
					winners.Add(1)
					if paused[win.CampaignID] {
						mu.Lock()
						failures = append(failures, win.CampaignID)
						mu.Unlock()
					}
				}
			}
		}()
	}
	// Changes: bid amounts and flags, campaigns switching between running
	// ones, a batch of new bids.
	rng := rand.New(rand.NewPCG(9, 9))
	var target campaigns.Campaign // a running listings campaign that takes new bids
	for _, c := range w.cs {
		if c.Type == campaigns.TypeListings && !paused[c.ID] {
			target = c
			break
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for round := 0; time.Now().Before(deadline); round++ {
		bs := make([]campaigns.Bid, 0, 50)
		for range 50 {
			b := w.bs[rng.IntN(len(w.bs))]
			if paused[b.CampaignID] {
				continue
			}
			b.AmountMicros = int64(10_000 + rng.IntN(3_000_000))
			b.Active = rng.IntN(4) != 0
			bs = append(bs, b)
		}
		if err := w.camps.Import(ctx, benchMP, nil, bs); err != nil {
			t.Fatal(err)
		}
		nb := campaigns.Bid{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "new-%d", round)).String(), CampaignID: target.ID, TargetType: campaigns.TargetProduct,
			Target: fmt.Sprintf("p-%07d", rng.IntN(w.products)), AmountMicros: 500_000, Active: true}
		if err := w.camps.Import(ctx, benchMP, nil, []campaigns.Bid{nb}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("paused campaigns won %d times: %v", len(failures), failures[:min(5, len(failures))])
	}
	if auctions.Load() < 50 || winners.Load() == 0 {
		t.Fatalf("%d auctions, %d winners: too few to mean anything", auctions.Load(), winners.Load())
	}
	t.Logf("%d auctions, %d winners during the changes", auctions.Load(), winners.Load())
}
