package auction

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// The scenarios of docs/design/auction-ranking.md, computed by hand there.
func TestRankHandComputed(t *testing.T) {
	const µ = 1
	docExample := []named{
		{Group: 1, CampaignID: "c1", ProductID: "P1", BidMicros: 1_000_000, QualityPPM: 500_000},              // score 10,000,000 × 0.5 = 5.0e12
		{Group: 2, CampaignID: "c2", ProductID: "P2", BidMicros: 800_000, QualityPPM: 900_000},                // 8,000,000 × 0.9 = 7.2e12
		{Group: 1, CampaignID: "c3", ProductID: "P1", BidMicros: 600_000, QualityPPM: 500_000},                // 3.0e12
		{Group: 3, CampaignID: "c4", ProductID: "P3", BidMicros: 5_000_000, CPM: true, QualityPPM: 1_000_000}, // 5.0e12, quality 1
		{Group: 4, CampaignID: "c5", ProductID: "P4", BidMicros: 50_000, QualityPPM: 1_000_000},               // below the reserve
	}
	reserve := Reserve{CPCMicros: 100_000, CPMMicros: 1_000_000}
	tests := []struct {
		name    string
		cands   []named
		slots   int
		reserve Reserve
		want    []Placement
	}{
		{"doc example, 2 slots", docExample, 2, reserve, []Placement{
			{Cand: 1, Rank: 1, PriceMicros: 555_556},   // ⌈5e12 / (10 × 900,000)⌉
			{Cand: 3, Rank: 2, PriceMicros: 5_000_000}, // tie with c1 on score, wins on quality: pays its bid
		}},
		{"doc example, 3 slots: c3 on the same product prices c1", docExample, 3, reserve, []Placement{
			{Cand: 1, Rank: 1, PriceMicros: 555_556},
			{Cand: 3, Rank: 2, PriceMicros: 5_000_000},
			{Cand: 0, Rank: 3, PriceMicros: 600_000}, // ⌈3e12 / (10 × 500,000)⌉
		}},
		{"doc example, 10 slots: one winner per product", docExample, 10, reserve, []Placement{
			{Cand: 1, Rank: 1, PriceMicros: 555_556},
			{Cand: 3, Rank: 2, PriceMicros: 5_000_000},
			{Cand: 0, Rank: 3, PriceMicros: 600_000},
		}},
		{"lone winner pays the reserve", []named{
			{Group: 1, CampaignID: "a", ProductID: "p", BidMicros: 700_000, QualityPPM: 1_000_000},
		}, 1, reserve, []Placement{{Cand: 0, Rank: 1, PriceMicros: 100_000}}},
		{"no reserve: at least 1 µ", []named{
			{Group: 1, CampaignID: "a", ProductID: "p", BidMicros: 700_000, QualityPPM: 1_000_000},
		}, 1, Reserve{}, []Placement{{Cand: 0, Rank: 1, PriceMicros: 1 * µ}}},
		{"price never below the reserve", []named{
			{Group: 1, CampaignID: "a", ProductID: "p", BidMicros: 700_000, QualityPPM: 1_000_000},
			{Group: 2, CampaignID: "b", ProductID: "q", BidMicros: 110_000, QualityPPM: 100_000}, // score 1.1e11 → 11,000 µ to beat
		}, 1, reserve, []Placement{{Cand: 0, Rank: 1, PriceMicros: 100_000}}},
		{"equal score and quality: smaller campaign id first", []named{
			{Group: 1, CampaignID: "b", ProductID: "p1", BidMicros: 300_000, QualityPPM: 1_000_000},
			{Group: 2, CampaignID: "a", ProductID: "p2", BidMicros: 300_000, QualityPPM: 1_000_000},
		}, 2, Reserve{}, []Placement{
			{Cand: 1, Rank: 1, PriceMicros: 300_000},
			{Cand: 0, Rank: 2, PriceMicros: 1},
		}},
		{"bid equal to the reserve competes", []named{
			{Group: 1, CampaignID: "a", ProductID: "p", BidMicros: 100_000, QualityPPM: 1_000_000},
		}, 1, reserve, []Placement{{Cand: 0, Rank: 1, PriceMicros: 100_000}}},
		{"largest bids do not overflow", []named{
			{Group: 1, CampaignID: "a", ProductID: "p", BidMicros: 1_000_000_000_000_000, QualityPPM: 1_000_000},
			{Group: 2, CampaignID: "b", ProductID: "q", BidMicros: 999_999_999_999_999, QualityPPM: 1_000_000},
		}, 1, Reserve{}, []Placement{{Cand: 0, Rank: 1, PriceMicros: 999_999_999_999_999}}},
		{"one winner per vendor group (sponsored brand)", []named{
			{Group: 7, CampaignID: "a", ProductID: "p1", BidMicros: 900_000, QualityPPM: 1_000_000},
			{Group: 7, CampaignID: "a", ProductID: "p2", BidMicros: 800_000, QualityPPM: 1_000_000},
			{Group: 8, CampaignID: "b", ProductID: "p3", BidMicros: 500_000, QualityPPM: 1_000_000},
		}, 2, Reserve{}, []Placement{
			{Cand: 0, Rank: 1, PriceMicros: 800_000}, // its own vendor's other product would take the slot
			{Cand: 2, Rank: 2, PriceMicros: 1},
		}},
		{"invalid candidates ignored", []named{
			{Group: 1, CampaignID: "a", ProductID: "p", BidMicros: 0, QualityPPM: 1_000_000},
			{Group: 2, CampaignID: "b", ProductID: "q", BidMicros: 5, QualityPPM: 0},
		}, 3, Reserve{}, []Placement{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rk ranker
			cands, names := unname(tt.cands)
			got := append([]Placement{}, rk.Rank(cands, names, tt.slots, tt.reserve)...)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestQualityPPM(t *testing.T) {
	for _, tt := range []struct {
		q    float64
		want int64
	}{{0, 1_000_000}, {1, 1_000_000}, {0.5, 500_000}, {1e-9, 1}, {0.1234565, 123_457}, {2, 1_000_000}, {-1, 1_000_000}} {
		if got := qualityPPM(tt.q); got != tt.want {
			t.Errorf("qualityPPM(%v) = %d, want %d", tt.q, got, tt.want)
		}
	}
}

func TestMatchFilter(t *testing.T) {
	meta := []byte(`{"color":"red","size":42,"tags":["a","b"],"eco":true,"promotions":["summer","x"]}`)
	tests := []struct {
		f    Filter
		want bool
	}{
		{Filter{Attributes: []Attribute{{"color", "red"}}}, true},
		{Filter{Attributes: []Attribute{{"color", "blue"}}}, false},
		{Filter{Attributes: []Attribute{{"size", "42"}, {"eco", "true"}}}, true},
		{Filter{Attributes: []Attribute{{"tags", "b"}}}, true},
		{Filter{Attributes: []Attribute{{"brand", "Acme"}}}, true},
		{Filter{Attributes: []Attribute{{"brand", "acme"}}}, false},
		{Filter{Attributes: []Attribute{{"missing", "x"}}}, false},
		{Filter{Operator: "or", Attributes: []Attribute{{"color", "blue"}, {"size", "42"}}}, true},
		{Filter{Operator: "and", Attributes: []Attribute{{"color", "blue"}, {"size", "42"}}}, false},
		{Filter{Promotions: []string{"summer"}}, true},
		{Filter{Promotions: []string{"winter"}}, false},
		{Filter{Operator: "or", Promotions: []string{"winter"}, Attributes: []Attribute{{"color", "red"}}}, true},
	}
	for _, tt := range tests {
		if got := matchFilter(&tt.f, meta, "b1", "Acme"); got != tt.want {
			t.Errorf("matchFilter(%+v) = %v, want %v", tt.f, got, tt.want)
		}
	}
	if matchFilter(&Filter{Attributes: []Attribute{{"color", "red"}}}, []byte(`[1]`), "", "") {
		t.Error("metadata that is not an object matched")
	}
}

// named is a candidate with its ids spelled out, the tests' form of it.
type named struct {
	Group                 int32
	CampaignID, ProductID string
	BidMicros             int64
	CPM                   bool
	QualityPPM            int64
}

func (c *named) candidate(i int) Candidate {
	return Candidate{Group: c.Group, Campaign: int32(i), Product: int32(i), BidMicros: c.BidMicros, CPM: c.CPM, QualityPPM: c.QualityPPM}
}

func (c *named) score() score { x := c.candidate(0); return x.score() }

// nameTable is the Names of unname's candidates: candidate i's ids at i
// (so two candidates of one campaign have different numbers and the same
// id, which the tie-break must treat as one campaign).
type nameTable struct{ camps, prods []string }

func (n *nameTable) CampaignID(i int32) string { return n.camps[i] }
func (n *nameTable) ProductID(i int32) string  { return n.prods[i] }

func unname(ns []named) ([]Candidate, *nameTable) {
	out := make([]Candidate, len(ns))
	names := &nameTable{}
	for i := range ns {
		out[i] = ns[i].candidate(i)
		names.camps, names.prods = append(names.camps, ns[i].CampaignID), append(names.prods, ns[i].ProductID)
	}
	return out, names
}

// rankSorted is the reference for Rank: the whole order sorted first, then
// the same walk.
func rankSorted(cands []named, slots int, reserve Reserve) []Placement {
	var order []int
	for i := range cands {
		c := &cands[i]
		if c.BidMicros > 0 && c.BidMicros >= reserve.of(c.CPM) && c.QualityPPM >= 1 && c.QualityPPM <= MaxQualityPPM {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(x, y int) bool {
		a, b := &cands[order[x]], &cands[order[y]]
		if r := cmpScore(a.score(), b.score()); r != 0 {
			return r > 0
		}
		if a.QualityPPM != b.QualityPPM {
			return a.QualityPPM > b.QualityPPM
		}
		if a.CampaignID != b.CampaignID {
			return a.CampaignID < b.CampaignID
		}
		return a.ProductID < b.ProductID
	})
	var out []Placement
	var groups []int32
	for k, ci := range order {
		if len(out) == slots {
			break
		}
		c := &cands[ci]
		if slices.Contains(groups, c.Group) {
			continue
		}
		price := reserve.of(c.CPM)
		cand := c.candidate(ci)
		for _, nj := range order[k+1:] {
			if !slices.Contains(groups, cands[nj].Group) {
				price = max(price, priceToBeat(cands[nj].score(), &cand))
				break
			}
		}
		groups = append(groups, c.Group)
		out = append(out, Placement{Cand: ci, Rank: len(out) + 1, PriceMicros: min(max(price, 1), c.BidMicros)})
	}
	return out
}

// Rank takes candidates off a heap only as far as it reads; it must give
// exactly what sorting everything gives, ties included.
func TestRankMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var rk ranker
	for iter := range 20_000 {
		n := r.IntN(60)
		if iter%100 == 0 {
			n = 500 + r.IntN(500)
		}
		cands := make([]named, n)
		for i := range cands {
			cands[i] = named{
				Group:      int32(r.IntN(max(1, n/3))),
				CampaignID: fmt.Sprintf("c%d", r.IntN(8)),
				ProductID:  fmt.Sprintf("p%d-%d", r.IntN(8), i), // (campaign, product) is unique, as in an auction
				BidMicros:  int64(r.IntN(6)) * 100_000,          // ties and zeros
				CPM:        r.IntN(4) == 0,
				QualityPPM: []int64{0, 1, 500_000, 1_000_000, 1_000_001}[r.IntN(5)],
			}
		}
		slots := 1 + r.IntN(10)
		reserve := Reserve{CPCMicros: int64(r.IntN(3)) * 100_000, CPMMicros: int64(r.IntN(3)) * 1_000_000}
		want := rankSorted(cands, slots, reserve)
		cs, names := unname(cands)
		got := slices.Clone(rk.Rank(cs, names, slots, reserve))
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d (%d candidates, %d slots, reserve %+v):\n got  %+v\n want %+v", iter, n, slots, reserve, got, want)
		}
		// The order read on (sponsored brand) continues the same sort.
		for i := 0; ; i++ {
			ci, ok := rk.at(i)
			if !ok {
				break
			}
			if i > 0 {
				prev, _ := rk.at(i - 1)
				if rk.before(ci, prev) {
					t.Fatalf("iteration %d: order position %d ranks before %d", iter, i, i-1)
				}
			}
		}
	}
}

func BenchmarkRank(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	cands := make([]named, 800)
	for i := range cands {
		cands[i] = named{Group: int32(r.IntN(500)), CampaignID: fmt.Sprintf("%08x-0000-7000-8000-000000000000", r.Uint32()),
			ProductID: fmt.Sprintf("p-%09d", r.IntN(1_000_000)), BidMicros: 100_000 + r.Int64N(2_900_000), QualityPPM: 1 + r.Int64N(MaxQualityPPM)}
	}
	cs, names := unname(cands)
	var rk ranker
	b.ReportAllocs()
	for b.Loop() {
		rk.Rank(cs, names, 5, Reserve{CPCMicros: 100_000})
	}
}

// TestScoreString: a score in decimal, beyond 64 bits too.
func TestScoreString(t *testing.T) {
	for _, c := range []struct {
		s    score
		want string
	}{
		{score{}, "0"},
		{score{0, 7_200_000_000_000}, "7200000000000"},
		{score{0, 1<<64 - 1}, "18446744073709551615"},
		{score{1, 0}, "18446744073709551616"},
		{score{1<<64 - 1, 1<<64 - 1}, "340282366920938463463374607431768211455"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}
