package auction

import (
	"slices"
	"strings"

	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/entityref"
)

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
	if a.ix.Capped() {
		a.startCapRead() // before the products: the read overlaps all of them (caps.go)
	}
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
		for _, r := range p.Bids() {
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
				// The bid from the gate's copies of the daily budget and
				// the maximum bid: the campaign's record is lines further.
				if ci := a.campaign(c); ci >= 0 {
					a.addBid(pk, ci, specAutomated, "", campaigns.AutomatedBid(c.Gate.Limits.DailyMicros, c.Gate.MaxBidMicros, p.QualityScore))
				} else if a.tr != nil {
					a.traceCampaignOut(pk, "", c, specAutomated, "", campaigns.AutomatedBid(c.Gate.Limits.DailyMicros, c.Gate.MaxBidMicros, p.QualityScore))
				}
			}
		}
	}
}

// touch reads, for every candidate product, the memory the real pass will
// read (its bids' array and their campaigns' gates, its vendors' entries
// and lists, the gates of their automated campaigns, the budgeted
// campaigns' places in the spend cache) once before that pass, a level of
// pointers at a time: the loads of one level do not depend on each other,
// so the CPU overlaps their cache misses, where the real pass would wait
// for each in turn, and a product's chain of loads would wait for its
// previous link.
func (a *auctionEnv) touch(first int) {
	prods := a.st.prods[first:]
	n := 0
	// What the entries point to: the bids' arrays, the vendors' entries.
	for i := range prods {
		p := prods[i].ip
		bs := p.Bids()
		for j := range bs {
			if bs[j].Camp == nil {
				n++
			}
		}
		for _, v := range p.Vendors() {
			n += len(v.Category) + len(v.Automated)
		}
	}
	// What those point to: the bids' campaigns' gates, the vendors'
	// lists.
	for i := range prods {
		p := prods[i].ip
		if len(p.Categories()) > 0 && p.Categories()[0] == (index.Cat{}) {
			n++
		}
		bs := p.Bids()
		for j := range bs {
			n += int(bs[j].Camp.Gate.Kind)
		}
		for _, v := range p.Vendors() {
			if len(v.Category) > 0 && v.Category[0].Target == (index.Cat{}) {
				n++
			}
			if len(v.Automated) > 0 && v.Automated[0] == nil {
				n++
			}
		}
	}
	// The automated campaigns' gates; the budget gate's reads of the
	// campaigns met, after their gates (each campaign's record and entry
	// in the spend cache), or the number the auction keys a campaign by,
	// beside its place in the cache (Camp.Num, Camp.Spend).
	for i := range prods {
		p := prods[i].ip
		bs := p.Bids()
		for j := range bs {
			n += touchCamp(bs[j].Camp)
		}
		for _, v := range p.Vendors() {
			for _, c := range v.Automated {
				n += int(c.Gate.Kind) + touchCamp(c)
			}
		}
	}
	a.st.touched = n
}

// touchCamp reads what the auction reads of campaign c after its gate.
func touchCamp(c *index.Camp) int {
	if c.Gate.Budgeted {
		return c.Spend.Touch()
	}
	return int(c.Num & 1)
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
// of the query, lower-cased, split on white space (docs/design/auction-ranking.md).
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
			if p != nil && p.Known() && p.Active() && p.HasVendor(c.Vendor) {
				a.addBid(a.addProduct(p, p.ID(), p.QualityScore, -1), ci, specProduct, b.B.ID, b.B.AmountMicros)
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
