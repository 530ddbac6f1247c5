package auction_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// countingCaps counts the reads of a CapView.
type countingCaps struct {
	auction.CapView
	reads atomic.Int64
}

func (c *countingCaps) Send(ctx context.Context, mp, user string, deadline time.Time, p *freqcap.Pending) {
	c.reads.Add(1)
	c.CapView.Send(ctx, mp, user, deadline, p)
}

// TestFrequencyCaps: the explain names the cap that filtered a candidate
// (frequency_capped) from the counts in Redis, per campaign and per bid; the
// next day and the next week start again; a shopper the caps cannot count
// is served unless the campaign skips them; the counts are read once per
// request whatever its number of auctions, not at all in a marketplace
// without capped campaigns, and, in one with some, also for a request that
// meets none (the read starts before the products are read).
func TestFrequencyCaps(t *testing.T) {
	env := testenv.Get(t)
	w := newExWorld(t, auction.Reserve{})
	store := freqcap.New(env.Redis(t))
	caps := &countingCaps{CapView: store}
	w.engine.Caps, w.engine.CapTimeout = caps, 2*time.Second
	w.now = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // a Monday
	w.catalog("", `[{"id":"p1","name":"P1","vendors":["v"],"active":true},{"id":"p2","name":"P2","vendors":["v"],"active":true}]`)
	// No capped campaign in the marketplace: nothing is read.
	w.campaign("plain", "v", nil, "product:p2:1")
	w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p1","p2"]},"opaqueUserId":"someone"}]}`)
	if n := caps.reads.Load(); n != 0 {
		t.Errorf("%d reads in a marketplace without capped campaigns, want 0", n)
	}
	restrict := func(skip bool, rs ...campaigns.Restriction) func(*campaigns.Campaign) {
		return func(c *campaigns.Campaign) {
			c.Restrictions = rs
			if skip {
				c.CapsWithoutShopper = campaigns.CapsSkip
			}
		}
	}
	// 1: impressions, daily, campaign; 14: clicks, weekly, bid; 3: impressions, monthly, campaign.
	daily := w.campaign("daily", "v", restrict(false, campaigns.Restriction{ID: 1, TypeID: 1, Limit: 1, Active: true}), "product:p1:1")
	bidc := w.campaign("bid", "v", restrict(false, campaigns.Restriction{ID: 1, TypeID: 14, Limit: 2, Active: true}), "product:p1:1")
	skip := w.campaign("skip", "v", restrict(true, campaigns.Restriction{ID: 1, TypeID: 3, Limit: 5, Active: true}), "product:p1:1")
	w.campaign("off", "v", restrict(true, campaigns.Restriction{ID: 1, TypeID: 1, Limit: 1, Active: false}), "product:p1:1")
	w.campaign("free", "v", nil, "product:p2:1")
	bidID := w.camps.BidsOf(exMP, bidc.ID)[0].ID

	user := "shopper-" + uuid.NewString()
	verdicts := func(extra string) map[string]string {
		t.Helper()
		e := w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":5,"products":{"ids":["p1","p2"]}`+extra+`}]}`)[0]
		out := map[string]string{}
		for _, c := range e.Candidates {
			v := "competes" // won or lost in the ranking
			if l := strings.SplitN(w.line(c), " ", 2)[1]; strings.HasPrefix(l, "filtered/") {
				v = l
			}
			out[w.names[c.CampaignID]] = v
		}
		return out
	}
	expect := func(what, extra string, want map[string]string) {
		t.Helper()
		got := verdicts(extra)
		for name, v := range want {
			if got[name] != v {
				t.Errorf("%s: %s is %q, want %q (all: %v)", what, name, got[name], v, got)
			}
		}
	}
	shopper := `,"opaqueUserId":"` + user + `"`
	expect("no counts", shopper, map[string]string{"daily": "competes", "bid": "competes", "skip": "competes", "off": "competes", "free": "competes"})

	hit := func(off int64, fields ...string) {
		t.Helper()
		if err := store.Count(context.Background(), []freqcap.Hit{{MP: exMP, User: user, Partition: 0, Offset: off, At: w.now, Loc: time.UTC, Fields: fields}}, w.now); err != nil {
			t.Fatal(err)
		}
	}
	hit(1, freqcap.CampaignField(daily.ID, freqcap.Impression), freqcap.CampaignField(skip.ID, freqcap.Impression))
	hit(2, freqcap.BidField(bidc.ID, bidID, freqcap.Click))
	expect("one impression, one click", shopper, map[string]string{"daily": "filtered/frequency_capped", "bid": "competes", "skip": "competes", "free": "competes"})
	hit(3, freqcap.BidField(bidc.ID, bidID, freqcap.Click))
	hit(3, freqcap.BidField(bidc.ID, bidID, freqcap.Click)) // a replay: not counted again
	expect("two clicks", shopper, map[string]string{"daily": "filtered/frequency_capped", "bid": "filtered/frequency_capped", "free": "competes"})
	// Two shoppers in one request: a read for each, each auction judged on
	// its own shopper's counts (the read started for the first is not
	// reused for the second).
	before := caps.reads.Load()
	other := `{"type":"listings","slots":5,"products":{"ids":["p1","p2"]},"opaqueUserId":"someone-else"}`
	two := w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":5,"products":{"ids":["p1","p2"]}`+shopper+`},`+other+`]}`)
	if n := caps.reads.Load() - before; n != 2 {
		t.Errorf("%d reads for two shoppers' auctions, want 2", n)
	}
	verdictOf := func(e auction.Explanation, name string) string {
		for _, c := range e.Candidates {
			if w.names[c.CampaignID] == name {
				return strings.SplitN(w.line(c), " ", 2)[1]
			}
		}
		return "absent"
	}
	if v := verdictOf(two[0], "daily"); v != "filtered/frequency_capped" {
		t.Errorf("the capped shopper's auction: daily is %q, want filtered/frequency_capped", v)
	}
	if v := verdictOf(two[1], "daily"); strings.HasPrefix(v, "filtered/") {
		t.Errorf("the other shopper's auction: daily is %q, want it to compete", v)
	}
	var c freqcap.Counts
	if err := store.Read(context.Background(), exMP, user, w.now, time.UTC, &c); err != nil || c.Bid("weekly", bidc.ID, bidID, freqcap.Click) != 2 {
		t.Fatalf("clicks counted %d, %v; want 2", c.Bid("weekly", bidc.ID, bidID, freqcap.Click), err)
	}

	// Another shopper, and none: the caps do not apply; skip sits out.
	expect("another shopper", `,"opaqueUserId":"someone-else"`, map[string]string{"daily": "competes", "bid": "competes", "skip": "competes"})
	expect("no shopper", "", map[string]string{"daily": "competes", "bid": "competes", "skip": "filtered/frequency_cap_no_shopper", "off": "competes"})

	// The next day: the daily cap is lifted, the weekly one holds.
	w.now = w.now.Add(24 * time.Hour)
	expect("next day", shopper, map[string]string{"daily": "competes", "bid": "filtered/frequency_capped"})
	// The next week: both lifted.
	w.now = w.now.Add(7 * 24 * time.Hour)
	expect("next week", shopper, map[string]string{"daily": "competes", "bid": "competes", "skip": "competes"})

	// One read per request, whatever its number of auctions.
	before = caps.reads.Load()
	three := `{"type":"listings","slots":2,"products":{"ids":["p1","p2"]}` + shopper + `}`
	w.explain(auction.Auctions, `{"auctions":[`+three+`,`+three+`,`+three+`]}`)
	if n := caps.reads.Load() - before; n != 1 {
		t.Errorf("%d reads for a request of three auctions, want 1", n)
	}
	// Without a capped candidate, in a marketplace with caps: one read (it
	// started before the products were known), which the auction does not
	// wait for: it may end after the answer.
	before = caps.reads.Load()
	w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p2"]}`+shopper+`}]}`)
	for deadline := time.Now().Add(5 * time.Second); caps.reads.Load()-before < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := caps.reads.Load() - before; n != 1 {
		t.Errorf("%d reads without a capped candidate, want 1", n)
	}

	// Counts that cannot be read (nothing listens): capped campaigns serve,
	// but skip sits out, within the deadline.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	w.engine.Caps, w.engine.CapTimeout = freqcap.New(down), 50*time.Millisecond
	start := time.Now()
	expect("counts unavailable", shopper, map[string]string{"daily": "competes", "bid": "competes", "skip": "filtered/frequency_cap_unavailable"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the auction took %s with Redis down", d)
	}

	// A Redis that hangs (SIGSTOP) with a connection open: the read gives
	// up at CapTimeout, and the auction answers under the same rule.
	pr := testenv.OwnRedis(t)
	silent := redisstore.Open(redisstore.Options{Addr: pr.Addr})
	t.Cleanup(func() { _ = silent.Close() })
	if err := silent.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := pr.Freeze(); err != nil {
		t.Fatal(err)
	}
	w.engine.Caps, w.engine.CapTimeout = freqcap.New(silent), 100*time.Millisecond
	start = time.Now()
	expect("counts frozen", shopper, map[string]string{"daily": "competes", "bid": "competes", "skip": "filtered/frequency_cap_unavailable"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the auction took %s with Redis frozen", d)
	}
}
