// Package exports runs the asynchronous data exports (docs/reference/exports.md): of
// the monitoring_metrics dataset, one query on the daily rollup, and of the
// balance_ledger dataset, the vendors' balance movements and the charges
// drawn on them. It validates requests, keeps each export's record on the
// entities log, writes the rows as CSV or Parquet to S3 with a multipart
// upload, and hands out presigned URLs to the files.
package exports

// Kind is how a column's values are typed in a file.
type Kind uint8

// Column kinds. CSV renders every kind as text; Parquet has a type per kind.
const (
	KindString    Kind = iota // text; Parquet BYTE_ARRAY (STRING)
	KindDate                  // a local day; CSV YYYY-MM-DD, Parquet INT32 (DATE)
	KindBool                  // CSV true/false, Parquet BOOLEAN
	KindInt                   // a count; Parquet INT64
	KindStrings               // a list of texts; CSV a JSON array, Parquet a repeated BYTE_ARRAY (STRING)
	KindMoney                 // an exact amount of the marketplace currency; CSV a decimal, Parquet DECIMAL(38,9)
	KindPrice                 // an amount per unit, rounded to 9 decimals; empty (CSV) or null (Parquet) without units
	KindRatio                 // a ratio; CSV a decimal or empty, Parquet optional DOUBLE (null for a zero denominator)
	KindTimestamp             // an instant (Unix milliseconds in cell.i); CSV RFC 3339 UTC with milliseconds, Parquet INT64 TIMESTAMP(MILLIS, UTC)
)

// String names the kind as the datasets endpoint shows it.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindDate:
		return "date"
	case KindBool:
		return "boolean"
	case KindInt:
		return "integer"
	case KindStrings:
		return "array of string"
	case KindMoney:
		return "decimal"
	case KindPrice:
		return "decimal or null"
	case KindRatio:
		return "number or null"
	case KindTimestamp:
		return "timestamp"
	}
	return "unknown"
}

// Dimension is a column the rows are grouped by.
type Dimension struct {
	Name        string
	Kind        Kind
	Description string
	column      string // rollup_daily column
}

// Metric is a column of sums (or of a ratio of sums) per row.
type Metric struct {
	Name        string
	Kind        Kind
	Description string
	parts       []part // the sums it is computed from
	value       func(s *sums) cell
}

// Dataset describes an exportable dataset.
type Dataset struct {
	Name          string
	Description   string
	Granularities []string
	Dimensions    []Dimension
	Metrics       []Metric
}

// Dimension returns the dimension called name.
func (d *Dataset) Dimension(name string) (Dimension, bool) {
	for _, x := range d.Dimensions {
		if x.Name == name {
			return x, true
		}
	}
	return Dimension{}, false
}

// Metric returns the metric called name.
func (d *Dataset) Metric(name string) (Metric, bool) {
	for _, x := range d.Metrics {
		if x.Name == name {
			return x, true
		}
	}
	return Metric{}, false
}

// Names of the datasets.
const (
	DatasetMonitoringMetrics = "monitoring_metrics"
	DatasetBalanceLedger     = "balance_ledger"
)

// Granularities: one row per marketplace-local day (monitoring_metrics),
// one row per movement (balance_ledger).
const (
	GranularityDayLocal = "day_local"
	GranularityMovement = "movement"
)

// Datasets lists every dataset.
func Datasets() []*Dataset { return []*Dataset{monitoringMetrics, balanceLedger} }

// DatasetByName returns a dataset.
func DatasetByName(name string) (*Dataset, bool) {
	for _, d := range Datasets() {
		if d.Name == name {
			return d, true
		}
	}
	return nil, false
}

// monitoringMetrics: the daily sums of sponsored interactions, their
// charges and the purchases attributed to them (docs/reference/exports.md). Its
// definitions are the rollup's (docs/design/rollups.md).
var monitoringMetrics = &Dataset{
	Name:          DatasetMonitoringMetrics,
	Description:   "Daily impressions, clicks, spend and attributed purchases of sponsored placements, per marketplace-local day.",
	Granularities: []string{GranularityDayLocal},
	Dimensions: []Dimension{
		{Name: "vendor_id", Kind: KindString, Description: "The vendor (advertiser) that owns the campaign.", column: "vendor_id"},
		{Name: "campaign_id", Kind: KindString, Description: "The campaign that won the auction.", column: "campaign_id"},
		{Name: "entity_type", Kind: KindString, Description: "What was promoted: product, vendor or banner.", column: "entity_type"},
		{Name: "entity_id", Kind: KindString, Description: "The id of what was promoted.", column: "entity_id"},
		{Name: "day_local", Kind: KindDate, Description: "The marketplace-local day of the event (of the purchase, for attributed purchases).", column: "day_local"},
		{Name: "device_type", Kind: KindString, Description: "Device of the interaction event (desktop, mobile).", column: "device_type"},
		{Name: "page_id", Kind: KindString, Description: "Page id of the interaction event.", column: "page_id"},
		{Name: "page_type", Kind: KindString, Description: "Page type of the interaction event.", column: "page_type"},
		{Name: "page_value", Kind: KindStrings, Description: "Page value of the interaction event.", column: "page_value"},
		{Name: "placement_page", Kind: KindInt, Description: "Page number of the placement.", column: "placement_page"},
		{Name: "auction_device", Kind: KindString, Description: "Device of the auction that served the ad.", column: "auction_device"},
		{Name: "auction_location", Kind: KindStrings, Description: "Geo cells of the auction that served the ad.", column: "auction_location"},
		{Name: "auction_page_type", Kind: KindString, Description: "Page type of the auction.", column: "auction_page_type"},
		{Name: "auction_page_id", Kind: KindString, Description: "Page id of the auction.", column: "auction_page_id"},
		{Name: "auction_page_value", Kind: KindStrings, Description: "Page value of the auction.", column: "auction_page_value"},
		{Name: "auction_search_query", Kind: KindString, Description: "Search query of the auction.", column: "auction_search_query"},
		{Name: "auction_category", Kind: KindString, Description: "Category of the auction.", column: "auction_category"},
		{Name: "currency_code", Kind: KindString, Description: "ISO 4217 currency of every amount of the row (the marketplace's).", column: "currency_code"},
		{Name: "external_vendor_id", Kind: KindString, Description: "The vendor id the interaction's event gave (externalVendorId), else the vendor's catalog id.", column: "external_vendor_id"},
		{Name: "vendor_name", Kind: KindString, Description: "The vendor's name when the interaction was recorded.", column: "vendor_name"},
		{Name: "campaign_name", Kind: KindString, Description: "The campaign's name when the interaction was recorded.", column: "campaign_name"},
		{Name: "external_campaign_id", Kind: KindString, Description: "Campaign id reported by the marketplace on events of its own (external) campaigns.", column: "external_campaign_id"},
		{Name: "status", Kind: KindString, Description: "The campaign's status when the interaction was recorded.", column: "status"},
		{Name: "campaign_type", Kind: KindString, Description: "The campaign's type (manual, autobidding).", column: "campaign_type"},
		{Name: "ad_format", Kind: KindString, Description: "Ad format of the auction (listings, banners, ...).", column: "ad_format"},
		{Name: "charge_type", Kind: KindString, Description: "How the winner pays: CPC or CPM.", column: "charge_type"},
		{Name: "is_active", Kind: KindBool, Description: "Whether the campaign was active when the interaction was recorded.", column: "is_active"},
	},
	Metrics: []Metric{
		{Name: "impressions", Kind: KindInt, Description: "Countable impressions (received at most 30 days after they happened).", parts: []part{pImpressions}, value: func(s *sums) cell { return intCell(s.u[pImpressions]) }},
		{Name: "clicks", Kind: KindInt, Description: "Countable clicks.", parts: []part{pClicks}, value: func(s *sums) cell { return intCell(s.u[pClicks]) }},
		{Name: "charged_clicks", Kind: KindInt, Description: "Clicks charged to a CPC winner (once per winner).", parts: []part{pChargedClicks}, value: func(s *sums) cell { return intCell(s.u[pChargedClicks]) }},
		{Name: "charged_impressions", Kind: KindInt, Description: "Impressions charged to a CPM winner (once per winner).", parts: []part{pChargedImpressions}, value: func(s *sums) cell { return intCell(s.u[pChargedImpressions]) }},
		{Name: "charged_attributed_purchases", Kind: KindInt, Description: "Attributed purchases charged as such (cost per acquisition). Endcap charges clicks and impressions only: always 0.", value: func(*sums) cell { return intCell(0) }},
		{Name: "quantity", Kind: KindInt, Description: "Units of the purchased items attributed to the row.", parts: []part{pQuantity}, value: func(s *sums) cell { return cell{i: s.i[pQuantity]} }},
		{Name: "purchase_count", Kind: KindInt, Description: "Distinct purchase events with at least one item attributed to the row.", parts: []part{pPurchases}, value: func(s *sums) cell { return intCell(s.u[pPurchases]) }},
		{Name: "ad_spent_clicks", Kind: KindMoney, Description: "Amount charged for the charged clicks.", parts: []part{pSpentClicks}, value: func(s *sums) cell { return moneyCell(s.spentClicks()) }},
		{Name: "ad_spent_impressions", Kind: KindMoney, Description: "Amount charged for the charged impressions.", parts: []part{pSpentImpressions}, value: func(s *sums) cell { return moneyCell(s.spentImpressions()) }},
		{Name: "ad_spent_exclusive_campaign", Kind: KindMoney, Description: "Flat fees of exclusive campaigns. No such charge exists: always 0.", value: func(*sums) cell { return moneyCell(amount{}) }},
		{Name: "ad_spent_attributed_purchases", Kind: KindMoney, Description: "Amount charged per attributed purchase (cost per acquisition). No such charge exists: always 0.", value: func(*sums) cell { return moneyCell(amount{}) }},
		{Name: "ad_spend", Kind: KindMoney, Description: "ad_spent_clicks + ad_spent_impressions + ad_spent_attributed_purchases + ad_spent_exclusive_campaign: everything charged.", parts: []part{pSpentClicks, pSpentImpressions}, value: func(s *sums) cell { return moneyCell(s.spend()) }},
		{Name: "total_purchase_amount", Kind: KindMoney, Description: "Σ unit price × quantity of the purchased items attributed to the row.", parts: []part{pPurchaseAmount}, value: func(s *sums) cell { return moneyCell(microsOf(s.i[pPurchaseAmount])) }},
		{Name: "ctr", Kind: KindRatio, Description: "clicks / impressions.", parts: []part{pClicks, pImpressions}, value: func(s *sums) cell { return ratioCell(float64(s.u[pClicks]), float64(s.u[pImpressions])) }},
		{Name: "conversion_rate", Kind: KindRatio, Description: "purchase_count / clicks.", parts: []part{pPurchases, pClicks}, value: func(s *sums) cell { return ratioCell(float64(s.u[pPurchases]), float64(s.u[pClicks])) }},
		{Name: "cpc", Kind: KindPrice, Description: "ad_spent_clicks / charged_clicks, rounded half up to 9 decimals; empty without charged clicks.", parts: []part{pSpentClicks, pChargedClicks}, value: func(s *sums) cell { return perUnitCell(s.spentClicks(), s.u[pChargedClicks], 1) }},
		{Name: "cpm", Kind: KindPrice, Description: "1000 × ad_spent_impressions / charged_impressions, rounded half up to 9 decimals; empty without charged impressions.", parts: []part{pSpentImpressions, pChargedImpressions}, value: func(s *sums) cell { return perUnitCell(s.spentImpressions(), s.u[pChargedImpressions], 1000) }},
		{Name: "roas", Kind: KindRatio, Description: "total_purchase_amount / ad_spend (return on ad spend).", parts: []part{pPurchaseAmount, pSpentClicks, pSpentImpressions}, value: func(s *sums) cell { return moneyRatioCell(microsOf(s.i[pPurchaseAmount]), s.spend()) }},
		{Name: "acos", Kind: KindRatio, Description: "ad_spend / total_purchase_amount (advertising cost of sales).", parts: []part{pSpentClicks, pSpentImpressions, pPurchaseAmount}, value: func(s *sums) cell { return moneyRatioCell(s.spend(), microsOf(s.i[pPurchaseAmount])) }},
		// Endcap extensions (after the spec's metrics): what the budget cap
		// refused (docs/design/budgets.md).
		{Name: "budget_refused_impressions", Kind: KindInt, Description: "Endcap extension: impressions of CPM winners not charged because the charge would have taken the campaign over its daily, weekly, monthly or total budget.", parts: []part{pRefusedImpressions}, value: func(s *sums) cell { return intCell(s.u[pRefusedImpressions]) }},
		{Name: "budget_refused_clicks", Kind: KindInt, Description: "Endcap extension: clicks of CPC winners not charged because the charge would have taken the campaign over its daily, weekly, monthly or total budget.", parts: []part{pRefusedClicks}, value: func(s *sums) cell { return intCell(s.u[pRefusedClicks]) }},
		{Name: "invalid_clicks", Kind: KindInt, Description: "Endcap extension: clicks of CPC winners not charged because an invalid-click rule refused them (no impression, too fast, repeated, too many; docs/design/charges.md, Invalid clicks).", parts: []part{pInvalidClicks}, value: func(s *sums) cell { return intCell(s.u[pInvalidClicks]) }},
	},
}
