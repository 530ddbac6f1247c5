package auction

import (
	"cmp"
	"context"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/campaigns"
)

// Explaining an auction (POST /v2/auctions/explain, docs/design/auction-ranking.md
// "Explain"): the auction runs through the same code as Run, with a tracer
// that the engine's checks report to where they drop a bid. It stops after
// the ranking: no winner is made, no resolvedBidId signed, and the caller
// records nothing; the budget gate is only read, as in every auction.
//
// What the tracer costs an auction that is not explained: a nil check
// where a bid is dropped (never where one is kept), and the engine keeps
// the reason of each verdict it already makes (a byte beside the verdict).

// Reason is why a candidate did not win, as Explain reports it: a stable
// code on the wire (Reason.String). The codes shared with bid eligibility
// (management/campaigns) are the same strings for the same causes.
type Reason uint8

// The reasons, grouped by what the engine checks, in the order it checks
// them: the product of the auction's context, the bid, its campaign, the
// product again (filter, banner image), then the ranking.
const (
	reasonNone Reason = iota

	// The product (a product of the request's context, left out before its
	// bids were looked at; or the product of a bid).
	ReasonProductNotFound    // not in the catalog
	ReasonProductInactive    // active: false
	ReasonProductNoVendors   // no vendor may promote it (ExcludedProduct only; its bids: vendor_not_permitted)
	ReasonNotInCategory      // not in the request's category context
	ReasonVendorNotPermitted // the campaign's vendor is not among the product's vendors
	ReasonBidInactive        // the bid's isActive is false
	// Campaign: not running, or of a type that does not compete in this
	// kind of auction.
	reasonNotRunning // refined into one of the four below (notRunningWhy)
	ReasonCampaignType
	ReasonCampaignPaused
	ReasonCampaignScheduled
	ReasonCampaignEnded
	// Dayparting and negative keywords (of the campaign; a bid's own
	// negative keywords report the second too).
	ReasonOutsideSchedule // its timetable does not serve the marketplace's current local hour
	ReasonNegativeKeyword // a negative keyword matches the auction's searchQuery
	// Campaign targeting, then budgets.
	ReasonTargetingPlacement
	ReasonTargetingDevice
	ReasonTargetingLocation
	ReasonTargetingSegment        // no opaqueUserId, or not a member of any of its segments
	ReasonSegmentUnavailable      // segment membership could not be read in time
	ReasonFrequencyCapped         // the shopper reached a frequency cap of the campaign or bid (caps.go)
	ReasonFrequencyCapNoShopper   // capped, capsWithoutShopper skip, and no opaqueUserId
	ReasonFrequencyCapUnavailable // capped, capsWithoutShopper skip, and the counts could not be read in time
	ReasonInsufficientBalance     // the campaign's vendor is out of funds (balances)
	ReasonTotalBudgetExhausted
	ReasonMonthlyBudgetExhausted
	ReasonWeeklyBudgetExhausted
	ReasonDailyBudgetExhausted
	ReasonPaced
	// A more specific (or, equally specific, higher) bid of the same
	// campaign on the same product counts instead.
	ReasonSuperseded
	// The product again.
	ReasonFilterMismatch      // fails the request's filter
	ReasonNoActiveProduct     // keyword-only auction: the vendor has no active product (passing the filter)
	ReasonProductWithoutImage // banners: no imageURL
	// Lost in the ranking.
	ReasonBelowReserve     // the bid is below the reserve price of its charge type
	ReasonOutranked        // ranked below the last winner, all slots taken
	ReasonProductWonHigher // its product already won a higher rank (one winner per product)
	ReasonVendorWonHigher  // sponsored brand: its vendor already won a higher rank
	numReasons
)

var reasonCodes = [numReasons]string{
	reasonNone:                    "",
	ReasonProductNotFound:         campaigns.ReasonProductNotFound,
	ReasonProductInactive:         campaigns.ReasonProductInactive,
	ReasonProductNoVendors:        "product_without_vendors",
	ReasonNotInCategory:           "not_in_category",
	ReasonVendorNotPermitted:      campaigns.ReasonVendorNotPermitted,
	ReasonBidInactive:             "bid_inactive",
	reasonNotRunning:              "campaign_not_running",
	ReasonCampaignType:            "campaign_type",
	ReasonCampaignPaused:          "campaign_paused",
	ReasonCampaignScheduled:       "campaign_scheduled",
	ReasonCampaignEnded:           "campaign_ended",
	ReasonOutsideSchedule:         campaigns.ReasonOutsideSchedule,
	ReasonNegativeKeyword:         campaigns.ReasonNegativeKeyword,
	ReasonTargetingPlacement:      "targeting_placement",
	ReasonTargetingDevice:         "targeting_device",
	ReasonTargetingLocation:       "targeting_location",
	ReasonTargetingSegment:        "targeting_segment",
	ReasonSegmentUnavailable:      "segment_unavailable",
	ReasonFrequencyCapped:         "frequency_capped",
	ReasonFrequencyCapNoShopper:   "frequency_cap_no_shopper",
	ReasonFrequencyCapUnavailable: "frequency_cap_unavailable",
	ReasonInsufficientBalance:     "insufficient_balance",
	ReasonTotalBudgetExhausted:    "total_budget_exhausted",
	ReasonMonthlyBudgetExhausted:  "monthly_budget_exhausted",
	ReasonWeeklyBudgetExhausted:   "weekly_budget_exhausted",
	ReasonDailyBudgetExhausted:    "daily_budget_exhausted",
	ReasonPaced:                   "paced",
	ReasonSuperseded:              "superseded",
	ReasonFilterMismatch:          "filter_mismatch",
	ReasonNoActiveProduct:         campaigns.ReasonNoActiveProduct,
	ReasonProductWithoutImage:     campaigns.ReasonProductNoImage,
	ReasonBelowReserve:            campaigns.ReasonBelowReserve,
	ReasonOutranked:               "outranked",
	ReasonProductWonHigher:        "product_won_higher",
	ReasonVendorWonHigher:         "vendor_won_higher",
}

// String is the reason's code ("" for none).
func (r Reason) String() string {
	if r < numReasons {
		return reasonCodes[r]
	}
	return "unknown"
}

// Outcome is what happened to a candidate.
type Outcome uint8

// The outcomes.
const (
	Won      Outcome = iota + 1 // a winner, with its rank and price
	Lost                        // ranked, but not a winner (below the reserve, outranked, its product or vendor taken)
	Filtered                    // dropped before the ranking
)

// String is the outcome on the wire.
func (o Outcome) String() string {
	switch o {
	case Won:
		return "won"
	case Lost:
		return "lost"
	case Filtered:
		return "filtered"
	}
	return "unknown"
}

// Explanation is one explained auction.
type Explanation struct {
	Kind  Kind
	Slots int
	// Candidates: every bid the auction met, each with its outcome. The
	// ranked ones first, in rank order (Position 1, 2, …); then those
	// below the reserve, then the filtered ones, each by product, campaign
	// and bid.
	Candidates []ExplainedCandidate
	// ExcludedProducts are the products of the request's products.ids left
	// out before any bid on them counted (unknown, inactive, without
	// vendors, outside the category), in request order. Their bids, if
	// any, are among the candidates, filtered with the same reason (bids
	// on a product without vendors: vendor_not_permitted).
	ExcludedProducts []ExcludedProduct
	// Error: the auction failed at run time, as Result.Error.
	Error bool
}

// ResultType is the explanation's `resultType`, as Result's.
func (e *Explanation) ResultType() string { return (&Result{Kind: e.Kind}).ResultType() }

// ExplainedCandidate is one bid an explained auction met, on one product.
type ExplainedCandidate struct {
	// ProductID is "" when no product could be chosen: a keyword bid of a
	// keyword-only auction whose vendor has no product for it.
	ProductID  string
	CampaignID string
	VendorID   string
	BidID      string // "" for automated campaigns (no stored bid)
	BidTarget  string // product, keyword, category, automated
	CPM        bool   // the campaign's charge type (CPC when false)
	BidMicros  int64  // per click (CPC) or per 1,000 impressions (CPM)
	QualityPPM int64  // the quality the ranking uses, parts per million; 0 when not known (a product the auction did not read)
	// Score is the exact ranking score, normalised bid (µ) × quality (ppm),
	// in decimal; "" for a filtered candidate.
	Score    string
	Outcome  Outcome
	Reason   Reason // reasonNone for a winner
	Position int    // 1-based place in the ranking order; 0 when not ranked
	// Rank and PriceMicros: a winner's rank (1-based) and price, in its
	// charge type's unit; 0 otherwise.
	Rank        int
	PriceMicros int64
}

// ExcludedProduct is a product of the request left out of the auction.
type ExcludedProduct struct {
	ProductID string
	Reason    Reason
}

// Explain runs each auction of one request as Run does, through the same
// code and with the same inputs (views, budget gate, segments, clock), and
// says for each what happened to every candidate. It is a dry run: no
// resolvedBidId is signed (no signing key is needed), no auction record is
// made, and no budget or pacing state changes.
//
// maxCandidates (0: no limit) bounds the candidates listed over all the
// auctions of the request: past it Explain stops and returns a
// *TooManyCandidatesError, having kept no more than maxCandidates of them.
func (e *Engine) Explain(ctx context.Context, m *Market, endpoint EndpointKind, reqs []Request, maxCandidates int) ([]Explanation, error) {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	at := now().UTC().Truncate(time.Millisecond)
	st, _ := e.pool.Get().(*state)
	if st == nil {
		st = newState()
	}
	defer e.pool.Put(st)
	st.caps.newRequest()
	defer st.caps.endRequest() // a read not taken: its reply dropped (caps.go)
	var left *int
	if maxCandidates > 0 {
		n := maxCandidates
		left = &n
	}
	out := make([]Explanation, len(reqs))
	for i := range reqs {
		tr := &tracer{left: left}
		res := e.runOne(ctx, st, nil, nil, m, endpoint, &reqs[i], i, at, tr)
		if tr.over {
			return nil, &TooManyCandidatesError{Limit: maxCandidates, Auction: i}
		}
		out[i] = Explanation{Kind: reqs[i].Kind, Slots: reqs[i].Slots, Error: res.Error}
		if !res.Error {
			out[i].Candidates, out[i].ExcludedProducts = tr.candidates(), tr.excluded
		}
	}
	return out, nil
}

// TooManyCandidatesError: the request's auctions have more candidates than
// the explain may list (Limit); Auction is the index of the auction at
// which the count passed it.
type TooManyCandidatesError struct {
	Limit   int
	Auction int
}

func (e *TooManyCandidatesError) Error() string {
	return "the auctions of this request have more than " + strconv.Itoa(e.Limit) + " candidates to explain (the count passed it at auctions[" +
		strconv.Itoa(e.Auction) + "]); explain fewer auctions, fewer products or a narrower context"
}

// tracer collects what happens to the candidates of one explained auction.
type tracer struct {
	recs     []traceRec
	ranked   []ExplainedCandidate // filled by traceRanking, in rank order then below the reserve
	excluded []ExcludedProduct
	leftOut  map[string]bool // ids of excluded
	kwOut    []kwOut         // keyword-only auctions: bids dropped before their product is chosen
	// left: how many more candidates the request may list (nil: no
	// limit), shared by its auctions; over: a candidate found none left.
	left *int
	over bool
}

// admit takes room for one more listed candidate: false (and over) when
// the request's limit is reached, and the candidate is not kept.
func (tr *tracer) admit() bool {
	if tr.left == nil {
		return true
	}
	if *tr.left <= 0 {
		tr.over = true
		return false
	}
	*tr.left--
	return true
}

// traceRec is a candidate dropped before the ranking.
type traceRec struct {
	productID string
	quality   int64
	info      *index.CampInfo
	bidID     string
	spec      uint8
	amount    int64
	why       Reason
}

// kwOut is a keyword bid of a keyword-only auction dropped with why.
type kwOut struct {
	info   *index.CampInfo
	bidID  string
	amount int64
	why    Reason
}

// candidates returns every candidate: ranked (already in order), then the
// filtered ones by product, campaign, bid target and bid.
func (tr *tracer) candidates() []ExplainedCandidate {
	out := make([]ExplainedCandidate, 0, len(tr.ranked)+len(tr.recs))
	out = append(out, tr.ranked...)
	n := len(out)
	for _, r := range tr.recs {
		out = append(out, ExplainedCandidate{
			ProductID: r.productID, CampaignID: r.info.ID, VendorID: r.info.VendorID, BidID: r.bidID,
			BidTarget: specNames[r.spec], CPM: r.info.CPM, BidMicros: r.amount, QualityPPM: r.quality,
			Outcome: Filtered, Reason: r.why,
		})
	}
	slices.SortStableFunc(out[n:], func(x, y ExplainedCandidate) int {
		return cmp.Or(cmp.Compare(x.ProductID, y.ProductID), cmp.Compare(x.CampaignID, y.CampaignID),
			cmp.Compare(x.BidTarget, y.BidTarget), cmp.Compare(x.BidID, y.BidID))
	})
	return out
}

// traceBid records a bid dropped with why, on product pk (-1: on product
// productID, or on no product when productID is ""). A product left out of
// the context gives its own reason to every bid on it: the engine drops it
// before it looks at a bid.
func (a *auctionEnv) traceBid(pk int32, productID string, info *index.CampInfo, spec uint8, bidID string, amount int64, why Reason) {
	if info == nil {
		return // a campaign the views do not know (deleted): nothing to name
	}
	var quality int64
	if pk >= 0 {
		p := &a.st.prods[pk]
		productID, quality = p.id, p.quality
		if p.excluded && p.why != reasonNone && p.why != ReasonFilterMismatch {
			why = p.why
		}
	}
	if a.tr.admit() {
		a.tr.recs = append(a.tr.recs, traceRec{productID: productID, quality: quality, info: info, bidID: bidID, spec: spec, amount: amount, why: why})
	}
}

// campaignWhy is why campaign ce may not compete (a.campaign returned -1),
// a not-running verdict told apart. Call it inside the index's read lock.
func (a *auctionEnv) campaignWhy(ce *index.Camp) Reason {
	why := a.st.camps[a.st.campIdx[ce.Num]].why
	if why == reasonNotRunning {
		why = notRunningWhy(&ce.Gate, a.kinds, a.atMs)
	}
	return why
}

// traceCampaignOut records a bid whose campaign may not compete.
func (a *auctionEnv) traceCampaignOut(pk int32, productID string, ce *index.Camp, spec uint8, bidID string, amount int64) {
	a.traceBid(pk, productID, ce.Info, spec, bidID, amount, a.campaignWhy(ce))
}

// notRunningWhy tells apart why a campaign is not running (Gate.Running
// false), as campaigns.Status does: a type that does not compete in this
// auction first, then ended, paused, scheduled.
func notRunningWhy(g *index.Gate, kinds index.Kind, atMs int64) Reason {
	switch {
	case g.Kind&kinds == 0:
		return ReasonCampaignType
	case atMs >= g.EndMs:
		return ReasonCampaignEnded
	case !g.Active:
		return ReasonCampaignPaused
	}
	return ReasonCampaignScheduled
}

// productWhy is why a product bid's product cannot be a candidate: unknown,
// inactive, or not promotable by vendor v.
func productWhy(p *index.Product, v *index.Vendor) Reason {
	switch {
	case p == nil || !p.Known():
		return ReasonProductNotFound
	case !p.Active():
		return ReasonProductInactive
	}
	return ReasonVendorNotPermitted
}

// traceLeftOut records a product of the request's ids that the auction
// leaves out (once per id). When the index holds an entry for it (with
// bids, maybe), it joins the auction's products, excluded, so that gather
// reports its bids with its reason.
func (a *auctionEnv) traceLeftOut(p *index.Product, k int, notInCategory bool) {
	st := a.st
	id := st.ids[k]
	if _, seen := st.prodIdx[id]; seen || a.tr.leftOut[id] || st.idPos[k] < 0 {
		return // a repeated id; or a category's product (only the request's ids are listed)
	}
	if a.tr.leftOut == nil {
		a.tr.leftOut = map[string]bool{}
	}
	a.tr.leftOut[id] = true
	why, bidsWhy := ReasonProductNotFound, ReasonProductNotFound
	switch {
	case p == nil || !p.Known():
	case !p.Active():
		why, bidsWhy = ReasonProductInactive, ReasonProductInactive
	case len(p.Vendors()) == 0:
		why, bidsWhy = ReasonProductNoVendors, ReasonVendorNotPermitted
	case notInCategory:
		why, bidsWhy = ReasonNotInCategory, ReasonNotInCategory
	}
	a.tr.excluded = append(a.tr.excluded, ExcludedProduct{ProductID: id, Reason: why})
	if p == nil {
		return
	}
	pk := a.addProduct(p, id, p.QualityScore, int(st.idPos[k]))
	st.prods[pk].excluded, st.prods[pk].why = true, bidsWhy
	if why == ReasonProductNotFound {
		st.prods[pk].quality = 0 // not known: shown as such
	}
}

// traceSuperseded records a bid another bid of its campaign replaced on
// its product.
func (a *auctionEnv) traceSuperseded(b bidRef) {
	a.traceBid(b.prod, "", a.st.camps[b.camp].c, b.spec, b.bidID, b.amount, ReasonSuperseded)
}

// traceDropped records a gathered bid that does not become a candidate, for
// the first reason in the engine's order: its product (left out, or failing
// the filter), its campaign's segments, its amount.
func (a *auctionEnv) traceDropped(b *bidRef, c *camp, p *prod) {
	why := ReasonBelowReserve // an amount <= 0: below any reserve
	switch {
	case p.excluded:
		why = p.why
	case !c.ok:
		why = c.why
	}
	info := c.c
	if a.tr.admit() {
		a.tr.recs = append(a.tr.recs, traceRec{productID: p.id, quality: p.quality, info: info, bidID: b.bidID, spec: b.spec, amount: b.amount, why: why})
	}
}

// traceKeywordOnlyOut records the keyword bids of a keyword-only auction
// dropped before their product was chosen, on the product they would have
// promoted (the vendor's best), if any.
func (a *auctionEnv) traceKeywordOnlyOut() {
	for _, o := range a.tr.kwOut {
		pk := int32(-1)
		if k, ok := a.vendorBest(o.info.VendorID); ok {
			pk = k
		}
		a.traceBid(pk, "", o.info, specKeyword, o.bidID, o.amount, o.why)
	}
}

// traceLandingPageOut records the product bids of a banners campaign that
// may not compete in a landing-page auction. Inside the index's read lock.
func (a *auctionEnv) traceLandingPageOut(c *index.Camp) {
	why := a.campaignWhy(c)
	c.EachBid(func(b *index.Bid) bool {
		if b.B.TargetType == campaigns.TargetProduct {
			a.traceLandingPageBid(c, b, why)
		}
		return true
	})
}

// traceLandingPageBid records a product bid of a landing-page auction
// dropped with why. Inside the index's read lock.
func (a *auctionEnv) traceLandingPageBid(c *index.Camp, b *index.Bid, why Reason) {
	var quality int64
	if p := a.ix.Product(b.B.Target); p != nil && p.Known() {
		quality = qualityPPM(p.QualityScore)
	}
	if c.Info == nil || !a.tr.admit() {
		return
	}
	a.tr.recs = append(a.tr.recs, traceRec{productID: b.B.Target, quality: quality, info: c.Info, bidID: b.B.ID,
		spec: specProduct, amount: b.B.AmountMicros, why: why})
}

// traceRanking records the ranked candidates after Rank: the whole order
// (the ranker takes the rest of it off its heap), each a winner or lost
// with why, then the candidates below the reserve.
func (a *auctionEnv) traceRanking(places []Placement) {
	st := a.st
	rk := &st.rk
	won := make(map[int]Placement, len(places))
	for _, pl := range places {
		won[pl.Cand] = pl
	}
	ranked := make([]bool, len(st.cands))
	for pos := 0; ; pos++ {
		ci, ok := rk.at(pos)
		if !ok {
			break
		}
		ranked[ci] = true
		if !a.tr.admit() {
			return
		}
		ec := a.explained(int(ci))
		ec.Position = pos + 1
		if pl, ok := won[int(ci)]; ok {
			ec.Outcome, ec.Rank, ec.PriceMicros = Won, pl.Rank, pl.PriceMicros
		} else {
			ec.Outcome, ec.Reason = Lost, ReasonOutranked
			if slices.Contains(rk.groups, st.cands[ci].Group) {
				ec.Reason = ReasonProductWonHigher
				if a.r.Kind == KindSponsoredBrand {
					ec.Reason = ReasonVendorWonHigher
				}
			}
		}
		a.tr.ranked = append(a.tr.ranked, ec)
	}
	n := len(a.tr.ranked)
	for i := range st.cands {
		if !ranked[i] {
			if !a.tr.admit() {
				return
			}
			ec := a.explained(i)
			ec.Outcome, ec.Reason = Lost, ReasonBelowReserve
			a.tr.ranked = append(a.tr.ranked, ec)
		}
	}
	slices.SortStableFunc(a.tr.ranked[n:], func(x, y ExplainedCandidate) int {
		return cmp.Or(cmp.Compare(x.ProductID, y.ProductID), cmp.Compare(x.CampaignID, y.CampaignID))
	})
}

// explained describes candidate i of the ranking.
func (a *auctionEnv) explained(i int) ExplainedCandidate {
	st := a.st
	c := &st.cands[i]
	b := &st.bids[st.candBid[i]]
	info := st.camps[b.camp].c
	return ExplainedCandidate{
		ProductID: st.prods[c.Product].id, CampaignID: info.ID, VendorID: info.VendorID, BidID: b.bidID,
		BidTarget: specNames[b.spec], CPM: c.CPM, BidMicros: c.BidMicros, QualityPPM: c.QualityPPM, Score: c.score().String(),
	}
}

// String is the score in decimal.
func (s score) String() string {
	if s.hi == 0 {
		return strconv.FormatUint(s.lo, 10)
	}
	v := new(big.Int).SetUint64(s.hi)
	return v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(s.lo)).String()
}
