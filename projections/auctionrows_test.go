package projections

import (
	"reflect"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/records"
)

// TestAuctionRowsReset: reset empties every column buffer (a column left
// out would carry the last batch's rows into the next insert).
func TestAuctionRowsReset(t *testing.T) {
	rec := &records.Auction{
		ID: "0190f0a4-1b2c-7d3e-8f40-123456789abc", MarketplaceID: "b26437b8-f7b0-4864-b425-657b25838304",
		At: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), Endpoint: "auctions", Kind: "listings", Slots: 2,
		ProductCount: 3, Category: "c-1", SearchQuery: "shoes", Locations: []string{"882a100d25fffff"},
		PageValue: []string{"x"}, Candidates: 4,
		Winners: []records.AuctionWinner{{Rank: 1, Type: "product", EntityID: "p-1", CampaignID: "c", VendorID: "v",
			BidTarget: "product", ChargeType: "CPC", BidMicros: 2, PriceMicros: 1, QualityPPM: 1_000_000}},
	}
	var a auctionRows
	var w winnerRows
	for range 3 {
		if err := a.add(rec, &w); err != nil {
			t.Fatal(err)
		}
	}
	a.reset()
	w.reset()
	for _, v := range []any{&a, &w} {
		rv := reflect.ValueOf(v).Elem()
		for i := range rv.NumField() {
			f := rv.Field(i)
			switch f.Kind() {
			case reflect.Int:
				if f.Int() != 0 {
					t.Errorf("%s.%s = %d after reset", rv.Type().Name(), rv.Type().Field(i).Name, f.Int())
				}
			case reflect.Slice:
				if f.Len() != 0 {
					t.Errorf("%s.%s has %d values after reset", rv.Type().Name(), rv.Type().Field(i).Name, f.Len())
				}
				if f.Cap() == 0 {
					t.Errorf("%s.%s lost its buffer", rv.Type().Name(), rv.Type().Field(i).Name)
				}
			default:
				t.Errorf("%s.%s: a field of kind %s the test does not know", rv.Type().Name(), rv.Type().Field(i).Name, f.Kind())
			}
		}
	}
	if err := a.add(rec, &w); err != nil || a.n != 1 || w.n != 1 || len(a.id) != 1 || len(w.entity) != 1 {
		t.Fatalf("after reset: err %v, %d auctions, %d winners", err, a.n, w.n)
	}
}
