package auction

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/campaigns"
)

// Bid specificity: of the bids of one campaign that apply to one product,
// the most specific is used.
const (
	specAutomated = iota + 1
	specCategory
	specKeyword
	specProduct
)

var specNames = [...]string{"", "automated", "category", "keyword", "product"}

type prod struct {
	ip        *index.Product // valid inside Index.Read only; nil for products found through the catalog
	id        string
	quality   int64 // ppm
	variation int32 // index of its variationID in the request's VariationIDs, -1 for none
	hasBids   bool
	excluded  bool   // filtered out after the bids were gathered (or, explaining, left out of the context)
	why       Reason // why it is excluded
}

// camp is what an auction keeps of a campaign it met: its immutable info
// (what the ranking, the winners and the segment check read; one pointer,
// as pointers written while the garbage collector marks cost) and verdict.
type camp struct {
	c       *index.CampInfo // nil when not eligible
	ok      bool            // eligible (segments still to check when needSeg)
	needSeg bool
	needCap bool // frequency caps to check (caps.go)
	bidCaps bool // caps per bid, checked for each of its bids
	// bidNeg: some of its bids have negative keywords, and the auction
	// has a searchQuery (bidNegated reads no campaign entry otherwise).
	bidNeg bool
	why    Reason // why not eligible
}

type bidRef struct {
	prod   int32
	camp   int32
	spec   uint8
	bidID  string
	amount int64
}

type pairKey struct{ camp, prod int32 }

// kwHit is a keyword bid of a keyword-only auction, whose product (the
// vendor's best) is chosen through the catalog after the index is read.
type kwHit struct {
	camp   int32
	vendor string
	bidID  string
	amount int64
}

type state struct {
	ids       []string // the context's product ids (request order, or the category's)
	idPos     []int32  // position of each id in the request, -1 for a category's
	prods     []prod
	prodIdx   map[string]int32
	camps     []camp
	campIdx   map[uint32]int32 // by index.Camp.Num
	bids      []bidRef
	best      map[pairKey]int32
	paths     map[index.Cat][]index.Cat
	catIDs    []index.Cat   // the request's category ids (id, ids), as handles
	catDisj   [][]index.Cat // the request's disjunctions, as handles
	cells     []string
	phrases   []string // phrases of the search query that some keyword bid targets
	kwHits    []kwHit
	vendBest  map[string]int32
	vendGroup map[string]int32
	filterOK  map[string]bool
	negHit    map[*campaigns.Negatives]bool // negated's verdicts of this auction
	cands     []Candidate
	candBid   []int32
	rk        ranker
	segIDs    []string
	caps      capState    // the request's frequency cap counts (caps.go)
	anc       []index.Cat // gather's scratch for one product's ancestors
	// paths is kept across the auctions of one pooled state for up to a
	// second (pathsAt), for one marketplace (pathsMP).
	pathsAt time.Time
	pathsMP string
	touched int                // keeps touch's loads from being optimised away
	found   []index.ProductRef // resolveProducts' lookups
}

// CampaignID and ProductID name the campaigns and products of the
// auction's candidates (Names, for the ranking's tie-break).
func (st *state) CampaignID(i int32) string { return st.camps[i].c.ID }
func (st *state) ProductID(i int32) string  { return st.prods[i].id }

func newState() *state {
	return &state{
		prodIdx: map[string]int32{}, campIdx: map[uint32]int32{}, best: map[pairKey]int32{},
		paths: map[index.Cat][]index.Cat{}, vendBest: map[string]int32{}, vendGroup: map[string]int32{},
		filterOK: map[string]bool{},
	}
}

func (st *state) reset() {
	st.ids, st.idPos, st.catIDs, st.catDisj = st.ids[:0], st.idPos[:0], st.catIDs[:0], st.catDisj[:0]
	st.prods, st.camps, st.bids, st.cells, st.phrases = st.prods[:0], st.camps[:0], st.bids[:0], st.cells[:0], st.phrases[:0]
	st.cands, st.candBid, st.segIDs, st.kwHits = st.cands[:0], st.candBid[:0], st.segIDs[:0], st.kwHits[:0]
	clear(st.prodIdx)
	clear(st.campIdx)
	clear(st.best)
	clear(st.vendBest)
	clear(st.vendGroup)
	clear(st.filterOK)
	st.caps.any = false // the read, if any, serves the request's next auctions
	clear(st.negHit)
}

// auctionEnv is what one auction's helpers share.
type auctionEnv struct {
	ctx   context.Context // the request's (the frequency caps' read)
	e     *Engine
	st    *state
	m     *Market
	r     *Request
	at    time.Time
	mp    string
	kinds index.Kind    // campaign types that compete
	atMs  int64         // at in Unix milliseconds
	ix    *index.Market // set inside Index.Read only
	// local is the auction's instant in the marketplace's zone, query its
	// normalised searchQuery, each computed at its first use (localSet,
	// querySet).
	local    time.Time
	localSet bool
	query    campaigns.Query
	querySet bool
	// tr collects what happens to every candidate when the auction is
	// explained (Explain); nil when it runs (Run). Every use is behind a
	// nil check, off the paths that keep candidates.
	tr *tracer
}

// runOne runs one auction. With a tracer (Explain) it stops after the
// ranking, with tr holding every candidate's outcome: no winner is made
// and nothing is signed (keys and ra are not used).
func (e *Engine) runOne(ctx context.Context, st *state, keys *bidtoken.Keyring, ra *resultArrays, m *Market, endpoint EndpointKind, r *Request, idx int, at time.Time, tr *tracer) Result {
	st.reset()
	if at.Sub(st.pathsAt) > time.Second || at.Before(st.pathsAt) || len(st.paths) > 100_000 || st.pathsMP != m.ID {
		clear(st.paths)
		st.pathsAt, st.pathsMP = at, m.ID
	}
	res := Result{Kind: r.Kind}
	id, err := uuid.NewV7()
	if err != nil {
		res.Error, res.Record.Error = true, true
		return res
	}
	a := &auctionEnv{ctx: ctx, e: e, st: st, m: m, r: r, at: at, atMs: at.UnixMilli(), mp: m.ID, tr: tr}
	if r.Kind == KindBanners {
		a.kinds = index.KindBanners
	} else {
		a.kinds = index.KindListings | index.KindAutomated
	}
	res.Record = newRecord(id, m, endpoint, r, idx, at)

	a.locations()
	a.categoryHandles()
	a.contextIDs()
	a.readIndex()
	a.keywordOnlyProducts()
	a.applyFilter()
	a.checkCaps()
	a.checkSegments(ctx)
	a.buildCandidates()
	if r.Kind == KindBanners {
		a.dropImageless()
	}
	res.Record.Candidates = len(st.cands)
	places := st.rk.Rank(st.cands, st, r.Slots, m.Reserve)
	if tr != nil {
		a.traceRanking(places)
		return res
	}

	res.Winners, res.Record.Winners = ra.take(len(places))
	for _, pl := range places {
		w, rw, err := a.winner(keys, id, pl)
		if err != nil {
			// Signing fails only on a bug (invalid claims): fail this
			// auction, not the request.
			if e.Log != nil {
				e.Log.Error("auction: cannot sign a winner", "auction", id.String(), "err", err)
			}
			res.Winners, res.Record.Winners, res.Error, res.Record.Error = res.Winners[:0], nil, true, true
			return res
		}
		res.Winners = append(res.Winners, w)
		res.Record.Winners = append(res.Record.Winners, rw)
	}
	return res
}
