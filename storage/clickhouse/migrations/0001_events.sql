-- Every accepted tracking event, one physical row per Kafka record that
-- claimed its (marketplace, kind, id). A replay of the same Kafka record after
-- a crash can insert an identical row again; ReplacingMergeTree keyed on the
-- idempotency key folds those, and the `events` view reads with FINAL so that
-- queries always see exactly one row per (marketplace_id, kind, event_id).
CREATE TABLE IF NOT EXISTS events_raw (
    marketplace_id UUID,
    kind Enum8('impression' = 1, 'click' = 2, 'purchase' = 3, 'pageview' = 4),
    event_id String,
    occurred_at DateTime('UTC'),
    occurred_at_ms Int64,
    received_at DateTime('UTC'),
    received_at_ms Int64,
    countable UInt8,
    opaque_user_id String,
    resolved_bid_id String,
    entity_type String,
    entity_id String,
    additional_attribution_type String,
    additional_attribution_id String,
    placement_path String,
    placement_position UInt32,
    placement_page UInt32,
    placement_page_size UInt32,
    placement_product_id String,
    placement_category_ids Array(String),
    placement_search_query String,
    page_type String,
    page_id String,
    page_value Array(String),
    object_type String,
    object_asset_id String,
    object_click_type String,
    external_campaign_id String,
    external_vendor_id String,
    device_type String,
    channel String,
    click_type String,
    items Nested (
        product_id String,
        unit_price_micros Int64,
        quantity Int64,
        vendor_id String
    ),
    kafka_partition Int32,
    kafka_offset Int64
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(received_at)
ORDER BY (marketplace_id, kind, event_id);

CREATE VIEW IF NOT EXISTS events AS SELECT * FROM events_raw FINAL;
