package auction

import (
	"math/bits"
	"slices"
)

// Ranking and pricing, as docs/design/auction-ranking.md states them. Everything is
// integer arithmetic on micro-units and parts per million, so that a result
// can be computed by hand and is the same on every machine.
//
//   - A bid's value per impression is its normalised bid: a CPM bid (per
//     1,000 impressions) as is, a CPC bid (per click) × CPCtoCPM (a click is
//     taken to follow 1% of impressions, so 1.00 per click ≡ 10.00 per
//     1,000 impressions).
//   - score = normalised bid × quality, quality in parts per million
//     (1..1,000,000).
//   - Candidates are sorted by score, then quality, then campaign id, then
//     product id (the last two ascending): a total order, so ties are broken
//     the same way every time.
//   - Walking that order, a candidate wins the next rank unless its group
//     (its product; its vendor in a sponsored-brand auction) already won,
//     until the slots are filled.
//   - A winner pays the least bid that keeps its rank: the smallest bid whose
//     score reaches the score of the first candidate after it in the order
//     whose group did not win a higher rank (a bid on the winner's own
//     product counts: without the rank, that bid would have taken the
//     product). Rounded up to the micro-unit, at least the reserve price of
//     its charge type (and 1 µ), never more than its own bid. With no such
//     candidate it pays the reserve (at least 1 µ).

// CPCtoCPM converts a CPC bid into the per-1,000-impressions unit that
// candidates of both charge types are ranked in.
const CPCtoCPM = 10

// MaxQualityPPM is a quality of 1 in parts per million.
const MaxQualityPPM = 1_000_000

// Candidate is one eligible bid on one product, ready to rank.
//
// It holds no pointer: Campaign and Product name its campaign and product
// through the Names given to Rank, which the tie-break reads only when two
// candidates tie on score and quality. An auction appends hundreds of
// candidates, and while the garbage collector marks, every pointer written
// to the heap costs a write barrier that shades its target, a cache miss
// into a heap of millions of entities (docs/design/performance.md).
type Candidate struct {
	Group      int32 // one winner per group: the product (the vendor in sponsored-brand auctions)
	Campaign   int32 // tie-break: Names.CampaignID(Campaign)
	Product    int32 // tie-break: Names.ProductID(Product)
	BidMicros  int64 // > 0; per click (CPC) or per 1,000 impressions (CPM)
	CPM        bool
	QualityPPM int64 // 1..MaxQualityPPM
}

// Names gives the ids behind the Campaign and Product numbers of
// candidates, for the tie-break.
type Names interface {
	CampaignID(i int32) string
	ProductID(i int32) string
}

// Reserve is a marketplace's reserve prices, micro-units: a bid below the
// reserve of its charge type never competes, and a winner never pays less.
type Reserve struct {
	CPCMicros int64
	CPMMicros int64
}

func (r Reserve) of(cpm bool) int64 {
	if cpm {
		return r.CPMMicros
	}
	return r.CPCMicros
}

// Placement is a winner: Cand indexes the candidates given to Rank.
type Placement struct {
	Cand        int
	Rank        int // 1-based
	PriceMicros int64
}

// score is a 128-bit score: normalised bid × quality.
type score struct{ hi, lo uint64 }

func (c *Candidate) unit() uint64 {
	if c.CPM {
		return 1
	}
	return CPCtoCPM
}

func (c *Candidate) score() score {
	hi, lo := bits.Mul64(uint64(c.BidMicros)*c.unit(), uint64(c.QualityPPM))
	return score{hi, lo}
}

func cmpScore(a, b score) int {
	switch {
	case a.hi != b.hi:
		if a.hi < b.hi {
			return -1
		}
		return 1
	case a.lo != b.lo:
		if a.lo < b.lo {
			return -1
		}
		return 1
	}
	return 0
}

// ranker holds Rank's working memory, reused across auctions.
//
// Rank needs only the head of the order (the winners, and for each the next
// candidate that prices it), so the candidates are not sorted: they are put
// in a binary heap (linear time) and taken off it one at a time, best first,
// as far as the walk reads: O(n + k log n) for k candidates read, instead of
// O(n log n). order is the part taken off so far, in rank order.
type ranker struct {
	cands  []Candidate // the candidates of the current Rank call
	names  Names       // and their ids
	order  []int32     // candidates in rank order, as far as taken off the heap
	heap   []int32     // the rest, a heap whose root ranks first
	scores []score
	groups []int32 // groups of the winners so far, in rank order
	out    []Placement
}

// before reports whether candidate a ranks before candidate b: higher
// score, then higher quality, then smaller campaign id, then smaller
// product id.
func (rk *ranker) before(a, b int32) bool {
	if r := cmpScore(rk.scores[a], rk.scores[b]); r != 0 {
		return r > 0
	}
	ca, cb := &rk.cands[a], &rk.cands[b]
	switch {
	case ca.QualityPPM != cb.QualityPPM:
		return ca.QualityPPM > cb.QualityPPM
	}
	if ca.Campaign != cb.Campaign {
		if x, y := rk.names.CampaignID(ca.Campaign), rk.names.CampaignID(cb.Campaign); x != y {
			return x < y
		}
	}
	return rk.names.ProductID(ca.Product) < rk.names.ProductID(cb.Product)
}

func (rk *ranker) down(i int) {
	h := rk.heap
	for {
		best, l := i, 2*i+1
		if l < len(h) && rk.before(h[l], h[best]) {
			best = l
		}
		if r := l + 1; r < len(h) && rk.before(h[r], h[best]) {
			best = r
		}
		if best == i {
			return
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
}

// at returns the candidate of rank order position i (0-based), taking
// candidates off the heap as needed; false past the last candidate.
func (rk *ranker) at(i int) (int32, bool) {
	for len(rk.order) <= i {
		n := len(rk.heap)
		if n == 0 {
			return 0, false
		}
		rk.order = append(rk.order, rk.heap[0])
		rk.heap[0] = rk.heap[n-1]
		rk.heap = rk.heap[:n-1]
		rk.down(0)
	}
	return rk.order[i], true
}

// Rank orders candidates and returns up to slots winners with their prices.
// Candidates with a bid below the reserve of their charge type, a bid ≤ 0 or
// a quality outside 1..MaxQualityPPM are ignored. The result aliases the
// ranker's memory: copy what outlives the next call. cands must not change
// while the ranker's order is read (at).
func (rk *ranker) Rank(cands []Candidate, names Names, slots int, reserve Reserve) []Placement {
	rk.cands, rk.names = cands, names
	rk.order, rk.heap, rk.scores, rk.groups, rk.out = rk.order[:0], rk.heap[:0], rk.scores[:0], rk.groups[:0], rk.out[:0]
	for i := range cands {
		c := &cands[i]
		if c.BidMicros <= 0 || c.BidMicros < reserve.of(c.CPM) || c.QualityPPM < 1 || c.QualityPPM > MaxQualityPPM {
			rk.scores = append(rk.scores, score{})
			continue
		}
		rk.scores = append(rk.scores, c.score())
		rk.heap = append(rk.heap, int32(i))
	}
	for i := len(rk.heap)/2 - 1; i >= 0; i-- {
		rk.down(i)
	}
	for k := 0; len(rk.out) < slots; k++ {
		ci, ok := rk.at(k)
		if !ok {
			break
		}
		c := &cands[ci]
		if slices.Contains(rk.groups, c.Group) {
			continue
		}
		// rk.groups holds the groups of the winners ranked above this one:
		// the first later candidate outside them sets the price.
		price := reserve.of(c.CPM)
		for j := k + 1; ; j++ {
			nj, ok := rk.at(j)
			if !ok {
				break
			}
			if !slices.Contains(rk.groups, cands[nj].Group) {
				price = max(price, priceToBeat(rk.scores[nj], c))
				break
			}
		}
		price = min(max(price, 1), c.BidMicros)
		rk.groups = append(rk.groups, c.Group)
		rk.out = append(rk.out, Placement{Cand: int(ci), Rank: len(rk.out) + 1, PriceMicros: price})
	}
	return rk.out
}

// priceToBeat is the least bid of c (its own unit) whose score reaches s:
// ⌈s / (unit × quality)⌉, capped at c's bid (a larger answer means c only
// ranks above s through the tie-break, at its full bid).
func priceToBeat(s score, c *Candidate) int64 {
	d := c.unit() * uint64(c.QualityPPM)
	if s.hi >= d {
		return c.BidMicros // the quotient does not fit 64 bits: far above any bid
	}
	q, r := bits.Div64(s.hi, s.lo, d)
	if r != 0 {
		q++
	}
	if q > uint64(c.BidMicros) {
		return c.BidMicros
	}
	return int64(q)
}
