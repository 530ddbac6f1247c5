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
	return &auction.Engine{
		Catalog:    a.Catalog,
		Index:      a.AuctionIndex,
		Segments:   a.Segments,
		Caps:       freqcap.New(a.Redis),
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

func (g budgetGate) Check(m *auction.Market, campaignID string, dailyMicros, totalMicros int64, hours *spend.Hours, at time.Time) auction.BudgetVerdict {
	if dailyMicros == 0 && totalMicros == 0 {
		return auction.BudgetOK
	}
	return budgetVerdict(g.spend.Check(m.ID, m.Loc, campaignID, spend.Limits{DailyMicros: dailyMicros, TotalMicros: totalMicros, Hours: hours}, at))
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
	}
	return auction.BudgetPaced
}
