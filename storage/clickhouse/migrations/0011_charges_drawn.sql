-- Charges drawn on a vendor's balance (docs/reference/balances.md; the balance_ledger
-- export, docs/reference/exports.md).
--
-- charges_raw.drawn: 1 when the charge drew its amount_micros on its
-- vendor's funds (a marketplace with balances: the sum of a vendor's drawn
-- charges is the `charged` of its balance); 0 for a charge of a marketplace
-- without balances, for a refused row, and in rows written before this
-- migration. The same in every copy of a replayed row.
--
-- One column per statement: the migrator skips a column that exists (18.16
-- has no ADD COLUMN IF NOT EXISTS).
ALTER TABLE charges_raw ADD COLUMN drawn UInt8;

-- The view again: a view's columns are fixed when it is created.
DROP TABLE IF EXISTS charges;
CREATE VIEW IF NOT EXISTS charges AS SELECT * FROM charges_raw FINAL WHERE refused_reason = '';
