package records

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fullRecord() Auction {
	return Auction{
		ID: "0190b7a2-7b1c-7c3e-8f00-000000000001", MarketplaceID: "7f000000-0000-4000-8000-000000000001",
		At: time.Date(2026, 11, 22, 10, 4, 5, 123_000_000, time.UTC), Endpoint: "auctions", Kind: "listings",
		Index: 2, Slots: 3, ProductCount: 500, Category: "c1", SearchQuery: "red \"running\" shoes\n",
		SlotID: "slot-1", Device: "mobile", PlacementID: 7, PlacementName: "search_top",
		Locations: []string{"8928308280fffff", "US"}, OpaqueUserID: "u-1", PageType: "search", PageID: "p/1",
		PageValue: []string{"a", "b"}, ExperimentVariant: "B", Candidates: 12,
		Winners: []AuctionWinner{
			{Rank: 1, Type: "product", EntityID: "p-1", CampaignID: "c-1", VendorID: "v-1", BidID: "b-1", BidTarget: "product",
				ChargeType: "CPC", BidMicros: 1_500_000, PriceMicros: 1_200_001, QualityPPM: 1_000_000},
			{Rank: 2, Type: "product", EntityID: "p-2", CampaignID: "c-2", VendorID: "v-2", BidTarget: "automated",
				ChargeType: "CPM", BidMicros: 9_223_372_036_854_775_807, PriceMicros: 0, QualityPPM: 1, VariationID: "var-9"},
		},
	}
}

// TestRecordAppendJSON: the hand-written encoder writes what encoding/json
// writes for the same record, byte for byte where the strings have no
// HTML characters, and a document that decodes to the same record always.
func TestRecordAppendJSON(t *testing.T) {
	minimal := Auction{ID: "a", MarketplaceID: "m", At: time.Unix(0, 0).UTC(), Endpoint: "auctions", Kind: "banners", Winners: []AuctionWinner{}}
	failed := minimal
	failed.Error, failed.Winners = true, nil
	nanos := minimal
	nanos.At = time.Date(2026, 1, 2, 3, 4, 5, 120, time.UTC)
	zone := minimal
	zone.At = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -(3*3600+30*60)))
	html := fullRecord()
	html.SearchQuery, html.Category, html.Winners[0].EntityID = "<b>&</b>", "c1&c2", "p\u2028x"
	badUTF8 := fullRecord()
	badUTF8.SearchQuery, badUTF8.PageValue = "ok\xffno", []string{"\x00\x1f", "é✓"}
	for _, tc := range []struct {
		name      string
		r         Auction
		byteEqual bool
	}{
		{"full", fullRecord(), true},
		{"minimal, empty winners", minimal, true},
		{"failed, nil winners", failed, true},
		{"nanoseconds", nanos, true},
		{"time zone", zone, true},
		{"invalid UTF-8 and control characters", badUTF8, true},
		{"HTML characters and U+2028", html, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(&tc.r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.r.AppendJSON([]byte("prefix"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatal("the prefix was not kept")
			}
			got = got[len("prefix"):]
			if tc.byteEqual && !bytes.Equal(got, want) {
				t.Fatalf("differs from encoding/json:\n got %s\nwant %s", got, want)
			}
			var a, b Auction
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatalf("%v: %s", err, got)
			}
			if err := json.Unmarshal(want, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("decodes to %+v, encoding/json's to %+v", a, b)
			}
		})
	}
	for _, y := range []int{-1, 10000} {
		r := minimal
		r.At = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := r.AppendJSON(nil); err == nil {
			t.Errorf("year %d: no error", y)
		}
		if _, err := json.Marshal(&r); err == nil {
			t.Errorf("year %d: encoding/json does not fail either: the check is not needed", y)
		}
	}
}

// TestRecordAppendJSONRandom: random strings of every kind of character
// decode to what encoding/json's document decodes to.
func TestRecordAppendJSONRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x7f", "<", "&", "é", "✓", "😀", "\u2028", "\xff", "\xc3"}
	rs := func() string {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	for i := range 2000 {
		r := fullRecord()
		r.ID, r.SearchQuery, r.Category, r.OpaqueUserID, r.PageValue = rs(), rs(), rs(), rs(), []string{rs()}
		r.Winners[0].EntityID, r.Winners[1].BidID, r.Candidates = rs(), rs(), rng.IntN(1000)-500
		got, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(&r)
		var a, b Auction
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("case %d: %v: %q", i, err, got)
		}
		_ = json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("case %d: %q decodes unlike %q", i, got, want)
		}
	}
}

func TestRecordAppendJSONAllocs(t *testing.T) {
	r := fullRecord()
	buf := make([]byte, 0, 4096)
	if a := testing.AllocsPerRun(100, func() { buf, _ = r.AppendJSON(buf[:0]) }); a != 0 {
		t.Fatalf("%v allocations into a buffer large enough", a)
	}
}

func BenchmarkRecordJSON(b *testing.B) {
	r := fullRecord()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = r.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&r)
		}
	})
}
