-- Purchase attribution (attribution/, docs/design/attribution.md).
--
-- The attribution projector consumes the events topic itself. It recomputes
-- the attribution of a user's purchases whenever an event of that user is
-- folded, so it reads one user's sponsored interactions and purchases at a
-- time: it keeps its own copies of them in two tables ordered by
-- (marketplace, user) (interactions_raw and events_raw are ordered by event
-- id, which cannot find one user's rows without a scan). Each Kafka record
-- is one row; a replay of the record inserts an identical row, which
-- ReplacingMergeTree folds (the record is in the key). A client retry of an
-- event id is another record, hence another row: the projector picks one
-- copy per event id by a fixed rule, so merges never change what it reads.

-- Sponsored impressions and clicks whose resolvedBidId is readable and
-- that were at most 30 days old on arrival, with what their token says.
CREATE TABLE IF NOT EXISTS attribution_touches_raw (
    marketplace_id UUID,
    opaque_user_id String,
    kind Enum8('impression' = 1, 'click' = 2),
    event_id String,
    interaction_id UUID,
    occurred_at DateTime('UTC'),
    occurred_at_ms Int64,
    received_at_ms Int64,
    auction_id UUID,
    auction_at_ms Int64,
    rank UInt8,
    ad_format String,
    charge_type String,
    campaign_id String,
    vendor_id String,
    entity_type String,
    entity_id String,
    entity_id_hashed UInt8,
    additional_attribution_type String,
    additional_attribution_id String,
    kafka_partition Int32,
    kafka_offset Int64
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (marketplace_id, opaque_user_id, kind, event_id, kafka_partition, kafka_offset);

-- Purchases (every one; countable = 0: more than 30 days old on arrival).
CREATE TABLE IF NOT EXISTS attribution_purchases_raw (
    marketplace_id UUID,
    opaque_user_id String,
    event_id String,
    occurred_at DateTime('UTC'),
    occurred_at_ms Int64,
    received_at_ms Int64,
    countable UInt8,
    items Nested (
        product_id String,
        unit_price_micros Int64,
        quantity Int64,
        vendor_id String
    ),
    kafka_partition Int32,
    kafka_offset Int64
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (marketplace_id, opaque_user_id, event_id, kafka_partition, kafka_offset);

-- Events folded before this migration are copied by the projector from the
-- events topic (its group starts at the earliest retained offset); older ones
-- can be copied by hand from interactions_raw and events_raw
-- (docs/design/attribution.md, Operations): a copy here could outlast the schema
-- step's timeout on a large database.

-- attributed_purchases_raw: one row per purchased item (attributed or not)
-- and computation; the row with the highest version is the item's current
-- attribution (version: docs/design/attribution.md). Read through the view
-- `attributed_purchases` (FINAL, attributed items only). The partition is
-- the purchase's month, which never changes for an item, so FINAL always
-- finds every version of it in one partition.
CREATE TABLE IF NOT EXISTS attributed_purchases_raw (
    marketplace_id UUID,
    purchase_event_id String,
    item_index UInt16,
    purchased_at DateTime('UTC'),
    purchased_at_ms Int64,
    purchase_received_at_ms Int64,
    day_local Date,
    currency_code String,
    opaque_user_id String,
    product_id String,
    item_vendor_id String,
    quantity Int64,
    unit_price_micros Int64,
    amount_micros Int64,
    attributed UInt8,
    reason String,
    score Float64,
    window_seconds UInt32,
    interaction_id UUID,
    interaction_kind String,
    interaction_event_id String,
    interaction_at DateTime('UTC'),
    interaction_at_ms Int64,
    auction_id UUID,
    auction_at DateTime('UTC'),
    auction_at_ms Int64,
    rank UInt8,
    ad_format String,
    campaign_id String,
    vendor_id String,
    entity_type String,
    entity_id String,
    charge_type String,
    version UInt64,
    computed_at DateTime('UTC')
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(purchased_at)
ORDER BY (marketplace_id, purchase_event_id, item_index);

CREATE VIEW IF NOT EXISTS attributed_purchases AS
SELECT * FROM attributed_purchases_raw FINAL WHERE attributed = 1;
