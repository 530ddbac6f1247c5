package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/idlist"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/spend"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestStatusReason: the first reason that applies, in the documented
// order: status, bids, budgets (as spend.Check reads them, refusal hints
// included), pacing, else serving; unknown spend decides no budget reason.
func TestStatusReason(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	// 09:30 in Berlin: a daily budget of 48 allows 21 (docs/design/budgets.md, Pacing).
	now := time.Date(2024, 5, 10, 7, 30, 0, 0, time.UTC)
	before, after := now.Add(-time.Hour), now.Add(time.Hour)
	running := Campaign{ID: "c", Type: TypeListings, Active: true, StartDate: before, DailyBudgetMicros: 48_000_000, TotalBudgetMicros: 100_000_000}
	with := func(f func(*Campaign)) Campaign { c := running; f(&c); return c }
	spent := func(day, total int64) *spend.Spent { return &spend.Spent{Day: day, Total: total} }
	weekly := with(func(c *Campaign) { c.DailyBudgetMicros, c.WeeklyBudgetMicros, c.TotalBudgetMicros = 0, 70_000_000, 0 })
	monthly := with(func(c *Campaign) { c.DailyBudgetMicros, c.MonthlyBudgetMicros, c.TotalBudgetMicros = 0, 300_000_000, 0 })
	cases := []struct {
		name string
		c    Campaign
		bids BidState
		sp   *spend.Spent
		want string
	}{
		{"serving", running, BidsLive, spent(0, 0), ReasonServing},
		{"serving just under the pace", running, BidsLive, spent(20_999_999, 50_000_000), ReasonServing},
		{"paced at the allowance", running, BidsLive, spent(21_000_000, 50_000_000), ReasonPaced},
		{"daily budget spent", running, BidsLive, spent(48_000_000, 50_000_000), ReasonOutOfDailyBudget},
		{"total budget spent", running, BidsLive, spent(1, 100_000_000), ReasonOutOfBudget},
		{"total before daily", running, BidsLive, spent(48_000_000, 100_000_000), ReasonOutOfBudget},
		{"a daily refusal hint stops it below the budget", running, BidsLive, &spend.Spent{Day: 47_000_000, DayHint: 48_500_000, Total: 50_000_000}, ReasonOutOfDailyBudget},
		{"a total refusal hint stops it below the budget", running, BidsLive, &spend.Spent{Total: 99_000_000, TotalHint: 100_400_000}, ReasonOutOfBudget},
		{"no daily budget: never paced", with(func(c *Campaign) { c.DailyBudgetMicros = 0 }), BidsLive, spent(99_000_000, 99_000_000), ReasonServing},
		{"no total budget", with(func(c *Campaign) { c.TotalBudgetMicros = 0 }), BidsLive, spent(1, math.MaxInt64), ReasonServing},
		{"spend unknown", running, BidsLive, nil, ReasonSpendUnavailable},
		// A weekly budget of 70 on Friday 09:30 in Berlin, 40 spent on the
		// days before: the 30 left spread over Friday to Sunday allows
		// 30 × (34,200 + 3,600) / 259,200 = 4.375 today.
		{"weekly budget spent", weekly, BidsLive, &spend.Spent{Week: 70_000_000, Total: 70_000_000}, ReasonOutOfWeeklyBudget},
		{"a weekly refusal hint", weekly, BidsLive, &spend.Spent{Week: 69_000_000, WeekHint: 70_100_000}, ReasonOutOfWeeklyBudget},
		{"weekly, under its pace", weekly, BidsLive, &spend.Spent{Day: 4_374_999, Week: 44_374_999}, ReasonServing},
		{"weekly, paced", weekly, BidsLive, &spend.Spent{Day: 4_375_000, Week: 44_375_000}, ReasonPaced},
		{"weekly: the day's spend alone stops nothing", weekly, BidsLive, &spend.Spent{Day: 0, Week: 0}, ReasonServing},
		{"monthly budget spent", monthly, BidsLive, &spend.Spent{Month: 300_000_000}, ReasonOutOfMonthlyBudget},
		{"total before monthly", with(func(c *Campaign) { c.DailyBudgetMicros, c.MonthlyBudgetMicros = 0, 100_000_000 }), BidsLive, &spend.Spent{Month: 100_000_000, Total: 100_000_000}, ReasonOutOfBudget},
		{"no bids", running, BidsNone, spent(0, 0), ReasonNoBids},
		{"no active bids", running, BidsNoneActive, spent(0, 0), ReasonNoActiveBids},
		{"no eligible products", running, BidsNoneEligible, spent(0, 0), ReasonNoEligibleProducts},
		{"bids before budgets", running, BidsNoneEligible, spent(48_000_000, 100_000_000), ReasonNoEligibleProducts},
		{"bids decided without spend", running, BidsNone, nil, ReasonNoBids},
		{"scheduled", with(func(c *Campaign) { c.StartDate = after }), BidsNone, spent(0, 100_000_000), ReasonScheduled},
		{"paused", with(func(c *Campaign) { c.Active = false }), BidsNone, nil, ReasonPaused},
		{"paused and scheduled", with(func(c *Campaign) { c.Active = false; c.StartDate = after }), BidsLive, nil, ReasonPaused},
		{"ended", with(func(c *Campaign) { c.EndDate = &before }), BidsLive, spent(0, 0), ReasonEnded},
		{"ended and paused", with(func(c *Campaign) { c.EndDate = &before; c.Active = false }), BidsLive, nil, ReasonEnded},
		{"ends at now", with(func(c *Campaign) { c.EndDate = &now }), BidsLive, spent(0, 0), ReasonEnded},
		{"archived", with(func(c *Campaign) { c.ArchivedAt = &before }), BidsLive, spent(0, 0), ReasonArchived},
		{"archived at now", with(func(c *Campaign) { c.ArchivedAt = &now }), BidsLive, spent(0, 0), ReasonArchived},
		{"archived and ended", with(func(c *Campaign) { c.ArchivedAt = &before; c.EndDate = &before }), BidsLive, nil, ReasonArchived},
		{"archived later (a status of the past)", with(func(c *Campaign) { c.ArchivedAt = &after }), BidsLive, spent(0, 0), ReasonServing},
		// A timetable: Friday 09:30 is outside Monday's hours; inside
		// Friday's 09:00–17:00, 48 over 8 served hours allows 9 at 09:30
		// ((1,800 + 3,600) / 28,800).
		{"outside its timetable", with(func(c *Campaign) { c.Timetables = []TimetableDay{{1, 9, 17}} }), BidsLive, spent(0, 0), ReasonOutsideSchedule},
		{"outside its timetable, spend unknown", with(func(c *Campaign) { c.Timetables = []TimetableDay{{1, 9, 17}} }), BidsLive, nil, ReasonOutsideSchedule},
		{"bids before the timetable", with(func(c *Campaign) { c.Timetables = []TimetableDay{{1, 9, 17}} }), BidsNone, spent(0, 0), ReasonNoBids},
		{"in its hours, under their pace", with(func(c *Campaign) { c.Timetables = []TimetableDay{{5, 9, 17}} }), BidsLive, spent(8_999_999, 50_000_000), ReasonServing},
		{"in its hours, paced over them", with(func(c *Campaign) { c.Timetables = []TimetableDay{{5, 9, 17}} }), BidsLive, spent(9_000_000, 50_000_000), ReasonPaced},
		{"the end hour is not served", with(func(c *Campaign) { c.Timetables = []TimetableDay{{5, 0, 9}} }), BidsLive, spent(0, 0), ReasonOutsideSchedule},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		got := StatusReason(tc.c, now, berlin, tc.bids, tc.sp)
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		seen[got] = true
	}
	seen[ReasonInsufficientFunds] = true // View decides it (TestViewFunds)
	for _, r := range StatusReasons {
		if !seen[r] {
			t.Errorf("no case answers %s", r)
		}
	}
}

func TestPacing(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	daily := Campaign{DailyBudgetMicros: 48_000_000}
	cases := []struct {
		c    Campaign
		now  time.Time
		sp   spend.Spent
		want string
	}{
		{Campaign{TotalBudgetMicros: 5}, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 99}, PacingNoDailyBudget},
		{daily, at("2024-05-10T07:30:00Z"), spend.Spent{}, PacingOnPace},
		{daily, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 20_999_999}, PacingOnPace},
		{daily, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 21_000_000}, PacingAheadOfPace},
		{daily, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 1, DayHint: 21_000_000}, PacingAheadOfPace},
		{daily, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 48_000_000}, PacingDailyBudgetSpent},
		// The day that clocks go forward: 82,800 s (docs/design/budgets.md).
		{daily, at("2024-03-31T07:30:00Z"), spend.Spent{Day: 19_826_086}, PacingAheadOfPace},
		{daily, at("2024-03-31T07:30:00Z"), spend.Spent{Day: 19_826_085}, PacingOnPace},
		// The last hour of the day allows the whole budget.
		{daily, at("2024-05-10T21:00:00Z"), spend.Spent{Day: 47_999_999}, PacingOnPace},
		// A budget of 10 µ a day is paced at midnight with nothing spent.
		{Campaign{DailyBudgetMicros: 10}, at("2024-05-09T22:00:00Z"), spend.Spent{}, PacingAheadOfPace},
		// A weekly budget of 70 on Friday 09:30, 40 spent before: 4.375 today
		// (TestStatusReason); a monthly one is paced the same way over the
		// month (Friday 10 May to the 31st: 22 days).
		{Campaign{WeeklyBudgetMicros: 70_000_000}, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 4_374_999, Week: 44_374_999}, PacingOnPace},
		{Campaign{WeeklyBudgetMicros: 70_000_000}, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 4_375_000, Week: 44_375_000}, PacingAheadOfPace},
		{Campaign{WeeklyBudgetMicros: 70_000_000, TotalBudgetMicros: 1}, at("2024-05-10T07:30:00Z"), spend.Spent{Week: 70_000_000, Total: 1}, PacingWeeklyBudgetSpent},
		{Campaign{MonthlyBudgetMicros: 220_000_000}, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 4_374_999, Month: 4_374_999}, PacingOnPace},
		{Campaign{MonthlyBudgetMicros: 220_000_000}, at("2024-05-10T07:30:00Z"), spend.Spent{Day: 4_375_000, Month: 4_375_000}, PacingAheadOfPace},
		{Campaign{MonthlyBudgetMicros: 220_000_000}, at("2024-05-10T07:30:00Z"), spend.Spent{Month: 220_000_000}, PacingMonthlyBudgetSpent},
	}
	for i, tc := range cases {
		if got := Pacing(tc.c, tc.now, berlin, tc.sp); got != tc.want {
			t.Errorf("case %d (%s, %+v): %s, want %s", i, tc.now.In(berlin), tc.sp, got, tc.want)
		}
	}
}

// fakeSpend answers spend from a map and records its calls.
type fakeSpend struct {
	mu    sync.Mutex
	spent map[string]spend.Spent
	err   error
	calls [][]string // ids of each call
	days  []string
}

func (f *fakeSpend) ReadSpend(_ context.Context, mp, day string, ids []string) ([]spend.Spent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, slices.Clone(ids))
	f.days = append(f.days, day)
	if f.err != nil {
		return nil, f.err
	}
	out := make([]spend.Spent, len(ids))
	for i, id := range ids {
		out[i] = f.spent[mp+"/"+id]
	}
	return out, nil
}

// TestView renders campaigns with their status reason and spend: one spend
// read for the whole page, the marketplace's local day, remaining budgets
// null where there is no budget, and when the read fails every campaign
// with its spend unavailable (and the reasons that need no spend).
// TestViewFunds: a running campaign whose vendor is out of funds is
// insufficient_balance before its budgets are looked at; its bids and
// status come first; the vendor's funds are read once per view; a read that
// fails leaves the reason undecided (spend_unavailable).
func TestViewFunds(t *testing.T) {
	s, _, now := newService(t)
	ctx := t.Context()
	*now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mk := func(body string, bid bool) Campaign {
		c, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, body))
		if err != nil {
			t.Fatal(err)
		}
		if bid {
			if _, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"product","target":"p-1","bidAmount":1}`)); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	serving := mk(`{"name":"S","type":"listings","totalBudget":100,"startDate":"2026-01-01T00:00:00Z"}`, true)
	spent := mk(`{"name":"B","type":"listings","totalBudget":1,"startDate":"2026-01-01T00:00:00Z"}`, true)
	nobids := mk(`{"name":"N","type":"listings","totalBudget":100,"startDate":"2026-01-01T00:00:00Z"}`, false)
	paused := mk(`{"name":"P","type":"listings","totalBudget":100,"isActive":false}`, true)
	s.UseSpend(&fakeSpend{spent: map[string]spend.Spent{mpA + "/" + spent.ID: {Total: 1_000_000}}})
	reads := 0
	var fail error
	s.UseFunds(func(_ context.Context, mp, vendor string) (bool, error) {
		reads++
		return vendor == "v-1", fail
	})
	var got []string
	for _, j := range s.View(ctx, mpA, time.UTC, serving, spent, nobids, paused) {
		got = append(got, j.StatusReason)
	}
	if want := []string{ReasonInsufficientFunds, ReasonInsufficientFunds, ReasonNoBids, ReasonPaused}; !reflect.DeepEqual(got, want) || reads != 1 {
		t.Errorf("reasons %v (%d reads of the funds), want %v (1)", got, reads, want)
	}
	fail = errors.New("i/o timeout")
	if out := s.View(ctx, mpA, time.UTC, serving); out[0].StatusReason != ReasonSpendUnavailable {
		t.Errorf("funds unreadable: %s", out[0].StatusReason)
	}
}

func TestView(t *testing.T) {
	s, f, now := newService(t)
	ctx := t.Context()
	auckland := mustLoc(t, "Pacific/Auckland")
	*now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // 01:00 on 2 March in Auckland
	mk := func(body string) Campaign {
		c, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, body))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1 := mk(`{"name":"Both","type":"listings","dailyBudget":10,"totalBudget":100,"startDate":"2026-01-01T00:00:00Z"}`)
	c2 := mk(`{"name":"Daily","type":"listings","dailyBudget":10,"startDate":"2026-01-01T00:00:00Z"}`)
	c3 := mk(`{"name":"Paused","type":"banners","totalBudget":5,"isActive":false}`)
	c4 := mk(`{"name":"Auto","type":"automated","dailyBudget":50,"startDate":"2026-01-01T00:00:00Z"}`)
	c5 := mk(`{"name":"Weekly","type":"listings","budget":{"type":"weekly","amount":70},"startDate":"2026-01-01T00:00:00Z"}`)
	if b := s.JSON(c5).Budget; b == nil || *b != (BudgetJSON{Type: BudgetWeekly, Amount: 70_000_000}) || s.JSON(c5).DailyBudget != nil {
		t.Errorf("weekly campaign: budget %+v, dailyBudget %v", b, s.JSON(c5).DailyBudget)
	}
	if b := s.JSON(c1).Budget; b == nil || *b != (BudgetJSON{Type: BudgetDaily, Amount: 10_000_000}) {
		t.Errorf("daily campaign: budget %+v", b)
	}
	for _, c := range []Campaign{c1, c2, c5} {
		if _, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"product","target":"p-1","bidAmount":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	sp := &fakeSpend{spent: map[string]spend.Spent{
		// 2.5 by 01:00 is ahead of the pace (10 × 2 h / 24 h = 0.83).
		mpA + "/" + c1.ID: {Day: 2_500_000, Total: 100_000_000},
		mpA + "/" + c2.ID: {Day: 12_000_000, Total: 40_000_000}, // over the budget (set by hand): remaining 0
		mpA + "/" + c3.ID: {Total: 1_000_000},
		mpA + "/" + c5.ID: {Day: 1_000_000, Week: 70_000_000, Month: 80_000_000, Total: 90_000_000},
	}}
	s.UseSpend(sp)
	out := s.View(ctx, mpA, auckland, c1, c2, c3, c4, c5)
	if len(sp.calls) != 1 || !reflect.DeepEqual(sp.calls[0], []string{c1.ID, c2.ID, c3.ID, c4.ID, c5.ID}) || sp.days[0] != "2026-03-02" {
		t.Fatalf("spend reads %v on %v, want one read of the four campaigns on 2026-03-02", sp.calls, sp.days)
	}
	render := func(j CampaignJSON) string {
		b, _ := json.Marshal(struct {
			R string     `json:"statusReason"`
			S *SpendJSON `json:"spend"`
		}{j.StatusReason, j.Spend})
		return string(b)
	}
	want := []string{
		`{"statusReason":"out_of_budget","spend":{"day":"2026-03-02","today":2.5,"thisWeek":0,"thisMonth":0,"total":100,"remainingDailyBudget":7.5,"remainingWeeklyBudget":null,"remainingMonthlyBudget":null,"remainingTotalBudget":0,"pacing":"ahead_of_pace","available":true}}`,
		`{"statusReason":"out_of_daily_budget","spend":{"day":"2026-03-02","today":12,"thisWeek":0,"thisMonth":0,"total":40,"remainingDailyBudget":0,"remainingWeeklyBudget":null,"remainingMonthlyBudget":null,"remainingTotalBudget":null,"pacing":"daily_budget_spent","available":true}}`,
		`{"statusReason":"paused","spend":{"day":"2026-03-02","today":0,"thisWeek":0,"thisMonth":0,"total":1,"remainingDailyBudget":null,"remainingWeeklyBudget":null,"remainingMonthlyBudget":null,"remainingTotalBudget":4,"pacing":"no_daily_budget","available":true}}`,
		`{"statusReason":"serving","spend":{"day":"2026-03-02","today":0,"thisWeek":0,"thisMonth":0,"total":0,"remainingDailyBudget":50,"remainingWeeklyBudget":null,"remainingMonthlyBudget":null,"remainingTotalBudget":null,"pacing":"on_pace","available":true}}`,
		`{"statusReason":"out_of_weekly_budget","spend":{"day":"2026-03-02","today":1,"thisWeek":70,"thisMonth":80,"total":90,"remainingDailyBudget":null,"remainingWeeklyBudget":0,"remainingMonthlyBudget":null,"remainingTotalBudget":null,"pacing":"weekly_budget_spent","available":true}}`,
	}
	for i, j := range out {
		if got := render(j); got != want[i] {
			t.Errorf("campaign %d:\n got %s\nwant %s", i+1, got, want[i])
		}
	}
	// The rest of the campaign is rendered as JSON renders it.
	plain := s.JSON(c1)
	plain.StatusReason, plain.Spend = out[0].StatusReason, out[0].Spend
	if !reflect.DeepEqual(plain, out[0]) {
		t.Errorf("view %+v\nJSON %+v", out[0], plain)
	}

	// Redis did not answer: spend unavailable, reasons without spend kept.
	sp.err = errors.New("i/o timeout")
	out = s.View(ctx, mpA, auckland, c1, c3)
	if got := render(out[0]); got != `{"statusReason":"spend_unavailable","spend":{"day":"2026-03-02","today":null,"thisWeek":null,"thisMonth":null,"total":null,"remainingDailyBudget":null,"remainingWeeklyBudget":null,"remainingMonthlyBudget":null,"remainingTotalBudget":null,"pacing":null,"available":false}}` {
		t.Errorf("unavailable: %s", got)
	}
	if out[1].StatusReason != ReasonPaused || out[1].Spend.Available {
		t.Errorf("unavailable, paused: %s", render(out[1]))
	}
	// No campaigns: no read.
	calls := len(sp.calls)
	if out := s.View(ctx, mpA, auckland); len(out) != 0 || len(sp.calls) != calls {
		t.Errorf("empty view: %v, %d reads", out, len(sp.calls)-calls)
	}
	// Without a reader, spend is never available.
	s.UseSpend(nil)
	if out := s.View(ctx, mpA, auckland, c4); out[0].Spend.Available || out[0].StatusReason != ReasonSpendUnavailable {
		t.Errorf("no reader: %s", render(out[0]))
	}

	// The automated campaign's products leave it: no eligible product.
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-1", Active: false, Vendors: idlist.Of("v-1")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-2", Active: true, Vendors: idlist.Of("v-2")})
	if st := s.BidState(mpA, c4); st != BidsNoneEligible {
		t.Errorf("automated campaign without an eligible product: %d", st)
	}
}

// TestBidState: what a listings campaign's bids allow, following the bids'
// switches and Eligibility (the catalog).
func TestBidState(t *testing.T) {
	s, f, _ := newService(t)
	ctx := t.Context()
	c, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
	if err != nil {
		t.Fatal(err)
	}
	step := func(name string, want BidState) {
		t.Helper()
		if got := s.BidState(mpA, c); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
	step("no bids", BidsNone)
	_, kw, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"keyword","target":"shoes","bidAmount":1,"isActive":false}`))
	if err != nil {
		t.Fatal(err)
	}
	step("one inactive bid", BidsNoneActive)
	if _, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"product","target":"p-3","bidAmount":1}`)); err != nil {
		t.Fatal(err)
	}
	step("an active bid on an inactive product", BidsNoneEligible)
	if _, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"product","target":"p-1","bidAmount":1}`)); err != nil {
		t.Fatal(err)
	}
	step("an active bid on an active product", BidsLive)
	f.DeleteProduct(mpA, "p-1")
	step("its product deleted", BidsNoneEligible)
	if _, _, _, err := s.UpdateBid(ctx, mpA, c.ID, kw.ID, 0, decode[BidInput](t, `{"isActive":true}`)); err != nil {
		t.Fatal(err)
	}
	step("the keyword bid switched on", BidsLive)
}
