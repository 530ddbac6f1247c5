package auction_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestWeeklyBudgetStopsAndServesNextWeek: a campaign with a weekly budget
// serves until its charges reach the budget (exactly, the charge that would
// cross it refused), then sits auctions out with weekly_budget_exhausted,
// and serves again from the next Monday 00:00 in the marketplace's time
// zone, when its charges count in a new week: the engine's clock, the real
// spend cache and charge script on Redis.
func TestWeeklyBudgetStopsAndServesNextWeek(t *testing.T) {
	w := newExWorld(t, auction.Reserve{})
	rdb := testenv.Get(t).Redis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cache := spend.NewCache(rdb, spend.Options{})
	w.engine.Budget = benchGate{cache}
	w.market.Loc = berlin
	// The spend cache loads the local day of the real clock: the auctions
	// run then, and next week.
	w.now = time.Now()
	w.catalog("", `[{"id":"P1","name":"P1","vendors":["v1"],"active":true}]`)
	c := w.campaign("Weekly", "v1", func(c *campaigns.Campaign) { c.WeeklyBudgetMicros = 1_000_000 }, "product:P1:0.5")
	req := `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["P1"]}}]}`
	run := func(want string) {
		t.Helper()
		cache.Register(exMP, berlin, c.ID)
		if err := cache.RefreshNow(ctx); err != nil {
			t.Fatal(err)
		}
		if got := w.lines(w.explain(auction.Auctions, req)[0]); !slices.Equal(got, []string{want}) {
			t.Errorf("at %s: %v, want [%s]", w.now.In(berlin), got, want)
		}
	}
	run("Weekly@P1 won #1 1")

	// Its clicks: 0.60 charged, 0.60 refused (1.20 > 1.00), 0.40 charged.
	charge := func(key, day string, micros int64) spend.Charge {
		return spend.Charge{MarketplaceID: exMP, Key: key, Owner: "0:" + key, CampaignID: c.ID, Day: day, Micros: micros,
			Limits: spend.Limits{WeeklyMicros: c.WeeklyBudgetMicros}, KeepUntil: time.Now().Add(time.Hour)}
	}
	today := spend.DayOf(w.now, berlin)
	out, err := spend.ApplyCharges(ctx, rdb, []spend.Charge{charge("a", today, 600_000), charge("b", today, 600_000), charge("c", today, 400_000)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []spend.ChargeOutcome{spend.ChargeApplied, spend.ChargeRefusedWeekly, spend.ChargeApplied}; !slices.Equal(out, want) {
		t.Fatalf("charges %v, want %v", out, want)
	}
	sp, err := spend.ReadSpends(ctx, rdb, exMP, today, []string{c.ID})
	if err != nil || sp[0].Week != 1_000_000 {
		t.Fatalf("week's spend %+v (%v), want exactly 1.00", sp, err)
	}
	run("Weekly@P1 filtered/weekly_budget_exhausted")

	// Next Monday, 00:30 in Berlin: a new week.
	w.now = spend.PeriodEnd(w.now, spend.PeriodWeek, berlin).Add(30 * time.Minute)
	run("Weekly@P1 won #1 1")
	monday := spend.DayOf(w.now, berlin)
	out, err = spend.ApplyCharges(ctx, rdb, []spend.Charge{charge("d", monday, 600_000)}, 0)
	if err != nil || out[0] != spend.ChargeApplied {
		t.Fatalf("a charge of the new week: %v %v", out, err)
	}
}
