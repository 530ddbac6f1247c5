package auction

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/spend"
)

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
		a.capMet()
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
	switch a.e.Budget.Check(a.m, &ce.Spend, ce.C.ID, l, a.at) {
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
