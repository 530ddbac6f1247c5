package campaigns

import (
	"context"
	"errors"
	"time"

	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/spend"
)

// Whether a campaign takes part in auctions, and why not, at read time:
// its status, its bids (Eligibility, the one rule of what a bid may take
// part with) and its spend as the budget cap counts it (spend,
// Redis), read with the budget rule the auction applies (spend.Check).
// docs/reference/campaigns.md, Delivery.

// Status reasons: why a campaign does or does not take part in auctions
// now, the first that applies in this order.
const (
	ReasonArchived           = "archived"              // status archived
	ReasonEnded              = "ended"                 // status ended
	ReasonPaused             = "paused"                // status paused
	ReasonScheduled          = "scheduled"             // status scheduled
	ReasonNoBids             = "no_bids"               // listings/banners: no bid
	ReasonNoActiveBids       = "no_active_bids"        // listings/banners: no bid with isActive
	ReasonNoEligibleProducts = "no_eligible_products"  // no active bid whose target is eligible (automated: no eligible product of the vendor)
	ReasonOutOfBudget        = "out_of_budget"         // total budget used up
	ReasonOutOfDailyBudget   = "out_of_daily_budget"   // daily budget used up today (local day)
	ReasonOutOfWeeklyBudget  = "out_of_weekly_budget"  // weekly budget used up this local week (Monday to Sunday)
	ReasonOutOfMonthlyBudget = "out_of_monthly_budget" // monthly budget used up this local calendar month
	ReasonPaced              = "paced"                 // spent ahead of the pacing curve: sits auctions out until it catches up
	ReasonInsufficientFunds  = "insufficient_balance"  // its vendor is out of funds (marketplaces with balances, docs/reference/balances.md)
	ReasonSpendUnavailable   = "spend_unavailable"     // spend could not be read: the budget reasons cannot be decided
	ReasonServing            = "serving"               // takes part in auctions
)

// StatusReasons are the status reasons in their order.
var StatusReasons = []string{ReasonArchived, ReasonEnded, ReasonPaused, ReasonScheduled, ReasonNoBids, ReasonNoActiveBids,
	ReasonNoEligibleProducts, ReasonOutsideSchedule, ReasonInsufficientFunds, ReasonOutOfBudget, ReasonOutOfMonthlyBudget, ReasonOutOfWeeklyBudget, ReasonOutOfDailyBudget, ReasonPaced, ReasonSpendUnavailable, ReasonServing}

// Pacing states of the budget of a period (daily, weekly or monthly).
const (
	PacingNoDailyBudget      = "no_daily_budget"      // no budget of a period: not paced
	PacingOnPace             = "on_pace"              // today's spend is below what the pacing curve allows now
	PacingAheadOfPace        = "ahead_of_pace"        // at or above it (below the budget): paced
	PacingDailyBudgetSpent   = "daily_budget_spent"   // the daily budget is used up today
	PacingWeeklyBudgetSpent  = "weekly_budget_spent"  // the weekly budget is used up this week
	PacingMonthlyBudgetSpent = "monthly_budget_spent" // the monthly budget is used up this month
)

// BidState is what a campaign's bids allow, for StatusReason.
type BidState uint8

// Bid states.
const (
	BidsLive         BidState = iota // at least one active bid whose target is eligible
	BidsNone                         // no bids (listings, banners)
	BidsNoneActive                   // bids, none active
	BidsNoneEligible                 // active bids, none with an eligible target (automated: no eligible product)
)

// StatusReason is why campaign c does or does not take part in auctions at
// now: its status when that is not running; else what its bids allow; else
// whether its timetable serves the current local hour (outside_schedule);
// else what its budgets allow (spend.Check on spend sp, the marketplace's local
// day in loc); else serving. sp nil means the spend could not be read: the
// budget reasons cannot be decided, and a campaign that would otherwise
// serve is spend_unavailable.
func StatusReason(c Campaign, now time.Time, loc *time.Location, bids BidState, sp *spend.Spent) string {
	switch Status(c, now) {
	case StatusArchived:
		return ReasonArchived
	case StatusEnded:
		return ReasonEnded
	case StatusPaused:
		return ReasonPaused
	case StatusScheduled:
		return ReasonScheduled
	}
	switch bids {
	case BidsNone:
		return ReasonNoBids
	case BidsNoneActive:
		return ReasonNoActiveBids
	case BidsNoneEligible:
		return ReasonNoEligibleProducts
	}
	if !InSchedule(c, now, loc) {
		return ReasonOutsideSchedule
	}
	if sp == nil {
		return ReasonSpendUnavailable
	}
	switch spend.Check(limits(c), *sp, now, loc) {
	case spend.TotalExhausted:
		return ReasonOutOfBudget
	case spend.MonthlyExhausted:
		return ReasonOutOfMonthlyBudget
	case spend.WeeklyExhausted:
		return ReasonOutOfWeeklyBudget
	case spend.DailyExhausted:
		return ReasonOutOfDailyBudget
	case spend.Paced:
		return ReasonPaced
	}
	return ReasonServing
}

func limits(c Campaign) spend.Limits {
	return spend.Limits{DailyMicros: c.DailyBudgetMicros, WeeklyMicros: c.WeeklyBudgetMicros, MonthlyMicros: c.MonthlyBudgetMicros,
		TotalMicros: c.TotalBudgetMicros, Hours: ServedHours(c.Timetables)}
}

// Pacing is the pacing state of c's budget of a period (daily, weekly or
// monthly) at now for spend sp (the budget rule's pacing step, spend.Check,
// on that budget alone).
func Pacing(c Campaign, now time.Time, loc *time.Location, sp spend.Spent) string {
	if p, _ := BudgetPeriod(c); p == "" {
		return PacingNoDailyBudget
	}
	l := limits(c)
	l.TotalMicros = 0
	switch spend.Check(l, sp, now, loc) {
	case spend.DailyExhausted:
		return PacingDailyBudgetSpent
	case spend.WeeklyExhausted:
		return PacingWeeklyBudgetSpent
	case spend.MonthlyExhausted:
		return PacingMonthlyBudgetSpent
	case spend.Paced:
		return PacingAheadOfPace
	}
	return PacingOnPace
}

// SpendJSON is a campaign's spend on the wire. Day is the marketplace's
// local day Today counts (spend.DayOf); ThisWeek and ThisMonth count the
// local week (from Monday) and calendar month that hold it. Every other
// field is null when Available is false (the spend could not be read). The
// remaining budgets are null when the campaign has no such budget.
type SpendJSON struct {
	Day                    string  `json:"day"`
	Today                  *Micros `json:"today"`
	ThisWeek               *Micros `json:"thisWeek"`
	ThisMonth              *Micros `json:"thisMonth"`
	Total                  *Micros `json:"total"`
	RemainingDailyBudget   *Micros `json:"remainingDailyBudget"`
	RemainingWeeklyBudget  *Micros `json:"remainingWeeklyBudget"`
	RemainingMonthlyBudget *Micros `json:"remainingMonthlyBudget"`
	RemainingTotalBudget   *Micros `json:"remainingTotalBudget"`
	Pacing                 *string `json:"pacing"`
	Available              bool    `json:"available"`
}

// spendJSON renders c's spend sp (nil: not read) of local day day.
func spendJSON(c Campaign, day string, now time.Time, loc *time.Location, sp *spend.Spent) *SpendJSON {
	out := &SpendJSON{Day: day}
	if sp == nil {
		return out
	}
	amount := func(v int64) *Micros { m := Micros(v); return &m }
	remaining := func(b, spent int64) *Micros {
		if b == 0 {
			return nil
		}
		return amount(max(b-spent, 0))
	}
	pacing := Pacing(c, now, loc, *sp)
	out.Today, out.Total = amount(sp.Day), amount(sp.Total)
	out.ThisWeek, out.ThisMonth = amount(sp.Week), amount(sp.Month)
	out.RemainingDailyBudget = remaining(c.DailyBudgetMicros, sp.Day)
	out.RemainingWeeklyBudget = remaining(c.WeeklyBudgetMicros, sp.Week)
	out.RemainingMonthlyBudget = remaining(c.MonthlyBudgetMicros, sp.Month)
	out.RemainingTotalBudget = remaining(c.TotalBudgetMicros, sp.Total)
	out.Pacing, out.Available = &pacing, true
	return out
}

// SpendReader reads campaigns' spend (spend.Reader: one round trip, within
// a deadline).
type SpendReader interface {
	ReadSpend(ctx context.Context, mp, day string, ids []string) ([]spend.Spent, error)
}

// UseSpend makes the views read spend with r (call before serving; without
// it spend is never available).
func (s *Service) UseSpend(r SpendReader) { s.spend = r }

// FundsReader says whether a vendor of a marketplace with balances is out of
// funds (false for a marketplace without balances).
type FundsReader func(ctx context.Context, mp, vendorID string) (bool, error)

// UseFunds makes View say insufficient_balance for the running campaigns
// of vendors out of funds (docs/reference/balances.md); the auction checks the
// vendor's funds before the campaign's budgets, and so does the reason.
func (s *Service) UseFunds(r FundsReader) { s.funds = r }

var errNoSpendReader = errors.New("campaigns: no spend reader")

// View renders campaigns of marketplace mp (in time zone loc) as the API
// answers them: with their status reason and spend, read for all of them in
// one call of the spend reader. When that fails, each campaign is rendered
// with its spend unavailable (the reader logs why).
func (s *Service) View(ctx context.Context, mp string, loc *time.Location, cs ...Campaign) []CampaignJSON {
	now := s.now()
	day := spend.DayOf(now, loc)
	var spent []spend.Spent
	err := errNoSpendReader
	if s.spend != nil && len(cs) > 0 {
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.ID
		}
		spent, err = s.spend.ReadSpend(ctx, mp, day, ids)
		if err == nil && len(spent) != len(cs) {
			err = errors.New("campaigns: spend reader answered another number of campaigns")
		}
	}
	out := make([]CampaignJSON, len(cs))
	outOf := map[string]bool{} // vendor → out of funds, read once per View
	for i, c := range cs {
		var sp *spend.Spent
		if err == nil {
			sp = &spent[i]
		}
		bids := BidsLive
		if Status(c, now) == StatusRunning {
			bids = s.BidState(mp, c)
		}
		out[i] = jsonAt(c, now)
		out[i].StatusReason = StatusReason(c, now, loc, bids, sp)
		if s.funds != nil && afterBids(out[i].StatusReason) {
			out[i].StatusReason = s.fundsReason(ctx, mp, c.VendorID, out[i].StatusReason, outOf)
		}
		out[i].Spend = spendJSON(c, day, now, loc, sp)
	}
	return out
}

// afterBids: the reason comes from the budgets (or serving): the vendor's
// funds come first.
func afterBids(reason string) bool {
	switch reason {
	case ReasonOutOfBudget, ReasonOutOfMonthlyBudget, ReasonOutOfWeeklyBudget, ReasonOutOfDailyBudget, ReasonPaced, ReasonSpendUnavailable, ReasonServing:
		return true
	}
	return false
}

// fundsReason is insufficient_balance when the vendor is out of funds, else
// reason (spend_unavailable when its funds cannot be read).
func (s *Service) fundsReason(ctx context.Context, mp, vendorID, reason string, outOf map[string]bool) string {
	out, seen := outOf[vendorID]
	if !seen {
		var err error
		if out, err = s.funds(ctx, mp, vendorID); err != nil {
			return ReasonSpendUnavailable
		}
		outOf[vendorID] = out
	}
	if out {
		return ReasonInsufficientFunds
	}
	return reason
}

// BidState says what campaign c's bids allow now: for a listings or
// banners campaign, whether it has bids, active ones, and active ones whose
// target is eligible (Eligibility); for an automated campaign, whether a
// product of its vendor is eligible for its strategy's bid (Eligibility).
func (s *Service) BidState(mp string, c Campaign) BidState {
	if c.Type == TypeAutomated {
		live := false
		s.cat.EachProductOfVendor(mp, c.VendorID, func(p entityref.ProductRef) bool {
			if !p.Vendors.Contains(c.VendorID) {
				return true
			}
			b := Bid{CampaignID: c.ID, TargetType: TargetProduct, Target: p.ID, AmountMicros: AutomatedBidMicros(c, p.QualityScore), Active: p.Active}
			live, _ = s.Eligibility(mp, c, b)
			live = live && b.Active
			return !live
		})
		if live {
			return BidsLive
		}
		return BidsNoneEligible
	}
	s.mu.RLock()
	m := s.bidsOf[mp][c.ID]
	keys := make([]string, 0, len(m))
	for _, k := range m {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	state := BidsNone
	for _, k := range keys {
		b, _, ok := s.bids.Get(mp, k)
		if !ok || b.CampaignID != c.ID {
			continue
		}
		if !b.Active {
			if state == BidsNone {
				state = BidsNoneActive
			}
			continue
		}
		if ok, _ := s.Eligibility(mp, c, b); ok {
			return BidsLive
		}
		state = BidsNoneEligible
	}
	return state
}
