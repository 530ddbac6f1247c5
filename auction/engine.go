package auction

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/spend"
)

// The auction engine: from a validated Request and the in-memory views of the
// catalog and the campaigns, the winners, their prices and their signed
// resolvedBidIds. docs/auction-ranking.md is the reference; keep it in step.
//
// What it reads, and how fresh it is:
//   - products, categories, vendors, campaigns and bids: the process's views
//     of the entities log (no network), current to the last applied record;
//   - spend: the Budget gate's cache (no network; refreshed in the
//     background);
//   - segment membership: one pipelined Redis round trip per auction, only
//     when a candidate campaign targets segments and the request has an
//     opaqueUserId;
//   - frequency caps: the shopper's counts, one Redis round trip per
//     request (caps.go), only when a candidate campaign is capped.

// CatalogView is what the engine reads of the catalog (catalog.Service),
// outside the index: category enumeration, vendors' products for keyword-only
// auctions, creatives for banners and filters, vendor names.
type CatalogView interface {
	EachProductInCategory(mp, categoryID string, fn func(entityref.ProductRef) bool)
	EachProductOfVendor(mp, vendorID string, fn func(entityref.ProductRef) bool)
	Vendor(mp, id string) (entityref.VendorRef, bool)
	Creative(mp, id string) (catalog.ProductCreative, bool)
}

// SegmentView tells segment membership (segments.Service).
type SegmentView interface {
	Memberships(ctx context.Context, mp, opaqueUserID string, ids []string) ([]bool, error)
}

// BudgetGate says whether a campaign may spend now: budget left, and not
// held back by pacing (BudgetOK), or which of them holds it back. It must
// answer from memory, and only read: an auction changes no budget or pacing
// state. l are the campaign's budgets (0: none; never all 0 here), and
// l.Hours its served hours (nil: every hour), over which pacing spreads
// them.
type BudgetGate interface {
	Check(m *Market, campaignID string, l spend.Limits, at time.Time) BudgetVerdict
}

// BudgetVerdict is a BudgetGate's answer.
type BudgetVerdict uint8

// The budget verdicts, in the order the budget rule checks them
// (docs/budgets.md).
const (
	BudgetOK               BudgetVerdict = iota
	BudgetTotalExhausted                 // the total budget is spent
	BudgetDailyExhausted                 // today's budget is spent
	BudgetPaced                          // today's spend is ahead of the pacing curve
	BudgetMonthlyExhausted               // this month's budget is spent
	BudgetWeeklyExhausted                // this week's budget is spent
)

// Market is the marketplace an auction runs for.
type Market struct {
	ID      string
	UUID    [16]byte
	Loc     *time.Location // the marketplace's time zone (budgets' local day)
	Reserve Reserve
	// Balances: its vendors pay from balances; a vendor out of funds does
	// not compete (FundsGate).
	Balances bool
}

// FundsGate says whether a vendor of a marketplace with balances is out of
// funds (docs/balances.md). Like BudgetGate it answers from memory.
type FundsGate interface {
	Out(marketplaceID, vendorID string, at time.Time) bool
}

// Engine runs auctions. Its fields are set once, before the first Run.
type Engine struct {
	Catalog CatalogView
	// Index is the auction index of products, categories, campaigns and
	// bids (fed by the catalog and campaigns views).
	Index    *index.Index
	Segments SegmentView
	Budget   BudgetGate
	Funds    FundsGate // nil: no vendor is ever out of funds
	// Keys returns the current resolvedBidId keyring.
	Keys func() *bidtoken.Keyring
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// SegmentTimeout bounds the segment membership round trip (20 ms when
	// 0). On timeout or error, segment-targeted campaigns do not compete.
	SegmentTimeout time.Duration
	// Caps reads the shopper's counts of frequency caps (caps.go);
	// CapTimeout bounds its round trip (20 ms when 0).
	Caps       CapView
	CapTimeout time.Duration
	Log        *slog.Logger

	pool sync.Pool
}

// Result is the outcome of one auction.
type Result struct {
	Kind    Kind
	Winners []Winner
	// Error is true when the auction failed at run time (no winners); the
	// other auctions of the request are unaffected.
	Error  bool
	Record Record
	// arrays, on the first result of a Run only, holds the arrays of the
	// results (see ReleaseResults).
	arrays *resultArrays
}

// resultArrays are the arrays of one Run's results: the results, and the
// winners and record winners they share out of two arrays. Kept between
// requests (resultArrays' pool), they are about 2 KB less garbage per
// auction, which sets how often the API collects (docs/performance.md).
type resultArrays struct {
	results []Result
	winners []Winner
	recs    []RecordWinner
}

var resultPool = sync.Pool{New: func() any { return new(resultArrays) }}

// maxPooledWinners is the most winners resultArrays keep arrays for.
const maxPooledWinners = 1024

// take returns room for n winners and n record winners (length 0).
func (ra *resultArrays) take(n int) ([]Winner, []RecordWinner) {
	if cap(ra.winners)-len(ra.winners) < n {
		ra.winners = make([]Winner, 0, max(2*cap(ra.winners), n, 16)) // the slices taken keep the old one
	}
	if cap(ra.recs)-len(ra.recs) < n {
		ra.recs = make([]RecordWinner, 0, max(2*cap(ra.recs), n, 16))
	}
	lo, rlo := len(ra.winners), len(ra.recs)
	ra.winners, ra.recs = ra.winners[:lo+n], ra.recs[:rlo+n]
	return ra.winners[lo : lo : lo+n], ra.recs[rlo : rlo : rlo+n]
}

// ReleaseResults hands the arrays of results, as Run returned them, back
// for the next Run: call it once, when nothing reads results, their winners
// or their records any more. It clears them. Not calling it is safe: the
// garbage collector then frees them.
func ReleaseResults(results []Result) {
	if len(results) == 0 || results[0].arrays == nil {
		return
	}
	ra := results[0].arrays
	clear(ra.results)
	clear(ra.winners)
	clear(ra.recs)
	if cap(ra.winners) > maxPooledWinners || cap(ra.recs) > maxPooledWinners || cap(ra.results) > MaxAuctions {
		return
	}
	ra.results, ra.winners, ra.recs = ra.results[:0], ra.winners[:0], ra.recs[:0]
	resultPool.Put(ra)
}

// ResultType is the result's `resultType` on the wire.
func (r *Result) ResultType() string {
	switch r.Kind {
	case KindSponsoredBrand:
		return "brand"
	}
	return r.Kind.String()
}

// Winner is one winner as the response shows it.
type Winner struct {
	Rank          int
	Type          string // product
	ID            string
	ResolvedBidID string
	CampaignID    string
	VendorID      string
	// AssetURL is a banner winner's image (the product's imageURL).
	AssetURL string
	// VariationID is a flights winner's variationID, as requested.
	VariationID string
	// Sponsored brand: the vendor's best products in this auction (the
	// winner's first), its name and the campaign's name.
	ProductIDs []string
	BrandName  string
	Headline   string
}

// ErrNoKeys is returned when no resolvedBidId keyring is loaded yet.
var ErrNoKeys = errors.New("auction: no resolvedBidId signing keys loaded")

// Run runs every auction of one request. Each result has its own auction id;
// they share the clock reading.
func (e *Engine) Run(ctx context.Context, m *Market, endpoint EndpointKind, reqs []Request) ([]Result, error) {
	keys := e.Keys()
	if keys == nil {
		return nil, ErrNoKeys
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	at := now().UTC().Truncate(time.Millisecond)
	if len(reqs) == 0 {
		return nil, nil
	}
	st, _ := e.pool.Get().(*state)
	if st == nil {
		st = newState()
	}
	defer e.pool.Put(st)
	st.caps.newRequest()
	ra := resultPool.Get().(*resultArrays)
	if cap(ra.results) < len(reqs) {
		ra.results = make([]Result, len(reqs))
	}
	out := ra.results[:len(reqs)]
	ra.results = out
	for i := range reqs {
		out[i] = e.runOne(ctx, st, keys, ra, m, endpoint, &reqs[i], i, at, nil)
	}
	out[0].arrays = ra
	return out, nil
}

// ---- per-auction working state ----

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
	st.caps.any = false
	clear(st.negHit)
}

// auctionEnv is what one auction's helpers share.
type auctionEnv struct {
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
	a := &auctionEnv{e: e, st: st, m: m, r: r, at: at, atMs: at.UnixMilli(), mp: m.ID, tr: tr}
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
	a.checkCaps(ctx)
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

// ---- context ----

// locations expands the request's H3 cells into themselves and their
// ancestors: a campaign cell matches when it is one of them.
func (a *auctionEnv) locations() {
	for _, s := range a.r.Locations {
		c, ok := cellOf(s)
		if !ok {
			continue
		}
		for res := c.Resolution(); res >= 0; res-- {
			a.st.cells = append(a.st.cells, formatCell(c.Parent(res)))
		}
	}
}

// contextIDs lists the product ids of the context: the request's, else
// those of the category's subtree (from the catalog's category index). A
// search query alone (banners, sponsored brand) or no context
// (landing-page banners) takes its products from the bids (gather).
func (a *auctionEnv) contextIDs() {
	st, r := a.st, a.r
	switch {
	case len(r.ProductIDs) > 0:
		st.ids = append(st.ids, r.ProductIDs...)
		for i := range r.ProductIDs {
			st.idPos = append(st.idPos, int32(i))
		}
	case r.Category != nil:
		var roots []string
		switch {
		case r.Category.ID != "":
			roots = []string{r.Category.ID}
		case len(r.Category.IDs) > 0:
			roots = r.Category.IDs[:1] // the others are checked per product
		default:
			roots = r.Category.Disjunctions[0]
		}
		for _, root := range roots {
			a.e.Catalog.EachProductInCategory(a.mp, root, func(p entityref.ProductRef) bool {
				if p.Active {
					st.ids = append(st.ids, p.ID)
					st.idPos = append(st.idPos, -1)
				}
				return true
			})
		}
	}
}

// path returns a category and its ancestors (cached for up to a second).
func (a *auctionEnv) path(cat index.Cat) []index.Cat {
	if p, ok := a.st.paths[cat]; ok {
		return p
	}
	p := a.ix.AppendPath(nil, cat)
	a.st.paths[cat] = p
	return p
}

// inCategory reports whether a product is in category c: one of its
// categories is c or a descendant of c.
func (a *auctionEnv) inCategory(p *index.Product, c index.Cat) bool {
	for _, pc := range p.Categories() {
		if pc == c || slices.Contains(a.path(pc), c) {
			return true
		}
	}
	return false
}

// ancestors appends the product's categories and their ancestors to dst:
// the product is in category c (inCategory) exactly when c is among them.
func (a *auctionEnv) ancestors(p *index.Product, dst []index.Cat) []index.Cat {
	for _, pc := range p.Categories() {
		dst = append(dst, a.path(pc)...)
	}
	return dst
}

// categoryHandles turns the request's category context into handles, once.
func (a *auctionEnv) categoryHandles() {
	cf, st := a.r.Category, a.st
	if cf == nil {
		return
	}
	if cf.ID != "" {
		st.catIDs = append(st.catIDs, index.CatOf(cf.ID))
	}
	for _, id := range cf.IDs {
		st.catIDs = append(st.catIDs, index.CatOf(id))
	}
	for _, d := range cf.Disjunctions {
		hs := make([]index.Cat, len(d))
		for i, id := range d {
			hs[i] = index.CatOf(id)
		}
		st.catDisj = append(st.catDisj, hs)
	}
}

// matchesCategory applies the request's category context to a product: in
// the category (id), in all (ids), in at least one of each disjunction.
func (a *auctionEnv) matchesCategory(p *index.Product) bool {
	for _, c := range a.st.catIDs {
		if !a.inCategory(p, c) {
			return false
		}
	}
	for _, d := range a.st.catDisj {
		if !slices.ContainsFunc(d, func(c index.Cat) bool { return a.inCategory(p, c) }) {
			return false
		}
	}
	return true
}

// resolveProducts turns the context's ids into candidate products: known,
// active, with a vendor, in the category when one is given. A repeated id
// counts once, with its first position's quality and variation.
func (a *auctionEnv) resolveProducts(lo, hi int) {
	st := a.st
	// Look every id up first (in passes of independent loads, see
	// index.Market.Products), then read the products.
	var touched uint64
	st.found, touched = a.ix.Products(st.ids[lo:hi], st.found[:0])
	st.touched += int(touched & 1)
	// Then read each entry once in a loop that does nothing else, for the
	// same reason: the loop below, with its map updates between the reads,
	// would wait for each entry's cache miss in turn.
	n := 0
	for _, r := range st.found {
		if p := a.ix.ProductAt(r); p != nil && p.Known {
			n++
		}
	}
	st.touched += n
	for j, r := range st.found {
		k := lo + j
		p := a.ix.ProductAt(r)
		if p == nil || !p.Known || !p.Active || len(p.Vendors()) == 0 {
			if a.tr != nil {
				a.traceLeftOut(p, k, false)
			}
			continue
		}
		// The request's copy of the id (hot in cache), not the index's.
		if _, dup := st.prodIdx[st.ids[k]]; dup || !a.matchesCategory(p) {
			if a.tr != nil && !dup {
				a.traceLeftOut(p, k, true)
			}
			continue
		}
		a.addProduct(p, st.ids[k], p.QualityScore, int(st.idPos[k]))
	}
}

// addProduct adds a candidate product (once). i is its index in the
// request's products, -1 when it comes from a category or a bid.
func (a *auctionEnv) addProduct(ip *index.Product, id string, qualityScore float64, i int) int32 {
	if k, ok := a.st.prodIdx[id]; ok {
		return k
	}
	q := qualityPPM(qualityScore)
	variation := int32(-1)
	if i >= 0 {
		if a.r.QualityScores != nil {
			q = qualityPPM(a.r.QualityScores[i])
		}
		if a.r.VariationIDs != nil {
			variation = int32(i)
		}
	}
	k := int32(len(a.st.prods))
	a.st.prods = append(a.st.prods, prod{ip: ip, id: id, quality: q, variation: variation})
	a.st.prodIdx[id] = k
	return k
}

// qualityPPM converts a quality score in (0, 1] to parts per million
// (rounded, at least 1); 0 (not set) is a quality of 1.
func qualityPPM(q float64) int64 {
	if !(q > 0 && q <= 1) {
		return MaxQualityPPM
	}
	return max(1, int64(math.Round(q*MaxQualityPPM)))
}

// ---- bids ----

// indexChunk is how many context ids an auction reads from the index per
// read-lock section (see index.RLock).
const indexChunk = 64

// readIndex resolves the context's products and gathers their bids from the
// auction index, in short read-lock sections. What is copied out of the
// index (campaigns, bid amounts) is the auction's snapshot; no pointer into
// the index is read outside a section.
func (a *auctionEnv) readIndex() {
	st := a.st
	a.ix = a.e.Index.RLock(a.mp)
	a.keywordPhrases()
	if len(a.r.ProductIDs) == 0 && a.r.Category == nil {
		if len(st.phrases) > 0 {
			a.keywordOnly()
		} else if a.r.SearchQuery == "" && a.r.Kind == KindBanners {
			a.landingPage()
		}
	}
	for lo := 0; lo < len(st.ids); lo += indexChunk {
		if lo > 0 {
			a.e.Index.RUnlock()
			a.ix = a.e.Index.RLock(a.mp)
		}
		first := len(st.prods)
		a.resolveProducts(lo, min(lo+indexChunk, len(st.ids)))
		a.gather(first)
	}
	a.e.Index.RUnlock()
	a.ix = nil
	for i := range st.prods {
		st.prods[i].ip = nil // not to be read outside a section
	}
}

// gather finds, for the candidate products from first on, the bids that
// apply to them, keeping per campaign the most specific one.
func (a *auctionEnv) gather(first int) {
	st := a.st
	a.touch(first)
	for pi := first; pi < len(st.prods); pi++ {
		p := st.prods[pi].ip
		pk := int32(pi)
		for _, r := range p.Bids {
			if r.Active && r.Vendor != nil && p.HasVendor(r.Vendor) {
				if ci := a.campaign(r.Camp); ci >= 0 {
					if !a.bidNegated(ci, r.Camp, r.ID) {
						a.addBid(pk, ci, specProduct, r.ID, r.Amount)
					} else if a.tr != nil {
						a.traceBid(pk, "", r.Camp.Info, specProduct, r.ID, r.Amount, ReasonNegativeKeyword)
					}
				} else if a.tr != nil {
					a.traceCampaignOut(pk, "", r.Camp, specProduct, r.ID, r.Amount)
				}
			} else if a.tr != nil && r.Vendor != nil {
				why := ReasonVendorNotPermitted
				if !r.Active {
					why = ReasonBidInactive
				}
				a.traceBid(pk, "", r.Camp.Info, specProduct, r.ID, r.Amount, why)
			}
		}
		for _, ph := range st.phrases {
			a.addBids(a.ix.Keyword(ph), p, pk, specKeyword)
		}
		anc := st.anc[:0] // the product's categories and their ancestors, once its vendors have category bids
		for _, v := range p.Vendors() {
			if len(v.Category) > 0 && len(anc) == 0 {
				anc = a.ancestors(p, anc)
				st.anc = anc
			}
			for _, cr := range v.Category {
				if slices.Contains(anc, cr.Target) && cr.Bid.B.Active {
					if ci := a.campaign(cr.Bid.Camp); ci >= 0 {
						if !a.bidNegated(ci, cr.Bid.Camp, cr.Bid.B.ID) {
							a.addBid(pk, ci, specCategory, cr.Bid.B.ID, cr.Bid.B.AmountMicros)
						} else if a.tr != nil {
							a.traceBid(pk, "", cr.Bid.Camp.Info, specCategory, cr.Bid.B.ID, cr.Bid.B.AmountMicros, ReasonNegativeKeyword)
						}
					} else if a.tr != nil {
						a.traceCampaignOut(pk, "", cr.Bid.Camp, specCategory, cr.Bid.B.ID, cr.Bid.B.AmountMicros)
					}
				} else if a.tr != nil && slices.Contains(anc, cr.Target) {
					a.traceBid(pk, "", cr.Bid.Camp.Info, specCategory, cr.Bid.B.ID, cr.Bid.B.AmountMicros, ReasonBidInactive)
				}
			}
			if a.r.Kind == KindBanners {
				continue // automated campaigns are listings campaigns
			}
			for _, c := range v.Automated {
				if ci := a.campaign(c); ci >= 0 {
					a.addBid(pk, ci, specAutomated, "", campaigns.AutomatedBidMicros(c.C, p.QualityScore))
				} else if a.tr != nil {
					a.traceCampaignOut(pk, "", c, specAutomated, "", campaigns.AutomatedBidMicros(c.C, p.QualityScore))
				}
			}
		}
	}
}

// touch reads, for every candidate product, the memory the real pass will
// read first (its vendors' entries and lists, its categories, the gates of
// its product bids' and its vendors' automated campaigns) once before that
// pass: these loads do not depend on each other, so the CPU overlaps their
// cache misses, where the real pass would wait for each in turn.
func (a *auctionEnv) touch(first int) {
	n := 0
	for i := first; i < len(a.st.prods); i++ {
		p := a.st.prods[i].ip
		if len(p.Categories()) > 0 && p.Categories()[0] == (index.Cat{}) {
			n++
		}
		for j := range p.Bids {
			n += int(p.Bids[j].Camp.Gate.Kind)
		}
		for _, v := range p.Vendors() {
			n += len(v.Category) + len(v.Automated)
			if len(v.Category) > 0 && v.Category[0].Target == (index.Cat{}) {
				n++
			}
			for _, c := range v.Automated {
				n += int(c.Gate.Kind)
			}
		}
	}
	a.st.touched = n
}

// addBids adds the active bids of bs whose campaign may compete and whose
// vendor may promote product p, as bids on product pk.
func (a *auctionEnv) addBids(bs []*index.Bid, p *index.Product, pk int32, spec uint8) {
	for _, b := range bs {
		if !b.B.Active || !b.Camp.Gate.Known || !p.HasVendor(b.Camp.Vendor) {
			if a.tr != nil && !b.B.Active && b.Camp.Gate.Known && p.HasVendor(b.Camp.Vendor) {
				a.traceBid(pk, "", b.Camp.Info, spec, b.B.ID, b.B.AmountMicros, ReasonBidInactive)
			}
			continue
		}
		if ci := a.campaign(b.Camp); ci >= 0 {
			if !a.bidNegated(ci, b.Camp, b.B.ID) {
				a.addBid(pk, ci, spec, b.B.ID, b.B.AmountMicros)
			} else if a.tr != nil {
				a.traceBid(pk, "", b.Camp.Info, spec, b.B.ID, b.B.AmountMicros, ReasonNegativeKeyword)
			}
		} else if a.tr != nil {
			a.traceCampaignOut(pk, "", b.Camp, spec, b.B.ID, b.B.AmountMicros)
		}
	}
}

// keywordPhrases lists the phrases of the search query that keyword bids
// target: a bid matches when its keyword is a run of whole consecutive words
// of the query, lower-cased, split on white space (docs/auction-ranking.md).
func (a *auctionEnv) keywordPhrases() {
	if a.r.SearchQuery == "" {
		return
	}
	words := strings.Fields(strings.ToLower(a.r.SearchQuery))
	for i := range words {
		phrase := ""
		for j := i; j < len(words); j++ {
			if j > i {
				phrase += " "
			}
			phrase += words[j]
			if len(phrase) > 4*campaigns.MaxKeywordLen {
				break
			}
			if len(a.ix.Keyword(phrase)) > 0 && !slices.Contains(a.st.phrases, phrase) {
				a.st.phrases = append(a.st.phrases, phrase)
			}
		}
	}
}

// keywordOnly collects the keyword bids of an auction with a search query
// and no products or category; keywordOnlyProducts then gives each the
// vendor's best active product.
func (a *auctionEnv) keywordOnly() {
	for _, ph := range a.st.phrases {
		for _, b := range a.ix.Keyword(ph) {
			if !b.B.Active || !b.Camp.Gate.Known {
				if a.tr != nil && b.Camp.Gate.Known {
					a.tr.kwOut = append(a.tr.kwOut, kwOut{info: b.Camp.Info, bidID: b.B.ID, amount: b.B.AmountMicros, why: ReasonBidInactive})
				}
				continue
			}
			if ci := a.campaign(b.Camp); ci >= 0 {
				if !a.bidNegated(ci, b.Camp, b.B.ID) {
					a.st.kwHits = append(a.st.kwHits, kwHit{camp: ci, vendor: b.Camp.C.VendorID, bidID: b.B.ID, amount: b.B.AmountMicros})
				} else if a.tr != nil {
					a.tr.kwOut = append(a.tr.kwOut, kwOut{info: b.Camp.Info, bidID: b.B.ID, amount: b.B.AmountMicros, why: ReasonNegativeKeyword})
				}
			} else if a.tr != nil && b.Camp.Info != nil {
				a.tr.kwOut = append(a.tr.kwOut, kwOut{info: b.Camp.Info, bidID: b.B.ID, amount: b.B.AmountMicros, why: a.campaignWhy(b.Camp)})
			}
		}
	}
}

// keywordOnlyProducts: a keyword bid of a keyword-only auction promotes its
// vendor's best active product (highest quality score, then smallest id).
// Runs after Index.Read: it reads the catalog.
func (a *auctionEnv) keywordOnlyProducts() {
	for _, h := range a.st.kwHits {
		if pk, ok := a.vendorBest(h.vendor); ok {
			a.addBid(pk, h.camp, specKeyword, h.bidID, h.amount)
		} else if a.tr != nil {
			a.traceBid(-1, "", a.st.camps[h.camp].c, specKeyword, h.bidID, h.amount, ReasonNoActiveProduct)
		}
	}
	if a.tr != nil {
		a.traceKeywordOnlyOut()
	}
}

func (a *auctionEnv) vendorBest(vendor string) (int32, bool) {
	if k, ok := a.st.vendBest[vendor]; ok {
		return k, k >= 0
	}
	var best entityref.ProductRef
	found := false
	a.e.Catalog.EachProductOfVendor(a.mp, vendor, func(p entityref.ProductRef) bool {
		if !p.Active || !a.passesFilter(p.ID) {
			return true
		}
		qp, qb := qualityPPM(p.QualityScore), qualityPPM(best.QualityScore)
		if !found || qp > qb || (qp == qb && p.ID < best.ID) {
			best, found = p, true
		}
		return true
	})
	k := int32(-1)
	if found {
		k = a.addProduct(nil, best.ID, best.QualityScore, -1)
	}
	a.st.vendBest[vendor] = k
	return k, found
}

// landingPage: a banners auction with no context at all is open to every
// banners campaign, with the products of its product bids.
func (a *auctionEnv) landingPage() {
	a.ix.EachBanners(func(c *index.Camp) bool {
		ci := a.campaign(c)
		if ci < 0 {
			if a.tr != nil {
				a.traceLandingPageOut(c)
			}
			return true
		}
		c.EachBid(func(b *index.Bid) bool {
			if !b.B.Active || b.B.TargetType != campaigns.TargetProduct {
				if a.tr != nil && b.B.TargetType == campaigns.TargetProduct {
					a.traceLandingPageBid(c, b, ReasonBidInactive)
				}
				return true
			}
			p := a.ix.Product(b.B.Target)
			if p != nil && p.Known && p.Active && p.HasVendor(c.Vendor) {
				a.addBid(a.addProduct(p, p.ID, p.QualityScore, -1), ci, specProduct, b.B.ID, b.B.AmountMicros)
			} else if a.tr != nil {
				a.traceLandingPageBid(c, b, productWhy(p, c.Vendor))
			}
			return true
		})
		return true
	})
}

// addBid records that campaign ci bids amount on product pk, keeping the
// campaign's most specific bid on the product (the higher amount between
// equally specific ones).
func (a *auctionEnv) addBid(pk, ci int32, spec uint8, bidID string, amount int64) {
	a.st.prods[pk].hasBids = true
	key := pairKey{ci, pk}
	if k, ok := a.st.best[key]; ok {
		cur := &a.st.bids[k]
		if spec > cur.spec || (spec == cur.spec && amount > cur.amount) {
			if a.tr != nil {
				a.traceSuperseded(*cur)
			}
			*cur = bidRef{prod: pk, camp: ci, spec: spec, bidID: bidID, amount: amount}
		} else if a.tr != nil {
			a.traceSuperseded(bidRef{prod: pk, camp: ci, spec: spec, bidID: bidID, amount: amount})
		}
		return
	}
	a.st.best[key] = int32(len(a.st.bids))
	a.st.bids = append(a.st.bids, bidRef{prod: pk, camp: ci, spec: spec, bidID: bidID, amount: amount})
}

// applyFilter drops the products that have bids but fail the listings
// filter (it reads the products' metadata from the catalog, after
// Index.Read).
func (a *auctionEnv) applyFilter() {
	if a.r.Filter == nil {
		return
	}
	for i := range a.st.prods {
		p := &a.st.prods[i]
		if p.hasBids && !p.excluded && !a.passesFilter(p.id) {
			p.excluded, p.why = true, ReasonFilterMismatch
		}
	}
}

// ---- campaign eligibility ----

// campaign returns the auction's index of a campaign, or -1 when it may not
// compete in this auction: unknown, wrong type, not running, outside its
// targeting, or held back by its budget. Segment targeting is checked later,
// for all campaigns at once. The verdict is computed once per auction.
func (a *auctionEnv) campaign(ce *index.Camp) int32 {
	if k, ok := a.st.campIdx[ce.Num]; ok {
		if !a.st.camps[k].ok {
			return -1
		}
		return k
	}
	k := int32(len(a.st.camps))
	why := a.campaignEligible(ce)
	ok := why == reasonNone
	var info *index.CampInfo
	if ok {
		info = ce.Info
	}
	// The gate says whether there are segments: info is not read here (a
	// cache miss per campaign, for the few that target segments).
	a.st.camps = append(a.st.camps, camp{c: info, ok: ok, needSeg: ok && ce.Gate.Segmented, needCap: ok && ce.Gate.Capped, why: why,
		bidNeg: ok && ce.Gate.BidNegative && a.r.SearchQuery != ""})
	if ok && ce.Gate.Capped {
		a.st.caps.any = true
	}
	cp := &a.st.camps[k]
	a.st.campIdx[ce.Num] = k
	if !cp.ok {
		return -1
	}
	return k
}

// campaignEligible returns why a campaign may not compete in this auction
// (reasonNone: it may, segments aside), checking in this order: running
// and of a type that competes (reasonNotRunning, told apart by
// notRunningWhy), its timetable, its negative keywords, placement, device,
// location, an opaqueUserId for segment targeting, budget and pacing.
func (a *auctionEnv) campaignEligible(ce *index.Camp) Reason {
	g := &ce.Gate
	if !g.Running(a.kinds, a.atMs) {
		return reasonNotRunning
	}
	if g.Scheduled && !a.inSchedule(ce.Hours) {
		return ReasonOutsideSchedule
	}
	if g.Negative && a.negated(ce.Negatives) {
		return ReasonNegativeKeyword
	}
	if !g.Targeted {
		return a.budgetAllows(ce)
	}
	c := &ce.C
	t := &c.Targeting
	if len(t.PlacementIDs) > 0 && !slices.Contains(t.PlacementIDs, a.r.PlacementID) {
		return ReasonTargetingPlacement
	}
	if len(t.Devices) > 0 && !slices.Contains(t.Devices, a.r.Device) {
		return ReasonTargetingDevice
	}
	if len(t.Locations) > 0 && !slices.ContainsFunc(t.Locations, func(l string) bool { return slices.Contains(a.st.cells, l) }) {
		return ReasonTargetingLocation
	}
	// Segments are the per-shopper targeting: an auction without a shopper
	// (none given, or its consent denied, which the parser drops it for)
	// never matches one.
	if len(t.Segments) > 0 && a.r.OpaqueUserID == "" {
		return ReasonTargetingSegment
	}
	return a.budgetAllows(ce)
}

// inSchedule reports whether served hours h hold the auction's instant in
// the marketplace's zone (read once per auction, when a campaign with a
// timetable is met).
func (a *auctionEnv) inSchedule(h *spend.Hours) bool {
	if !a.localSet {
		loc := a.m.Loc
		if loc == nil {
			loc = time.UTC
		}
		a.local, a.localSet = a.at.In(loc), true
	}
	return h == nil || h.Serves(a.local)
}

// negated reports whether negative keywords n match the auction's
// searchQuery, normalised once per auction (when the first campaign or bid
// with negative keywords is met); each list is matched once per auction.
func (a *auctionEnv) negated(n *campaigns.Negatives) bool {
	if n == nil || a.r.SearchQuery == "" {
		return false
	}
	if hit, ok := a.st.negHit[n]; ok {
		return hit
	}
	if a.st.negHit == nil { // made at the first use: most states never need it
		a.st.negHit = map[*campaigns.Negatives]bool{}
	}
	if !a.querySet {
		a.query, a.querySet = campaigns.NewQuery(a.r.SearchQuery), true
	}
	hit := n.Blocks(a.query)
	a.st.negHit[n] = hit
	return hit
}

// bidNegated reports whether the negative keywords of bid id of campaign c,
// the auction's campaign ci, match the auction's searchQuery. Call it
// inside the index's read lock.
func (a *auctionEnv) bidNegated(ci int32, c *index.Camp, id string) bool {
	return a.st.camps[ci].bidNeg && a.negated(c.BidNegatives(id))
}

// budgetAllows: the campaign has no budget, or the budget gate lets it
// spend now (reasonNone); else the budget or pacing that holds it back. It
// reads the gate's copies of the budgets, not the campaign.
func (a *auctionEnv) budgetAllows(ce *index.Camp) Reason {
	if a.m.Balances && a.e.Funds != nil && a.e.Funds.Out(a.m.ID, ce.C.VendorID, a.at) {
		return ReasonInsufficientBalance
	}
	g := &ce.Gate
	if !g.Budgeted || a.e.Budget == nil {
		return reasonNone
	}
	l := g.Limits
	if g.Scheduled {
		l.Hours = ce.Hours
	}
	switch a.e.Budget.Check(a.m, ce.C.ID, l, a.at) {
	case BudgetOK:
		return reasonNone
	case BudgetTotalExhausted:
		return ReasonTotalBudgetExhausted
	case BudgetMonthlyExhausted:
		return ReasonMonthlyBudgetExhausted
	case BudgetWeeklyExhausted:
		return ReasonWeeklyBudgetExhausted
	case BudgetDailyExhausted:
		return ReasonDailyBudgetExhausted
	}
	return ReasonPaced
}

// checkSegments resolves the segment targeting of the candidate campaigns in
// one round trip: a campaign competes when the user is in any of its
// segments.
func (a *auctionEnv) checkSegments(ctx context.Context) {
	st := a.st
	for i := range st.camps {
		if st.camps[i].needSeg {
			for _, s := range st.camps[i].c.Segments {
				if !slices.Contains(st.segIDs, s) {
					st.segIDs = append(st.segIDs, s)
				}
			}
		}
	}
	if len(st.segIDs) == 0 {
		return
	}
	var in []bool
	var err error
	if a.e.Segments != nil {
		timeout := a.e.SegmentTimeout
		if timeout <= 0 {
			timeout = 20 * time.Millisecond
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		in, err = a.e.Segments.Memberships(cctx, a.mp, a.r.OpaqueUserID, st.segIDs)
		cancel()
	} else {
		err = errors.New("no segment view")
	}
	if err != nil && a.e.Log != nil {
		a.e.Log.Warn("auction: segment membership unavailable; segment-targeted campaigns skipped", "marketplace", a.mp, "err", err)
	}
	for i := range st.camps {
		c := &st.camps[i]
		if !c.needSeg {
			continue
		}
		member := false
		if err == nil {
			for _, s := range c.c.Segments {
				if in[slices.Index(st.segIDs, s)] {
					member = true
					break
				}
			}
		}
		c.ok = member
		switch {
		case member:
		case err != nil:
			c.why = ReasonSegmentUnavailable
		default:
			c.why = ReasonTargetingSegment
		}
	}
}

// buildCandidates turns the kept bids of eligible campaigns into ranking
// candidates.
func (a *auctionEnv) buildCandidates() {
	st := a.st
	for bi := range st.bids {
		b := &st.bids[bi]
		c := &st.camps[b.camp]
		p := &st.prods[b.prod]
		if !c.ok || b.amount <= 0 || p.excluded {
			if a.tr != nil {
				a.traceDropped(b, c, p)
			}
			continue
		}
		if c.bidCaps && a.bidCapped(c, b) {
			if a.tr != nil {
				a.traceBid(b.prod, "", c.c, b.spec, b.bidID, b.amount, ReasonFrequencyCapped)
			}
			continue
		}
		group := b.prod
		if a.r.Kind == KindSponsoredBrand {
			group = a.vendorGroup(c.c.VendorID) // one winner per vendor
		}
		st.cands = append(st.cands, Candidate{
			Group: group, Campaign: b.camp, Product: b.prod, BidMicros: b.amount,
			CPM: c.c.CPM, QualityPPM: p.quality,
		})
		st.candBid = append(st.candBid, int32(bi))
	}
}

// vendorGroup numbers vendors for sponsored-brand auctions.
func (a *auctionEnv) vendorGroup(vendor string) int32 {
	g, ok := a.st.vendGroup[vendor]
	if !ok {
		g = int32(len(a.st.vendGroup))
		a.st.vendGroup[vendor] = g
	}
	return g
}

// dropImageless removes banner candidates whose product has no image: a
// banner winner needs an asset URL.
func (a *auctionEnv) dropImageless() {
	st := a.st
	keep := st.cands[:0]
	keepBid := st.candBid[:0]
	img := map[int32]bool{}
	for i, c := range st.cands {
		pk := st.bids[st.candBid[i]].prod
		ok, seen := img[pk]
		if !seen {
			cr, found := a.e.Catalog.Creative(a.mp, st.prods[pk].id)
			ok = found && cr.ImageURL != ""
			img[pk] = ok
		}
		if ok {
			keep = append(keep, c)
			keepBid = append(keepBid, st.candBid[i])
		} else if a.tr != nil {
			b := st.bids[st.candBid[i]]
			a.traceBid(b.prod, "", st.camps[b.camp].c, b.spec, b.bidID, b.amount, ReasonProductWithoutImage)
		}
	}
	st.cands, st.candBid = keep, keepBid
}

// ---- winners ----

var adFormats = [...]bidtoken.AdFormat{
	KindListings: bidtoken.Listings, KindBanners: bidtoken.Banners, KindSponsoredBrand: bidtoken.SponsoredBrand,
	KindHotels: bidtoken.Hotels, KindFlights: bidtoken.Flights,
}

func (a *auctionEnv) winner(keys *bidtoken.Keyring, auctionID uuid.UUID, pl Placement) (Winner, RecordWinner, error) {
	st := a.st
	b := &st.bids[st.candBid[pl.Cand]]
	c := st.camps[b.camp].c
	p := &st.prods[b.prod]
	cand := &st.cands[pl.Cand]

	campaignID, err := uuid.Parse(c.ID)
	if err != nil {
		return Winner{}, RecordWinner{}, err
	}
	claims := bidtoken.Claims{
		MarketplaceID: a.m.UUID, AuctionID: auctionID, CampaignID: campaignID,
		AuctionTimeMs: a.at.UnixMilli(), ChargeType: bidtoken.CPC, AdFormat: adFormats[a.r.Kind],
		Rank: uint8(pl.Rank), PriceMicros: pl.PriceMicros, WinnerType: bidtoken.WinnerProduct,
		WinnerID: p.id, VendorID: c.VendorID,
	}
	if cand.CPM {
		claims.ChargeType = bidtoken.CPM
	}
	if b.bidID != "" {
		if bid, err := uuid.Parse(b.bidID); err == nil {
			claims.BidID = bid
		}
	}
	tok, err := keys.Encode(claims)
	if err != nil {
		return Winner{}, RecordWinner{}, err
	}
	w := Winner{
		Rank: pl.Rank, Type: "product", ID: p.id, ResolvedBidID: tok, CampaignID: c.ID, VendorID: c.VendorID,
		VariationID: a.variationOf(p),
	}
	switch a.r.Kind {
	case KindBanners:
		if cr, ok := a.e.Catalog.Creative(a.mp, p.id); ok {
			w.AssetURL = cr.ImageURL
		}
	case KindSponsoredBrand:
		w.Headline = c.Name
		if v, ok := a.e.Catalog.Vendor(a.mp, c.VendorID); ok {
			w.BrandName = v.Name
		}
		w.ProductIDs = a.vendorProducts(cand.Group, p.id)
	}
	rw := RecordWinner{
		Rank: pl.Rank, Type: w.Type, EntityID: w.ID, CampaignID: c.ID, VendorID: c.VendorID, BidID: b.bidID,
		BidTarget: specNames[b.spec], ChargeType: claims.ChargeType.String(), BidMicros: b.amount,
		PriceMicros: pl.PriceMicros, QualityPPM: cand.QualityPPM, VariationID: w.VariationID,
	}
	return w, rw, nil
}

// variationOf is the variationID the request gave with p ("" for none).
func (a *auctionEnv) variationOf(p *prod) string {
	if p.variation < 0 {
		return ""
	}
	return a.r.VariationIDs[p.variation]
}

// MaxBrandProducts is how many products a sponsored-brand winner lists.
const MaxBrandProducts = 3

// vendorProducts lists the best products (by score order) of a vendor group
// in this auction, first the winning one.
func (a *auctionEnv) vendorProducts(group int32, first string) []string {
	out := []string{first}
	for i := 0; len(out) < MaxBrandProducts; i++ {
		ci, ok := a.st.rk.at(i)
		if !ok {
			break
		}
		c := &a.st.cands[ci]
		if id := a.st.prods[c.Product].id; c.Group == group && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func newRecord(id uuid.UUID, m *Market, endpoint EndpointKind, r *Request, idx int, at time.Time) Record {
	rec := Record{
		ID: id.String(), MarketplaceID: m.ID, At: at, Endpoint: endpoint.String(), Kind: r.Kind.String(), Index: idx,
		Slots: r.Slots, ProductCount: len(r.ProductIDs), SearchQuery: r.SearchQuery, SlotID: r.SlotID,
		Device: r.Device, PlacementID: r.PlacementID, PlacementName: r.PlacementName, OpaqueUserID: r.OpaqueUserID,
		ExperimentVariant: r.ExperimentVariant, Locations: r.Locations,
	}
	if r.Location != "" {
		rec.Locations = []string{r.Location}
	}
	if r.Category != nil {
		rec.Category = r.Category.String()
	}
	if r.Page != nil {
		rec.PageType, rec.PageID, rec.PageValue = r.Page.Type, r.Page.ID, r.Page.Value
	}
	return rec
}

// String is the category context in canonical text: `id`, `a&b` for ids (in
// all), `(a|b)&(c)` for disjunctions.
func (c *CategoryFilter) String() string {
	switch {
	case c.ID != "":
		return c.ID
	case len(c.IDs) > 0:
		return strings.Join(c.IDs, "&")
	}
	parts := make([]string, len(c.Disjunctions))
	for i, d := range c.Disjunctions {
		parts[i] = "(" + strings.Join(d, "|") + ")"
	}
	return strings.Join(parts, "&")
}
