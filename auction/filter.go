package auction

import (
	"bytes"
	"encoding/json"
	"slices"

	"strconv"

	"github.com/uber/h3-go/v4"
)

// The listings `filter`: which products may win, by their attributes and
// promotions (docs/design/auction-ranking.md, "Filter").
//
//   - An attribute `key:value` matches a product whose `metadata` has the key
//     at its top level with that value: a string equal to it, a number or a
//     boolean whose JSON text equals it, or an array with such an element.
//     The key `brand` also matches the product's brand id or brand name
//     (when metadata has no `brand`).
//   - A promotion matches a product whose `metadata.promotions` is an array
//     holding that promotion id (or a string equal to it).
//   - operator `and` (the default): every attribute and every promotion must
//     match; `or`: at least one of them.

// passesFilter applies the request's filter to a product (cached for the
// auction). Without a filter every product passes.
func (a *auctionEnv) passesFilter(productID string) bool {
	f := a.r.Filter
	if f == nil {
		return true
	}
	if ok, seen := a.st.filterOK[productID]; seen {
		return ok
	}
	cr, found := a.e.Catalog.Creative(a.mp, productID)
	ok := found && matchFilter(f, cr.Metadata, cr.BrandID, cr.BrandName)
	a.st.filterOK[productID] = ok
	return ok
}

func matchFilter(f *Filter, metadata []byte, brandID, brandName string) bool {
	var meta map[string]json.RawMessage
	if len(metadata) > 0 {
		_ = json.Unmarshal(metadata, &meta) // not an object: no attribute matches
	}
	any, all := false, true
	test := func(ok bool) {
		any = any || ok
		all = all && ok
	}
	for _, at := range f.Attributes {
		raw, has := meta[at.Key]
		switch {
		case has:
			test(valueMatches(raw, at.Value))
		case at.Key == "brand":
			test(at.Value != "" && (at.Value == brandID || at.Value == brandName))
		default:
			test(false)
		}
	}
	for _, promo := range f.Promotions {
		raw, has := meta["promotions"]
		test(has && valueMatches(raw, promo))
	}
	if f.Operator == "or" {
		return any
	}
	return all
}

// valueMatches reports whether a JSON value is, or (an array) holds, want:
// a string equal to it, or a number or boolean whose JSON text equals it.
func valueMatches(raw json.RawMessage, want string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return false
		}
		return slices.ContainsFunc(items, func(it json.RawMessage) bool {
			it = bytes.TrimSpace(it)
			return len(it) > 0 && it[0] != '[' && it[0] != '{' && valueMatches(it, want)
		})
	case '"':
		var s string
		return json.Unmarshal(raw, &s) == nil && s == want
	case '{', 'n':
		return false
	}
	return string(raw) == want // number, true, false
}

// cellOf reads a canonical H3 cell id (the request parser validated it).
func cellOf(s string) (h3.Cell, bool) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, false
	}
	c := h3.Cell(v)
	return c, c.IsValid()
}

// formatCell writes a cell the way campaigns store them: lower-case hex.
func formatCell(c h3.Cell) string { return strconv.FormatUint(uint64(c), 16) }
