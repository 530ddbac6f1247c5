package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/endcap/endcap/auction"
)

// smallManifest is a seeded marketplace small enough for tests.
func smallManifest() *SeedManifest {
	cfg, _ := SeedConfig{Vendors: 20, Products: 3000, Campaigns: 400, Categories: 40, Seed: 4}.withDefaults()
	p := newSeedPlan(cfg)
	return &SeedManifest{PlanVersion: seedPlanVersion, Seed: cfg.Seed, ProductIDPrefix: seedProductPrefix,
		ProductIDWidth: seedProductWidth, Products: cfg.Products, Vendors: cfg.Vendors, Categories: cfg.Categories,
		Campaigns: cfg.Campaigns, Keywords: searchTerms[:], ProductsWithBids: len(p.biddedProducts())}
}

func mustAuctionsConfig(t *testing.T, cfg AuctionsConfig) AuctionsConfig {
	t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Every body is a valid /v2/auctions request for the service's own parser, with distinct ids of the
// manifest's space, the configured counts, and the requested share of ids with bids.
func TestAuctionBodyValid(t *testing.T) {
	m := smallManifest()
	for _, tc := range []struct {
		name string
		cfg  AuctionsConfig
	}{
		{"defaults", AuctionsConfig{Manifest: m, BidShare: 0.25}},
		{"uniform", AuctionsConfig{Manifest: m, IDs: 50, Slots: 3}},
		{"only bidded", AuctionsConfig{Manifest: m, IDs: 40, BidShare: 1}},
		{"five auctions with scores", AuctionsConfig{Manifest: m, IDs: 20, Slots: 40, Auctions: 5, QualityScores: true}},
		{"category and query", AuctionsConfig{Manifest: m, IDs: 10, Auctions: 5, CategoryShare: 0.4, QueryShare: 0.4}},
		{"shoppers", AuctionsConfig{Manifest: m, IDs: 10, Auctions: 5, CategoryShare: 0.5, QueryShare: 0.5, Shoppers: 1_000_000_000}},
		{"all ids of a tiny space", AuctionsConfig{Manifest: &SeedManifest{PlanVersion: 1, ProductIDPrefix: "x", ProductIDWidth: 1,
			Products: 12, Categories: 1}, IDs: 12}},
		{"every product of the space", AuctionsConfig{Manifest: m, IDs: 3000, Slots: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustAuctionsConfig(t, tc.cfg)
			sp := newIDSpace(*cfg.Manifest)
			ab := newAuctionBody(&cfg, sp, 1)
			var buf []byte
			var ids, bidded, withCategory, withQuery int
			for range 20 {
				buf = ab.build(buf, time.Now())
				if len(buf) > ab.sizeHint() {
					t.Errorf("body %d bytes above its size hint %d", len(buf), ab.sizeHint())
				}
				reqs, verr := auction.ParseAuctions(buf, auction.Auctions)
				if verr != nil {
					t.Fatalf("%v\n%.500s", verr, buf)
				}
				if len(reqs) != cfg.Auctions {
					t.Fatalf("%d auctions", len(reqs))
				}
				for _, r := range reqs {
					if r.Kind != auction.KindListings || r.Slots != cfg.Slots || len(r.ProductIDs) != cfg.IDs {
						t.Fatalf("kind %v slots %d ids %d", r.Kind, r.Slots, len(r.ProductIDs))
					}
					if cfg.QualityScores != (len(r.QualityScores) == cfg.IDs) {
						t.Fatalf("%d quality scores", len(r.QualityScores))
					}
					seen := map[string]bool{}
					for _, id := range r.ProductIDs {
						i := sp.parseID(id)
						if i < 0 || seen[id] {
							t.Fatalf("id %q: index %d, repeated %v", id, i, seen[id])
						}
						seen[id] = true
						if _, ok := slices.BinarySearch(sp.bidded, i); ok {
							bidded++
						}
					}
					ids += len(r.ProductIDs)
					if r.Category != nil {
						withCategory++
						if !strings.HasPrefix(r.Category.ID, "c-") {
							t.Fatalf("category %+v", r.Category)
						}
					}
					if r.SearchQuery != "" {
						withQuery++
						if !slices.Contains(searchTerms[:], r.SearchQuery) {
							t.Fatalf("searchQuery %q", r.SearchQuery)
						}
					}
					if r.Category != nil && r.SearchQuery != "" {
						t.Fatal("category and searchQuery in one auction")
					}
					if n, err := strconv.Atoi(strings.TrimPrefix(r.OpaqueUserID, "u-")); cfg.Shoppers > 0 &&
						(err != nil || n < 0 || n >= cfg.Shoppers) {
						t.Fatalf("opaqueUserId %q of %d shoppers", r.OpaqueUserID, cfg.Shoppers)
					}
					if cfg.Shoppers == 0 && r.OpaqueUserID != "" {
						t.Fatalf("opaqueUserId %q that was not asked for", r.OpaqueUserID)
					}
				}
			}
			// The share of ids with a product bid: BidShare of them are drawn from those products, the rest
			// uniformly (where the products with bids are uniform's share of them).
			base := float64(len(sp.bidded)) / float64(sp.count)
			want := cfg.BidShare + (1-cfg.BidShare)*base
			got := float64(bidded) / float64(ids)
			if ids > 500 && (got < want-0.08 || got > want+0.08) {
				t.Errorf("%.3f of the ids have a product bid, want about %.3f", got, want)
			}
			if cfg.CategoryShare > 0 && (withCategory == 0 || withQuery == 0) {
				t.Errorf("%d auctions with a category, %d with a query", withCategory, withQuery)
			}
			if cfg.CategoryShare == 0 && cfg.QueryShare == 0 && withCategory+withQuery > 0 {
				t.Error("context that was not asked for")
			}
		})
	}
}

func TestAuctionBodyDeterministic(t *testing.T) {
	cfg := mustAuctionsConfig(t, AuctionsConfig{Manifest: smallManifest(), IDs: 30, Seed: 8, BidShare: 0.5})
	sp := newIDSpace(*cfg.Manifest)
	a, b, c := newAuctionBody(&cfg, sp, 2), newAuctionBody(&cfg, sp, 2), newAuctionBody(&cfg, sp, 3)
	for range 3 {
		x, y, z := a.build(nil, time.Now()), b.build(nil, time.Now()), c.build(nil, time.Now())
		if string(x) != string(y) {
			t.Fatal("same seed and worker, different bodies")
		}
		if string(x) == string(z) {
			t.Fatal("two workers send the same bodies")
		}
	}
}

func TestAuctionsConfigRejects(t *testing.T) {
	m := smallManifest()
	for _, cfg := range []AuctionsConfig{
		{Manifest: m, IDs: 10001},
		{Manifest: m, IDs: 3001},
		{Manifest: m, Slots: 41},
		{Manifest: m, Auctions: 6},
		{Manifest: m, BidShare: 1.5},
		{Manifest: m, BidShare: -0.1},
		{Manifest: m, CategoryShare: 0.6, QueryShare: 0.6},
		{Manifest: &SeedManifest{}},
		{Manifest: &SeedManifest{ProductIDPrefix: "p", ProductIDWidth: 1, Products: 10, Categories: 1}, QueryShare: 0.5, IDs: 5},
	} {
		if _, err := cfg.withDefaults(); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := RunAuctions(context.Background(), AuctionsConfig{URL: "ftp://x", Manifest: m}); err == nil {
		t.Error("bad URL accepted")
	}
}

func TestDefaultSeedManifest(t *testing.T) {
	m := DefaultSeedManifest()
	if m.Products != 1_000_000 || m.Vendors != 10_000 || m.Campaigns != 100_000 || m.ProductIDExample != "p-000000000" {
		t.Errorf("%+v", m)
	}
	// About 3 product bids per listings campaign, with some repeats: a quarter of the products.
	if m.ProductsWithBids < 200_000 || m.ProductsWithBids > 300_000 {
		t.Errorf("%d products with bids", m.ProductsWithBids)
	}
}

func TestScanAnswer(t *testing.T) {
	for _, tc := range []struct {
		body                   string
		results, winners, errs int
	}{
		{`{"results":[{"resultType":"listings","winners":[],"error":false}]}`, 1, 0, 0},
		{`{"results":[{"resultType":"listings","winners":[{"rank":1,"type":"product","id":"p","resolvedBidId":"a","campaignId":"c"},` +
			`{"rank":2,"type":"product","id":"q","resolvedBidId":"b","campaignId":"c"}],"error":false},` +
			`{"resultType":"listings","winners":[],"error":true}]}`, 2, 2, 1},
		{"{ \"results\" : [ { \"winners\" : [ ] , \"error\" :\ttrue , \"resultType\" : \"listings\" } ] }", 1, 0, 1},
		{`{"errCode":"bad_request","message":"resultType"}`, 0, 0, 0},
		{`not json`, 0, 0, 0},
	} {
		r, w, e := scanAnswer([]byte(tc.body))
		if r != tc.results || w != tc.winners || e != tc.errs {
			t.Errorf("%s: %d results %d winners %d errors, want %d %d %d", tc.body, r, w, e, tc.results, tc.winners, tc.errs)
		}
	}
}

// answerFor is a contract-shaped answer to body: per auction, the first `winners` ids (at most slots), or
// an error result when errAuction is its index.
func answerFor(body []byte, winners, errAuction int) ([]byte, error) {
	reqs, verr := auction.ParseAuctions(body, auction.Auctions)
	if verr != nil {
		return nil, verr
	}
	var b strings.Builder
	b.WriteString(`{"results":[`)
	for k, r := range reqs {
		if k > 0 {
			b.WriteByte(',')
		}
		if k == errAuction {
			b.WriteString(`{"resultType":"listings","winners":[],"error":true}`)
			continue
		}
		b.WriteString(`{"resultType":"listings","winners":[`)
		for n := range min(winners, r.Slots, len(r.ProductIDs)) {
			if n > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"rank":%d,"type":"product","id":%q,"resolvedBidId":"AbC-_%d","campaignId":"0193-c"}`, n+1, r.ProductIDs[n], n)
		}
		b.WriteString(`],"error":false}`)
	}
	b.WriteString("]}")
	return []byte(b.String()), nil
}

func mustAnswer(t *testing.T, body []byte, winners, errAuction int) []byte {
	t.Helper()
	ans, err := answerFor(body, winners, errAuction)
	if err != nil {
		t.Fatalf("invalid request: %v", err)
	}
	return ans
}

func TestCheckAnswer(t *testing.T) {
	cfg := mustAuctionsConfig(t, AuctionsConfig{Manifest: smallManifest(), IDs: 10, Slots: 3, Auctions: 2, Check: true})
	sp := newIDSpace(*cfg.Manifest)
	ab := newAuctionBody(&cfg, sp, 0)
	body := ab.build(nil, time.Now())
	good := string(mustAnswer(t, body, 3, -1))
	reqs, _ := auction.ParseAuctions(body, auction.Auctions)
	first := reqs[0].ProductIDs[0]
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"good", good, ""},
		{"one error result", string(mustAnswer(t, body, 3, 1)), ""},
		{"fewer winners than slots", string(mustAnswer(t, body, 1, -1)), ""},
		{"not JSON", `{"results":`, "not the answer's JSON"},
		{"no results", `{"errCode":"x"}`, "no results"},
		{"one result for two auctions", `{"results":[{"resultType":"listings","winners":[],"error":false}]}`, "1 results for 2 auctions"},
		{"wrong result type", strings.Replace(good, `"resultType":"listings"`, `"resultType":"banners"`, 1), "resultType"},
		{"error missing", strings.Replace(good, `,"error":false`, ``, 1), "error missing"},
		{"winners missing", `{"results":[{"resultType":"listings","error":false},{"resultType":"listings","winners":[],"error":false}]}`, "winners missing"},
		{"error with winners", strings.Replace(good, `"error":false`, `"error":true`, 1), "error true and 3 winners"},
		{"rank", strings.Replace(good, `"rank":2`, `"rank":3`, 1), "rank 3, want 2"},
		{"type", strings.Replace(good, `"type":"product"`, `"type":"vendor"`, 1), "type"},
		{"campaign id", strings.Replace(good, `"campaignId":"0193-c"`, `"campaignId":""`, 1), "campaignId missing"},
		{"resolved bid id", strings.Replace(good, `"resolvedBidId":"AbC-_0"`, `"resolvedBidId":"a+b/="`, 1), "resolvedBidId"},
		{"long resolved bid id", strings.Replace(good, `"resolvedBidId":"AbC-_0"`, `"resolvedBidId":"`+strings.Repeat("a", 201)+`"`, 1), "resolvedBidId"},
		{"id not asked", strings.Replace(good, `"id":"`+first+`"`, `"id":"p-999999999"`, 1), "was not among the auction's ids"},
		{"id of another auction", strings.Replace(good, `"id":"`+first+`"`, `"id":"`+reqs[1].ProductIDs[5]+`"`, 1), "was not among"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := *ab
			a.st = auctionStats{}
			got := a.check([]byte(tc.answer))
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("check = %q, want %q", got, tc.want)
			}
		})
	}
	a := *ab
	a.st = auctionStats{}
	a.inspect(mustAnswer(t, body, 3, 1))
	if a.st != (auctionStats{results: 2, winners: 3, errors: 1}) {
		t.Errorf("stats %+v", a.st)
	}
	a.st = auctionStats{}
	a.inspect(mustAnswer(t, body, 0, -1))
	if a.st != (auctionStats{results: 2, empty: 2}) {
		t.Errorf("stats %+v", a.st)
	}
}

// auctionServer answers every valid request 201 with up to `winners` winners per auction (checking the
// request with the service's parser), and records what it saw.
type auctionServer struct {
	winners  int
	requests atomic.Int64
	mu       sync.Mutex
	bad      string
}

func (s *auctionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // cut off by the end of the run
	}
	s.requests.Add(1)
	var why string
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v2/auctions":
		why = r.Method + " " + r.URL.Path
	case r.Header.Get("Authorization") != "Bearer ecm_test" || r.Header.Get("Content-Type") != "application/json":
		why = "headers " + r.Header.Get("Authorization")
	}
	ans, err := answerFor(body, s.winners, -1)
	if err != nil {
		why = "invalid body: " + err.Error()
	}
	if why != "" {
		s.mu.Lock()
		s.bad = why
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"errCode":"bad_request","message":"`+why+`"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(ans)
}

func quickAuctions(url string) AuctionsConfig {
	return AuctionsConfig{URL: url, APIKey: "ecm_test", Duration: 500 * time.Millisecond, Warmup: -1, Concurrency: 4,
		Manifest: smallManifest(), IDs: 100, Slots: 4, BidShare: 0.5, Seed: 1}
}

func TestRunAuctionsAgainstServer(t *testing.T) {
	for _, check := range []bool{false, true} {
		t.Run(fmt.Sprintf("check=%v", check), func(t *testing.T) {
			s := &auctionServer{winners: 3}
			srv := httptest.NewServer(s)
			defer srv.Close()
			cfg := quickAuctions(srv.URL + "/")
			cfg.Check, cfg.Auctions = check, 2
			rep, err := RunAuctions(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", rep)
			if s.bad != "" {
				t.Fatal(s.bad)
			}
			if rep.Requests == 0 || rep.OK != rep.Requests || rep.Statuses[201] != rep.Requests || rep.Failed != 0 {
				t.Fatalf("requests %d ok %d statuses %v", rep.Requests, rep.OK, rep.Statuses)
			}
			if rep.Events != 2*rep.Requests || rep.Results != rep.Events || rep.Winners != 3*rep.Results ||
				rep.WinnersPerAuction != 3 || rep.BadAnswers != 0 || rep.AuctionErrors != 0 || rep.EmptyAuctions != 0 {
				t.Errorf("auctions %d results %d winners %d (%.2f) bad %d errors %d empty %d: %s",
					rep.Events, rep.Results, rep.Winners, rep.WinnersPerAuction, rep.BadAnswers, rep.AuctionErrors, rep.EmptyAuctions, rep.FirstBadAnswer)
			}
			if rep.Elapsed != cfg.Duration || rep.Stopped != "duration" || rep.Checked != check || rep.IDsPerAuction != 100 {
				t.Errorf("elapsed %v stopped %q checked %v ids %d", rep.Elapsed, rep.Stopped, rep.Checked, rep.IDsPerAuction)
			}
			checkLatencies(t, rep.Report)

			var j map[string]any
			b, _ := json.Marshal(rep)
			if err := json.Unmarshal(b, &j); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"auctions_per_sec", "requests_per_sec", "p50_ms", "p90_ms", "p99_ms", "max_ms",
				"winners_per_auction", "statuses", "bad_answers", "auction_errors", "ids_per_auction"} {
				if _, ok := j[k]; !ok {
					t.Errorf("JSON report without %s: %s", k, b)
				}
			}
			if _, ok := j["events_per_sec"]; ok || j["winners_per_auction"] != 3.0 {
				t.Errorf("JSON report: %s", b)
			}
		})
	}
}

// The bare baseline answers every auction request with one empty result.
func TestRunAuctionsAgainstBare(t *testing.T) {
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	rep, err := RunAuctions(context.Background(), quickAuctions(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests == 0 || rep.OK != rep.Requests || rep.Results != rep.OK || rep.Winners != 0 || rep.BadAnswers != 0 {
		t.Errorf("\n%s", rep)
	}
}

// 2xx answers that are not the contract's are counted as bad answers; failures by status.
func TestRunAuctionsBadAnswersAndFailures(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"errCode":"service_unavailable"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer srv.Close()
	cfg := quickAuctions(srv.URL)
	cfg.Concurrency = 1
	rep, err := RunAuctions(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK == 0 || rep.BadAnswers != rep.OK || rep.Failed == 0 || rep.Statuses[503] != rep.Failed ||
		!strings.Contains(rep.FirstBadAnswer, `0 results for 1 auctions: {"accepted":true}`) || !strings.Contains(rep.FirstError, "503") {
		t.Errorf("\n%s", rep)
	}
}

// Open loop: the rate is held, and latency counts from the scheduled send time.
func TestRunAuctionsOpenLoop(t *testing.T) {
	s := &auctionServer{winners: 1}
	srv := httptest.NewServer(s)
	defer srv.Close()
	cfg := quickAuctions(srv.URL)
	cfg.Rate, cfg.Duration = 200, time.Second
	rep, err := RunAuctions(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests < 180 || rep.Requests > 202 || rep.TargetRate != 200 || rep.Unsent != 0 || rep.WinnersPerAuction != 1 {
		t.Errorf("\n%s", rep)
	}
}

func BenchmarkBuildAuctionBody(b *testing.B) {
	cfg, err := AuctionsConfig{Manifest: smallManifest(), BidShare: 0.25}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	ab := newAuctionBody(&cfg, newIDSpace(*cfg.Manifest), 0)
	buf := make([]byte, 0, ab.sizeHint())
	b.ReportAllocs()
	for b.Loop() {
		buf = ab.build(buf, time.Time{})
	}
	b.SetBytes(int64(len(buf)))
}
