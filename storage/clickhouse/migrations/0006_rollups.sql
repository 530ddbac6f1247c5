-- Daily rollups of the export dataset `monitoring_metrics` (rollups/,
-- docs/design/rollups.md).
--
-- rollup_daily: integer sums of the dataset's metrics per marketplace-local
-- day and per combination of every export dimension (the grain). It is not
-- fed by materialized views (they would count replayed raw rows): the rollup
-- job recomputes whole days from the FINAL views into a private staging
-- table (CREATE TABLE ... AS rollup_daily) and swaps each day in with
-- ALTER TABLE rollup_daily REPLACE PARTITION <day> FROM <staging>, which is
-- atomic per day. One partition per local day (all marketplaces).
--
-- A grain can have two rows in a day (one from interactions, one from
-- attributed purchases): readers always GROUP BY and merge. Money is int64
-- micro-units plus thousandths of a micro-unit (sub-micros), summed apart:
-- exact = micros + intDiv(sub_micros, 1000). `purchases` is the exact set of
-- attributed purchase ids (uniqExactState): purchase_count of any group is
-- uniqExactMerge(purchases), which a sum could not give.
CREATE TABLE IF NOT EXISTS rollup_daily (
    marketplace_id UUID,
    day_local Date,
    currency_code String,
    sponsored UInt8,
    vendor_id String,
    external_vendor_id String,
    vendor_name String,
    campaign_id String,
    external_campaign_id String,
    campaign_name String,
    campaign_type String,
    status String,
    is_active UInt8,
    ad_format String,
    charge_type String,
    entity_type String,
    entity_id String,
    device_type String,
    page_type String,
    page_id String,
    page_value Array(String),
    placement_page UInt32,
    auction_device String,
    auction_location Array(String),
    auction_page_type String,
    auction_page_id String,
    auction_page_value Array(String),
    auction_search_query String,
    auction_category String,
    impressions UInt64,
    clicks UInt64,
    charged_impressions UInt64,
    charged_clicks UInt64,
    ad_spent_impressions_micros Int64,
    ad_spent_impressions_sub_micros UInt64,
    ad_spent_clicks_micros Int64,
    ad_spent_clicks_sub_micros UInt64,
    attributed_items UInt64,
    purchases AggregateFunction(uniqExact, String),
    quantity Int64,
    total_purchase_amount_micros Int64
) ENGINE = MergeTree()
PARTITION BY day_local
ORDER BY (marketplace_id, vendor_id, campaign_id, entity_type, entity_id);

-- rollup_days: when each local day was last recomputed (computed_at: the
-- start of the computation; raw rows inserted after it may be missing) and
-- how many rollup rows it has. A day is final once it was recomputed after
-- it could no longer change (docs/design/rollups.md). Read with FINAL.
CREATE TABLE IF NOT EXISTS rollup_days (
    day_local Date,
    computed_at DateTime('UTC'),
    rows UInt64
) ENGINE = ReplacingMergeTree(computed_at)
ORDER BY day_local;
