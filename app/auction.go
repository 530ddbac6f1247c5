package app

import (
	"time"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/auction/budget"
)

// auctionEngine builds the auction engine over the process's in-memory views
// (catalog, campaigns, segments) and its budget cache.
func (a *App) auctionEngine() *auction.Engine {
	return &auction.Engine{
		Catalog:  a.Catalog,
		Index:    a.AuctionIndex,
		Segments: a.Segments,
		Budget:   budgetGate{a.Spend},
		Keys:     a.BidKeys.Load,
		Log:      a.log,
	}
}

// budgetGate answers the engine's budget question from the spend cache with
// budget.Check (budget left, pacing).
type budgetGate struct{ spend *budget.Cache }

func (g budgetGate) Allow(m *auction.Market, campaignID string, dailyMicros, totalMicros int64, at time.Time) bool {
	if dailyMicros == 0 && totalMicros == 0 {
		return true
	}
	day, total := g.spend.Spend(m.ID, m.Loc, campaignID, at)
	limits := budget.Limits{DailyMicros: dailyMicros, TotalMicros: totalMicros}
	return budget.Check(limits, day, total, at, m.Loc) == budget.OK
}
