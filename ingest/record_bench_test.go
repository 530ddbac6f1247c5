package ingest

import (
	stdjson "encoding/json"
	"testing"

	gojson "github.com/goccy/go-json"
)

// An event record as it travels on the events topic: encoding/json and
// goccy/go-json (what the projectors use) decode it side by side.
var benchRec = func() []byte {
	e := Event{Kind: KindClick, MarketplaceID: "6f1c2b9e-8a53-4c1e-9d3e-0c7f1a2b3c4d", ID: "evt-1234567890", OccurredAtMs: 1763740000000, ReceivedAtMs: 1763740000100,
		OpaqueUserID: "user-abcdef-123456", ResolvedBidID: "AQEAAAAB3x9f8k2lm4n5o6p7q8r9s0t1u2v3w4x5y6z7A8B9C0D1E2F3G4H5I6J7K8L9M0N1O2P3Q4R5S6T7U8V9W0X1Y2Z3a4b5c6d7e8f9g0h1i2j3k4",
		Placement: &Placement{Path: "/search", Position: 3, Page: 1, PageSize: 20, SearchQuery: "running shoes"},
		Page:      &Page{Type: "search", ID: "s-1", Value: []string{"running shoes"}}, DeviceType: "mobile", Channel: "onsite"}
	b, _ := stdjson.Marshal(&e)
	return b
}()

func BenchmarkDecodeStd(b *testing.B) {
	for b.Loop() {
		var e Event
		if err := stdjson.Unmarshal(benchRec, &e); err != nil {
			b.Fatal(err)
		}
	}
}
func BenchmarkDecodeGoccy(b *testing.B) {
	for b.Loop() {
		var e Event
		if err := gojson.Unmarshal(benchRec, &e); err != nil {
			b.Fatal(err)
		}
	}
}
