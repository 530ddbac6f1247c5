package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/management/accounts"
)

// fakeAuctioneer answers Explain with its explanations and counts the
// calls of both methods.
type fakeAuctioneer struct {
	exps           []auction.Explanation
	runs, explains int
	market         auction.Market
	reqs           []auction.Request
	max            int   // the limit of the last Explain
	err            error // Explain's error
}

func (f *fakeAuctioneer) Run(context.Context, *auction.Market, auction.EndpointKind, []auction.Request) ([]auction.Result, error) {
	f.runs++
	return nil, nil
}

func (f *fakeAuctioneer) Explain(_ context.Context, m *auction.Market, endpoint auction.EndpointKind, reqs []auction.Request, maxCandidates int) ([]auction.Explanation, error) {
	f.explains++
	f.max = maxCandidates
	f.market = *m
	f.reqs = append([]auction.Request(nil), reqs...)
	if endpoint != auction.Auctions {
		panic("explain of another endpoint")
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.exps, nil
}

type countingRecorder struct{ n int }

func (r *countingRecorder) Record(*auction.Record) { r.n++ }

// explainServer routes the two handlers with a marketplace principal set,
// as requireKey sets it.
func explainServer(f *fakeAuctioneer, rec *countingRecorder) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	h := &handlers{d: Deps{Auctions: f, AuctionRecorder: rec, MaxBodyBytes: 4096, ExplainMaxCandidates: 77, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Set(principalKey, accounts.Principal{Marketplace: accounts.Marketplace{ID: "0193a5b0-0000-7000-8000-0000000000aa", Timezone: "UTC",
			ReserveCPCMicros: 100_000, ReserveCPMMicros: 1_000_000}})
	})
	r.POST("/v2/auctions", h.postAuctions(auction.Auctions))
	r.POST("/v2/auctions/explain", h.postAuctionsExplain)
	return r
}

func post(r *gin.Engine, path, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
	return w
}

// TestExplainHandler: a valid body is explained (never run, nothing
// recorded), with the marketplace's reserve, and written in the documented
// shape: nulls where a field does not apply, strings escaped, the score as
// a string, money as exact decimals.
func TestExplainHandler(t *testing.T) {
	f := &fakeAuctioneer{exps: []auction.Explanation{
		{Kind: auction.KindListings, Slots: 2, Candidates: []auction.ExplainedCandidate{
			{ProductID: `p"1\é`, CampaignID: "c-1", VendorID: "v-1", BidID: "b-1", BidTarget: "product", BidMicros: 800_000,
				QualityPPM: 900_000, Score: "340282366920938463463374607431768211455", Outcome: auction.Won, Position: 1, Rank: 1, PriceMicros: 555_556},
			{ProductID: "p-2", CampaignID: "c-2", VendorID: "v-2", BidTarget: "automated", CPM: true, BidMicros: 5_000_000,
				QualityPPM: 1_000_000, Score: "5000000000000", Outcome: auction.Lost, Reason: auction.ReasonOutranked, Position: 2},
			{CampaignID: "c-3", VendorID: "v-3", BidID: "b-3", BidTarget: "keyword", BidMicros: 10_000,
				Outcome: auction.Filtered, Reason: auction.ReasonNoActiveProduct},
		}, ExcludedProducts: []auction.ExcludedProduct{{ProductID: "gone", Reason: auction.ReasonProductNotFound}}},
		{Kind: auction.KindBanners, Slots: 1},
	}}
	rec := &countingRecorder{}
	r := explainServer(f, rec)
	w := post(r, "/v2/auctions/explain", `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p\"1\\é","p-2"]}},
		{"type":"banners","slots":1,"slotId":"top"}]}`)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("%d %s: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	if f.explains != 1 || f.runs != 0 || rec.n != 0 {
		t.Fatalf("explains %d, runs %d, records %d", f.explains, f.runs, rec.n)
	}
	if len(f.reqs) != 2 || f.reqs[0].Kind != auction.KindListings || f.reqs[1].Kind != auction.KindBanners ||
		f.market.Reserve != (auction.Reserve{CPCMicros: 100_000, CPMMicros: 1_000_000}) {
		t.Fatalf("explained %+v for %+v", f.reqs, f.market)
	}
	want := `{"results":[{"resultType":"listings","slots":2,"candidates":[
		{"productId":"p\"1\\é","campaignId":"c-1","vendorId":"v-1","bidId":"b-1","bidTarget":"product","chargeType":"CPC",
		 "bid":0.8,"quality":0.9,"score":"340282366920938463463374607431768211455","outcome":"won","reason":null,
		 "position":1,"rank":1,"price":0.555556},
		{"productId":"p-2","campaignId":"c-2","vendorId":"v-2","bidId":null,"bidTarget":"automated","chargeType":"CPM",
		 "bid":5,"quality":1,"score":"5000000000000","outcome":"lost","reason":"outranked","position":2,"rank":null,"price":null},
		{"productId":null,"campaignId":"c-3","vendorId":"v-3","bidId":"b-3","bidTarget":"keyword","chargeType":"CPC",
		 "bid":0.01,"quality":null,"score":null,"outcome":"filtered","reason":"no_active_product","position":null,"rank":null,"price":null}],
		"excludedProducts":[{"productId":"gone","reason":"product_not_found"}],"error":false},
		{"resultType":"banners","slots":1,"candidates":[],"excludedProducts":[],"error":false}]}`
	var got, exp any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, w.Body)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	eb, _ := json.Marshal(exp)
	if !bytes.Equal(gb, eb) {
		t.Fatalf("body\n%s\nwant\n%s", gb, eb)
	}
}

// TestExplainHandlerRejects: a body /v2/auctions refuses, explain refuses
// the same way (status and body), without explaining or running anything.
func TestExplainHandlerRejects(t *testing.T) {
	f := &fakeAuctioneer{}
	rec := &countingRecorder{}
	r := explainServer(f, rec)
	for _, body := range []string{
		``, `{`, `[]`, `{}`, `{"auctions":[]}`, `{"auctions":[{"type":"listings"}]}`,
		`{"auctions":[{"type":"hotels","slots":1,"products":{"ids":["a"]}}]}`,
		`{"auctions":[{"type":"listings","slots":1}]}`,
		`{"auctions":[{"type":"banners","slots":1}]}`,
		`{"auctions":[{"type":"listings","slots":41,"products":{"ids":["a"]}}]}`,
		`{"auctions":[{"type":"listings","slots":1,"products":{"ids":["a"]},"placementId":9}]}`,
		`{"auctions":[` + strings.Repeat(`{"type":"listings","slots":1,"products":{"ids":["a"]}},`, 5) + `{"type":"listings","slots":1,"products":{"ids":["a"]}}]}`,
		`{"auctions":[{"type":"listings","slots":1,"products":{"ids":["` + strings.Repeat("x", 5000) + `"]}}]}`, // over MaxBodyBytes
	} {
		a, e := post(r, "/v2/auctions", body), post(r, "/v2/auctions/explain", body)
		if a.Code < 400 || e.Code != a.Code || e.Body.String() != a.Body.String() {
			t.Errorf("%.80s: auctions %d %s, explain %d %s", body, a.Code, a.Body, e.Code, e.Body)
		}
	}
	if f.explains != 0 || f.runs != 0 || rec.n != 0 {
		t.Fatalf("explains %d, runs %d, records %d", f.explains, f.runs, rec.n)
	}
}

// TestExplainTooManyCandidates: the handler passes its limit to the engine,
// and the engine's TooManyCandidatesError is a 422 too_many_candidates in
// the /v2 error shape, its message naming the limit.
func TestExplainTooManyCandidates(t *testing.T) {
	f := &fakeAuctioneer{err: &auction.TooManyCandidatesError{Limit: 77, Auction: 1}}
	r := explainServer(f, &countingRecorder{})
	w := post(r, "/v2/auctions/explain", `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["a"]}},{"type":"listings","slots":2,"products":{"ids":["b"]}}]}`)
	var body v2Error
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 422 || body.ErrCode != "too_many_candidates" ||
		!strings.Contains(body.Message, "more than 77 candidates") || body.DocURL == "" || f.max != 77 {
		t.Fatalf("%d %s (limit passed: %d)", w.Code, w.Body, f.max)
	}
}
