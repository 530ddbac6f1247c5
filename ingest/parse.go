package ingest

import (
	"github.com/endcap/endcap/internal/jsontext"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file decodes and validates a POST /v2/events body.
//
// The body is checked once by validJSON, which accepts what json.Valid
// accepts, several times faster (so that a syntax error anywhere is
// invalid_json, whatever else is wrong), less the strings that break the
// text rule (invalid UTF-8, unpaired surrogate escapes, \u0000; see
// jsontext.StringProblem: bad_request naming the field). After that the parser trusts the
// JSON grammar and walks the bytes by hand: every object is scanned once to
// find the byte span of each known key (last duplicate wins, keys are
// case-sensitive, unknown keys are skipped), and the known values are then
// validated in a fixed field order, so that the first error reported for a
// request does not depend on the order of keys in the body. Strings are
// decoded straight from the body; all strings kept for one event share a
// single allocation. Numbers are converted exactly from their decimal text.

// Limits of lists inside an event that neither the spec nor event.go bound.
const (
	maxCategoryIDs = 100 // placement.categoryIds
	maxPageValues  = 500 // page.value in its array form (a cart may list many products)
)

// Accepted values of the enumerated fields (case-sensitive).
var (
	entityTypes  = []string{"product", "vendor"}
	pageTypes    = []string{"home", "category", "PDP", "search", "cart", "other"}
	objectTypes  = []string{"listing", "banner"}
	deviceTypes  = []string{"desktop", "mobile"}
	channelTypes = []string{"onsite", "offsite", "instore"}
	// clickTypes holds the spec's values and those the official SDK types
	// send. A value is stored as given.
	clickTypes = []string{"product", "like", "add-to-cart", "image", "add_to_cart", "purchase_now"}
)

// Keys of the request and of its objects. The index constants below are
// positions in these lists.
var (
	topNames = []string{"impressions", "clicks", "purchases", "pageviews"}

	interactionNames = []string{"id", "occurredAt", "opaqueUserId", "resolvedBidId", "entity",
		"additionalAttribution", "placement", "page", "object", "externalCampaignId",
		"externalVendorId", "deviceType", "channel", "clickType"}
	purchaseNames  = []string{"id", "occurredAt", "opaqueUserId", "deviceType", "channel", "items"}
	pageViewNames  = []string{"id", "occurredAt", "opaqueUserId", "deviceType", "channel", "page"}
	itemNames      = []string{"productId", "unitPrice", "quantity", "vendorId"}
	placementNames = []string{"path", "position", "page", "pageSize", "productId", "categoryIds", "searchQuery"}
	pageNames      = []string{"type", "pageId", "value"}
	entityNames    = []string{"id", "type"}
	objectNames    = []string{"type", "assetId", "clickType"}
)

const (
	// Shared by every event kind.
	fID = iota
	fOccurredAt
	fOpaqueUserID
	// Impressions and clicks (interactionNames).
	fResolvedBidID
	fEntity
	fAdditionalAttribution
	fPlacement
	fPage
	fObject
	fExternalCampaignID
	fExternalVendorID
	fDeviceType
	fChannel
	fClickType
	numInteractionFields
)

const (
	// Purchases and pageviews (purchaseNames, pageViewNames).
	fOtherDeviceType = fOpaqueUserID + 1 + iota
	fOtherChannel
	fOtherTail // items of a purchase, page of a pageview
	numOtherFields
)

const (
	fItemProductID = iota
	fItemUnitPrice
	fItemQuantity
	fItemVendorID
)

const (
	fPlPath = iota
	fPlPosition
	fPlPage
	fPlPageSize
	fPlProductID
	fPlCategoryIDs
	fPlSearchQuery
	numPlacementFields
)

// strRule says how a string field is validated.
type strRule struct {
	required bool   // absent or null is an error
	nonEmpty bool   // "" is an error; an accepted "" leaves the field empty
	max      int    // maximum length in Unicode code points
	missCode string // code when absent or empty
	maxCode  string // code when too long
}

var (
	ruleEventID      = strRule{true, true, MaxEventIDLen, CodeBadRequest, CodeBadRequest}
	ruleOpaqueUserID = strRule{true, true, MaxOpaqueUserIDLen, CodeBadRequest, CodeInvalidOpaqueUserID}
	// An empty resolvedBidId counts as absent: analytics.js sends "" from an
	// empty data-ts-resolved-bid attribute, and rejecting the event would
	// lose it (4xx is final for that client).
	ruleResolvedBid = strRule{false, false, MaxResolvedBidIDLen, CodeInvalidResolvedBidID, CodeInvalidResolvedBidID}
	ruleProductID   = strRule{true, true, MaxStringFieldLen, CodeMissingProductID, CodeBadRequest}
	ruleRequired    = strRule{true, true, MaxStringFieldLen, CodeBadRequest, CodeBadRequest}
	ruleNonEmpty    = strRule{false, true, MaxStringFieldLen, CodeBadRequest, CodeBadRequest}
	ruleOptional    = strRule{false, false, MaxStringFieldLen, CodeBadRequest, CodeBadRequest}
)

// valSpan is the byte range of one JSON value in the body. hi == 0 means the
// key was absent (no value can end at offset 0).
type valSpan struct{ lo, hi int }

// strFixup points a string field at its bytes in the event's string arena.
type strFixup struct {
	dst    *string
	lo, hi int
}

// eventExtras holds the optional objects of one impression, click or pageview,
// allocated for the whole request at once.
type eventExtras struct {
	entity      Entity
	attribution Entity
	placement   Placement
	page        Page
	object      Object
	pageValue   [1]string // backing array of Page.Value in the string form
}

type evParser struct {
	b     []byte
	now   int64
	elems [4][]valSpan // element spans of the four arrays
	over  [4]bool      // an array has more than MaxEventsPerArray elements
	list  []valSpan    // element spans of a nested array
	arena []byte       // decoded strings of the event being parsed
	fix   []strFixup
	tmp   []byte // scratch for keys, enum values and times that contain escapes
}

var evParserPool = sync.Pool{New: func() any { return new(evParser) }}

// ParseRequest decodes and validates a POST /v2/events body. On success it returns every event
// (in request order: impressions, clicks, purchases, pageviews) with MarketplaceID set, ReceivedAtMs = nowMs.
// Any invalid part rejects the whole request with a *ValidationError (Code = wire errCode, Message names the
// field by JSON path, e.g. "impressions[3].opaqueUserId: must be at most 90 characters").
func ParseRequest(body []byte, marketplaceID string, nowMs int64) ([]Event, *ValidationError) {
	start := jsontext.SkipWS(body, 0)
	if start == len(body) {
		return nil, invalid(CodeEmptyRequest, "", "request body is empty")
	}
	if body[start] != '{' {
		if !validJSON(body) {
			return nil, invalidJSON(body)
		}
		return nil, invalid(CodeBadRequest, "", "request body must be a JSON object")
	}

	p := evParserPool.Get().(*evParser)
	defer p.release()
	p.b = body
	p.now = nowMs

	// One pass checks the syntax of the whole body and collects the
	// elements of the four arrays.
	var top [4]valSpan
	end, ok := p.scanTop(start, &top)
	if !ok || jsontext.SkipWS(body, end) != len(body) {
		return nil, invalidJSON(body)
	}

	// Shape errors are reported when their array's turn comes, to keep the
	// order of errors.
	var shapeErr [4]*ValidationError
	found := false
	total, withExtras := 0, 0
	for k, sp := range top {
		if !p.present(sp) {
			continue
		}
		found = true
		if p.b[sp.lo] != '[' {
			shapeErr[k] = invalid(CodeBadRequest, topNames[k], "must be an array")
			break
		}
		if p.over[k] {
			shapeErr[k] = invalid(CodeBadRequest, topNames[k], "must have at most %d items", MaxEventsPerArray)
			break
		}
		total += len(p.elems[k])
		if k != 2 {
			withExtras += len(p.elems[k])
		}
	}
	if !found {
		return nil, invalid(CodeEmptyRequest, "", "at least one of impressions, clicks, purchases, pageviews is required")
	}

	var events []Event
	var ext []eventExtras
	if total > 0 {
		events = make([]Event, total)
	} else {
		events = []Event{}
	}
	if withExtras > 0 {
		ext = make([]eventExtras, withExtras)
	}
	n, nx := 0, 0
	for k := range top {
		if shapeErr[k] != nil {
			return nil, shapeErr[k]
		}
		for i, sp := range p.elems[k] {
			l := evPath{arr: topNames[k], idx: i, oidx: -1}
			ev := &events[n]
			n++
			ev.Kind = Kind(k + 1)
			ev.MarketplaceID = marketplaceID
			ev.ReceivedAtMs = nowMs
			if p.b[sp.lo] != '{' {
				return nil, invalid(CodeBadRequest, l.at(""), "must be an object")
			}
			p.arena = p.arena[:0]
			var err *ValidationError
			switch ev.Kind {
			case KindImpression, KindClick:
				err = p.interaction(sp, l, ev, &ext[nx])
				nx++
			case KindPurchase:
				err = p.purchase(sp, l, ev)
			case KindPageView:
				err = p.pageView(sp, l, ev, &ext[nx])
				nx++
			}
			if err != nil {
				return nil, err
			}
			p.commit()
		}
	}
	return events, nil
}

func (p *evParser) release() {
	clear(p.fix[:cap(p.fix)]) // do not keep the caller's events alive
	p.fix = p.fix[:0]
	p.b = nil
	if cap(p.arena) > 64<<10 {
		p.arena = nil
	}
	if cap(p.tmp) > 64<<10 {
		p.tmp = nil
	}
	evParserPool.Put(p)
}

// commit gives the strings of the event just parsed their final value: one
// allocation holds them all.
func (p *evParser) commit() {
	if len(p.fix) == 0 {
		return
	}
	s := string(p.arena)
	for _, f := range p.fix {
		*f.dst = s[f.lo:f.hi]
	}
	clear(p.fix)
	p.fix = p.fix[:0]
}

// invalidJSON explains why the syntax check refused body: a syntax error
// (invalid_json), or a string that the JSON grammar accepts and the text
// rule does not (jsontext.StringProblem: bad_request naming the field).
func invalidJSON(body []byte) *ValidationError {
	r := jsontext.Explain(body)
	if r.Syntax {
		return invalid(CodeInvalidJSON, r.Path, "%s", r.Msg)
	}
	return invalid(CodeBadRequest, r.Path, "%s", r.Msg)
}

// evPath is the JSON path of an event, or of an object or array element nested
// in it; paths are only built when an error is reported.
type evPath struct {
	arr  string // impressions, clicks, purchases, pageviews
	idx  int
	obj  string // nested object or array field, "" for the event itself
	oidx int    // index in the nested array, -1 for an object
}

func (l evPath) at(field string) string {
	var sb strings.Builder
	sb.WriteString(l.arr)
	sb.WriteByte('[')
	sb.WriteString(strconv.Itoa(l.idx))
	sb.WriteByte(']')
	if l.obj != "" {
		sb.WriteByte('.')
		sb.WriteString(l.obj)
		if l.oidx >= 0 {
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(l.oidx))
			sb.WriteByte(']')
		}
	}
	if field != "" {
		sb.WriteByte('.')
		sb.WriteString(field)
	}
	return sb.String()
}

func (l evPath) sub(obj string, idx int) evPath {
	return evPath{arr: l.arr, idx: l.idx, obj: obj, oidx: idx}
}

func elemField(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

// ---- event kinds ----

func (p *evParser) common(f []valSpan, l evPath, ev *Event) *ValidationError {
	if err := p.str(f[fID], l, "id", ruleEventID, &ev.ID); err != nil {
		return err
	}
	if err := p.occurredAt(f[fOccurredAt], l, &ev.OccurredAtMs); err != nil {
		return err
	}
	return p.str(f[fOpaqueUserID], l, "opaqueUserId", ruleOpaqueUserID, &ev.OpaqueUserID)
}

func (p *evParser) interaction(sp valSpan, l evPath, ev *Event, ex *eventExtras) *ValidationError {
	var f [numInteractionFields]valSpan
	names := interactionNames
	if ev.Kind == KindImpression {
		names = names[:fClickType] // clickType is a click field
	}
	p.fields(sp.lo, names, f[:])
	if err := p.common(f[:], l, ev); err != nil {
		return err
	}
	if err := p.str(f[fResolvedBidID], l, "resolvedBidId", ruleResolvedBid, &ev.ResolvedBidID); err != nil {
		return err
	}
	hasBid := p.nonEmptyString(f[fResolvedBidID])
	if p.present(f[fEntity]) {
		if err := p.entity(f[fEntity], l, "entity", &ex.entity); err != nil {
			return err
		}
		ev.Entity = &ex.entity
	} else if !hasBid {
		return invalid(CodeBadRequest, l.at(""), "one of resolvedBidId or entity is required")
	}
	if p.present(f[fAdditionalAttribution]) {
		if err := p.entity(f[fAdditionalAttribution], l, "additionalAttribution", &ex.attribution); err != nil {
			return err
		}
		ev.AdditionalAttribution = &ex.attribution
	}
	if p.present(f[fPlacement]) {
		if err := p.placement(f[fPlacement], l, &ex.placement); err != nil {
			return err
		}
		ev.Placement = &ex.placement
	}
	if p.present(f[fPage]) {
		if err := p.page(f[fPage], l, ex); err != nil {
			return err
		}
		ev.Page = &ex.page
	}
	if p.present(f[fObject]) {
		if err := p.object(f[fObject], l, &ex.object); err != nil {
			return err
		}
		ev.Object = &ex.object
	}
	if err := p.str(f[fExternalCampaignID], l, "externalCampaignId", ruleOptional, &ev.ExternalCampaignID); err != nil {
		return err
	}
	if hasBid && p.nonEmptyString(f[fExternalCampaignID]) {
		return invalid(CodeInvalidUseOfExternalCampaignID, l.at("externalCampaignId"),
			"must not be set together with resolvedBidId")
	}
	if err := p.str(f[fExternalVendorID], l, "externalVendorId", ruleOptional, &ev.ExternalVendorID); err != nil {
		return err
	}
	if err := p.enum(f[fDeviceType], l, "deviceType", false, deviceTypes, &ev.DeviceType); err != nil {
		return err
	}
	if err := p.enum(f[fChannel], l, "channel", false, channelTypes, &ev.Channel); err != nil {
		return err
	}
	if ev.Kind == KindClick {
		return p.enum(f[fClickType], l, "clickType", false, clickTypes, &ev.ClickType)
	}
	return nil
}

func (p *evParser) purchase(sp valSpan, l evPath, ev *Event) *ValidationError {
	var f [numOtherFields]valSpan
	p.fields(sp.lo, purchaseNames, f[:])
	if err := p.common(f[:], l, ev); err != nil {
		return err
	}
	if err := p.items(f[fOtherTail], l, ev); err != nil {
		return err
	}
	if err := p.enum(f[fOtherDeviceType], l, "deviceType", false, deviceTypes, &ev.DeviceType); err != nil {
		return err
	}
	return p.enum(f[fOtherChannel], l, "channel", false, channelTypes, &ev.Channel)
}

func (p *evParser) pageView(sp valSpan, l evPath, ev *Event, ex *eventExtras) *ValidationError {
	var f [numOtherFields]valSpan
	p.fields(sp.lo, pageViewNames, f[:])
	if err := p.common(f[:], l, ev); err != nil {
		return err
	}
	if !p.present(f[fOtherTail]) {
		return invalid(CodeBadRequest, l.at("page"), "is required")
	}
	if err := p.page(f[fOtherTail], l, ex); err != nil {
		return err
	}
	ev.Page = &ex.page
	if err := p.enum(f[fOtherDeviceType], l, "deviceType", false, deviceTypes, &ev.DeviceType); err != nil {
		return err
	}
	return p.enum(f[fOtherChannel], l, "channel", false, channelTypes, &ev.Channel)
}

// ---- nested objects ----

func (p *evParser) items(sp valSpan, l evPath, ev *Event) *ValidationError {
	if !p.present(sp) {
		return invalid(CodeNoPurchaseItems, l.at("items"), "is required: a purchase needs at least one item")
	}
	if p.b[sp.lo] != '[' {
		return invalid(CodeBadRequest, l.at("items"), "must be an array")
	}
	var over bool
	p.list, over = p.elements(sp.lo, p.list[:0], MaxItemsPerPurchase)
	if over {
		return invalid(CodeBadRequest, l.at("items"), "must have at most %d items", MaxItemsPerPurchase)
	}
	if len(p.list) == 0 {
		return invalid(CodeNoPurchaseItems, l.at("items"), "must not be empty: a purchase needs at least one item")
	}
	items := make([]Item, len(p.list))
	var total int64 // checked sum of unitPrice × quantity, in micro-units
	for i, isp := range p.list {
		il := l.sub("items", i)
		if p.b[isp.lo] != '{' {
			return invalid(CodeBadRequest, il.at(""), "must be an object")
		}
		var f [4]valSpan
		p.fields(isp.lo, itemNames, f[:])
		it := &items[i]
		if err := p.str(f[fItemProductID], il, "productId", ruleProductID, &it.ProductID); err != nil {
			return err
		}
		if err := p.unitPrice(f[fItemUnitPrice], il, &it.UnitPriceMicros); err != nil {
			return err
		}
		if err := p.quantity(f[fItemQuantity], il, &it.Quantity); err != nil {
			return err
		}
		if err := p.str(f[fItemVendorID], il, "vendorId", ruleNonEmpty, &it.VendorID); err != nil {
			return err
		}
		// unitPrice ≤ 1e15 and quantity ≤ 1e6 micro-units: the product
		// fits in int64 only when checked against what is left.
		if it.Quantity > (MaxPurchaseTotalMicros-total)/it.UnitPriceMicros {
			return invalid(CodeBadRequest, l.at("items"), "the purchase total (unitPrice × quantity summed over items) must be at most %d", MaxPurchaseTotalMicros/1_000_000)
		}
		total += it.Quantity * it.UnitPriceMicros
	}
	ev.Items = items
	return nil
}

func (p *evParser) entity(sp valSpan, l evPath, field string, dst *Entity) *ValidationError {
	if p.b[sp.lo] != '{' {
		return invalid(CodeBadRequest, l.at(field), "must be an object")
	}
	var f [2]valSpan
	p.fields(sp.lo, entityNames, f[:])
	el := l.sub(field, -1)
	if err := p.str(f[0], el, "id", ruleRequired, &dst.ID); err != nil {
		return err
	}
	return p.enum(f[1], el, "type", true, entityTypes, &dst.Type)
}

func (p *evParser) placement(sp valSpan, l evPath, dst *Placement) *ValidationError {
	if p.b[sp.lo] != '{' {
		return invalid(CodeBadRequest, l.at("placement"), "must be an object")
	}
	var f [numPlacementFields]valSpan
	p.fields(sp.lo, placementNames, f[:])
	pl := l.sub("placement", -1)
	if err := p.str(f[fPlPath], pl, "path", ruleRequired, &dst.Path); err != nil {
		return err
	}
	if err := p.positive32(f[fPlPosition], pl, "position", &dst.Position); err != nil {
		return err
	}
	if err := p.positive32(f[fPlPage], pl, "page", &dst.Page); err != nil {
		return err
	}
	if err := p.positive32(f[fPlPageSize], pl, "pageSize", &dst.PageSize); err != nil {
		return err
	}
	if err := p.str(f[fPlProductID], pl, "productId", ruleNonEmpty, &dst.ProductID); err != nil {
		return err
	}
	if sp := f[fPlCategoryIDs]; p.present(sp) {
		vals, err := p.stringList(sp, pl, "categoryIds", maxCategoryIDs, ruleNonEmpty)
		if err != nil {
			return err
		}
		dst.CategoryIDs = vals
	}
	return p.str(f[fPlSearchQuery], pl, "searchQuery", ruleNonEmpty, &dst.SearchQuery)
}

func (p *evParser) page(sp valSpan, l evPath, ex *eventExtras) *ValidationError {
	if p.b[sp.lo] != '{' {
		return invalid(CodeBadRequest, l.at("page"), "must be an object")
	}
	var f [3]valSpan
	p.fields(sp.lo, pageNames, f[:])
	pl := l.sub("page", -1)
	dst := &ex.page
	if err := p.enum(f[0], pl, "type", true, pageTypes, &dst.Type); err != nil {
		return err
	}
	if err := p.str(f[1], pl, "pageId", ruleRequired, &dst.ID); err != nil {
		return err
	}
	v := f[2]
	if !p.present(v) {
		return nil
	}
	switch p.b[v.lo] {
	case '"':
		if err := p.str(v, pl, "value", ruleOptional, &ex.pageValue[0]); err != nil {
			return err
		}
		dst.Value = ex.pageValue[:]
	case '[':
		vals, err := p.stringList(v, pl, "value", maxPageValues, ruleOptional)
		if err != nil {
			return err
		}
		dst.Value = vals
	default:
		return invalid(CodeBadRequest, pl.at("value"), "must be a string or a non-empty array of strings")
	}
	return nil
}

func (p *evParser) object(sp valSpan, l evPath, dst *Object) *ValidationError {
	if p.b[sp.lo] != '{' {
		return invalid(CodeBadRequest, l.at("object"), "must be an object")
	}
	var f [3]valSpan
	p.fields(sp.lo, objectNames, f[:])
	ol := l.sub("object", -1)
	if err := p.enum(f[0], ol, "type", true, objectTypes, &dst.Type); err != nil {
		return err
	}
	if err := p.str(f[1], ol, "assetId", ruleOptional, &dst.AssetID); err != nil {
		return err
	}
	return p.enum(f[2], ol, "clickType", false, clickTypes, &dst.ClickType)
}

// stringList validates a non-empty array of at most max strings, each
// following rule.
func (p *evParser) stringList(sp valSpan, l evPath, field string, max int, rule strRule) ([]string, *ValidationError) {
	if p.b[sp.lo] != '[' {
		return nil, invalid(CodeBadRequest, l.at(field), "must be an array of strings")
	}
	var over bool
	p.list, over = p.elements(sp.lo, p.list[:0], max)
	if over {
		return nil, invalid(CodeBadRequest, l.at(field), "must have at most %d items", max)
	}
	if len(p.list) == 0 {
		return nil, invalid(CodeBadRequest, l.at(field), "must not be empty")
	}
	vals := make([]string, len(p.list))
	rule.required = true
	for i, esp := range p.list {
		if p.b[esp.lo] != '"' {
			return nil, invalid(CodeBadRequest, l.at(elemField(field, i)), "must be a string")
		}
		if err := p.str(esp, l, elemField(field, i), rule, &vals[i]); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// ---- scalar fields ----

// present reports whether a key was given with a value other than null.
func (p *evParser) present(sp valSpan) bool { return sp.hi != 0 && p.b[sp.lo] != 'n' }

// nonEmptyString reports whether sp is a string other than "".
func (p *evParser) nonEmptyString(sp valSpan) bool {
	return sp.hi != 0 && p.b[sp.lo] == '"' && sp.hi-sp.lo > 2
}

// str validates a string field and, if it is kept, arranges for *dst to get
// its value when the event is committed. The field name may be an element
// path such as "categoryIds[2]"; it is only used in messages.
func (p *evParser) str(sp valSpan, l evPath, field string, rule strRule, dst *string) *ValidationError {
	if !p.present(sp) {
		if rule.required {
			return invalid(rule.missCode, l.at(field), "is required")
		}
		return nil
	}
	if p.b[sp.lo] != '"' {
		return invalid(CodeBadRequest, l.at(field), "must be a string")
	}
	lo := len(p.arena)
	p.arena = jsontext.AppendUnquoted(p.arena, p.b[sp.lo+1:sp.hi-1])
	hi := len(p.arena)
	if hi == lo {
		if rule.nonEmpty {
			return invalid(rule.missCode, l.at(field), "must not be empty")
		}
		return nil
	}
	if s := p.arena[lo:hi]; len(s) > rule.max && utf8.RuneCount(s) > rule.max {
		return invalid(rule.maxCode, l.at(field), "must be at most %d characters", rule.max)
	}
	p.fix = append(p.fix, strFixup{dst, lo, hi})
	return nil
}

// enum validates a string field against its allowed values and stores the
// matching constant (no allocation).
func (p *evParser) enum(sp valSpan, l evPath, field string, required bool, values []string, dst *string) *ValidationError {
	if !p.present(sp) {
		if required {
			return invalid(CodeBadRequest, l.at(field), "is required")
		}
		return nil
	}
	if p.b[sp.lo] != '"' {
		return invalid(CodeBadRequest, l.at(field), "must be a string")
	}
	raw := p.unquoteTmp(sp)
	for _, v := range values {
		if string(raw) == v {
			*dst = v
			return nil
		}
	}
	return invalid(CodeBadRequest, l.at(field), "must be one of %s", strings.Join(values, ", "))
}

// unquoteTmp returns the decoded content of the string at sp, without
// copying when it has no escapes. The result is valid until the next call.
func (p *evParser) unquoteTmp(sp valSpan) []byte {
	raw := p.b[sp.lo+1 : sp.hi-1]
	if jsontext.PlainString(raw) {
		return raw
	}
	p.tmp = jsontext.AppendUnquoted(p.tmp[:0], raw)
	return p.tmp
}

func (p *evParser) occurredAt(sp valSpan, l evPath, dst *int64) *ValidationError {
	if !p.present(sp) {
		return invalid(CodeBadRequest, l.at("occurredAt"), "is required")
	}
	if p.b[sp.lo] != '"' {
		return invalid(CodeBadRequest, l.at("occurredAt"), "must be a string")
	}
	ms, subMs, ok := parseRFC3339(p.unquoteTmp(sp))
	if !ok {
		return invalid(CodeBadRequest, l.at("occurredAt"),
			"must be an RFC 3339 date-time with a time zone offset, such as 2024-07-11T13:55:09.123Z")
	}
	if ms < 0 {
		return invalid(CodeInvalidEventTime, l.at("occurredAt"), "must not be before 1970-01-01T00:00:00Z")
	}
	if limit := p.now + MaxFutureSkewMillis; ms > limit || ms == limit && subMs {
		// The message carries no server time, so that it is the same for
		// every request (clients have the Date header).
		return invalid(CodeInvalidEventTime, l.at("occurredAt"), "must not be more than 5 minutes in the future")
	}
	*dst = ms
	return nil
}

func (p *evParser) unitPrice(sp valSpan, l evPath, dst *int64) *ValidationError {
	if !p.present(sp) {
		return invalid(CodeBadRequest, l.at("unitPrice"), "is required")
	}
	if !isNumberStart(p.b[sp.lo]) {
		return invalid(CodeBadRequest, l.at("unitPrice"), "must be a number")
	}
	d := jsontext.ScaleDecimal(p.b[sp.lo:sp.hi], 6, MaxUnitPriceMicros)
	switch {
	case d.Zero || d.Neg:
		return invalid(CodeBadRequest, l.at("unitPrice"), "must be greater than 0")
	case d.Over:
		return invalid(CodeBadRequest, l.at("unitPrice"), "must be at most %d", MaxUnitPriceMicros/1_000_000)
	case d.Mag == 0:
		return invalid(CodeBadRequest, l.at("unitPrice"), "must be at least 0.0000005 (prices are kept to the micro-unit)")
	}
	*dst = int64(d.Mag)
	return nil
}

func (p *evParser) quantity(sp valSpan, l evPath, dst *int64) *ValidationError {
	if !p.present(sp) {
		*dst = 1
		return nil
	}
	if !isNumberStart(p.b[sp.lo]) {
		return invalid(CodeBadRequest, l.at("quantity"), "must be an integer")
	}
	d := jsontext.ScaleDecimal(p.b[sp.lo:sp.hi], 0, MaxQuantity)
	switch {
	case !d.Integral:
		return invalid(CodeBadRequest, l.at("quantity"), "must be an integer")
	case d.Zero || d.Neg:
		return invalid(CodeQuantityNotPositive, l.at("quantity"), "must be greater than 0")
	case d.Over:
		return invalid(CodeBadRequest, l.at("quantity"), "must be at most %d", MaxQuantity)
	}
	*dst = int64(d.Mag)
	return nil
}

// positive32 validates an optional integer in [1, MaxInt32].
func (p *evParser) positive32(sp valSpan, l evPath, field string, dst *int32) *ValidationError {
	if !p.present(sp) {
		return nil
	}
	if !isNumberStart(p.b[sp.lo]) {
		return invalid(CodeBadRequest, l.at(field), "must be an integer")
	}
	d := jsontext.ScaleDecimal(p.b[sp.lo:sp.hi], 0, math.MaxInt32)
	switch {
	case !d.Integral:
		return invalid(CodeBadRequest, l.at(field), "must be an integer")
	case d.Zero || d.Neg:
		return invalid(CodeBadRequest, l.at(field), "must be at least 1")
	case d.Over:
		return invalid(CodeBadRequest, l.at(field), "must be at most %d", math.MaxInt32)
	}
	*dst = int32(d.Mag)
	return nil
}

func isNumberStart(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

// parseRFC3339 parses an RFC 3339 date-time with a mandatory offset
// (YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm), 'T' and 'Z' in either case) into
// Unix milliseconds, truncating the fraction; subMs reports a non-zero
// fraction below the millisecond.
func parseRFC3339(s []byte) (ms int64, subMs, ok bool) {
	if len(s) < 20 {
		return 0, false, false
	}
	num := func(a, b int) int {
		n := 0
		for _, c := range s[a:b] {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec := num(11, 13), num(14, 16), num(17, 19)
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' && s[10] != 't' || s[13] != ':' || s[16] != ':' ||
		year < 0 || month < 1 || month > 12 || day < 1 || day > jsontext.DaysIn(month, year) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return 0, false, false
	}
	i := 19
	var frac int64
	if s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if i-fs < 3 {
				frac = frac*10 + int64(s[i]-'0')
			} else if s[i] != '0' {
				subMs = true
			}
			i++
		}
		if i == fs {
			return 0, false, false
		}
		for k := i - fs; k < 3; k++ {
			frac *= 10
		}
	}
	if i >= len(s) {
		return 0, false, false
	}
	var offset int
	switch s[i] {
	case 'Z', 'z':
		i++
	case '+', '-':
		if len(s)-i != 6 || s[i+3] != ':' {
			return 0, false, false
		}
		oh, om := num(i+1, i+3), num(i+4, i+6)
		if oh < 0 || oh > 23 || om < 0 || om > 59 {
			return 0, false, false
		}
		offset = oh*3600 + om*60
		if s[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return 0, false, false
	}
	if i != len(s) {
		return 0, false, false
	}
	secs := jsontext.DaysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return secs*1000 + frac, subMs, true
}

// ---- JSON syntax ----

// maxNestingDepth is encoding/json's limit on nested arrays and objects.
const maxNestingDepth = 10000

// scanTop checks the syntax of the object at b[lo] == '{' (the request) and
// stores the spans of the four arrays' keys in top; the elements of those
// that are arrays go to p.elems and p.over. A repeated key keeps its last
// value. It returns the offset after the object and whether it is valid.
func (p *evParser) scanTop(lo int, top *[4]valSpan) (int, bool) {
	b := p.b
	for k := range p.elems {
		p.elems[k], p.over[k] = p.elems[k][:0], false
	}
	i := jsontext.SkipWS(b, lo+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		ks := i + 1
		var ok bool
		if i, ok = jsontext.ValidString(b, i); !ok {
			return i, false
		}
		key := b[ks : i-1]
		if !jsontext.PlainString(key) {
			p.tmp = jsontext.AppendUnquoted(p.tmp[:0], key)
			key = p.tmp
		}
		k := -1
		for n, name := range topNames {
			if string(key) == name {
				k = n
				break
			}
		}
		i = jsontext.SkipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		i = jsontext.SkipWS(b, i+1)
		vs := i
		if k >= 0 {
			p.elems[k], p.over[k] = p.elems[k][:0], false
		}
		if k >= 0 && i < len(b) && b[i] == '[' {
			i, ok = p.scanArray(i, k)
		} else {
			i, ok = validValue(b, i, 1)
		}
		if !ok {
			return i, false
		}
		if k >= 0 {
			top[k] = valSpan{vs, i}
		}
		i = jsontext.SkipWS(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = jsontext.SkipWS(b, i+1)
		default:
			return i, false
		}
	}
}

// scanArray checks the syntax of the array at b[lo] == '[', the value of
// topNames[k], and collects the spans of up to MaxEventsPerArray elements.
func (p *evParser) scanArray(lo, k int) (int, bool) {
	b := p.b
	i := jsontext.SkipWS(b, lo+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		vs := i
		var ok bool
		if i, ok = validValue(b, i, 2); !ok {
			return i, false
		}
		if len(p.elems[k]) < MaxEventsPerArray {
			p.elems[k] = append(p.elems[k], valSpan{vs, i})
		} else {
			p.over[k] = true
		}
		i = jsontext.SkipWS(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = jsontext.SkipWS(b, i+1)
		default:
			return i, false
		}
	}
}

// validJSON reports whether b is one JSON value with optional surrounding
// whitespace. It agrees with json.Valid but for the strings that break the
// text rule (jsontext.ValidString), and is several times faster.
func validJSON(b []byte) bool {
	i, ok := validValue(b, jsontext.SkipWS(b, 0), 0)
	return ok && jsontext.SkipWS(b, i) == len(b)
}

func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	var ok bool
	switch b[i] {
	case '"':
		return jsontext.ValidString(b, i)
	case '{':
		if depth++; depth > maxNestingDepth {
			return i, false
		}
		i = jsontext.SkipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			if i, ok = jsontext.ValidString(b, i); !ok {
				return i, false
			}
			i = jsontext.SkipWS(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = validValue(b, jsontext.SkipWS(b, i+1), depth); !ok {
				return i, false
			}
			i = jsontext.SkipWS(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '}':
				return i + 1, true
			case ',':
				i = jsontext.SkipWS(b, i+1)
			default:
				return i, false
			}
		}
	case '[':
		if depth++; depth > maxNestingDepth {
			return i, false
		}
		i = jsontext.SkipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			if i, ok = validValue(b, i, depth); !ok {
				return i, false
			}
			i = jsontext.SkipWS(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ']':
				return i + 1, true
			case ',':
				i = jsontext.SkipWS(b, i+1)
			default:
				return i, false
			}
		}
	case 't':
		return jsontext.ValidLiteral(b, i, "true")
	case 'f':
		return jsontext.ValidLiteral(b, i, "false")
	case 'n':
		return jsontext.ValidLiteral(b, i, "null")
	default:
		return jsontext.ValidNumber(b, i)
	}
}

// ---- JSON walking (the body is known to be valid JSON) ----

// skipValue returns the offset just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return jsontext.SkipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = jsontext.SkipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// fields scans the object at b[lo] == '{' and stores in out[k] the span of
// the value of key names[k]; a repeated key keeps its last value.
func (p *evParser) fields(lo int, names []string, out []valSpan) {
	b := p.b
	i := jsontext.SkipWS(b, lo+1)
	if b[i] == '}' {
		return
	}
	for {
		ks := i + 1
		i = jsontext.SkipString(b, i)
		key := b[ks : i-1]
		if !jsontext.PlainString(key) {
			p.tmp = jsontext.AppendUnquoted(p.tmp[:0], key)
			key = p.tmp
		}
		i = jsontext.SkipWS(b, i) + 1 // ':'
		i = jsontext.SkipWS(b, i)
		vs := i
		i = skipValue(b, i)
		for k, name := range names {
			if string(key) == name {
				out[k] = valSpan{vs, i}
				break
			}
		}
		i = jsontext.SkipWS(b, i)
		if b[i] != ',' {
			return // '}'
		}
		i = jsontext.SkipWS(b, i+1)
	}
}

// elements appends to dst the spans of the elements of the array at
// b[lo] == '['. It stops and reports over when there are more than max.
func (p *evParser) elements(lo int, dst []valSpan, max int) ([]valSpan, bool) {
	b := p.b
	i := jsontext.SkipWS(b, lo+1)
	if b[i] == ']' {
		return dst, false
	}
	for {
		if len(dst) == max {
			return dst, true
		}
		vs := i
		i = skipValue(b, i)
		dst = append(dst, valSpan{vs, i})
		i = jsontext.SkipWS(b, i)
		if b[i] != ',' {
			return dst, false // ']'
		}
		i = jsontext.SkipWS(b, i+1)
	}
}
