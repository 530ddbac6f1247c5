package attribution

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/management/accounts"
)

// p0 is the purchase time of the unit cases (Unix ms).
const p0 = int64(1_800_000_000_000)

const (
	minute = int64(60_000)
	hour   = 60 * minute
	day    = 24 * hour
)

// tch builds a touch: label is its event id; the auction ran a second
// before it unless auctionMs says otherwise.
func tch(label, kind, format string, at int64, entity, vendor string) Touch {
	return Touch{Kind: kind, EventID: label, InteractionID: uuid.NewSHA1(uuid.Nil, []byte(label)), OccurredMs: at,
		ReceivedMs: at + 1000, AuctionMs: at - 1000, AuctionID: uuid.NewSHA1(uuid.Nil, []byte("a"+label)), Rank: 1,
		AdFormat: format, CampaignID: "c-" + vendor, VendorID: vendor, EntityType: "product", EntityID: entity}
}

func withAuction(t Touch, auctionMs int64) Touch { t.AuctionMs = auctionMs; return t }

func withAA(t Touch, typ, id string) Touch { t.AAType, t.AAID = typ, id; return t }

func vendorWinner(t Touch) Touch { t.EntityType, t.EntityID = "vendor", t.VendorID; return t }

// TestAttributeRules is the hand-computed table of the rule: for each case,
// the reason and the credited interaction of each item ("" = none).
func TestAttributeRules(t *testing.T) {
	def := DefaultRules()
	custom := RulesOf(&accounts.AttributionSettings{
		Windows: map[string]accounts.AttributionWindow{"banners": {ClickSeconds: 3600, ImpressionSeconds: 0}},
		NoHalo:  true, Revision: 3,
	})
	items := func(ids ...string) []Item {
		out := make([]Item, len(ids))
		for i, id := range ids {
			out[i] = Item{ProductID: id, UnitPriceMicros: 1_000_000, Quantity: 1, VendorID: "v1"}
		}
		return out
	}
	type want struct{ reason, touch string }
	cases := []struct {
		name    string
		rules   Rules
		items   []Item
		touches []Touch
		want    []want
	}{
		{"click beats a later impression", def, items("A"), []Touch{
			tch("i1", Impression, "listings", p0-10*minute, "A", "v1"),
			tch("c1", Click, "listings", p0-hour, "A", "v1"),
		}, []want{{ReasonProductClick, "c1"}}},
		{"latest click wins", def, items("A"), []Touch{
			tch("c1", Click, "listings", p0-3*hour, "A", "v1"),
			tch("c2", Click, "listings", p0-hour, "A", "v1"),
			tch("c0", Click, "listings", p0-5*hour, "A", "v1"),
		}, []want{{ReasonProductClick, "c2"}}},
		{"latest impression wins without clicks", def, items("A"), []Touch{
			tch("i1", Impression, "listings", p0-5*hour, "A", "v1"),
			tch("i2", Impression, "listings", p0-2*hour, "A", "v1"),
		}, []want{{ReasonProductImpression, "i2"}}},
		{"click window edge is inclusive", def, items("A"), []Touch{
			tch("c1", Click, "listings", p0-14*day, "A", "v1"),
		}, []want{{ReasonProductClick, "c1"}}},
		{"click a millisecond past the window", def, items("A"), []Touch{
			tch("c1", Click, "listings", p0-14*day-1, "A", "v1"),
		}, []want{{ReasonNone, ""}}},
		{"impression window edge", def, items("A"), []Touch{
			tch("i1", Impression, "listings", p0-day, "A", "v1"),
			tch("i0", Impression, "listings", p0-day-1, "A", "v1"),
		}, []want{{ReasonProductImpression, "i1"}}},
		{"old impression out, older click in", def, items("A"), []Touch{
			tch("i1", Impression, "listings", p0-2*day, "A", "v1"),
			tch("c1", Click, "listings", p0-13*day, "A", "v1"),
		}, []want{{ReasonProductClick, "c1"}}},
		{"other product of another vendor", def, items("A"), []Touch{
			tch("c1", Click, "listings", p0-hour, "B", "v2"),
		}, []want{{ReasonNone, ""}}},
		{"halo: another product of the item's vendor", def, items("A"), []Touch{
			tch("c1", Click, "listings", p0-hour, "B", "v1"),
		}, []want{{ReasonHaloClick, "c1"}}},
		{"halo impression", def, items("A"), []Touch{
			tch("i1", Impression, "listings", p0-hour, "B", "v1"),
		}, []want{{ReasonHaloImpression, "i1"}}},
		{"same-product impression beats a later halo click", def, items("A"), []Touch{
			tch("c1", Click, "listings", p0-minute, "B", "v1"),
			tch("i1", Impression, "listings", p0-2*hour, "A", "v1"),
		}, []want{{ReasonProductImpression, "i1"}}},
		{"vendor winner (banner) is a halo match", def, items("A"), []Touch{
			vendorWinner(tch("c1", Click, "banners", p0-hour, "", "v1")),
		}, []want{{ReasonHaloClick, "c1"}}},
		{"additionalAttribution names the product", def, items("A"), []Touch{
			withAA(vendorWinner(tch("c1", Click, "banners", p0-hour, "", "v9")), "product", "A"),
		}, []want{{ReasonProductClick, "c1"}}},
		{"auction after the purchase", def, items("A"), []Touch{
			withAuction(tch("c1", Click, "listings", p0, "A", "v1"), p0+1),
		}, []want{{ReasonNone, ""}}},
		{"auction 30 days before the purchase", def, items("A"), []Touch{
			withAuction(tch("c1", Click, "listings", p0-hour, "A", "v1"), p0-30*day),
		}, []want{{ReasonProductClick, "c1"}}},
		{"auction more than 30 days before the purchase", def, items("A"), []Touch{
			withAuction(tch("c1", Click, "listings", p0-hour, "A", "v1"), p0-30*day-1),
		}, []want{{ReasonNone, ""}}},
		{"interaction after the purchase", def, items("A"), []Touch{
			tch("c1", Click, "listings", p0+1, "A", "v1"),
		}, []want{{ReasonNone, ""}}},
		{"interaction and auction at the purchase time", def, items("A"), []Touch{
			withAuction(tch("c1", Click, "listings", p0, "A", "v1"), p0),
		}, []want{{ReasonProductClick, "c1"}}},
		{"unknown ad format is never credited", def, items("A"), []Touch{
			tch("c1", Click, "", p0-hour, "A", "v1"),
		}, []want{{ReasonNone, ""}}},
		{"items independently; one interaction for two items", def, items("A", "B", "Z", "A"), []Touch{
			tch("c1", Click, "listings", p0-hour, "A", "v1"),
			tch("i1", Impression, "listings", p0-hour, "B", "v2"),
		}, []want{{ReasonProductClick, "c1"}, {ReasonProductImpression, "i1"}, {ReasonHaloClick, "c1"}, {ReasonProductClick, "c1"}}},
		{"custom: banner click window 1 h", custom, items("A"), []Touch{
			tch("c1", Click, "banners", p0-2*hour, "A", "v1"),
			tch("i1", Impression, "banners", p0-minute, "A", "v1"),
			tch("c2", Click, "listings", p0-3*hour, "A", "v1"),
		}, []want{{ReasonProductClick, "c2"}}},
		{"custom: halo off", custom, items("A"), []Touch{
			tch("c1", Click, "listings", p0-hour, "B", "v1"),
		}, []want{{ReasonNone, ""}}},
		{"tie on time: the later auction, then the smaller interaction id", def, items("A"), []Touch{
			withAuction(tch("x", Click, "listings", p0-hour, "A", "v1"), p0-2*hour),
			withAuction(tch("y", Click, "listings", p0-hour, "A", "v1"), p0-90*minute),
		}, []want{{ReasonProductClick, "y"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &Purchase{EventID: "p", OccurredMs: p0, ReceivedMs: p0 + 500, Items: c.items}
			// Every order of the touches gives the same answer.
			for round := range 4 {
				ts := append([]Touch(nil), c.touches...)
				rand.New(rand.NewPCG(uint64(round), 7)).Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
				got := Attribute(p, ts, &c.rules)
				if len(got) != len(c.want) {
					t.Fatalf("%d results, want %d", len(got), len(c.want))
				}
				for i, w := range c.want {
					label := ""
					if got[i].Touch != nil {
						label = got[i].Touch.EventID
					}
					if got[i].Reason != w.reason || label != w.touch || got[i].ItemIndex != i {
						t.Errorf("order %d item %d: %s %q, want %s %q", round, i, got[i].Reason, label, w.reason, w.touch)
					}
					if got[i].Score != Score(w.reason) {
						t.Errorf("item %d score %v, want %v", i, got[i].Score, Score(w.reason))
					}
				}
			}
		})
	}
}

func TestScore(t *testing.T) {
	for reason, want := range map[string]float64{ReasonProductClick: 1, ReasonProductImpression: 0.5,
		ReasonHaloClick: 0.25, ReasonHaloImpression: 0.125, ReasonNone: 0, "other": 0} {
		if got := Score(reason); got != want {
			t.Errorf("Score(%s) = %v, want %v", reason, got, want)
		}
	}
}

// TestVersion: the version grows with the settings revision first, then
// with the latest receipt among the purchase and the qualifying touches
// (touches that do not qualify do not move it).
func TestVersion(t *testing.T) {
	r := DefaultRules()
	p := &Purchase{EventID: "p", OccurredMs: p0, ReceivedMs: p0 + 500, Items: []Item{{ProductID: "A", VendorID: "v1", Quantity: 1}}}
	v0 := Attribute(p, nil, &r)[0].Version
	if v0 != uint64(p0+500) {
		t.Errorf("no touches: version %d, want the purchase's receipt %d", v0, p0+500)
	}
	late := tch("c1", Click, "listings", p0-hour, "A", "v1")
	late.ReceivedMs = p0 + 10*day
	other := tch("c2", Click, "listings", p0-hour, "Q", "v7")
	other.ReceivedMs = p0 + 20*day
	v1 := Attribute(p, []Touch{late, other}, &r)[0].Version
	if v1 != uint64(p0+10*day) {
		t.Errorf("late click: version %d, want %d", v1, p0+10*day)
	}
	r.Revision = 1
	if v2 := Attribute(p, nil, &r)[0].Version; v2 <= v1 {
		t.Errorf("a newer revision's version %d is not above %d", v2, v1)
	}
}

func TestRulesOf(t *testing.T) {
	r := RulesOf(nil)
	if !r.Halo || r.Revision != 0 || len(r.Windows) != 5 {
		t.Fatalf("defaults: %+v", r)
	}
	for _, f := range accounts.AttributionAdFormats {
		if r.Window(f, Click) != 14*24*time.Hour || r.Window(f, Impression) != 24*time.Hour {
			t.Errorf("%s default windows %v", f, r.Windows[f])
		}
	}
	if r.MaxWindow() != 14*24*time.Hour {
		t.Errorf("max window %v", r.MaxWindow())
	}
	r = RulesOf(&accounts.AttributionSettings{Windows: map[string]accounts.AttributionWindow{
		"hotels": {ClickSeconds: 30 * 86400, ImpressionSeconds: 7200}, "nonsense": {ClickSeconds: 1},
	}, NoHalo: true, Revision: 9})
	if r.Halo || r.Revision != 9 || r.Window("hotels", Click) != 30*24*time.Hour || r.Window("hotels", Impression) != 2*time.Hour ||
		r.Window("listings", Click) != DefaultClickWindow || r.Window("nonsense", Click) != 0 || r.MaxWindow() != 30*24*time.Hour {
		t.Errorf("settings applied wrongly: %+v", r)
	}
	if r.Window("listings", "pageview") != 0 {
		t.Error("a pageview has a window")
	}
}
