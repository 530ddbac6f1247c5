-- The interactions fact table and the charges table, folded from the events
-- topic by the interactions projector (projections/interactions.go,
-- docs/design/charges.md).
--
-- interactions_raw: one row per countable impression or click (sponsored and
-- organic), keyed like events_raw by (marketplace_id, kind, event_id), with
-- every reporting dimension the projector can know: from the event, from the
-- resolvedBidId, and entity attributes from the in-memory views at projection
-- time. The auction's context (device, locations, page, search query,
-- category) is joined at query time from `auctions` on (marketplace_id,
-- auction_id). Events older than 30 days on arrival are not here.
-- A replay of the same Kafka record inserts an identical row. A charged row
-- carries charged = 1, the ReplacingMergeTree version: should a later copy of
-- the same event id ever be inserted uncharged (a client retry after the
-- dedupe window), the charged row is the one that stays. Read through the
-- view `interactions` (FINAL).
CREATE TABLE IF NOT EXISTS interactions_raw (
    marketplace_id UUID,
    kind Enum8('impression' = 1, 'click' = 2),
    event_id String,
    interaction_id UUID,
    occurred_at DateTime('UTC'),
    occurred_at_ms Int64,
    received_at DateTime('UTC'),
    day_local Date,
    currency_code String,
    opaque_user_id String,
    sponsored UInt8,
    auction_id UUID,
    auction_at DateTime('UTC'),
    auction_at_ms Int64,
    rank UInt8,
    ad_format String,
    charge_type String,
    price_micros Int64,
    campaign_id String,
    campaign_name String,
    campaign_type String,
    campaign_status String,
    campaign_active UInt8,
    external_campaign_id String,
    bid_id String,
    vendor_id String,
    vendor_name String,
    vendor_global_id String,
    external_vendor_id String,
    entity_type String,
    entity_id String,
    entity_id_hashed UInt8,
    additional_attribution_type String,
    additional_attribution_id String,
    device_type String,
    channel String,
    page_type String,
    page_id String,
    page_value Array(String),
    placement_path String,
    placement_position UInt32,
    placement_page UInt32,
    placement_page_size UInt32,
    placement_product_id String,
    placement_category_ids Array(String),
    placement_search_query String,
    object_type String,
    object_asset_id String,
    click_type String,
    charged UInt8,
    amount_micros Int64,
    amount_sub_micros UInt16,
    kafka_partition Int32,
    kafka_offset Int64
) ENGINE = ReplacingMergeTree(charged)
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (marketplace_id, kind, event_id);

CREATE VIEW IF NOT EXISTS interactions AS SELECT * FROM interactions_raw FINAL;

-- charges_raw: one row per charged interaction (a CPC click or a CPM
-- impression of an auction winner, at most one of each per winner), with the
-- vendor-charge fields of the spec (interactionId, timestamp, campaignId,
-- productId, vendorId, amount, externalVendorId, globalId). amount_micros is
-- what moved the campaign's spend in Redis; the exact amount is
-- amount_micros + amount_sub_micros / 1000 micro-units (CPM: the cleared
-- price per 1,000 impressions divided by 1,000). A replay inserts an identical
-- row; the view `charges` (FINAL) shows one.
CREATE TABLE IF NOT EXISTS charges_raw (
    marketplace_id UUID,
    interaction_id UUID,
    timestamp DateTime('UTC'),
    timestamp_ms Int64,
    day_local Date,
    kind Enum8('impression' = 1, 'click' = 2),
    event_id String,
    received_at DateTime('UTC'),
    currency_code String,
    campaign_id String,
    product_id String,
    vendor_id String,
    external_vendor_id String,
    global_id String,
    charge_type String,
    price_micros Int64,
    amount_micros Int64,
    amount_sub_micros UInt16,
    auction_id UUID,
    rank UInt8,
    auction_at DateTime('UTC'),
    kafka_partition Int32,
    kafka_offset Int64
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (marketplace_id, timestamp, interaction_id);

CREATE VIEW IF NOT EXISTS charges AS SELECT * FROM charges_raw FINAL;
