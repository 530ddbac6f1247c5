package campaigns

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

func TestBidUnmarshalPacks(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 123, time.UTC)
	tests := []Bid{
		{ID: "b-1", CampaignID: "c-1", TargetType: TargetProduct, Target: "p-000000001", AmountMicros: 1_250_000, Active: true, CreatedAt: at, UpdatedAt: at},
		{ID: "8f0c2d8e-6c2b-4f6e-9a51-2d8f3a9b7c10", CampaignID: "0b7d6f1e-3a2c-4e8f-b9d1-5c6a7e8f9a0b", TargetType: TargetKeyword, Target: "running shoes"},
		{ID: "b-2", CampaignID: "c-2", TargetType: TargetCategory, Target: "c-17", AmountMicros: 1},
		{ID: "b-3", TargetType: "unknown-type", Target: "ü€𝄞"}, // kept as decoded
		{},
	}
	for _, want := range tests {
		raw, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got Bid
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
		for _, c := range []string{TargetProduct, TargetCategory, TargetKeyword} {
			if got.TargetType == c && unsafe.StringData(got.TargetType) != unsafe.StringData(c) {
				t.Errorf("target type %q is a copy, not the constant", c)
			}
		}
		if got.ID != "" && got.Target != "" &&
			uintptr(unsafe.Pointer(unsafe.StringData(got.Target))) != uintptr(unsafe.Pointer(unsafe.StringData(got.ID)))+uintptr(len(got.ID)+len(got.CampaignID)) {
			t.Errorf("%+v: id, campaign id and target do not share one allocation", got)
		}
	}
	var b Bid
	for _, bad := range []string{`{"id":1}`, `[`, `"x"`} {
		if err := json.Unmarshal([]byte(bad), &b); err == nil {
			t.Errorf("%s: decoded without an error", bad)
		}
	}
}

func TestCampaignUnmarshalPacks(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 123, time.UTC)
	end := at.Add(72 * time.Hour)
	tests := []Campaign{
		{ID: "c-1", VendorID: "v-1", Name: "Spring — ünïcødé", Type: TypeListings, ChargeType: ChargeCPC, DailyBudgetMicros: 5_000_000,
			StartDate: at, EndDate: &end, Active: true, BillingContactID: "bc-1", CreatedAt: at, UpdatedAt: at,
			Targeting: Targeting{PlacementIDs: []int{1, 2}, Devices: []string{"mobile"}, Locations: []string{"8928308280fffff"}, Segments: []string{"s-1"}}},
		{ID: "c-2", VendorID: "v-2", Name: "Brand", Type: TypeBanners, ChargeType: ChargeCPM},
		{ID: "c-3", VendorID: "v-3", Type: TypeAutomated, MaxBidMicros: 1},
		{ID: "c-4", Type: "unknown-type", ChargeType: "CPA"}, // kept as decoded
		{},
	}
	for _, want := range tests {
		raw, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got Campaign
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(got); string(again) != string(raw) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
		for _, c := range []string{TypeListings, TypeBanners, TypeAutomated, ChargeCPC, ChargeCPM} {
			if (got.Type == c && unsafe.StringData(got.Type) != unsafe.StringData(c)) ||
				(got.ChargeType == c && unsafe.StringData(got.ChargeType) != unsafe.StringData(c)) {
				t.Errorf("%q is a copy, not the constant", c)
			}
		}
		if got.ID != "" && got.BillingContactID != "" &&
			uintptr(unsafe.Pointer(unsafe.StringData(got.BillingContactID))) != uintptr(unsafe.Pointer(unsafe.StringData(got.ID)))+uintptr(len(got.ID)+len(got.VendorID)+len(got.Name)) {
			t.Errorf("%+v: the ids and the name do not share one allocation", got)
		}
	}
	var c Campaign
	for _, bad := range []string{`{"id":1}`, `[`, `"x"`} {
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("%s: decoded without an error", bad)
		}
	}
}
