-- Auction records (auction.Record, topic <prefix>auctions), folded by the
-- auctions projector: one row per auction in auctions_raw, one row per winner
-- in auction_winners_raw. Reporting only: nothing that moves money reads them.
-- Auction ids are unique UUIDv7s, so the only duplicates are replays of the
-- same Kafka record (identical rows); ReplacingMergeTree keyed on the auction
-- (and the winner's rank) folds them, and the views read with FINAL.
-- Times are DateTime('UTC') plus an Int64 milliseconds column (no DateTime64
-- on 18.16). A replayed row has the same `at`, hence the same partition.
CREATE TABLE IF NOT EXISTS auctions_raw (
    auction_id UUID,
    marketplace_id UUID,
    at DateTime('UTC'),
    at_ms Int64,
    endpoint String,
    kind String,
    idx UInt8,
    slots UInt16,
    product_count UInt32,
    category String,
    search_query String,
    slot_id String,
    device String,
    placement_id UInt8,
    placement_name String,
    locations Array(String),
    opaque_user_id String,
    page_type String,
    page_id String,
    page_value Array(String),
    experiment_variant String,
    candidates UInt32,
    error UInt8,
    winners UInt16
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (marketplace_id, auction_id);

CREATE TABLE IF NOT EXISTS auction_winners_raw (
    auction_id UUID,
    marketplace_id UUID,
    at DateTime('UTC'),
    at_ms Int64,
    kind String,
    rank UInt16,
    type String,
    entity_id String,
    campaign_id String,
    vendor_id String,
    bid_id String,
    bid_target String,
    charge_type String,
    bid_micros Int64,
    price_micros Int64,
    quality_ppm UInt32,
    variation_id String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (marketplace_id, auction_id, rank);

CREATE VIEW IF NOT EXISTS auctions AS SELECT * FROM auctions_raw FINAL;

CREATE VIEW IF NOT EXISTS auction_winners AS SELECT * FROM auction_winners_raw FINAL;
