package campaigns

import (
	"encoding/json"
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
		if got != want {
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
