package rollups

import (
	"fmt"
	"strings"
	"time"
)

// The statements below fill a staging table (same schema as rollup_daily)
// with the aggregates of a set of local days. Placeholders: {stage} (the
// staging table), {days} (a list of toDate literals) and the ? arguments of
// window. Every raw table is read with FINAL, and only key or
// partition-constant columns (occurred_at, purchased_at, at, sponsored) are
// filtered inside the FINAL subqueries: a filter on a column that differs
// between versions of a row (attributed, day_local) is applied outside, after
// the versions were folded, so that it sees the current version only.
//
// Every subquery on either side of a JOIN has an alias: current ClickHouse
// refuses a JOIN of a subquery without one (Code 206), 18.16 takes both
// (docs/design/clickhouse.md).
//
// The filters inside FINAL are PREWHERE: ClickHouse does not move a WHERE to
// PREWHERE in a FINAL query, and the raw tables are not sorted by time, so a
// WHERE let every row of the month's partitions through the FINAL merge
// before dropping the ones outside the window. PREWHERE drops them as they
// are read. It is safe here because these columns are the same in every
// version of a row: a row's versions are all kept or all dropped
// (BenchmarkRecentRefresh: a recent run about twice as fast).

// grainColumns is the grain of rollup_daily besides the day and marketplace,
// in the table's column order. Every export dimension maps to one of them
// (docs/design/rollups.md).
var grainColumns = []string{
	"currency_code", "sponsored", "vendor_id", "external_vendor_id", "vendor_name",
	"campaign_id", "external_campaign_id", "campaign_name", "campaign_type", "status", "is_active",
	"ad_format", "charge_type", "entity_type", "entity_id",
	"device_type", "page_type", "page_id", "page_value", "placement_page",
	"auction_device", "auction_location", "auction_page_type", "auction_page_id", "auction_page_value",
	"auction_search_query", "auction_category",
}

// interactionMetrics and purchaseMetrics are the metric columns each source
// fills; the other source's columns keep their defaults (0, empty state).
var (
	interactionMetrics = []string{
		"impressions", "clicks", "charged_impressions", "charged_clicks",
		"ad_spent_impressions_micros", "ad_spent_impressions_sub_micros",
		"ad_spent_clicks_micros", "ad_spent_clicks_sub_micros",
		"budget_refused_impressions", "budget_refused_clicks", "invalid_clicks",
	}
	purchaseMetrics = []string{"attributed_items", "purchases", "quantity", "total_purchase_amount_micros"}
)

// auctionDims reads the auction context of the auctions in the scan window,
// limited to the auctions the outer query can meet.
const auctionDims = `
    SELECT marketplace_id, auction_id, device AS auction_device, locations AS auction_location,
           page_type AS auction_page_type, page_id AS auction_page_id, page_value AS auction_page_value,
           search_query AS auction_search_query, category AS auction_category
    FROM auctions_raw FINAL
    PREWHERE at >= toDateTime(?) AND at < toDateTime(?) AND auction_id IN (%s)`

// insertInteractions: impressions and clicks (sponsored and organic) of the
// days, with the auction context and a hashed winner's id resolved.
const insertInteractions = `
INSERT INTO {stage} (marketplace_id, day_local, {grain}, {imetrics})
SELECT marketplace_id, day_local,
       currency_code, sponsored, vendor_id, external_vendor_id, vendor_name,
       campaign_id, external_campaign_id, campaign_name, campaign_type, campaign_status AS status,
       campaign_active AS is_active, ad_format, charge_type, entity_type,
       if(entity_id_hashed = 1, winner_entity_id, raw_entity_id) AS entity_id,
       device_type, page_type, page_id, page_value, placement_page,
       auction_device, auction_location, auction_page_type, auction_page_id, auction_page_value,
       auction_search_query, auction_category,
       countIf(kind = 'impression') AS impressions,
       countIf(kind = 'click') AS clicks,
       countIf(kind = 'impression' AND charged = 1) AS charged_impressions,
       countIf(kind = 'click' AND charged = 1) AS charged_clicks,
       sumIf(amount_micros, kind = 'impression' AND charged = 1) AS ad_spent_impressions_micros,
       sumIf(toUInt64(amount_sub_micros), kind = 'impression' AND charged = 1) AS ad_spent_impressions_sub_micros,
       sumIf(amount_micros, kind = 'click' AND charged = 1) AS ad_spent_clicks_micros,
       sumIf(toUInt64(amount_sub_micros), kind = 'click' AND charged = 1) AS ad_spent_clicks_sub_micros,
       countIf(kind = 'impression' AND charged = 0 AND refused_reason IN ('daily_budget', 'weekly_budget', 'monthly_budget', 'total_budget')) AS budget_refused_impressions,
       countIf(kind = 'click' AND charged = 0 AND refused_reason IN ('daily_budget', 'weekly_budget', 'monthly_budget', 'total_budget')) AS budget_refused_clicks,
       countIf(kind = 'click' AND charged = 0 AND startsWith(refused_reason, 'invalid_')) AS invalid_clicks
FROM (
    SELECT * FROM (
        SELECT * FROM (
            SELECT marketplace_id, kind, day_local, currency_code, sponsored, auction_id, toUInt16(rank) AS rank,
                   ad_format, charge_type, campaign_id, campaign_name, campaign_type, campaign_status,
                   campaign_active, external_campaign_id, vendor_id, vendor_name, external_vendor_id,
                   entity_type, entity_id AS raw_entity_id, entity_id_hashed, device_type, page_type, page_id,
                   page_value, placement_page, charged, amount_micros, amount_sub_micros, refused_reason
            FROM interactions_raw FINAL
            PREWHERE occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?)
        ) WHERE day_local IN ({days})
    ) AS interactions ANY LEFT JOIN (` + auctionDims + `
    ) AS auction_ctx USING (marketplace_id, auction_id)
) AS with_auction ANY LEFT JOIN (
    SELECT marketplace_id, auction_id, rank, entity_id AS winner_entity_id
    FROM auction_winners_raw FINAL
    PREWHERE at >= toDateTime(?) AND at < toDateTime(?) AND auction_id IN (%s)
) AS winners USING (marketplace_id, auction_id, rank)
GROUP BY marketplace_id, day_local, {grain}`

// interactionAuctions is the IN list of the auction joins of
// insertInteractions: the sponsored interactions' auctions in the window.
const interactionAuctions = `SELECT auction_id FROM interactions_raw WHERE occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?) AND sponsored = 1`

// insertPurchases: attributed items of the days (current version only), with
// the credited interaction's dimensions (page, device, names, status: the
// interaction's snapshot) and its auction's context. The purchase's day is
// the row's day.
const insertPurchases = `
INSERT INTO {stage} (marketplace_id, day_local, {grain}, {pmetrics})
SELECT marketplace_id, day_local,
       currency_code, toUInt8(1) AS sponsored, vendor_id, external_vendor_id, vendor_name,
       campaign_id, external_campaign_id, campaign_name, campaign_type, campaign_status AS status,
       campaign_active AS is_active, ad_format, charge_type, entity_type, entity_id,
       device_type, page_type, page_id, page_value, placement_page,
       auction_device, auction_location, auction_page_type, auction_page_id, auction_page_value,
       auction_search_query, auction_category,
       count() AS attributed_items,
       uniqExactState(purchase_event_id) AS purchases,
       sum(quantity) AS quantity,
       sum(amount_micros) AS total_purchase_amount_micros
FROM (
    SELECT * FROM (
        SELECT * FROM (
            SELECT marketplace_id, day_local, currency_code, purchase_event_id, quantity, amount_micros,
                   attributed, interaction_kind, interaction_event_id, auction_id, ad_format, charge_type,
                   campaign_id, vendor_id, entity_type, entity_id
            FROM attributed_purchases_raw FINAL
            PREWHERE purchased_at >= toDateTime(?) AND purchased_at < toDateTime(?)
        ) WHERE attributed = 1 AND day_local IN ({days})
    ) AS purchases ANY LEFT JOIN (
        SELECT marketplace_id, toString(kind) AS interaction_kind, event_id AS interaction_event_id,
               external_vendor_id, vendor_name, external_campaign_id, campaign_name, campaign_type,
               campaign_status, campaign_active, device_type, page_type, page_id, page_value, placement_page
        FROM interactions_raw FINAL
        PREWHERE occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?) AND sponsored = 1 AND event_id IN (
            SELECT interaction_event_id FROM attributed_purchases_raw
            WHERE purchased_at >= toDateTime(?) AND purchased_at < toDateTime(?) AND attributed = 1)
    ) AS credited USING (marketplace_id, interaction_kind, interaction_event_id)
) AS with_interaction ANY LEFT JOIN (` + auctionDims + `
) AS auction_ctx USING (marketplace_id, auction_id)
GROUP BY marketplace_id, day_local, {grain}`

// purchaseAuctions is the IN list of the auction join of insertPurchases.
const purchaseAuctions = `SELECT auction_id FROM attributed_purchases_raw WHERE purchased_at >= toDateTime(?) AND purchased_at < toDateTime(?) AND attributed = 1`

// Zones run from UTC−12 to UTC+14, so local day d is within
// [d − 14 h, d + 1 day + 12 h) in UTC; the window adds a day on each side.
const (
	windowBefore = 24 * time.Hour
	windowAfter  = 2 * 24 * time.Hour
	// auctionLookback: an interaction or a purchase is counted only up to 30
	// days after its auction (a day more for clock skew and zones).
	auctionLookback = 31 * 24 * time.Hour
)

// window is the UTC instant range holding every event of the local days
// lo..hi (dates at 00:00 UTC).
func window(lo, hi time.Time) (from, to time.Time) {
	return lo.Add(-windowBefore), hi.Add(windowAfter)
}

// render fills the placeholders of a statement.
func render(q, stage string, days []time.Time) string {
	r := strings.NewReplacer(
		"{stage}", stage,
		"{days}", dayList(days),
		"{grain}", strings.Join(grainColumns, ", "),
		"{imetrics}", strings.Join(interactionMetrics, ", "),
		"{pmetrics}", strings.Join(purchaseMetrics, ", "),
	)
	return r.Replace(q)
}

// dayList renders dates (produced here, never user input) as toDate literals.
func dayList(days []time.Time) string {
	parts := make([]string, len(days))
	for i, d := range days {
		parts[i] = "toDate('" + d.Format(time.DateOnly) + "')"
	}
	return strings.Join(parts, ", ")
}

// interactionsStatement returns insertInteractions for the days and its
// arguments, in placeholder order.
func interactionsStatement(stage string, days []time.Time) (string, []any) {
	from, to := window(days[0], days[len(days)-1])
	aFrom := from.Add(-auctionLookback)
	q := fmt.Sprintf(render(insertInteractions, stage, days), interactionAuctions, interactionAuctions)
	f, t, a := from.Unix(), to.Unix(), aFrom.Unix()
	return q, []any{f, t, a, t, f, t, a, t, f, t}
}

// purchasesStatement returns insertPurchases for the days and its arguments.
func purchasesStatement(stage string, days []time.Time) (string, []any) {
	from, to := window(days[0], days[len(days)-1])
	before := from.Add(-auctionLookback)
	q := fmt.Sprintf(render(insertPurchases, stage, days), purchaseAuctions)
	f, t, b := from.Unix(), to.Unix(), before.Unix()
	return q, []any{f, t, b, t, f, t, b, t, f, t}
}
