package auction_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/endcap/endcap/auction"
)

// exFunds says which vendors are out of funds.
type exFunds map[string]bool

func (f exFunds) Out(_, vendorID string, _ time.Time) bool { return f[vendorID] }

// TestAuctionInsufficientBalance: in a marketplace with balances, the
// campaigns of a vendor out of funds do not compete (explain:
// insufficient_balance), whatever their bids; the other vendors' do. In a
// marketplace without balances nothing changes.
func TestAuctionInsufficientBalance(t *testing.T) {
	w := newExWorld(t, auction.Reserve{})
	w.catalog("", `[{"id":"a1","name":"A1","vendors":["va"],"active":true},{"id":"b1","name":"B1","vendors":["vb"],"active":true}]`)
	w.campaign("rich", "va", nil, "product:a1:0.5")
	w.campaign("broke", "vb", nil, "product:b1:2")
	w.engine.Funds = exFunds{"vb": true}
	body := `{"auctions":[{"type":"listings","slots":5,"products":{"ids":["a1","b1"]}}]}`
	winners := func() []string {
		t.Helper()
		reqs, verr := auction.ParseAuctions([]byte(body), auction.Auctions)
		if verr != nil {
			t.Fatal(verr)
		}
		defer auction.Release(reqs)
		res, err := w.engine.Run(context.Background(), w.market, auction.Auctions, reqs)
		if err != nil {
			t.Fatal(err)
		}
		defer auction.ReleaseResults(res)
		var out []string
		for _, win := range res[0].Winners {
			out = append(out, w.names[win.CampaignID])
		}
		return out
	}
	for _, tc := range []struct {
		balances bool
		want     []string
		broke    string
	}{
		{false, []string{"broke", "rich"}, "broke@b1 won"},
		{true, []string{"rich"}, "broke@b1 filtered/insufficient_balance"},
	} {
		w.market.Balances = tc.balances
		if got := winners(); !slices.Equal(got, tc.want) {
			t.Errorf("balances %v: winners %v, want %v", tc.balances, got, tc.want)
		}
		e := w.explain(auction.Auctions, body)[0]
		found := false
		for _, c := range e.Candidates {
			if w.names[c.CampaignID] == "broke" {
				found = true
				if l := w.line(c); len(l) < len(tc.broke) || l[:len(tc.broke)] != tc.broke {
					t.Errorf("balances %v: %q, want %q", tc.balances, l, tc.broke)
				}
			}
		}
		if !found {
			t.Errorf("balances %v: broke is not a candidate: %v", tc.balances, w.lines(e))
		}
	}
}
