package app

import (
	"time"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/budget"
	"github.com/endcap/endcap/campaigns"
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

func (g budgetGate) Allow(m *auction.Market, c *campaigns.Campaign, at time.Time) bool {
	if c.DailyBudgetMicros == 0 && c.TotalBudgetMicros == 0 {
		return true
	}
	day, total := g.spend.Spend(m.ID, m.Loc, c.ID, at)
	limits := budget.Limits{DailyMicros: c.DailyBudgetMicros, TotalMicros: c.TotalBudgetMicros}
	return budget.Check(limits, day, total, at, m.Loc) == budget.OK
}
