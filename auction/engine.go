package auction

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/spend"
)

// The auction engine: from a validated Request and the in-memory views of the
// catalog and the campaigns, the winners, their prices and their signed
// resolvedBidIds. docs/design/auction-ranking.md is the reference; keep it in step.
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
	Check(m *Market, slot *spend.Slot, campaignID string, l spend.Limits, at time.Time) BudgetVerdict
}

// BudgetVerdict is a BudgetGate's answer.
type BudgetVerdict uint8

// The budget verdicts, in the order the budget rule checks them
// (docs/design/budgets.md).
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
// funds (docs/reference/balances.md). Like BudgetGate it answers from memory.
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
// auction, which sets how often the API collects (docs/design/performance.md).
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
	defer st.caps.endRequest() // a read not taken: its reply dropped (caps.go)
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
