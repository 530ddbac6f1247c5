-- Impressions and clicks that interactions_raw holds are no longer copied into
-- events_raw (docs/design/projector.md, "Table events_raw / view events"): every
-- countable impression and click was written twice, once in each table
-- (docs/design/performance.md, ClickHouse: inserts and merges: writing it once took
-- about an eighth off ClickHouse's CPU in a catch-up).
--
-- interactions_raw keeps, beside its reporting columns, what the event said
-- that they do not: its resolvedBidId, its receipt time in ms, and the
-- fields the reporting columns replace (the entity of a sponsored event, the
-- event's own externalVendorId and clickType, object.clickType). The view
-- `events` reads those rows back as the events they were.
--
-- in_events_raw tells which interactions_raw rows also have their event in
-- events_raw: 1 for every row written before this migration (the column's
-- default, also what a build before it inserts, as it does not name the
-- column), 0 for the rows of this version, whose events are only here.
-- `events` reads each event from one table: events_raw whole, and the rows of
-- interactions_raw with in_events_raw = 0.
--
-- One column per statement: the migrator skips a column that exists (18.16
-- has no ADD COLUMN IF NOT EXISTS).
ALTER TABLE interactions_raw ADD COLUMN in_events_raw UInt8 DEFAULT 1;
ALTER TABLE interactions_raw ADD COLUMN received_at_ms Int64 DEFAULT toInt64(toUInt32(received_at)) * 1000;
ALTER TABLE interactions_raw ADD COLUMN resolved_bid_id String;
ALTER TABLE interactions_raw ADD COLUMN event_entity_type String;
ALTER TABLE interactions_raw ADD COLUMN event_entity_id String;
ALTER TABLE interactions_raw ADD COLUMN event_external_vendor_id String;
ALTER TABLE interactions_raw ADD COLUMN event_click_type String;
ALTER TABLE interactions_raw ADD COLUMN object_click_type String;

-- The view `interactions` again: a view's columns are fixed when it is
-- created, and SELECT * of 0004 predates these.
DROP TABLE IF EXISTS interactions;
CREATE VIEW IF NOT EXISTS interactions AS SELECT * FROM interactions_raw FINAL;

-- The view of every accepted event, one row per (marketplace_id, kind,
-- event_id), as 0001 defined it: the same columns, in the same order. A
-- sponsored row's entity_* are the winner's (from the resolvedBidId); the
-- event's own entity, if it sent one, is in event_entity_* (left empty for
-- organic rows, whose entity_* are the event's).
DROP TABLE IF EXISTS events;
CREATE VIEW IF NOT EXISTS events AS
SELECT marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at, received_at_ms, countable,
    opaque_user_id, resolved_bid_id, entity_type, entity_id, additional_attribution_type, additional_attribution_id,
    placement_path, placement_position, placement_page, placement_page_size, placement_product_id,
    placement_category_ids, placement_search_query, page_type, page_id, page_value,
    object_type, object_asset_id, object_click_type, external_campaign_id, external_vendor_id,
    device_type, channel, click_type,
    items.product_id, items.unit_price_micros, items.quantity, items.vendor_id,
    kafka_partition, kafka_offset
FROM events_raw FINAL
UNION ALL
SELECT marketplace_id, CAST(kind AS Enum8('impression' = 1, 'click' = 2, 'purchase' = 3, 'pageview' = 4)), event_id,
    occurred_at, occurred_at_ms, received_at, received_at_ms, toUInt8(1),
    opaque_user_id, resolved_bid_id, if(sponsored, event_entity_type, entity_type), if(sponsored, event_entity_id, entity_id),
    additional_attribution_type, additional_attribution_id,
    placement_path, placement_position, placement_page, placement_page_size, placement_product_id,
    placement_category_ids, placement_search_query, page_type, page_id, page_value,
    object_type, object_asset_id, object_click_type, external_campaign_id, event_external_vendor_id,
    device_type, channel, event_click_type,
    emptyArrayString(), emptyArrayInt64(), emptyArrayInt64(), emptyArrayString(),
    kafka_partition, kafka_offset
FROM interactions_raw FINAL
WHERE in_events_raw = 0;
