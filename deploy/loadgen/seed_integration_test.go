package loadgen

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startEndcap runs one in-process Endcap (target all) with raised rate limits and returns its URL, a
// marketplace id and its two keys.
func startEndcap(t *testing.T) (url, marketplaceID, marketplaceKey, advancedKey string) {
	t.Helper()
	a := testapp.Start(t, testapp.WithMarketplace("Seed Market", "USD", "America/New_York"),
		testapp.Configure(func(c *config.Config, _ []string) {
			c.RateLimitCatalog, c.RateLimitDefault = "1000000/1s", "1000000/1s"
		}))
	return a.URL, a.Marketplace.ID, a.MarketplaceKey, a.AdvancedKey
}

// The seed's bodies are accepted by the real API, a forced re-run duplicates nothing, and (once the
// endpoint exists) auctions on the seeded products are answered by the contract, with winners.
func TestSeedAndAuctionsAgainstEndcap(t *testing.T) {
	url, mp, mkey, akey := startEndcap(t)
	cfg := SeedConfig{URL: url, APIKey: akey, MarketplaceID: mp, Vendors: 30, Products: 3000, Campaigns: 240,
		Categories: 50, Concurrency: 8, Seed: 11, Manifest: filepath.Join(t.TempDir(), "seed.json"), CappedPercent: 20}
	rep, err := RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	plan := newSeedPlan(SeedConfig{Vendors: 30, Products: 3000, Campaigns: 240, Categories: 50, Seed: 11})
	wantBids, wantCaps := 0, int64(0)
	for j := range 240 {
		wantBids += plan.campaign(j).bids()
		if plan.capped(j, 20) {
			wantCaps++
		}
	}
	if wantCaps < 24 || wantCaps > 72 {
		t.Fatalf("%d of 240 campaigns drawn for a cap at 20%%", wantCaps)
	}
	if rep.Stopped != "done" || !rep.Manifest.Complete || rep.CampaignsCreated != 240 || rep.BidsCreated != int64(wantBids) ||
		rep.CapsCreated != wantCaps || !slices.Contains(rep.Manifest.Phases, "caps-20") ||
		rep.Products.Products != 3000 || rep.Vendors.Products != 30 || rep.Categories.Products != 50 {
		t.Fatalf("first run: %+v", rep)
	}

	cfg.Force = true
	rep, err = RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != "done" || rep.CampaignsCreated != 0 || rep.CampaignsExisting != 240 || rep.BidsCreated != 0 ||
		rep.BidsExisting != int64(wantBids) || rep.CapsCreated != 0 || rep.CapsExisting != wantCaps {
		t.Fatalf("forced re-run: %s", rep)
	}

	// The auction endpoint may not be there yet.
	req, _ := http.NewRequest(http.MethodPost, url+auctionsPath,
		strings.NewReader(`{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p-000000000"]}}]}`))
	req.Header.Set("Authorization", "Bearer "+mkey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		t.Log("POST /v2/auctions answers 404: auctions not checked")
		return
	}
	m, err := ReadSeedManifest(cfg.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	arep, err := RunAuctions(context.Background(), AuctionsConfig{URL: url, APIKey: mkey, Duration: time.Second,
		Warmup: -1, Concurrency: 2, Manifest: &m, IDs: 200, Slots: 5, BidShare: 1, Check: true, Seed: 1, Shoppers: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", arep)
	if arep.Requests == 0 || arep.OK != arep.Requests || arep.BadAnswers != 0 || arep.AuctionErrors != 0 || arep.Winners == 0 {
		t.Errorf("auctions against Endcap:\n%s", arep)
	}
}
