package auction

import (
	"math"
	"slices"

	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/entityref"
)

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
	// Look every id up first, in passes of independent loads that leave
	// each candidate's entry and id in cache (index.Market.Products), then
	// read the products.
	var touched uint64
	st.found, touched = a.ix.Products(st.ids[lo:hi], st.found[:0])
	st.touched += int(touched & 1)
	for j, r := range st.found {
		k := lo + j
		p := a.ix.ProductAt(r)
		if p == nil || !p.Known() || !p.Active() || len(p.Vendors()) == 0 {
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
