package auction

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/consent"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/money"

	"github.com/uber/h3-go/v4"
)

// slots validates a required slot count (`slots` or `winners`).
func (p *parser) slots(sp jsontext.Span, i int, field string, dst *int) *ValidationError {
	if !p.Present(sp) {
		return fail(CodeMissingSlots, i, fld(field), "is required")
	}
	v, integral, ok := p.integer(sp)
	switch {
	case !ok || !integral:
		return fail(CodeBadRequest, i, fld(field), "must be an integer")
	case v < MinSlots:
		return fail(CodeTooFewSlots, i, fld(field), "must be at least %d", MinSlots)
	case v > MaxSlots:
		return fail(CodeBadRequest, i, fld(field), "must be at most %d", MaxSlots)
	}
	*dst = int(v)
	return nil
}

// placementInt validates an integer placementId (1..8).
func (p *parser) placementInt(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	v, integral, ok := p.integer(sp)
	switch {
	case !ok:
		return fail(CodeBadRequest, i, fld("placementId"), "must be an integer")
	case !integral || v < MinPlacementID || v > MaxPlacementID:
		return fail(CodeInvalidPlacementID, i, fld("placementId"), "must be an integer from %d to %d", MinPlacementID, MaxPlacementID)
	}
	r.PlacementID = int(v)
	return nil
}

// common validates consent, opaqueUserId and page. When the shopper's
// consent denies ad storage or personalisation, opaqueUserId is validated and
// dropped: the auction runs and is recorded without its shopper, so that no
// per-shopper targeting (segments) applies and nothing of it is stored.
func (p *parser) common(f *[numAuctionFields]jsontext.Span, i int, r *Request) *ValidationError {
	denied, bad := consent.Denied(&p.Scanner, f[aConsent])
	if bad != nil {
		path := fld("consent")
		if bad.Field != "" {
			path = fld("consent." + bad.Field)
		}
		return fail(CodeBadRequest, i, path, "%s", bad.Message)
	}
	dst := &r.OpaqueUserID
	if denied {
		dst = nil
	}
	if err := p.str(f[aOpaqueUserID], i, fld("opaqueUserId"), MaxOpaqueUserIDLen, CodeInvalidOpaqueUserID, dst); err != nil {
		return err
	}
	return p.page(f[aPage], i, r)
}

func (p *parser) experimentVariant(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return fail(CodeBadRequest, i, fld("experimentVariant"), "must be a string")
	}
	if p.emptyString(sp) {
		return nil
	}
	if r.Kind != KindListings {
		return fail(CodeNoListingExperimentVariant, i, fld("experimentVariant"), "experiment variants are only for sponsored listings auctions")
	}
	return p.str(sp, i, fld("experimentVariant"), MaxExperimentVariantLen, CodeExperimentVariantTooLong, &r.ExperimentVariant)
}

func (p *parser) demandSources(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '[' {
		return fail(CodeBadRequest, i, fld("demandSources"), "must be an array")
	}
	if p.emptyArray(sp) {
		return nil
	}
	if r.Kind != KindListings {
		return fail(CodeInvalidExternalDemandAdType, i, fld("demandSources"), "external demand is only for listings auctions")
	}
	return fail(CodeUnauthorizedExternalDemand, i, fld("demandSources"), "external demand is not configured for this marketplace (Endcap does not run external demand)")
}

// products validates a Products object (`ids`, `qualityScores`, `prices`);
// pre is "" or "triggers.".
func (p *parser) products(sp jsontext.Span, i int, pre string, r *Request) *ValidationError {
	var f [3]jsontext.Span
	if given, err := p.object(sp, i, fpath{pre: pre, field: "products", k1: -1, k2: -1}, productsNames, f[:]); !given {
		return err
	}
	idsPath := fpath{pre: pre, field: "products.ids", k1: -1, k2: -1}
	ids := f[0]
	if !p.Present(ids) {
		return fail(CodeNoProducts, i, idsPath, "is required: at least one product id")
	}
	if err := p.array(ids, i, idsPath, &p.list, &productIDsArray); err != nil {
		return err
	}
	n := len(p.list)
	l := idLists.Get().(*[]string)
	if cap(*l) < n || n > maxPooledIDList {
		*l = make([]string, 0, n)
	}
	out := (*l)[:n]
	if n <= maxPooledIDList {
		r.idList = l
	}
	if err := p.stringList(p.list, i, idsPath, MaxIDLen, CodeBadRequest, out); err != nil {
		return err
	}
	r.ProductIDs = out

	if sp := f[1]; p.Present(sp) {
		path := fpath{pre: pre, field: "products.qualityScores", k1: -1, k2: -1}
		if err := p.sameLength(sp, i, path, n); err != nil {
			return err
		}
		qs := make([]float64, n)
		for k, esp := range p.list {
			if err := p.qualityScore(esp, i, &path, k, &qs[k]); err != nil {
				return err
			}
		}
		r.QualityScores = qs
	}
	if sp := f[2]; p.Present(sp) {
		path := fpath{pre: pre, field: "products.prices", k1: -1, k2: -1}
		if err := p.sameLength(sp, i, path, n); err != nil {
			return err
		}
		pr := make([]int64, n)
		for k, esp := range p.list {
			if err := p.price(esp, i, path.el(k), &pr[k]); err != nil {
				return err
			}
		}
		r.PricesMicros = pr
	}
	return nil
}

// sameLength checks that the value at sp is an array of n elements and leaves
// their spans in p.list.
func (p *parser) sameLength(sp jsontext.Span, i int, path fpath, n int) *ValidationError {
	if p.B[sp.Lo] != '[' {
		return fail(CodeBadRequest, i, path, "must be an array of numbers")
	}
	var over bool
	p.list, over = p.Elements(sp.Lo, p.list[:0], n)
	if over || len(p.list) != n {
		return fail(CodeProductInfoMismatch, i, path, "must have one item per product id (%d)", n)
	}
	return nil
}

// qualityScore converts the quality score at sp, element k of path (k < 0:
// path itself), into *dst: a JSON number in (0, 1] (after rounding to the
// nearest float64).
func (p *parser) qualityScore(sp jsontext.Span, i int, path *fpath, k int, dst *float64) *ValidationError {
	num := p.B[sp.Lo:sp.Hi]
	if !jsontext.IsNumberStart(num[0]) {
		return fail(CodeBadRequest, i, path.elem(k), "must be a number")
	}
	if num[0] != '-' {
		if v, err := strconv.ParseFloat(string(num), 64); err == nil && v > 0 && v <= 1 {
			*dst = v
			return nil
		}
	}
	return fail(CodeInvalidQualityScore, i, path.elem(k), "must be greater than 0 and at most 1")
}

// price converts a price exactly from its decimal text to micro-units,
// rounding half away from zero after the sixth decimal.
func (p *parser) price(sp jsontext.Span, i int, path fpath, dst *int64) *ValidationError {
	if !jsontext.IsNumberStart(p.B[sp.Lo]) {
		return fail(CodeBadRequest, i, path, "must be a number")
	}
	d := money.Scale(p.B[sp.Lo:sp.Hi], 6, MaxPriceMicros)
	switch {
	case d.Zero || d.Neg:
		return fail(CodeNonPositivePrice, i, path, "must be greater than 0")
	case d.Over:
		return fail(CodeBadRequest, i, path, "must be at most %d", MaxPriceMicros/1_000_000)
	case d.Mag == 0:
		return fail(CodeBadRequest, i, path, "must be at least 0.0000005 (prices are kept to the micro-unit)")
	}
	*dst = int64(d.Mag)
	return nil
}

// category validates an AuctionCategory: exactly one of id, ids,
// disjunctions; pre is "" or "triggers.".
func (p *parser) category(sp jsontext.Span, i int, pre string, r *Request) *ValidationError {
	path := fpath{pre: pre, field: "category", k1: -1, k2: -1}
	var f [3]jsontext.Span
	if given, err := p.object(sp, i, path, categoryNames, f[:]); !given {
		return err
	}
	n := 0
	for _, s := range f {
		if p.Present(s) {
			n++
		}
	}
	if n != 1 {
		return fail(CodeInvalidCategory, i, path, "exactly one of id, ids, disjunctions must be set")
	}
	c := new(CategoryFilter)
	switch {
	case p.Present(f[0]):
		path.field = "category.id"
		if p.B[f[0].Lo] != '"' {
			return fail(CodeBadRequest, i, path, "must be a string")
		}
		if err := p.categoryID(f[0], i, path, &c.ID); err != nil {
			return err
		}
	case p.Present(f[1]):
		path.field = "category.ids"
		ids, err := p.categoryList(f[1], i, path, &p.list)
		if err != nil {
			return err
		}
		c.IDs = ids
	default:
		path.field = "category.disjunctions"
		if err := p.array(f[2], i, path, &p.list2, &disjunctionsArray); err != nil {
			return err
		}
		ds := make([][]string, len(p.list2))
		for k, dsp := range p.list2 {
			ids, err := p.categoryList(dsp, i, path.el(k), &p.list)
			if err != nil {
				return err
			}
			ds[k] = ids
		}
		c.Disjunctions = ds
	}
	r.Category = c
	return nil
}

// categoryList validates an array of 1..5 category ids.
func (p *parser) categoryList(sp jsontext.Span, i int, path fpath, list *[]jsontext.Span) ([]string, *ValidationError) {
	if err := p.array(sp, i, path, list, &categoryIDsArray); err != nil {
		return nil, err
	}
	out := make([]string, len(*list))
	if err := p.stringList(*list, i, path, MaxIDLen, CodeInvalidCategory, out); err != nil {
		return nil, err
	}
	return out, nil
}

// categoryID validates one category id (at sp, known to be a string).
func (p *parser) categoryID(sp jsontext.Span, i int, path fpath, dst *string) *ValidationError {
	lo, hi := p.decode(sp)
	if lo == hi {
		return fail(CodeInvalidCategory, i, path, "must not be empty")
	}
	if err := p.checkLen(lo, hi, MaxIDLen, CodeBadRequest, i, path, -1); err != nil {
		return err
	}
	p.keep(dst, lo, hi)
	return nil
}

// searchQuery validates a search query: trimmed of white space, blank counts
// as absent, at most MaxSearchQueryWords words and MaxStringLen characters.
// pre is "" or "triggers.".
// given reports a non-blank query.
func (p *parser) searchQuery(sp jsontext.Span, i int, pre string, r *Request) (given bool, err *ValidationError) {
	if !p.Present(sp) {
		return false, nil
	}
	path := fpath{pre: pre, field: "searchQuery", k1: -1, k2: -1}
	if p.B[sp.Lo] != '"' {
		return false, fail(CodeBadRequest, i, path, "must be a string")
	}
	lo, hi := p.decode(sp)
	for lo < hi {
		c, size := utf8.DecodeRune(p.arena[lo:hi])
		if !unicode.IsSpace(c) {
			break
		}
		lo += size
	}
	for hi > lo {
		c, size := utf8.DecodeLastRune(p.arena[lo:hi])
		if !unicode.IsSpace(c) {
			break
		}
		hi -= size
	}
	if lo == hi {
		return false, nil
	}
	words, inWord := 0, false
	for j := lo; j < hi; {
		c, size := utf8.DecodeRune(p.arena[j:hi])
		j += size
		if unicode.IsSpace(c) {
			inWord = false
		} else if !inWord {
			inWord = true
			if words++; words > MaxSearchQueryWords {
				return false, fail(CodeTooManySearchQueryWords, i, path, "must have at most %d words", MaxSearchQueryWords)
			}
		}
	}
	if err := p.checkLen(lo, hi, MaxStringLen, CodeBadRequest, i, path, -1); err != nil {
		return false, err
	}
	p.keep(&r.SearchQuery, lo, hi)
	return true, nil
}

// geo validates geoTargeting: an object with exactly one of location or
// locations, or a bare string (read as location).
func (p *parser) geo(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	var f [2]jsontext.Span
	locPath := fld("geoTargeting.location")
	switch p.B[sp.Lo] {
	case '"':
		f[0] = sp
		locPath = fld("geoTargeting")
	case '{':
		p.Fields(sp.Lo, geoNames, f[:])
	default:
		return fail(CodeBadRequest, i, fld("geoTargeting"), "must be an object")
	}
	hasLoc, hasLocs := p.Present(f[0]), p.Present(f[1])
	if hasLoc == hasLocs {
		return fail(CodeInvalidGeoTargeting, i, fld("geoTargeting"), "exactly one of location or locations must be set")
	}
	if hasLoc {
		if p.B[f[0].Lo] != '"' {
			return fail(CodeBadRequest, i, locPath, "must be a string")
		}
		if p.emptyString(f[0]) {
			return fail(CodeInvalidGeoTargeting, i, locPath, "must not be empty")
		}
		return p.str(f[0], i, locPath, MaxStringLen, CodeBadRequest, &r.Location)
	}
	path := fld("geoTargeting.locations")
	if err := p.array(f[1], i, path, &p.list, &locationsArray); err != nil {
		return err
	}
	var cells [MaxLocations]uint64
	out := make([]string, 0, len(p.list))
	for k, esp := range p.list {
		if p.B[esp.Lo] != '"' {
			return fail(CodeBadRequest, i, path.el(k), "must be a string")
		}
		c, ok := parseCell(p.UnquoteTmp(esp))
		if !ok {
			return fail(CodeInvalidLocationCell, i, path.el(k), "must be a valid H3 cell index in hexadecimal")
		}
		cells[k] = c
		if k > 0 && cells[0] == c {
			continue // the same cell twice
		}
		out = out[:len(out)+1]
		lo := len(p.arena)
		p.arena = strconv.AppendUint(p.arena, c, 16)
		p.keep(&out[len(out)-1], lo, len(p.arena))
	}
	r.Locations = out
	return nil
}

// parseCell parses an H3 cell index written in 1..16 hexadecimal digits
// (either case, no prefix) and checks that it is a valid cell.
func parseCell(s []byte) (uint64, bool) {
	if len(s) == 0 || len(s) > 16 {
		return 0, false
	}
	var x uint64
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		x = x<<4 | uint64(c)
	}
	return x, h3.Cell(x).IsValid()
}

func (p *parser) page(sp jsontext.Span, i int, r *Request) *ValidationError {
	var f [3]jsontext.Span
	if given, err := p.object(sp, i, fld("page"), pageNames, f[:]); !given {
		return err
	}
	pg := new(Page)
	if !p.Present(f[0]) {
		return fail(CodeBadRequest, i, fld("page.type"), "is required")
	}
	t, err := p.enum(f[0], i, fld("page.type"), pageTypes)
	if err != nil {
		return err
	}
	pg.Type = t
	if !p.Present(f[1]) {
		return fail(CodeBadRequest, i, fld("page.pageId"), "is required")
	}
	if p.emptyString(f[1]) {
		return fail(CodeBadRequest, i, fld("page.pageId"), "must not be empty")
	}
	if err := p.str(f[1], i, fld("page.pageId"), MaxStringLen, CodeBadRequest, &pg.ID); err != nil {
		return err
	}
	if v := f[2]; p.Present(v) {
		path := fld("page.value")
		switch p.B[v.Lo] {
		case '"':
			pg.Value = make([]string, 1)
			if err := p.str(v, i, path, MaxStringLen, CodeBadRequest, &pg.Value[0]); err != nil {
				return err
			}
		case '[':
			if err := p.array(v, i, path, &p.list, &pageValuesArray); err != nil {
				return err
			}
			pg.Value = make([]string, len(p.list))
			if err := p.stringList(p.list, i, path, MaxStringLen, "", pg.Value); err != nil {
				return err
			}
		default:
			return fail(CodeBadRequest, i, path, "must be a string or a non-empty array of strings")
		}
	}
	r.Page = pg
	return nil
}

func (p *parser) filter(sp jsontext.Span, i int, r *Request) *ValidationError {
	var f [3]jsontext.Span
	if given, err := p.object(sp, i, fld("filter"), filterNames, f[:]); !given {
		return err
	}
	fl := &Filter{Operator: "and"}
	if s := f[0]; p.Present(s) {
		if p.B[s.Lo] != '"' {
			return fail(CodeBadRequest, i, fld("filter.operator"), "must be a string")
		}
		switch string(p.UnquoteTmp(s)) {
		case "and":
		case "or":
			fl.Operator = "or"
		default:
			return fail(CodeBadRequest, i, fld("filter.operator"), "the filter operation must be and or or")
		}
	}
	if s := f[1]; p.Present(s) {
		path := fld("filter.attributes")
		if err := p.array(s, i, path, &p.list, &attributesArray); err != nil {
			return err
		}
		fl.Attributes = make([]Attribute, len(p.list))
		for k, esp := range p.list {
			if p.B[esp.Lo] != '"' {
				return fail(CodeBadRequest, i, path.el(k), "must be a string")
			}
			lo, hi := p.decode(esp)
			colon := lo + bytes.IndexByte(p.arena[lo:hi], ':')
			if colon <= lo || colon == hi-1 {
				return fail(CodeBadRequest, i, path.el(k), "a filter attribute must be key:value with a non-empty key and value")
			}
			if utf8.RuneCount(p.arena[lo:colon]) > MaxAttributePartLen || utf8.RuneCount(p.arena[colon+1:hi]) > MaxAttributePartLen {
				return fail(CodeBadRequest, i, path.el(k), "the key and the value of a filter attribute must be at most %d characters each", MaxAttributePartLen)
			}
			p.keep(&fl.Attributes[k].Key, lo, colon)
			p.keep(&fl.Attributes[k].Value, colon+1, hi)
		}
	}
	if s := f[2]; p.Present(s) {
		path := fld("filter.promotions")
		if err := p.array(s, i, path, &p.list, &promotionsArray); err != nil {
			return err
		}
		fl.Promotions = make([]string, len(p.list))
		if err := p.stringList(p.list, i, path, MaxIDLen, CodeBadRequest, fl.Promotions); err != nil {
			return err
		}
	}
	if fl.Attributes == nil && fl.Promotions == nil {
		return fail(CodeBadRequest, i, fld("filter"), "a filter needs attributes or promotions")
	}
	r.Filter = fl
	return nil
}
