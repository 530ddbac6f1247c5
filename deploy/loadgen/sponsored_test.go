package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
)

func TestCollectWinners(t *testing.T) {
	var auctions atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/auctions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "bad", http.StatusUnauthorized)
			return
		}
		var req struct {
			Auctions []struct {
				Products struct{ IDs []string } `json:"products"`
			} `json:"auctions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		auctions.Add(int64(len(req.Auctions)))
		res := `{"results":[`
		for i := range req.Auctions {
			if i > 0 {
				res += ","
			}
			res += `{"resultType":"listings","winners":[{"rank":1,"type":"product","id":"` + req.Auctions[i].Products.IDs[0] + `","resolvedBidId":"tok","campaignId":"c"}],"error":false}`
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(res + "]}"))
	}))
	defer srv.Close()

	tests := []struct {
		name    string
		key     string
		n       int
		want    int
		wantErr bool
	}{
		{"twelve auctions in three requests", "k", 12, 12, false},
		{"wrong key", "x", 5, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bids, err := CollectWinners(context.Background(), srv.URL, tc.key, []string{"p-1", "p-2"}, tc.n)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if len(bids) != tc.want {
				t.Fatalf("%d winners, want %d", len(bids), tc.want)
			}
			for _, b := range bids {
				if b.Product != "p-1" || b.Token != "tok" {
					t.Fatalf("winner %+v", b)
				}
			}
		})
	}
}

type wireEvent struct {
	ID            string           `json:"id"`
	OpaqueUserID  string           `json:"opaqueUserId"`
	ResolvedBidID string           `json:"resolvedBidId"`
	OccurredAt    time.Time        `json:"occurredAt"`
	Entity        *json.RawMessage `json:"entity"`
	Items         []struct {
		ProductID string `json:"productId"`
	} `json:"items"`
}

func TestSponsoredBody(t *testing.T) {
	bids := []SponsoredBid{{"sp-7", "tokA"}, {"sp-8", "tokB"}}
	tests := []struct {
		name      string
		share     float64
		sponsored func(n int) bool // over the impressions of 100 bodies
	}{
		{"organic only", 0, func(n int) bool { return n == 0 }},
		{"all sponsored", 1, func(n int) bool { return n == 100*30 }},
		{"half", 0.5, func(n int) bool { return n > 1200 && n < 1800 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pool atomic.Pointer[[]SponsoredBid]
			pool.Store(&bids)
			s := &sponsoredBody{bodyBuilder: newBodyBuilder([8]byte{1}, 3, 1, 50, 1000, 100), share: tc.share, pool: &pool}
			ids := map[string]bool{}
			var nSp int
			var buf []byte
			for range 100 {
				buf = s.build(buf, time.Now())
				var body struct{ Impressions, Clicks, Purchases, Pageviews []wireEvent }
				if err := json.Unmarshal(buf, &body); err != nil {
					t.Fatalf("body is not JSON: %v\n%s", err, buf)
				}
				spUsers := map[string]string{}
				for _, list := range [][]wireEvent{body.Impressions, body.Clicks} {
					for _, e := range list {
						switch {
						case e.ResolvedBidID != "" && e.Entity != nil, e.ResolvedBidID == "" && e.Entity == nil:
							t.Fatalf("event %s: resolvedBidId %q, entity %v", e.ID, e.ResolvedBidID, e.Entity != nil)
						case e.ResolvedBidID == "tokA":
							spUsers[e.OpaqueUserID] = "sp-7"
						case e.ResolvedBidID == "tokB":
							spUsers[e.OpaqueUserID] = "sp-8"
						}
					}
				}
				for _, e := range body.Impressions {
					if e.ResolvedBidID != "" {
						nSp++
					}
				}
				for _, p := range body.Purchases {
					if prod := p.Items[0].ProductID; (prod == "sp-7" || prod == "sp-8") && spUsers[p.OpaqueUserID] == "" {
						t.Fatalf("purchase %s of a sponsored product by %s, who saw no sponsored event", p.ID, p.OpaqueUserID)
					}
				}
				for _, list := range [][]wireEvent{body.Impressions, body.Clicks, body.Purchases, body.Pageviews} {
					for _, e := range list {
						if ids[e.ID] {
							t.Fatalf("duplicate event id %s", e.ID)
						}
						ids[e.ID] = true
					}
				}
			}
			if !tc.sponsored(nSp) {
				t.Fatalf("%d sponsored impressions of %d", nSp, 100*30)
			}
		})
	}
}

// TestSponsoredBodyMint: with Mint, every sponsored impression carries a token of its own that the API's
// keyring verifies, with the pool winner's claims but a fresh auction (a UUIDv7 of its time, before the
// event); its click carries the same token, and a purchase after it buys the winner's product.
func TestSponsoredBodyMint(t *testing.T) {
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{3: []byte("loadgen-test-key-0123456789abcdef")}, 3)
	if err != nil {
		t.Fatal(err)
	}
	mp := uuid.New()
	base := bidtoken.Claims{MarketplaceID: mp, AuctionID: uuid.Must(uuid.NewV7()), CampaignID: uuid.New(),
		AuctionTimeMs: time.Now().Add(-time.Hour).UnixMilli(), ChargeType: bidtoken.CPM, AdFormat: bidtoken.Listings, Rank: 2,
		PriceMicros: 1_250_000, WinnerType: bidtoken.WinnerProduct, WinnerID: "sp-7", VendorID: "v-1"}
	tok, err := kr.Encode(base)
	if err != nil {
		t.Fatal(err)
	}
	bids := []SponsoredBid{{"sp-7", tok}}
	var pool atomic.Pointer[[]SponsoredBid]
	pool.Store(&bids)
	s := &sponsoredBody{bodyBuilder: newBodyBuilder([8]byte{1}, 3, 1, 50, 1000, 100), share: 1, pool: &pool, mint: kr}
	seen := map[string]bool{}
	var buf []byte
	for range 20 {
		now := time.Now()
		buf = s.build(buf, now)
		var body struct{ Impressions, Clicks, Purchases []wireEvent }
		if err := json.Unmarshal(buf, &body); err != nil {
			t.Fatalf("body is not JSON: %v\n%s", err, buf)
		}
		byUser := map[string]bool{}
		for _, e := range body.Impressions {
			if seen[e.ResolvedBidID] {
				t.Fatalf("impression %s reuses a token", e.ID)
			}
			seen[e.ResolvedBidID] = true
			c, err := kr.Decode(e.ResolvedBidID, mp)
			if err != nil {
				t.Fatalf("impression %s: %v", e.ID, err)
			}
			id := uuid.UUID(c.AuctionID)
			sec, nsec := id.Time().UnixTime()
			if id.Version() != 7 || time.Unix(sec, nsec).UnixMilli() != c.AuctionTimeMs || c.AuctionTimeMs >= e.OccurredAt.UnixMilli() ||
				c.AuctionTimeMs < now.Add(-ClickLead-time.Second).UnixMilli() || !e.OccurredAt.Equal(now.Add(-ClickLead).Truncate(time.Millisecond)) {
				t.Fatalf("impression %s at %v: auction %s at %d", e.ID, e.OccurredAt, id, c.AuctionTimeMs)
			}
			want := base
			want.AuctionID, want.AuctionTimeMs, want.KeyID = c.AuctionID, c.AuctionTimeMs, 3
			if c != want {
				t.Fatalf("impression %s: claims %+v, want the pool winner's %+v", e.ID, c, want)
			}
			byUser[e.OpaqueUserID] = true
		}
		for _, e := range body.Clicks {
			if !seen[e.ResolvedBidID] {
				t.Fatalf("click %s carries a token no impression of the body had", e.ID)
			}
			// Past the invalid-click rules' minimum delay after its impression (ENDCAP_INVALID_CLICK_MIN_DELAY).
			if !e.OccurredAt.Equal(now.Truncate(time.Millisecond)) || e.OccurredAt.Sub(body.Impressions[0].OccurredAt) < time.Second {
				t.Fatalf("click %s at %v, its impressions at %v", e.ID, e.OccurredAt, body.Impressions[0].OccurredAt)
			}
		}
		for _, p := range body.Purchases { // all sponsored: each follows a (sponsored) click, when there are clicks
			if len(body.Clicks) > 0 && (!byUser[p.OpaqueUserID] || p.Items[0].ProductID != "sp-7") {
				t.Fatalf("purchase %s after a sponsored click buys %s", p.ID, p.Items[0].ProductID)
			}
		}
	}
	if len(seen) != 20*30 {
		t.Fatalf("%d distinct tokens, want one per impression (%d)", len(seen), 20*30)
	}
}
