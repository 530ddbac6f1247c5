package auction_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/management/campaigns"
)

// The campaign controls end to end through the campaigns service, the
// index and the engine: dayparting (in and out of hours, by the engine's
// clock, the next day, a day added) and negative keywords (exact and
// phrase, campaign and bid level), with the explain reasons and Run's
// winners agreeing.

// outcome is the explain line of campaign name on product, "" when the
// auction had no candidate of it.
func (w *exWorld) outcome(e auction.Explanation, name, product string) string {
	for _, c := range e.Candidates {
		if w.names[c.CampaignID] == name && c.ProductID == product {
			l := w.line(c)
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i] // rank and price
			}
			return l
		}
	}
	return ""
}

// winners runs body with Run and returns the names of the winning
// campaigns.
func (w *exWorld) winners(endpoint auction.EndpointKind, body string) []string {
	w.t.Helper()
	reqs, verr := auction.ParseAuctions([]byte(body), endpoint)
	if verr != nil {
		w.t.Fatal(verr)
	}
	defer auction.Release(reqs)
	res, err := w.engine.Run(context.Background(), w.market, endpoint, reqs)
	if err != nil {
		w.t.Fatal(err)
	}
	defer auction.ReleaseResults(res)
	var out []string
	for _, win := range res[0].Winners {
		out = append(out, w.names[win.CampaignID])
	}
	return out
}

func TestDayparting(t *testing.T) {
	w := newExWorld(t, auction.Reserve{})
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	w.market.Loc = berlin
	w.catalog("", `[{"id":"p1","name":"P1","vendors":["va"],"active":true},{"id":"p2","name":"P2","vendors":["vb"],"active":true}]`)
	day := w.campaign("day", "va", nil, "product:p1:0.5")
	w.campaign("always", "vb", nil, "product:p2:0.5")
	ctx := context.Background()
	// Monday 09:00–17:00, marketplace time.
	_, _, err = w.camps.PutTimetables(ctx, exMP, day.ID, 0, campaigns.TimetablesInput{Timetables: campaigns.Opt[[]campaigns.TimetableInput]{Set: true,
		V: []campaigns.TimetableInput{{DayOfWeek: opt(1), StartHour: opt(9), EndHour: opt(17)}}}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p1","p2"]}}]}`
	// 2026-03-02 is a Monday; Berlin is UTC+1 in March.
	for _, c := range []struct {
		local string
		want  string
	}{
		{"2026-03-02T08:59:59", "day@p1 filtered/outside_schedule"},
		{"2026-03-02T09:00:00", "day@p1 won"},
		{"2026-03-02T16:59:59", "day@p1 won"},
		{"2026-03-02T17:00:00", "day@p1 filtered/outside_schedule"},
		{"2026-03-03T10:00:00", "day@p1 filtered/outside_schedule"}, // the next day: Tuesday has no hours
		{"2026-03-09T10:00:00", "day@p1 won"},                       // the next Monday
	} {
		at, err := time.ParseInLocation("2006-01-02T15:04:05", c.local, berlin)
		if err != nil {
			t.Fatal(err)
		}
		w.now = at
		e := w.explain(auction.Auctions, body)[0]
		if got := w.outcome(e, "day", "p1"); got != c.want {
			t.Errorf("%s: %q, want %q", c.local, got, c.want)
		}
		if got := w.outcome(e, "always", "p2"); got != "always@p2 won" {
			t.Errorf("%s: a campaign without a timetable: %q", c.local, got)
		}
		won := strings.Join(w.winners(auction.Auctions, body), ",")
		if wantWin := strings.HasSuffix(c.want, "won"); strings.Contains(won, "day") != wantWin {
			t.Errorf("%s: Run's winners %s", c.local, won)
		}
		reason := campaigns.StatusReason(mustCampaign(t, w, day.ID), at, berlin, campaigns.BidsLive, nil)
		if wantOut := strings.HasSuffix(c.want, "outside_schedule"); (reason == campaigns.ReasonOutsideSchedule) != wantOut {
			t.Errorf("%s: statusReason %s", c.local, reason)
		}
	}
	// Tuesday added: the same hour of Tuesday serves now.
	_, _, err = w.camps.PutTimetables(ctx, exMP, day.ID, 0, campaigns.TimetablesInput{Timetables: campaigns.Opt[[]campaigns.TimetableInput]{Set: true,
		V: []campaigns.TimetableInput{{DayOfWeek: opt(2), StartHour: opt(0), EndHour: opt(24)}}}})
	if err != nil {
		t.Fatal(err)
	}
	w.now = time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC)
	if got := w.outcome(w.explain(auction.Auctions, body)[0], "day", "p1"); got != "day@p1 won" {
		t.Errorf("Tuesday added: %q", got)
	}
	// The timetable removed: every hour serves.
	if _, _, err := w.camps.DeleteTimetables(ctx, exMP, day.ID, 0, nil); err != nil {
		t.Fatal(err)
	}
	w.now = time.Date(2026, 3, 4, 2, 0, 0, 0, time.UTC) // Wednesday 03:00
	if got := w.outcome(w.explain(auction.Auctions, body)[0], "day", "p1"); got != "day@p1 won" {
		t.Errorf("timetable removed: %q", got)
	}
}

func TestNegativeKeywords(t *testing.T) {
	w := newExWorld(t, auction.Reserve{})
	w.catalog("", `[{"id":"p1","name":"P1","vendors":["va"],"active":true},{"id":"p2","name":"P2","vendors":["vb"],"active":true},
		{"id":"p3","name":"P3","vendors":["vc"],"active":true}]`)
	neg := w.campaign("neg", "va", nil, "product:p1:0.5", "keyword:shoes:0.6")
	bidneg := w.campaign("bidneg", "vb", nil, "product:p2:0.5", "keyword:boots:0.6")
	w.campaign("plain", "vc", nil, "product:p3:0.5")
	ctx := context.Background()
	nk := func(pairs ...string) campaigns.NegativeKeywordsInput {
		var l []campaigns.NegativeKeywordInput
		for i := 0; i < len(pairs); i += 2 {
			l = append(l, campaigns.NegativeKeywordInput{Keyword: opt(pairs[i]), MatchType: opt(pairs[i+1])})
		}
		return campaigns.NegativeKeywordsInput{NegativeKeywords: campaigns.Opt[[]campaigns.NegativeKeywordInput]{Set: true, V: l}}
	}
	if _, _, err := w.camps.PutCampaignNegatives(ctx, exMP, neg.ID, 0, nk("Cheap Shoes", "EXACT", "free", "phrase")); err != nil {
		t.Fatal(err)
	}
	// bidneg's keyword bid "boots" excludes "rain"; its product bid does not.
	var kwBid campaigns.Bid
	for _, b := range w.camps.BidsOf(exMP, bidneg.ID) {
		if b.TargetType == campaigns.TargetKeyword {
			kwBid = b
		}
	}
	if _, _, _, err := w.camps.PutBidNegatives(ctx, exMP, bidneg.ID, kwBid.ID, 0, nk("rain", "phrase")); err != nil {
		t.Fatal(err)
	}
	auctionOf := func(query string) string {
		return `{"auctions":[{"type":"listings","slots":5,"products":{"ids":["p1","p2","p3"]},"searchQuery":"` + query + `"}]}`
	}
	for _, c := range []struct {
		query              string
		neg, bidneg, plain string
	}{
		{"cheap shoes", "neg@p1 filtered/negative_keyword", "bidneg@p2 won", "plain@p3 won"},    // exact
		{"  CHEAP-shoe! ", "neg@p1 filtered/negative_keyword", "bidneg@p2 won", "plain@p3 won"}, // exact, normalised (case, punctuation, plural)
		{"cheap red shoes", "neg@p1 won", "bidneg@p2 won", "plain@p3 won"},                      // exact: not the whole query
		{"free shoes", "neg@p1 filtered/negative_keyword", "bidneg@p2 won", "plain@p3 won"},     // phrase
		{"shoes for free", "neg@p1 filtered/negative_keyword", "bidneg@p2 won", "plain@p3 won"}, // phrase at the end
		{"freedom shoes", "neg@p1 won", "bidneg@p2 won", "plain@p3 won"},                        // not a whole word
		{"rain boots", "neg@p1 won", "bidneg@p2 won", "plain@p3 won"},                           // the bid's negative: the product bid still serves
		{"", "neg@p1 won", "bidneg@p2 won", "plain@p3 won"},                                     // no query: nothing to match
	} {
		e := w.explain(auction.Auctions, auctionOf(c.query))[0]
		for _, x := range []struct{ name, product, want string }{{"neg", "p1", c.neg}, {"bidneg", "p2", c.bidneg}, {"plain", "p3", c.plain}} {
			if got := w.outcome(e, x.name, x.product); got != x.want {
				t.Errorf("%q: %s@%s %q, want %q\n%s", c.query, x.name, x.product, got, x.want, strings.Join(w.lines(e), "\n"))
			}
		}
		won := w.winners(auction.Auctions, auctionOf(c.query))
		if blocked := strings.HasSuffix(c.neg, "negative_keyword"); blocked == contains(won, "neg") {
			t.Errorf("%q: Run's winners %v", c.query, won)
		}
	}
	// The bid level on its own: in "rain boots" bidneg's keyword bid is
	// excluded (its product bid, more specific, counts anyway); in a
	// keyword-only auction it is all the campaign has.
	kwOnly := func(query string) auction.Explanation {
		return w.explain(auction.SponsoredBrand, `{"auctions":[{"winners":5,"placementId":"p","triggers":{"searchQuery":"`+query+`"}}]}`)[0]
	}
	if got := w.outcome(kwOnly("rain boots"), "bidneg", "p2"); got != "bidneg@p2 filtered/negative_keyword" {
		t.Errorf("keyword-only, the bid's negative: %q\n%s", got, strings.Join(w.lines(kwOnly("rain boots")), "\n"))
	}
	if got := w.outcome(kwOnly("winter boots"), "bidneg", "p2"); got != "bidneg@p2 won" {
		t.Errorf("keyword-only, no negative: %q\n%s", got, strings.Join(w.lines(kwOnly("winter boots")), "\n"))
	}
	if got := w.outcome(kwOnly("free shoes"), "neg", "p1"); got != "neg@p1 filtered/negative_keyword" {
		t.Errorf("keyword-only, the campaign's negative: %q\n%s", got, strings.Join(w.lines(kwOnly("free shoes")), "\n"))
	}
	// Removed: serves again.
	if _, _, err := w.camps.PutCampaignNegatives(ctx, exMP, neg.ID, 0, nk()); err != nil {
		t.Fatal(err)
	}
	if got := w.outcome(w.explain(auction.Auctions, auctionOf("free shoes"))[0], "neg", "p1"); got != "neg@p1 won" {
		t.Errorf("negatives removed: %q", got)
	}
}

func opt[T any](v T) campaigns.Opt[T] { return campaigns.Opt[T]{Set: true, V: v} }

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

func mustCampaign(t *testing.T, w *exWorld, id string) campaigns.Campaign {
	t.Helper()
	c, _, ok := w.camps.Campaign(exMP, id)
	if !ok {
		t.Fatalf("campaign %s not found", id)
	}
	return c
}
