package loadgen

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startEndcap runs one in-process Endcap (target all) with raised rate limits and returns its URL, a
// marketplace id and its two keys.
func startEndcap(t *testing.T) (url, marketplaceID, marketplaceKey, advancedKey string) {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitCatalog, cfg.RateLimitDefault = "1000000/1s", "1000000/1s"
	a, err := app.New(cfg, app.TargetAll, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("Endcap did not stop within 20s")
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := a.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	m, err := a.Accounts.CreateMarketplace(wctx, "Seed Market", "USD", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	if marketplaceKey, _, err = a.Accounts.CreateKey(wctx, m.ID, accounts.KeyMarketplace); err != nil {
		t.Fatal(err)
	}
	if advancedKey, _, err = a.Accounts.CreateKey(wctx, m.ID, accounts.KeyAdvanced); err != nil {
		t.Fatal(err)
	}
	url = "http://" + addr.String()
	testenv.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return testenv.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	return url, m.ID, marketplaceKey, advancedKey
}

// The seed's bodies are accepted by the real API, a forced re-run duplicates nothing, and (once the
// endpoint exists) auctions on the seeded products are answered by the contract, with winners.
func TestSeedAndAuctionsAgainstEndcap(t *testing.T) {
	url, mp, mkey, akey := startEndcap(t)
	cfg := SeedConfig{URL: url, APIKey: akey, MarketplaceID: mp, Vendors: 30, Products: 3000, Campaigns: 240,
		Categories: 50, Concurrency: 8, Seed: 11, Manifest: filepath.Join(t.TempDir(), "seed.json")}
	rep, err := RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	plan := newSeedPlan(SeedConfig{Vendors: 30, Products: 3000, Campaigns: 240, Categories: 50, Seed: 11})
	wantBids := 0
	for j := range 240 {
		wantBids += plan.campaign(j).bids()
	}
	if rep.Stopped != "done" || !rep.Manifest.Complete || rep.CampaignsCreated != 240 || rep.BidsCreated != int64(wantBids) ||
		rep.Products.Products != 3000 || rep.Vendors.Products != 30 || rep.Categories.Products != 50 {
		t.Fatalf("first run: %+v", rep)
	}

	cfg.Force = true
	rep, err = RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != "done" || rep.CampaignsCreated != 0 || rep.CampaignsExisting != 240 || rep.BidsCreated != 0 ||
		rep.BidsExisting != int64(wantBids) {
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
		Warmup: -1, Concurrency: 2, Manifest: &m, IDs: 200, Slots: 5, BidShare: 1, Check: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", arep)
	if arep.Requests == 0 || arep.OK != arep.Requests || arep.BadAnswers != 0 || arep.AuctionErrors != 0 || arep.Winners == 0 {
		t.Errorf("auctions against Endcap:\n%s", arep)
	}
}
