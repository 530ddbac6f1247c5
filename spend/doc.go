// Package spend is where money moves: what a campaign may still spend, what
// an interaction is charged, and the ledger that records it. The auction asks
// it whether a campaign may serve (Cache, Check), the fold asks it what an
// interaction costs and charges it exactly once (ChargeRule, ApplyCharges,
// with the invalid-click rules of JudgeClick judged in the same step),
// and the campaign API asks it how much was spent and how the day is paced
// (Reader, Pacing rules). docs/design/budgets.md and docs/design/charges.md describe the
// rules; this package is the only place that decides them.
//
// Spend lives in Redis, one hash per campaign (see docs/design/budgets.md for the
// key layout): the charging pipeline adds to it with ApplyCharges, and every
// auction process keeps an in-memory copy in a Cache, refreshed about once a
// second, so that the auction reads spend without a Redis round trip. Check
// applies the budget rule (total, daily, pacing) to what the Cache returns.
package spend
