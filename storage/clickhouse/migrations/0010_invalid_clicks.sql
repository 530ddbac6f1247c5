-- Invalid clicks (docs/design/charges.md, "Invalid clicks"). A CPC click that an
-- invalid-click rule refuses is stored not charged, with its reason in
-- refused_reason (invalid_no_impression, invalid_too_fast,
-- invalid_repeat_click, invalid_click_rate) in interactions_raw and in a
-- refused row of charges_raw, which need no new column.
--
-- attribution_touches_raw.invalid: 1 when the copied click was refused as
-- invalid (the attribution projector then never credits it); 0 otherwise,
-- and in rows copied before this migration.
--
-- rollup_daily.invalid_clicks: the clicks refused as invalid, per grain (the
-- export metric invalid_clicks, an Endcap extension). Days computed before
-- this migration read 0 until they are computed again.
--
-- One column per statement: the migrator skips a column that exists (18.16
-- has no ADD COLUMN IF NOT EXISTS).
ALTER TABLE attribution_touches_raw ADD COLUMN invalid UInt8;
ALTER TABLE rollup_daily ADD COLUMN invalid_clicks UInt64;
