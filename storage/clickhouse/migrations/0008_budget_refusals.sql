-- Charges refused for a budget (docs/design/budgets.md, "The cap"; docs/design/charges.md).
-- The charge script refuses a charge that would take a campaign's spend over
-- its daily or total budget; the interaction is stored as not charged, with
-- the reason.
--
-- refused_reason, in interactions_raw: why a sponsored interaction is not
-- charged (kind, before_auction, after_window, duplicate, daily_budget,
-- total_budget; bad_token for an unreadable token's row), '' when it is
-- charged or organic. It is the same in every copy of a replayed row; a
-- charged copy and an uncharged one of the same event (a retry after the
-- dedupe window) fold to the charged one (ReplacingMergeTree(charged)), whose
-- reason is ''. Rows written before this migration have ''.
--
-- refused_reason, in charges_raw: '' for a charge; daily_budget or
-- total_budget for a row that records a refused charge (amounts 0, the
-- token's price in price_micros), which the vendor-charges list shows on
-- request. The view `charges` keeps the charges only.
--
-- rollup_daily: the interactions refused for a budget, per grain (the export
-- metrics budget_refused_impressions and budget_refused_clicks, an Endcap
-- extension of monitoring_metrics). Days computed before this migration read
-- 0, which they were.
--
-- One column per statement: the migrator skips a column that exists (18.16
-- has no ADD COLUMN IF NOT EXISTS).
ALTER TABLE interactions_raw ADD COLUMN refused_reason String;
ALTER TABLE charges_raw ADD COLUMN refused_reason String;
ALTER TABLE rollup_daily ADD COLUMN budget_refused_impressions UInt64;
ALTER TABLE rollup_daily ADD COLUMN budget_refused_clicks UInt64;

-- The views again: a view's columns are fixed when it is created. `events`
-- names its columns and needs no change.
DROP TABLE IF EXISTS interactions;
CREATE VIEW IF NOT EXISTS interactions AS SELECT * FROM interactions_raw FINAL;
DROP TABLE IF EXISTS charges;
CREATE VIEW IF NOT EXISTS charges AS SELECT * FROM charges_raw FINAL WHERE refused_reason = '';
