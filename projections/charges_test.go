package projections

import (
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
)

// TestLegacyMarkerKey: the key builds before 2026-11-22 used for a charge
// marker, from the key that replaced it.
func TestLegacyMarkerKey(t *testing.T) {
	const mp = "6f1c3b5e-0000-4000-8000-000000000001"
	c := &bidtoken.Claims{AuctionID: uuid.MustParse("0197afbb-a67b-7718-991a-1b1c1d1e1f20"), Rank: 7}
	for _, tc := range []struct {
		rank uint8
		kind records.Kind
		want string
	}{
		{7, records.KindClick, "ec:charged:{" + mp + "}:0197afbba67b7718991a1b1c1d1e1f20:7:c"},
		{40, records.KindImpression, "ec:charged:{" + mp + "}:0197afbba67b7718991a1b1c1d1e1f20:40:i"},
	} {
		c.Rank = tc.rank
		if got := legacyMarkerKey(mp, spend.ChargeKey(c, tc.kind)); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

func TestInteractionID(t *testing.T) {
	const mp = "6f1c3b5e-0000-4000-8000-000000000001"
	a := InteractionID(mp, records.KindClick, "ev-1")
	if a.Version() != 5 || a.Variant() != uuid.RFC4122 {
		t.Errorf("version %d variant %v, want a UUIDv5", a.Version(), a.Variant())
	}
	// Fixed: the vendor-charges endpoint and the daily files rely on it.
	if want := uuid.NewSHA1(uuid.MustParse("6b8f2d4a-93c1-4f0e-8a57-2e1d9c3b7f60"), []byte(mp+"/click/ev-1")); a != want {
		t.Errorf("InteractionID = %s, want %s", a, want)
	}
	for _, other := range []uuid.UUID{
		InteractionID(mp, records.KindImpression, "ev-1"),
		InteractionID(mp, records.KindClick, "ev-2"),
		InteractionID("6f1c3b5e-0000-4000-8000-000000000002", records.KindClick, "ev-1"),
	} {
		if other == a {
			t.Errorf("%s collides with another key", other)
		}
	}
	ns := uuid.MustParse("6b8f2d4a-93c1-4f0e-8a57-2e1d9c3b7f60")
	for _, id := range []string{"", "é-ü", strings.Repeat("x", 200), strings.Repeat("y", 300)} { // the last longer than the stack buffer
		if got, want := InteractionID(mp, records.KindImpression, id), uuid.NewSHA1(ns, []byte(mp+"/impression/"+id)); got != want {
			t.Errorf("InteractionID(%d-byte id) = %s, want %s", len(id), got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = InteractionID(mp, records.KindClick, "ev-1") }); n != 0 {
		t.Errorf("InteractionID allocates %.0f times, want 0", n)
	}
}

// testViews are fixed entity views.
func testViews(loc *time.Location) Views {
	return Views{
		Marketplace: func(id string) (MarketplaceDims, bool) {
			return MarketplaceDims{Currency: "EUR", Location: loc}, id == testMP
		},
		Campaign: func(mp, id string, at time.Time) (CampaignDims, bool) {
			if id != testCampaign {
				return CampaignDims{}, false
			}
			return CampaignDims{Name: "Spring", Type: "listings", VendorID: "v-camp", Status: "running", Active: true}, true
		},
		Vendor: func(mp, id string) (VendorDims, bool) {
			return VendorDims{Name: "Vendor " + id, GlobalID: "g-" + id}, true
		},
		ProductVendor: func(mp, id string) string {
			if id == "p-one" {
				return "v-1" // "p-two" has two vendors: none is its own
			}
			return ""
		},
	}
}

const (
	testMP       = "6f1c3b5e-0000-4000-8000-000000000001"
	testCampaign = "c0ffee00-1122-4333-8444-5566778899aa"
)

func testToken(t testing.TB, edit func(*bidtoken.Claims)) string {
	t.Helper()
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{1: []byte("endcap-test-key-0123456789abcdef")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := bidtoken.Claims{
		MarketplaceID: uuid.MustParse(testMP), AuctionID: uuid.MustParse("0197afbb-a67b-7718-991a-1b1c1d1e1f20"),
		CampaignID: uuid.MustParse(testCampaign), AuctionTimeMs: 1751000000123, ChargeType: bidtoken.CPC,
		AdFormat: bidtoken.Listings, Rank: 2, PriceMicros: 1_250_000, WinnerType: bidtoken.WinnerProduct,
		WinnerID: "p_Mfk15", VendorID: "v_42",
	}
	if edit != nil {
		edit(&c)
	}
	tok, err := kr.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestInteractionRow: the dimensions and the charge of one row, sponsored
// and organic, from the event, the token and the views.
func TestInteractionRow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	views := testViews(berlin)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	auctionMs := int64(1751000000123)                                         // 2025-06-27T04:53:20.123Z
	lateEvening := time.Date(2025, 6, 27, 22, 30, 0, 0, time.UTC).UnixMilli() // 00:30 on the 28th in Berlin
	base := func(kind records.Kind, tok string) records.Event {
		return records.Event{Kind: kind, MarketplaceID: testMP, ID: "ev", OccurredAtMs: lateEvening, ReceivedAtMs: lateEvening + 500,
			OpaqueUserID: "u", ResolvedBidID: tok, DeviceType: "mobile",
			Page:      &records.Page{Type: "search", ID: "p1", Value: []string{"shoes"}},
			Placement: &records.Placement{Path: "/s", Position: 3, Page: 2, PageSize: 20},
		}
	}
	type want struct {
		sponsored, charged             uint8
		campaign, campName, vendor     string
		vendorName, extVendor, entType string
		entID                          string
		hashed                         uint8
		amount                         int64
		sub                            uint16
		chargeDay                      string // "" = no charge
	}
	tests := []struct {
		name string
		e    records.Event
		want want
	}{
		{"CPC click", base(records.KindClick, testToken(t, nil)),
			want{1, 1, testCampaign, "Spring", "v_42", "Vendor v_42", "v_42", "product", "p_Mfk15", 0, 1_250_000, 0, "2025-06-28"}},
		{"CPC impression: stored, not charged", base(records.KindImpression, testToken(t, nil)),
			want{1, 0, testCampaign, "Spring", "v_42", "Vendor v_42", "v_42", "product", "p_Mfk15", 0, 0, 0, ""}},
		{"CPM impression", base(records.KindImpression, testToken(t, func(c *bidtoken.Claims) { c.ChargeType, c.PriceMicros = bidtoken.CPM, 3_999_999 })),
			want{1, 1, testCampaign, "Spring", "v_42", "Vendor v_42", "v_42", "product", "p_Mfk15", 0, 3_999, 999, "2025-06-28"}},
		{"hashed vendor and winner: vendor from the campaign", base(records.KindClick, testToken(t, func(c *bidtoken.Claims) {
			c.WinnerID, c.WinnerIDHashed, c.WinnerIDHash = "", true, bidtoken.IDHash("long")
			c.VendorID, c.VendorIDHashed, c.VendorIDHash = "", true, bidtoken.IDHash("v-camp")
		})), want{1, 1, testCampaign, "Spring", "v-camp", "Vendor v-camp", "v-camp", "product", "", 1, 1_250_000, 0, "2025-06-28"}},
		{"unknown campaign: no campaign attributes, still charged", base(records.KindClick, testToken(t, func(c *bidtoken.Claims) {
			c.CampaignID = uuid.MustParse("c0ffee00-1122-4333-8444-000000000000")
		})), want{1, 1, "c0ffee00-1122-4333-8444-000000000000", "", "v_42", "Vendor v_42", "v_42", "product", "p_Mfk15", 0, 1_250_000, 0, "2025-06-28"}},
		{"token of another marketplace: unattributed", base(records.KindClick, testToken(t, func(c *bidtoken.Claims) {
			c.MarketplaceID = uuid.MustParse("6f1c3b5e-0000-4000-8000-000000000009")
		})), want{0, 0, "", "", "", "", "", "", "", 0, 0, 0, ""}},
		{"organic product with one vendor", func() records.Event {
			e := base(records.KindClick, "")
			e.Entity = &records.Entity{Type: "product", ID: "p-one"}
			return e
		}(), want{0, 0, "", "", "v-1", "Vendor v-1", "v-1", "product", "p-one", 0, 0, 0, ""}},
		{"organic product with two vendors", func() records.Event {
			e := base(records.KindImpression, "")
			e.Entity = &records.Entity{Type: "product", ID: "p-two"}
			return e
		}(), want{0, 0, "", "", "", "", "", "product", "p-two", 0, 0, 0, ""}},
		{"organic vendor with an external vendor id", func() records.Event {
			e := base(records.KindImpression, "")
			e.Entity = &records.Entity{Type: "vendor", ID: "v-9"}
			e.ExternalVendorID, e.ExternalCampaignID = "ext-v", "ext-c"
			return e
		}(), want{0, 0, "", "", "v-9", "Vendor v-9", "ext-v", "vendor", "v-9", 0, 0, 0, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newInteractionRows(1)
			d := Event{E: tc.e, MP: uuid.MustParse(testMP), Partition: 2, Offset: 40}
			d.derive()
			c, err := r.add(&d, &views, log)
			if err != nil {
				t.Fatal(err)
			}
			if r.n != 1 {
				t.Fatalf("%d rows", r.n)
			}
			for i, col := range r.columns() {
				if n := colLen(col); n != 1 {
					t.Fatalf("column %d has %d values", i, n)
				}
			}
			got := want{r.sponsored[0], r.charged[0], r.campaign.At(0), r.campName.At(0), r.vendor[0],
				r.vendorName.At(0), r.extVendor.At(0), r.entType.At(0), r.entID.At(0), r.entHashed[0], r.amount[0], r.sub[0], ""}
			if c != nil {
				got.chargeDay = c.Day
				if c.Micros != r.amount[0] || c.CampaignID != r.campaign.At(0) || c.Owner != "2:40" || c.MarketplaceID != testMP {
					t.Errorf("charge %+v does not match its row", c)
				}
			}
			if got != tc.want {
				t.Errorf("row\n got %+v\nwant %+v", got, tc.want)
			}
			if r.day[0] != time.Date(2025, 6, 28, 0, 0, 0, 0, time.UTC) {
				t.Errorf("day_local %s, want 2025-06-28 (Berlin)", r.day[0])
			}
			if r.sponsored[0] == 1 && (r.auctionAtMs[0] != auctionMs || r.rank[0] != 2 || r.adFormat.At(0) != "listings") {
				t.Errorf("auction columns %d %d %q", r.auctionAtMs[0], r.rank[0], r.adFormat.At(0))
			}
		})
	}

	t.Run("unknown marketplace fails the batch", func(t *testing.T) {
		e := base(records.KindClick, testToken(t, nil))
		e.MarketplaceID = "6f1c3b5e-0000-4000-8000-000000000002"
		r := newInteractionRows(1)
		d := Event{E: e, MP: uuid.MustParse(e.MarketplaceID)}
		d.derive()
		if _, err := r.add(&d, &views, log); err == nil || r.n != 0 {
			t.Errorf("err %v, %d rows", err, r.n)
		}
	})
}

func colLen(col any) int {
	switch c := col.(type) {
	case []string:
		return len(c)
	case []uuid.UUID:
		return len(c)
	case []time.Time:
		return len(c)
	case []int64:
		return len(c)
	case []int32:
		return len(c)
	case []uint8:
		return len(c)
	case []uint16:
		return len(c)
	case []uint32:
		return len(c)
	case [][]string:
		return len(c)
	case *clickhouse.Strings:
		return c.Len()
	}
	panic("unknown column type")
}

// benchRecords returns n records of the events topic as the fold's
// benchmarks see them: 60% CPM impressions, 15% CPC clicks (each with its
// own auction) and 25% organic impressions, of 5,000 users.
func benchRecords(b *testing.B, n int) []*kgo.Record {
	now := time.Now().UnixMilli()
	batch := make([]*kgo.Record, n)
	for i := range batch {
		e := records.Event{MarketplaceID: testMP, ID: "e-" + strconv.Itoa(i), OccurredAtMs: now, ReceivedAtMs: now,
			OpaqueUserID: "u-" + strconv.Itoa(i%5000), DeviceType: "mobile",
			Placement: &records.Placement{Path: "/search", Position: int32(i%20 + 1), Page: 1, PageSize: 20},
			Page:      &records.Page{Type: "search", ID: "s", Value: []string{"shoes"}}}
		switch r := i % 20; {
		case r < 12:
			e.Kind = records.KindImpression
			e.ResolvedBidID = testToken(b, func(c *bidtoken.Claims) { c.ChargeType, c.AuctionID = bidtoken.CPM, uuid.New() })
		case r < 15:
			e.Kind = records.KindClick
			e.ResolvedBidID = testToken(b, func(c *bidtoken.Claims) { c.AuctionID = uuid.New() })
		default:
			e.Kind = records.KindImpression
			e.Entity = &records.Entity{Type: "product", ID: "p-one"}
		}
		v, _ := json.Marshal(&e)
		batch[i] = &kgo.Record{Value: v, Partition: int32(i % 3), Offset: int64(i)}
	}
	return batch
}
