package auction

import (
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/validation"
)

// The request*.go files decode and validate an auction request body. The
// rules, the decisions where the contracts are silent and the order of the
// checks are in docs/reference/auctions-request.md; keep the two in step.
//
// The body is checked once by jsontext.Scanner.Valid (what json.Valid
// accepts, faster, less the strings that break the text rule of
// jsontext.StringProblem), so that a syntax error anywhere is invalid_json
// whatever else is wrong; that pass also records where every array and
// object ends, so that skipping one later costs O(1) instead of a second
// read of, say, 10,000 product ids. After that the parser trusts the JSON
// grammar and walks the bytes with the scanner, as ingest/parse.go does for
// /v2/events: each object is scanned once for the byte spans of its known
// keys (the last of duplicate keys wins, keys are case-sensitive, unknown
// keys are skipped), and the known values are then validated in a fixed
// order, so that the first error reported does not depend on the order of
// keys in the body. Strings are decoded straight from the body into one
// arena, which every string of the request shares and Release hands back for
// the next request. Money is converted exactly from its decimal text. No
// reflection: a 500-id auction costs 4 allocations.

// ---- field tables ----

var (
	topNames = []string{"auctions"}

	auctionNames = []string{"type", "slots", "slotId", "device", "products", "category", "searchQuery",
		"geoTargeting", "placementId", "opaqueUserId", "page", "filter", "experimentVariant", "demandSources",
		"winners", "triggers", "travelContext", "consent"}
	productsNames      = []string{"ids", "qualityScores", "prices"}
	categoryNames      = []string{"id", "ids", "disjunctions"}
	geoNames           = []string{"location", "locations"}
	pageNames          = []string{"type", "pageId", "value"}
	filterNames        = []string{"operator", "attributes", "promotions"}
	triggerNames       = []string{"products", "category", "searchQuery"}
	travelProductNames = []string{"id", "variationID", "qualityScore", "price"}
	travelCatNames     = []string{"singleCategory"}
	singleCatNames     = []string{"id"}
	travelCtxNames     = []string{"site", "passengers", "travelStartDate", "travelEndDate", "travelerType",
		"pageName", "platform", "route", "flightType"}
)

const (
	aType = iota
	aSlots
	aSlotID
	aDevice
	aProducts
	aCategory
	aSearchQuery
	aGeo
	aPlacementID
	aOpaqueUserID
	aPage
	aFilter
	aExperimentVariant
	aDemandSources
	aWinners
	aTriggers
	aTravelContext
	aConsent
	numAuctionFields
)

const (
	tcSite = iota
	tcPassengers
	tcStart
	tcEnd
	tcTravelerType
	tcPageName
	tcPlatform
	tcRoute
	tcFlightType
	numTravelCtxFields
)

var (
	pageTypes     = []string{"home", "category", "PDP", "search", "cart", "other"}
	travelerTypes = []string{"family", "group", "solo", "couple"}
)

// The arrays of the request (parser.array).
var (
	productIDsArray = arrayRule{of: "strings", max: MaxProducts, tooManyCode: CodeTooManyProducts, tooMany: "must have at most %d product ids",
		noneCode: CodeNoProducts, none: "must not be empty: at least one product id"}
	travelProductsArray = arrayRule{of: "objects", max: MaxProducts, tooManyCode: CodeTooManyProducts, tooMany: "must have at most %d products",
		noneCode: CodeNoProducts, none: "must not be empty: at least one product"}
	categoryIDsArray = arrayRule{of: "strings", max: MaxCategoryItems, tooManyCode: CodeInvalidCategory, tooMany: "must have at most %d category ids",
		noneCode: CodeInvalidCategory, none: "must not be empty"}
	disjunctionsArray = arrayRule{of: "arrays of strings", max: MaxCategoryItems, tooManyCode: CodeInvalidCategory, tooMany: "must have at most %d disjunctions",
		noneCode: CodeInvalidCategory, none: "must not be empty"}
	locationsArray = arrayRule{of: "strings", max: MaxLocations, tooManyCode: CodeTooManyLocations, tooMany: "must have at most %d locations",
		noneCode: CodeInvalidGeoTargeting, none: "must not be empty"}
	pageValuesArray = arrayRule{of: "strings", max: MaxPageValues, tooManyCode: CodeBadRequest, tooMany: "must have at most %d items",
		noneCode: CodeBadRequest, none: "must not be empty"}
	attributesArray = arrayRule{of: "strings", max: MaxFilterAttributes, tooManyCode: CodeBadRequest,
		tooMany: "the number of filter attributes must be from 1 to %d"}
	promotionsArray = arrayRule{of: "strings", max: MaxFilterPromotions, tooManyCode: CodeBadRequest,
		tooMany: "the number of filter promotions must be from 1 to %d"}
)

// ---- parser ----

// strFixup points a string at its bytes in the request's string arena.
type strFixup struct {
	dst    *string
	lo, hi int
}

// listFixup points the elements of a string slice at the arena ranges
// offs[off+2k], offs[off+2k+1] (a pointer-free list for big id arrays).
type listFixup struct {
	dst []string
	off int
}

type parser struct {
	jsontext.Scanner
	arena []byte      // decoded strings of the request, *box's array
	box   *[]byte     // from stringArenas; nil once commit handed it to requests
	fix   []strFixup  // invariant: fix[len(fix):cap(fix)] is zeroed
	lists []listFixup // invariant: lists[len(lists):cap(lists)] is zeroed
	offs  []int
	list  []jsontext.Span // element spans of an array
	list2 []jsontext.Span // element spans of a nested array
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// idLists holds the arrays of Request.ProductIDs between requests (an
// auction of 500 products would otherwise allocate 8 KB for the list, which
// the engine copies and nothing keeps).
var idLists = sync.Pool{New: func() any { return new([]string) }}

// maxPooledIDList is the longest list idLists keeps.
const maxPooledIDList = MaxProducts

// stringArenas holds, between requests, the arenas that requests' strings
// point into. A 500-product auction's strings are about 6 KB, a third of the
// garbage an auction makes over HTTP, and garbage is what sets how often the
// API collects (docs/design/performance.md). The strings are not copied out of the
// arena: the requests own it until Release hands it back.
var stringArenas = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledArena is the largest arena stringArenas keeps.
const maxPooledArena = 1 << 20

// Release hands what ParseAuctions allocated for reqs back for reuse: the
// lists of product ids and the bytes of every string of the requests. Call
// it last, once nothing reads the requests nor anything made from them:
// the results and records of Engine.Run share their strings (a winner's id
// is the request's). It clears the bytes, so that a string read after its
// release reads zeros, never another request's data. Not calling it is
// safe: the garbage collector then frees them.
func Release(reqs []Request) {
	if len(reqs) > 0 && reqs[0].arena != nil {
		a := reqs[0].arena
		reqs[0].arena = nil
		clear(*a)
		if cap(*a) <= maxPooledArena {
			*a = (*a)[:0]
			stringArenas.Put(a)
		}
	}
	for i := range reqs {
		r := &reqs[i]
		if l := r.idList; l != nil {
			clear(r.ProductIDs) // keep no request's strings alive
			*l = r.ProductIDs[:0]
			idLists.Put(l)
		}
		r.ProductIDs, r.idList = nil, nil
	}
}

func (p *parser) release() {
	clear(p.fix) // do not keep the caller's requests alive
	p.fix = p.fix[:0]
	clear(p.lists)
	p.lists = p.lists[:0]
	p.Scanner.Release()
	if p.box != nil { // not handed to requests (an invalid one): keep it
		*p.box = p.arena[:0]
		if cap(p.arena) > maxPooledArena {
			*p.box = nil
		}
	}
	p.arena = nil
	if cap(p.fix) > 1<<16 {
		p.fix = nil
	}
	if cap(p.list) > 1<<16 {
		p.list = nil
	}
	if cap(p.offs) > 1<<17 {
		p.offs = nil
	}
	parserPool.Put(p)
}

// commit gives every string of the requests its final value, a range of
// the arena, and hands the arena to reqs (see Release).
func (p *parser) commit(reqs []Request) {
	if len(p.arena) == 0 || len(p.fix) == 0 && len(p.lists) == 0 {
		return
	}
	s := unsafe.String(unsafe.SliceData(p.arena), len(p.arena))
	*p.box = p.arena
	reqs[0].arena, p.box, p.arena = p.box, nil, nil
	for _, f := range p.fix {
		*f.dst = s[f.lo:f.hi]
	}
	clear(p.fix)
	p.fix = p.fix[:0]
	for _, l := range p.lists {
		offs := p.offs[l.off : l.off+2*len(l.dst)]
		for k := range l.dst {
			l.dst[k] = s[offs[2*k]:offs[2*k+1]]
		}
	}
	clear(p.lists)
	p.lists = p.lists[:0]
}

// ParseAuctions decodes and validates the body of one of the three auction
// endpoints. On success it returns one Request per auction, in request order.
// Any invalid part rejects the whole request with a *ValidationError whose
// Message names the field by its JSON path; the first error in the order of
// docs/reference/auctions-request.md is reported.
func ParseAuctions(body []byte, kind EndpointKind) ([]Request, *ValidationError) {
	if kind != Auctions && kind != SponsoredBrand && kind != Travel {
		return nil, invalid(CodeBadRequest, "", "unknown auction endpoint")
	}
	start := jsontext.SkipWS(body, 0)
	if start == len(body) {
		return nil, invalid(CodeEmptyRequest, "", "request body is empty")
	}
	p := parserPool.Get().(*parser)
	defer p.release()
	if p.box == nil {
		p.box = stringArenas.Get().(*[]byte)
	}
	if cap(*p.box) < len(body) { // decoded, the strings are never longer than the body
		*p.box = make([]byte, 0, len(body))
	}
	p.arena, p.offs = (*p.box)[:0], p.offs[:0]
	if !p.Valid(body) {
		return nil, validation.RejectJSON(body)
	}
	if body[start] != '{' {
		return nil, invalid(CodeBadRequest, "", "request body must be a JSON object")
	}

	var top [1]jsontext.Span
	p.Fields(start, topNames, top[:])
	sp := top[0]
	if !p.Present(sp) {
		return nil, invalid(CodeMissingAuctions, "auctions", "is required: at least one auction")
	}
	if body[sp.Lo] != '[' {
		return nil, invalid(CodeBadRequest, "auctions", "must be an array")
	}
	var elems [MaxAuctions]jsontext.Span
	list, over := p.Elements(sp.Lo, elems[:0], MaxAuctions)
	if over {
		return nil, invalid(CodeTooManyAuctions, "auctions", "must have at most %d auctions", MaxAuctions)
	}
	if len(list) == 0 {
		return nil, invalid(CodeMissingAuctions, "auctions", "must not be empty: at least one auction")
	}
	reqs := make([]Request, len(list))
	for i, asp := range list {
		if body[asp.Lo] != '{' {
			return nil, fail(CodeBadRequest, i, fld(""), "must be an object")
		}
		var f [numAuctionFields]jsontext.Span
		p.Fields(asp.Lo, auctionNames, f[:])
		var err *ValidationError
		switch kind {
		case Auctions:
			err = p.auction(&f, i, &reqs[i])
		case SponsoredBrand:
			err = p.sponsoredBrand(&f, i, &reqs[i])
		case Travel:
			err = p.travel(&f, i, &reqs[i])
		}
		if err != nil {
			return nil, err
		}
	}
	p.commit(reqs)
	return reqs, nil
}

// fpath is the JSON path of a value below auctions[i]: pre+field, then [k1],
// then .sub, then [k2] (an index < 0 and an empty string are left out). It is
// a value, so passing one costs nothing: the string is only built by at(),
// when an error is reported.
type fpath struct {
	pre, field string
	k1         int
	sub        string
	k2         int
}

// fld is the path of a field of the auction ("" for the auction itself).
func fld(field string) fpath { return fpath{field: field, k1: -1, k2: -1} }

// el is the path of element k of the array at f.
func (f fpath) el(k int) fpath {
	if f.k1 < 0 && f.sub == "" {
		f.k1 = k
	} else {
		f.k2 = k
	}
	return f
}

// elem is el(k), or f itself when k < 0.
func (f *fpath) elem(k int) fpath {
	if k < 0 {
		return *f
	}
	return f.el(k)
}

// dot is the path of field sub of the object at f (one level only).
func (f fpath) dot(sub string) fpath {
	f.sub = sub
	return f
}

func (f fpath) at(i int) string {
	var sb strings.Builder
	sb.WriteString("auctions[")
	sb.WriteString(strconv.Itoa(i))
	sb.WriteByte(']')
	if f.pre != "" || f.field != "" {
		sb.WriteByte('.')
		sb.WriteString(f.pre)
		sb.WriteString(f.field)
	}
	if f.k1 >= 0 {
		sb.WriteByte('[')
		sb.WriteString(strconv.Itoa(f.k1))
		sb.WriteByte(']')
	}
	if f.sub != "" {
		sb.WriteByte('.')
		sb.WriteString(f.sub)
	}
	if f.k2 >= 0 {
		sb.WriteByte('[')
		sb.WriteString(strconv.Itoa(f.k2))
		sb.WriteByte(']')
	}
	return sb.String()
}

// fail builds the error of auction i at path f.
func fail(code string, i int, f fpath, format string, args ...any) *ValidationError {
	return invalid(code, f.at(i), format, args...)
}
