package campaigns

import (
	"hash/maphash"
	"slices"
	"unique"
)

// The auction index: the campaigns and bids of a marketplace arranged the
// way an auction reads them, with pointers instead of keys, so that an
// auction of 500 products costs a few map lookups per product (its product
// bids, each of its vendors) and pointer reads for the rest.
//
// It is kept by the collections' OnChange hooks under Service.mu, and read
// through ReadIndex under the read lock. Entries are updated in place: a
// reader must not keep a pointer after its ReadIndex callback returns.

// CampEntry is a campaign in the index. Known is false while bids of the
// campaign were applied but the campaign itself not yet (the log's
// partitions are not ordered among themselves) or after it was deleted.
type CampEntry struct {
	C     Campaign
	Known bool
	bids  map[string]*BidEntry // by bid key
}

// BidEntry is a bid with its campaign.
type BidEntry struct {
	B    Bid
	Camp *CampEntry
}

// VendorEntry is what an auction needs of a vendor beyond product bids.
type VendorEntry struct {
	Category  []CatRef     // category bids of the vendor's known campaigns
	Automated []*CampEntry // automated campaigns
}

// CatRef is a category bid with its category beside it, so that an auction
// can match categories without reading the bid. Category ids are interned
// (unique), like the catalog's, so matching mostly compares pointers.
type CatRef struct {
	Target string
	Bid    *BidEntry
}

// intern returns the canonical copy of an id shared with the catalog.
func intern(s string) string { return unique.Make(s).Value() }

func removeCat(list []CatRef, b *BidEntry) []CatRef {
	for i := range list {
		if list[i].Bid == b {
			list[i] = list[len(list)-1]
			list[len(list)-1] = CatRef{}
			return list[:len(list)-1]
		}
	}
	return list
}

// MarketIndex is the auction index of one marketplace.
type MarketIndex struct {
	// mayBid is a one-hash Bloom filter of the products with product bids:
	// a clear bit spares ProductBids its map lookup (most products of an
	// auction have none, and the map is large and cold). Bits are set, never
	// cleared; the filter is rebuilt when it doubles (rebuildBloom).
	mayBid  []uint64
	bloomN  int // product ids added since the last rebuild
	camps   map[string]*CampEntry
	product map[string][]*BidEntry // product id -> bids
	keyword map[string][]*BidEntry // normalised keyword -> bids
	vendors map[string]*VendorEntry
	banners map[string]*CampEntry // banners campaigns by id
}

func newMarketIndex() *MarketIndex {
	return &MarketIndex{
		camps: map[string]*CampEntry{}, product: map[string][]*BidEntry{}, keyword: map[string][]*BidEntry{},
		vendors: map[string]*VendorEntry{}, banners: map[string]*CampEntry{},
	}
}

var bloomSeed = maphash.MakeSeed()

// ProductBids are the bids on a product, of every vendor and state.
func (ix *MarketIndex) ProductBids(productID string) []*BidEntry {
	if n := len(ix.mayBid); n > 0 {
		h := maphash.String(bloomSeed, productID)
		if ix.mayBid[(h>>6)&uint64(n-1)]&(1<<(h&63)) == 0 {
			return nil
		}
	}
	return ix.product[productID]
}

// bloomAdd marks a product as having bids, growing the filter to about
// 16 bits per product (a false positive rate of about 6%).
func (ix *MarketIndex) bloomAdd(productID string) {
	ix.bloomN++
	if want := max(64, nextPow2(len(ix.product)*16/64)); len(ix.mayBid) < want || ix.bloomN > 2*len(ix.product)+1024 {
		ix.mayBid = make([]uint64, max(want, len(ix.mayBid)))
		ix.bloomN = 0
		for id := range ix.product {
			ix.setBloom(id)
		}
	}
	ix.setBloom(productID)
}

func (ix *MarketIndex) setBloom(productID string) {
	h := maphash.String(bloomSeed, productID)
	ix.mayBid[(h>>6)&uint64(len(ix.mayBid)-1)] |= 1 << (h & 63)
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// KeywordBids are the bids on a normalised keyword.
func (ix *MarketIndex) KeywordBids(keyword string) []*BidEntry { return ix.keyword[keyword] }

// Vendor is a vendor's category bids and automated campaigns (nil: none).
func (ix *MarketIndex) Vendor(vendorID string) *VendorEntry { return ix.vendors[vendorID] }

// Campaign is a campaign by id (nil or not Known: none).
func (ix *MarketIndex) Campaign(id string) *CampEntry { return ix.camps[id] }

// EachBanners calls fn for every banners campaign until it returns false.
func (ix *MarketIndex) EachBanners(fn func(*CampEntry) bool) {
	for _, c := range ix.banners {
		if !fn(c) {
			return
		}
	}
}

// Bids are a campaign's bids in no order.
func (c *CampEntry) EachBid(fn func(*BidEntry) bool) {
	for _, b := range c.bids {
		if !fn(b) {
			return
		}
	}
}

// ReadIndex runs fn with the auction index of a marketplace (nil when it has
// no campaign) under the Service's read lock. fn must not call the Service.
func (s *Service) ReadIndex(mp string, fn func(*MarketIndex)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.index[mp])
}

// ---- maintenance (called under s.mu) ----

func (s *Service) marketIndex(mp string) *MarketIndex {
	ix := s.index[mp]
	if ix == nil {
		ix = newMarketIndex()
		s.index[mp] = ix
	}
	return ix
}

func (ix *MarketIndex) campEntry(id string) *CampEntry {
	c := ix.camps[id]
	if c == nil {
		c = &CampEntry{bids: map[string]*BidEntry{}}
		ix.camps[id] = c
	}
	return c
}

func (ix *MarketIndex) vendor(v string) *VendorEntry {
	e := ix.vendors[v]
	if e == nil {
		e = &VendorEntry{}
		ix.vendors[v] = e
	}
	return e
}

func removePtr[T any](list []*T, p *T) []*T {
	if i := slices.Index(list, p); i >= 0 {
		list[i] = list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
	}
	return list
}

// detachCampaign removes a known campaign's entries from the vendor lists
// (before its vendor or type changes, or it is deleted).
func (ix *MarketIndex) detachCampaign(c *CampEntry) {
	if !c.Known {
		return
	}
	if ve := ix.vendors[c.C.VendorID]; ve != nil {
		for _, b := range c.bids {
			if b.B.TargetType == TargetCategory {
				ve.Category = removeCat(ve.Category, b)
			}
		}
		ve.Automated = removePtr(ve.Automated, c)
		if len(ve.Category) == 0 && len(ve.Automated) == 0 {
			delete(ix.vendors, c.C.VendorID)
		}
	}
	delete(ix.banners, c.C.ID)
}

// attachCampaign adds a known campaign's entries to the vendor lists.
func (ix *MarketIndex) attachCampaign(c *CampEntry) {
	if !c.Known {
		return
	}
	for _, b := range c.bids {
		if b.B.TargetType == TargetCategory {
			ve := ix.vendor(c.C.VendorID)
			ve.Category = append(ve.Category, CatRef{Target: b.B.Target, Bid: b})
		}
	}
	switch c.C.Type {
	case TypeAutomated:
		ve := ix.vendor(c.C.VendorID)
		ve.Automated = append(ve.Automated, c)
	case TypeBanners:
		ix.banners[c.C.ID] = c
	}
}

func (s *Service) indexCampaignEntry(mp, id string, nw *Campaign) {
	ix := s.marketIndex(mp)
	c := ix.campEntry(id)
	ix.detachCampaign(c)
	if nw == nil {
		c.Known, c.C = false, Campaign{}
		if len(c.bids) == 0 {
			delete(ix.camps, id)
		}
		return
	}
	c.C, c.Known = *nw, true
	c.C.VendorID = intern(c.C.VendorID)
	ix.attachCampaign(c)
}

func (s *Service) indexBidEntry(mp, key string, old, nw *Bid) {
	ix := s.marketIndex(mp)
	if old != nil && (nw == nil || nw.CampaignID != old.CampaignID || nw.TargetType != old.TargetType || nw.Target != old.Target) {
		c := ix.camps[old.CampaignID]
		if c != nil {
			if b := c.bids[key]; b != nil {
				ix.unlinkBid(c, b)
				delete(c.bids, key)
			}
			if !c.Known && len(c.bids) == 0 {
				delete(ix.camps, old.CampaignID)
			}
		}
		old = nil
	}
	if nw == nil {
		return
	}
	c := ix.campEntry(nw.CampaignID)
	if b := c.bids[key]; b != nil {
		target := b.B.Target
		b.B = *nw // same key, so same campaign and target: amount or flag changed
		b.B.Target = target
		return
	}
	b := &BidEntry{B: *nw, Camp: c}
	if nw.TargetType == TargetCategory {
		b.B.Target = intern(nw.Target)
	}
	c.bids[key] = b
	switch nw.TargetType {
	case TargetProduct:
		ix.product[nw.Target] = append(ix.product[nw.Target], b)
		ix.bloomAdd(nw.Target)
	case TargetKeyword:
		ix.keyword[nw.Target] = append(ix.keyword[nw.Target], b)
	case TargetCategory:
		if c.Known {
			ve := ix.vendor(c.C.VendorID)
			ve.Category = append(ve.Category, CatRef{Target: b.B.Target, Bid: b})
		}
	}
}

func (ix *MarketIndex) unlinkBid(c *CampEntry, b *BidEntry) {
	switch b.B.TargetType {
	case TargetProduct:
		if l := removePtr(ix.product[b.B.Target], b); len(l) > 0 {
			ix.product[b.B.Target] = l
		} else {
			delete(ix.product, b.B.Target)
		}
	case TargetKeyword:
		if l := removePtr(ix.keyword[b.B.Target], b); len(l) > 0 {
			ix.keyword[b.B.Target] = l
		} else {
			delete(ix.keyword, b.B.Target)
		}
	case TargetCategory:
		if c.Known {
			if ve := ix.vendors[c.C.VendorID]; ve != nil {
				ve.Category = removeCat(ve.Category, b)
			}
		}
	}
}
