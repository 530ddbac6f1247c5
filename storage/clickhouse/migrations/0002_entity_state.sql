-- Copies of entity state (vendors, products, campaigns, ...) for reporting
-- dimensions, folded from the changelog topics by the entities projector.
-- ClickHouse is never read to make a decision; the in-memory views are.
-- One row per (type, marketplace, id) and version; the view keeps the latest.
CREATE TABLE IF NOT EXISTS entity_state_raw (
    type String,
    marketplace_id String,
    id String,
    version Int64,
    deleted UInt8,
    state String,
    updated_at DateTime('UTC')
) ENGINE = ReplacingMergeTree(version)
PARTITION BY type
ORDER BY (type, marketplace_id, id);

CREATE VIEW IF NOT EXISTS entity_state AS
SELECT type, marketplace_id, id, version, state, updated_at
FROM entity_state_raw FINAL
WHERE deleted = 0;
