package app

import (
	"time"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/spend"
)

// auctionEngine builds the auction engine over the process's in-memory views
// (catalog, campaigns, segments) and its budget cache.
func (a *App) auctionEngine() *auction.Engine {
	if a.capCounts == nil {
		a.capCounts = freqcap.New(a.Redis)
	}
	return &auction.Engine{
		Catalog:    a.Catalog,
		Index:      a.AuctionIndex,
		Segments:   a.Segments,
		Caps:       a.capCounts,
		CapTimeout: a.cfg.FrequencyCapTimeout,
		Budget:     budgetGate{a.Spend},
		Funds:      a.Funds,
		Keys:       a.BidKeys.Load,
		Log:        a.log,
	}
}

// budgetGate answers the engine's budget question from the spend cache with
// the budget rule (budget left, pacing: spend.Cache.Check). It only reads.
type budgetGate struct{ spend *spend.Cache }

func (g budgetGate) Check(m *auction.Market, slot *spend.Slot, campaignID string, l spend.Limits, at time.Time) auction.BudgetVerdict {
	if l.DailyMicros == 0 && l.WeeklyMicros == 0 && l.MonthlyMicros == 0 && l.TotalMicros == 0 {
		return auction.BudgetOK
	}
	return budgetVerdict(g.spend.CheckSlot(slot, m.ID, m.Loc, campaignID, l, at))
}

// budgetVerdict is the engine's name of a budget verdict.
func budgetVerdict(v spend.Verdict) auction.BudgetVerdict {
	switch v {
	case spend.OK:
		return auction.BudgetOK
	case spend.TotalExhausted:
		return auction.BudgetTotalExhausted
	case spend.DailyExhausted:
		return auction.BudgetDailyExhausted
	case spend.WeeklyExhausted:
		return auction.BudgetWeeklyExhausted
	case spend.MonthlyExhausted:
		return auction.BudgetMonthlyExhausted
	}
	return auction.BudgetPaced
}
