package exports

import (
	"slices"
	"testing"
	"time"
)

// TestLedgerFill: every column of the balance_ledger dataset has its value
// in a row, in the order the request names the columns: a top-up's amount,
// a credit-limit change's limit (amount 0), the other rows' empty limit.
func TestLedgerFill(t *testing.T) {
	r := &Request{Dataset: DatasetBalanceLedger}
	for _, d := range balanceLedger.Dimensions {
		r.Dimensions = append(r.Dimensions, d.Name)
	}
	for _, m := range balanceLedger.Metrics {
		r.Metrics = append(r.Metrics, m.Name)
	}
	slices.Reverse(r.Dimensions) // the request's order, not the dataset's
	p, err := newLedgerPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 20, 23, 30, 0, 0, time.UTC)
	day := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC) // the local day of a marketplace east of UTC
	top := movementRow(LedgerMovement{ID: "m-1", VendorID: "v-1", Kind: LedgerTopUp, Micros: 5_000_000, Description: "Q4", At: at}, day, "EUR")
	limit := movementRow(LedgerMovement{ID: "m-2", VendorID: "v-1", Kind: LedgerCreditLimit, Micros: 2_500_000, At: at}, day, "EUR")
	charge := ledgerRow{at: at, micros: -250_000, day: day.Unix() / 86400}
	charge.text = [numLedgerText]string{lVendor: "v-2", lID: "i-1", lKind: LedgerCharge, lCampaign: "c-1", lChargeType: "CPC", lCurrency: "EUR"}
	for _, tc := range []struct {
		name string
		row  ledgerRow
		want map[string]cell
	}{
		{"top-up", top, map[string]cell{"occurred_at": {i: at.UnixMilli()}, "day_local": {i: 20778}, "vendor_id": {s: "v-1"}, "movement_id": {s: "m-1"},
			"kind": {s: "top_up"}, "description": {s: "Q4"}, "campaign_id": {}, "charge_type": {}, "currency_code": {s: "EUR"},
			"amount": {m: amount{units: 5}}, "credit_limit": {null: true}}},
		{"credit limit", limit, map[string]cell{"occurred_at": {i: at.UnixMilli()}, "day_local": {i: 20778}, "vendor_id": {s: "v-1"}, "movement_id": {s: "m-2"},
			"kind": {s: "credit_limit"}, "description": {}, "campaign_id": {}, "charge_type": {}, "currency_code": {s: "EUR"},
			"amount": {}, "credit_limit": {m: amount{units: 2, nanos: 500_000_000}}}},
		{"charge", charge, map[string]cell{"occurred_at": {i: at.UnixMilli()}, "day_local": {i: 20778}, "vendor_id": {s: "v-2"}, "movement_id": {s: "i-1"},
			"kind": {s: "charge"}, "description": {}, "campaign_id": {s: "c-1"}, "charge_type": {s: "CPC"}, "currency_code": {s: "EUR"},
			"amount": {m: amount{units: -1, nanos: 750_000_000}}, "credit_limit": {null: true}}},
	} {
		row := make([]cell, len(p.cols))
		for i := range row {
			row[i] = cell{s: "left from the row before"}
		}
		p.fill(row, &tc.row)
		if len(p.cols) != len(tc.want) {
			t.Fatalf("%d columns, want %d", len(p.cols), len(tc.want))
		}
		for i, c := range p.cols {
			if got, want := row[i], tc.want[c.Name]; got.s != want.s || got.i != want.i || got.m != want.m || got.null != want.null {
				t.Errorf("%s: %s is %+v, want %+v", tc.name, c.Name, got, want)
			}
		}
	}
}
