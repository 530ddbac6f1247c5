package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/testkit/testenv"
)

// sdkVersion is the official JS SDK the wire contract (§7) was read from.
const sdkVersion = "0.3.8"

// sdkOutcome is one SDK call as testdata/sdk/check.mjs reports it: the
// resolved value, or the error thrown.
type sdkOutcome struct {
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error *struct {
		Kind    string `json:"kind"`
		Status  int    `json:"status"`
		Message string `json:"message"`
		Body    struct {
			ErrCode, DocURL, Message string
		} `json:"body"`
		Retry bool `json:"retry"`
	} `json:"error"`
}

type sdkSummary struct {
	Auction, Impression, Click, Tampered *sdkOutcome
	TamperedBidID                        string `json:"tamperedBidId"`
	SlashedAuction, SlashedImpression    *sdkOutcome
}

type sdkAuctionResult struct {
	Results []struct {
		ResultType string `json:"resultType"`
		Error      bool   `json:"error"`
		Winners    []struct {
			Rank          int    `json:"rank"`
			Type          string `json:"type"`
			ID            string `json:"id"`
			ResolvedBidID string `json:"resolvedBidId"`
			CampaignID    string `json:"campaignId"`
		} `json:"winners"`
	} `json:"results"`
}

// TestSDK: the official JS SDK (@topsort/sdk 0.3.8, installed from the npm
// registry) works against Endcap by changing only its host: an auction of a
// campaign set up through the public API returns that campaign's winners,
// their resolvedBidIds are accepted on impression and click events, a
// tampered one is refused with invalid_resolved_bid_id, and a host with a
// trailing slash works too.
func TestSDK(t *testing.T) {
	testenv.Get(t) // skips (-short, no stack) before npm runs
	dir := installSDK(t)

	s, _ := cpStart(t)
	A := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", A,
		`{"vendors":[{"id":"v-sdk","name":"SDK Vendor"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", A, `{"products":[
		{"id":"p-sdk-1","name":"SDK product 1","vendors":["v-sdk"],"price":12.5},
		{"id":"p-sdk-2","name":"SDK product 2","vendors":["v-sdk"],"price":8},
		{"id":"p-sdk-3","name":"SDK product 3 (no bid)","vendors":["v-sdk"]}]}`, nil), 200)
	r := cpDo(t, s, "POST", cpVendor("v-sdk"), A, `{"name":"SDK listings","type":"listings","chargeType":"CPC","dailyBudget":50}`, nil)
	cpStatus(t, r, 201)
	campaign := cpID(t, r)
	for _, b := range []string{
		`{"targetType":"product","target":"p-sdk-1","bidAmount":2}`,
		`{"targetType":"product","target":"p-sdk-2","bidAmount":1}`,
	} {
		cpStatus(t, cpDo(t, s, "POST", cpBids(campaign), A, b, nil), 201)
	}

	sum := runSDKCheck(t, dir, map[string]any{
		"url": s.URL, "apiKey": s.MarketplaceKey, "slots": 2,
		"productIds": []string{"p-sdk-3", "p-sdk-2", "p-sdk-1", "p-unknown"}, "eventPrefix": "sdk",
	})

	// createAuction: both products with a bid win, the higher bid first.
	wantWinners := fmt.Sprintf(`[1 product p-sdk-1 %[1]s] [2 product p-sdk-2 %[1]s]`, campaign)
	checkSDKAuction(t, "createAuction", sum.Auction, wantWinners)
	checkSDKAuction(t, "createAuction with host ending in /", sum.SlashedAuction, wantWinners)

	// reportEvent with the winner's resolvedBidId: {ok: true, retry: false}.
	for name, o := range map[string]*sdkOutcome{
		"impression": sum.Impression, "click": sum.Click, "impression with host ending in /": sum.SlashedImpression,
	} {
		if o == nil || !o.OK {
			t.Errorf("reportEvent %s: %+v", name, o)
			continue
		}
		sameJSON(t, o.Value, `{"ok":true,"retry":false}`)
	}

	// A tampered resolvedBidId: the SDK throws the 400 with its body.
	switch o := sum.Tampered; {
	case o == nil || o.OK || o.Error == nil:
		t.Errorf("reportEvent with tampered resolvedBidId %q did not throw: %+v", sum.TamperedBidID, o)
	case o.Error.Kind != "AppError" || o.Error.Status != 400 || o.Error.Retry || o.Error.Body.ErrCode != "invalid_resolved_bid_id" ||
		!strings.HasPrefix(o.Error.Body.Message, "clicks[0].resolvedBidId"):
		t.Errorf("reportEvent with tampered resolvedBidId %q threw %+v", sum.TamperedBidID, *o.Error)
	}

	// The accepted events reach ClickHouse; the refused one does not.
	for _, id := range []string{"sdk-imp", "sdk-clk", "sdk-imp-slashed"} {
		waitFor(t, s, id)
	}
	if n := s.count(t, "SELECT count() FROM events WHERE event_id = 'sdk-clk-tampered'"); n != 0 {
		t.Errorf("the refused click is stored (%d rows)", n)
	}
}

var resolvedBidIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,199}$`)

// checkSDKAuction checks createAuction's resolved value: one listings result
// whose winners (rank, type, id, campaignId) are want, each with a
// resolvedBidId in unpadded base64url under 200 characters.
func checkSDKAuction(t *testing.T, name string, o *sdkOutcome, want string) {
	t.Helper()
	if o == nil || !o.OK {
		t.Errorf("%s: %+v", name, o)
		return
	}
	var res sdkAuctionResult
	if err := json.Unmarshal(o.Value, &res); err != nil || len(res.Results) != 1 {
		t.Errorf("%s returned %s (%v)", name, o.Value, err)
		return
	}
	r := res.Results[0]
	var got []string
	for _, w := range r.Winners {
		got = append(got, fmt.Sprintf("[%d %s %s %s]", w.Rank, w.Type, w.ID, w.CampaignID))
		if !resolvedBidIDRE.MatchString(w.ResolvedBidID) {
			t.Errorf("%s: winner %s has resolvedBidId %q", name, w.ID, w.ResolvedBidID)
		}
	}
	if r.ResultType != "listings" || r.Error || strings.Join(got, " ") != want {
		t.Errorf("%s: resultType %q, error %v, winners %v; want listings, false, %s\n%s", name, r.ResultType, r.Error, got, want, o.Value)
	}
}

// installSDK installs @topsort/sdk into a temporary directory with npm, next
// to a copy of testdata/sdk, and returns the directory. Without node or npm
// the test is skipped, unless ENDCAP_TEST_REQUIRE_STACK=1.
func installSDK(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
				t.Skipf("%s not installed (deploy/local/install.sh installs it): %v", tool, err)
			}
			t.Fatalf("%s not installed (run deploy/local/install.sh): %v", tool, err)
		}
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "check.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "sdk", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	out, err := runSDKTool(t, dir, 3*time.Minute, "npm", "install", "--no-audit", "--no-fund", "--no-update-notifier", "@topsort/sdk@"+sdkVersion)
	if err != nil {
		t.Fatalf("npm install @topsort/sdk@%s: %v\n%s", sdkVersion, err, out)
	}
	var pkg struct{ Version string }
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "@topsort", "sdk", "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil || pkg.Version != sdkVersion {
		t.Fatalf("installed @topsort/sdk: version %q (%v), want %s", pkg.Version, err, sdkVersion)
	}
	nodeVersion, _ := runSDKTool(t, dir, 10*time.Second, "node", "--version")
	t.Logf("@topsort/sdk %s installed in %s (node %s)", sdkVersion, time.Since(start).Round(time.Millisecond), bytes.TrimSpace(nodeVersion))
	return dir
}

// runSDKCheck runs check.mjs with its input and decodes its summary.
func runSDKCheck(t *testing.T, dir string, input map[string]any) sdkSummary {
	t.Helper()
	arg, _ := json.Marshal(input)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "check.mjs", string(arg))
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node check.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	var sum sdkSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("check.mjs summary: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("check.mjs summary: %s", bytes.TrimSpace(stdout.Bytes()))
	return sum
}

// runSDKTool runs a command in dir with a deadline and returns its combined
// output.
func runSDKTool(t *testing.T, dir string, timeout time.Duration, name string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}
