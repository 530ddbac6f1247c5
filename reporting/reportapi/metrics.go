// Package reportapi answers the Reporting API,
// GET /public/v1/reporting-service/… (docs/reference/reporting-api.md): the results of
// a marketplace, a vendor, a campaign or a product over a window of the
// marketplace's local days, in total or per day, and the interactions
// report grouped by vendor, campaign or product. Every figure is read from
// rollup_daily, the daily rollup the exports read (docs/design/rollups.md), and
// every answer says how fresh it is (dataAsOf, the days' watermark). The
// HTTP handlers (api/reporting.go) only parse, authorize and answer.
package reportapi

import (
	"golang.org/x/text/currency"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/reporting/vendorcharges"
)

// Metrics are the sponsored results of a group of rollup rows.
type Metrics struct {
	Impressions, ChargedImpressions uint64
	Clicks, ChargedClicks           uint64
	// SpentImpressions and SpentClicks are the exact amounts charged:
	// micro-units plus thousandths of a micro-unit (CPM impressions).
	SpentImpressions, SpentClicks vendorcharges.Amount
	// PurchaseCount is the distinct attributed purchases, PurchaseQuantity
	// the units of their attributed items, PurchaseAmount their value.
	PurchaseCount    uint64
	PurchaseQuantity int64
	PurchaseAmount   money.Micros
}

// exact makes an Amount of summed micro-units and thousandths of a
// micro-unit (the rollup sums them apart: docs/design/rollups.md, Metrics).
func exact(micros int64, subMicros uint64) vendorcharges.Amount {
	micros += int64(subMicros / 1000)
	return vendorcharges.Amount{Micros: micros, SubMicros: uint16(subMicros % 1000)}
}

// Scale is the number of decimals of a currency's minor unit (ISO 4217: 2
// for EUR and USD, 0 for JPY, 3 for KWD); 2 for a code it does not know.
func Scale(code string) int {
	u, err := currency.ParseISO(code)
	if err != nil {
		return 2
	}
	scale, _ := currency.Standard.Rounding(u)
	return scale
}

// Minor is an exact amount in minor units of a currency of scale decimals
// (6 at most: micro-units), rounded to the nearest minor unit, halves away from zero.
// The decimal string (String of the amount) keeps every digit.
func Minor(a vendorcharges.Amount, scale int) int64 {
	scale = min(scale, 6)
	div := int64(1)
	for range 6 - scale {
		div *= 10
	}
	a = exact(a.Micros, uint64(a.SubMicros))
	if a.Micros < 0 {
		// −(m + s/1000) = (−m − 1) + (1000 − s)/1000: round the magnitude.
		neg := vendorcharges.Amount{Micros: -a.Micros}
		if a.SubMicros > 0 {
			neg = vendorcharges.Amount{Micros: -a.Micros - 1, SubMicros: 1000 - a.SubMicros}
		}
		return -Minor(neg, scale)
	}
	// In thousandths of a micro-unit: the remainder r×1000 + sub (below
	// div×1000) against half a minor unit; neither product overflows.
	q, r := a.Micros/div, a.Micros%div
	if (r*1000+int64(a.SubMicros))*2 >= div*1000 {
		q++
	}
	return q
}

// MinorMicros is Minor of a whole number of micro-units.
func MinorMicros(m money.Micros, scale int) int64 {
	return Minor(vendorcharges.Amount{Micros: int64(m)}, scale)
}
