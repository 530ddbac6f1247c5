package reportapi

import (
	"time"

	"github.com/endcap/endcap/internal/timestamp"
)

// The response bodies (docs/reference/reporting-api.md). Amounts are integers in
// minor units of the marketplace currency (Topsort's adSpent, amount),
// rounded to the nearest minor unit, each with its exact decimal text in
// currency units beside it (…Decimal).

// EventsJSON is the impressions or clicks of a report.
type EventsJSON struct {
	Total          uint64 `json:"total"`
	Charged        uint64 `json:"charged"`
	AdSpent        int64  `json:"adSpent"`
	AdSpentDecimal string `json:"adSpentDecimal"`
}

// PurchasesJSON is the attributed purchases of a report.
type PurchasesJSON struct {
	Amount        int64  `json:"amount"`
	AmountDecimal string `json:"amountDecimal"`
	Count         uint64 `json:"count"`
	Quantity      int64  `json:"quantity"`
}

// ReportJSON is the results of a report or of one of its days.
type ReportJSON struct {
	Impressions EventsJSON    `json:"impressions"`
	Clicks      EventsJSON    `json:"clicks"`
	Purchases   PurchasesJSON `json:"purchases"`
}

// Freshness is what every answer says of its data.
type Freshness struct {
	// CurrencyCode is the currency of every amount (ISO 4217).
	CurrencyCode string `json:"currencyCode"`
	// DataAsOf: every event acknowledged before it is counted (absent when
	// unknown).
	DataAsOf *timestamp.Time `json:"dataAsOf,omitempty"`
}

// NewFreshness is the freshness part of an answer.
func NewFreshness(currencyCode string, dataAsOf time.Time) Freshness {
	f := Freshness{CurrencyCode: currencyCode}
	if !dataAsOf.IsZero() {
		t := timestamp.Of(dataAsOf)
		f.DataAsOf = &t
	}
	return f
}

// Report is m as a report in a currency of scale decimals.
func (m Metrics) Report(scale int) ReportJSON {
	return ReportJSON{
		Impressions: EventsJSON{Total: m.Impressions, Charged: m.ChargedImpressions,
			AdSpent: Minor(m.SpentImpressions, scale), AdSpentDecimal: m.SpentImpressions.String()},
		Clicks: EventsJSON{Total: m.Clicks, Charged: m.ChargedClicks,
			AdSpent: Minor(m.SpentClicks, scale), AdSpentDecimal: m.SpentClicks.String()},
		Purchases: PurchasesJSON{Amount: MinorMicros(m.PurchaseAmount, scale), AmountDecimal: m.PurchaseAmount.String(),
			Count: m.PurchaseCount, Quantity: m.PurchaseQuantity},
	}
}

// TotalJSON is the answer of a total report.
type TotalJSON struct {
	ReportJSON
	StartDate string `json:"startDate"`
	EndDate   string `json:"endDate"`
	Freshness
}

// TotalBody is the answer of a total report of the window.
func TotalBody(m Metrics, w Window, fr Freshness) TotalJSON {
	return TotalJSON{ReportJSON: m.Report(Scale(fr.CurrencyCode)), StartDate: w.From.Format(time.DateOnly),
		EndDate: w.To.Format(time.DateOnly), Freshness: fr}
}

// DayJSON is one day of a daily report.
type DayJSON struct {
	ReportJSON
	Date string `json:"date"`
}

// DailyJSON is the answer of a daily report.
type DailyJSON struct {
	HasMore  bool      `json:"hasMore"`
	Reports  []DayJSON `json:"reports"`
	NextPage *string   `json:"nextPage"`
	Freshness
}

// DailyBody is the answer of a page of a daily report.
func DailyBody(days []Day, next *string, fr Freshness) DailyJSON {
	scale := Scale(fr.CurrencyCode)
	out := DailyJSON{HasMore: next != nil, Reports: make([]DayJSON, len(days)), NextPage: next, Freshness: fr}
	for i, d := range days {
		out.Reports[i] = DayJSON{ReportJSON: d.Report(scale), Date: d.Date.Format(time.DateOnly)}
	}
	return out
}

// InteractionJSON is one row of the interactions report (Topsort's
// names). The per-purchase and exclusive-campaign charges do not exist in
// Endcap: their fields are 0 (docs/design/rollups.md, Metrics).
type InteractionJSON struct {
	Timestamp                  timestamp.Time `json:"timestamp"`
	Date                       string         `json:"date"`
	VendorID                   *string        `json:"vendorId,omitempty"`
	CampaignID                 *string        `json:"campaignId,omitempty"`
	ProductID                  *string        `json:"productId,omitempty"`
	Impressions                uint64         `json:"impressions"`
	Clicks                     uint64         `json:"clicks"`
	ChargedImpressions         uint64         `json:"chargedImpressions"`
	ChargedClicks              uint64         `json:"chargedClicks"`
	ChargedAttributedPurchases uint64         `json:"chargedAttributedPurchases"`
	AdSpentImpressions         int64          `json:"adSpentImpressions"`
	AdSpentImpressionsDecimal  string         `json:"adSpentImpressionsDecimal"`
	AdSpentClicks              int64          `json:"adSpentClicks"`
	AdSpentClicksDecimal       string         `json:"adSpentClicksDecimal"`
	AdSpentAttributedPurchases int64          `json:"adSpentAttributedPurchases"`
	AdSpentExclusiveCampaign   int64          `json:"adSpentExclusiveCampaign"`
	TotalPurchaseAmount        int64          `json:"totalPurchaseAmount"`
	TotalPurchaseAmountDecimal string         `json:"totalPurchaseAmountDecimal"`
	TotalPurchaseCount         uint64         `json:"totalPurchaseCount"`
	TotalPurchaseQuantity      int64          `json:"totalPurchaseQuantity"`
}

// InteractionsJSON is the answer of the interactions report.
type InteractionsJSON struct {
	HasMore      bool              `json:"hasMore"`
	Interactions []InteractionJSON `json:"interactions"`
	NextPage     *string           `json:"nextPage"`
	Freshness
}

// InteractionsBody is the answer of a page of the interactions report;
// a row's timestamp is the start of its day in the marketplace's zone
// (loc).
func InteractionsBody(rows []Interaction, g GroupBy, loc *time.Location, next *string, fr Freshness) InteractionsJSON {
	if loc == nil {
		loc = time.UTC
	}
	scale := Scale(fr.CurrencyCode)
	out := InteractionsJSON{HasMore: next != nil, Interactions: make([]InteractionJSON, len(rows)), NextPage: next, Freshness: fr}
	for i, r := range rows {
		x := InteractionJSON{
			Timestamp:                  timestamp.Of(time.Date(r.Date.Year(), r.Date.Month(), r.Date.Day(), 0, 0, 0, 0, loc)),
			Date:                       r.Date.Format(time.DateOnly),
			Impressions:                r.Impressions,
			Clicks:                     r.Clicks,
			ChargedImpressions:         r.ChargedImpressions,
			ChargedClicks:              r.ChargedClicks,
			AdSpentImpressions:         Minor(r.SpentImpressions, scale),
			AdSpentImpressionsDecimal:  r.SpentImpressions.String(),
			AdSpentClicks:              Minor(r.SpentClicks, scale),
			AdSpentClicksDecimal:       r.SpentClicks.String(),
			TotalPurchaseAmount:        MinorMicros(r.PurchaseAmount, scale),
			TotalPurchaseAmountDecimal: r.PurchaseAmount.String(),
			TotalPurchaseCount:         r.PurchaseCount,
			TotalPurchaseQuantity:      r.PurchaseQuantity,
		}
		switch g {
		case ByVendor:
			x.VendorID = &r.VendorID
		case ByProduct:
			x.ProductID = &r.ProductID
		default:
			x.VendorID, x.CampaignID = &r.VendorID, &r.CampaignID
		}
		out.Interactions[i] = x
	}
	return out
}
