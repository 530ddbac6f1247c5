-- rollup_days.data_as_of_ms: the watermark of a day's recomputation, in Unix
-- milliseconds: every event acknowledged (by POST /v2/events) before it is
-- counted in the day's rows of rollup_daily (docs/design/rollups.md, Watermark). A
-- run records the later of its own watermark and the day's previous one; 0
-- means unknown (days recomputed before this migration, or by a run that
-- could not read the projectors' progress). A day is final once its
-- watermark is at or after rollups.FinalAfter(day).
ALTER TABLE rollup_days ADD COLUMN data_as_of_ms UInt64;
