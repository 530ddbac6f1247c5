package ingest

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/consent"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/validation"
)

// This file decodes and validates a POST /v2/events body.
//
// The body is checked once by jsontext.Scanner.Valid, which accepts what
// json.Valid accepts, several times faster (so that a syntax error anywhere
// is invalid_json, whatever else is wrong), less the strings that break the
// text rule (invalid UTF-8, unpaired surrogate escapes, \u0000; see
// jsontext.StringProblem: bad_request naming the field), and records where
// every array and object ends. After that the parser trusts the JSON grammar
// and walks the bytes with the scanner, as auction/request_parse.go does: every
// object is scanned once to find the byte span of each known key (last
// duplicate wins, keys are case-sensitive, unknown keys are skipped; a nested
// object is skipped in O(1)), and the known values are then validated in a
// fixed field order, so that the first error reported for a request does not
// depend on the order of keys in the body. Strings are decoded straight from
// the body; all strings kept for one event share a single allocation.
// Numbers are converted exactly from their decimal text.

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

	interactionNames = []string{"id", "occurredAt", "opaqueUserId", "consent", "resolvedBidId", "entity",
		"additionalAttribution", "placement", "page", "object", "externalCampaignId",
		"externalVendorId", "deviceType", "channel", "clickType"}
	purchaseNames  = []string{"id", "occurredAt", "opaqueUserId", "consent", "deviceType", "channel", "items"}
	pageViewNames  = []string{"id", "occurredAt", "opaqueUserId", "consent", "deviceType", "channel", "page"}
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
	fConsent
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
	fOtherDeviceType = fConsent + 1 + iota
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
	// Without consent the id is optional (a shopper who refused ad storage
	// has no stored id to send); one that is sent is validated, then dropped.
	ruleOpaqueUserIDNoConsent = strRule{false, false, MaxOpaqueUserIDLen, CodeBadRequest, CodeInvalidOpaqueUserID}
	// An empty resolvedBidId counts as absent: analytics.js sends "" from an
	// empty data-ts-resolved-bid attribute, and rejecting the event would
	// lose it (4xx is final for that client).
	ruleResolvedBid = strRule{false, false, MaxResolvedBidIDLen, CodeInvalidResolvedBidID, CodeInvalidResolvedBidID}
	ruleProductID   = strRule{true, true, MaxStringFieldLen, CodeMissingProductID, CodeBadRequest}
	ruleRequired    = strRule{true, true, MaxStringFieldLen, CodeBadRequest, CodeBadRequest}
	ruleNonEmpty    = strRule{false, true, MaxStringFieldLen, CodeBadRequest, CodeBadRequest}
	ruleOptional    = strRule{false, false, MaxStringFieldLen, CodeBadRequest, CodeBadRequest}
)

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
	jsontext.Scanner
	now   int64
	elems [4][]jsontext.Span // element spans of the four arrays
	list  []jsontext.Span    // element spans of a nested array
	arena []byte             // decoded strings of the event being parsed
	fix   []strFixup
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

	p := evParserPool.Get().(*evParser)
	defer p.release()
	// One pass checks the syntax of the whole body.
	if !p.Valid(body) {
		return nil, validation.RejectJSON(body)
	}
	if body[start] != '{' {
		return nil, invalid(CodeBadRequest, "", "request body must be a JSON object")
	}
	p.now = nowMs
	var top [4]jsontext.Span
	p.Fields(start, topNames, top[:])

	// Shape errors are reported when their array's turn comes, to keep the
	// order of errors.
	var shapeErr [4]*ValidationError
	found := false
	total, withExtras := 0, 0
	for k := range p.elems {
		p.elems[k] = p.elems[k][:0]
	}
	for k, sp := range top {
		if !p.Present(sp) {
			continue
		}
		found = true
		if p.B[sp.Lo] != '[' {
			shapeErr[k] = invalid(CodeBadRequest, topNames[k], "must be an array")
			break
		}
		var over bool
		if p.elems[k], over = p.Elements(sp.Lo, p.elems[k], MaxEventsPerArray); over {
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
			if p.B[sp.Lo] != '{' {
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
	p.Scanner.Release()
	if cap(p.arena) > 64<<10 {
		p.arena = nil
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

func (p *evParser) common(f []jsontext.Span, l evPath, ev *Event) *ValidationError {
	if err := p.str(f[fID], l, "id", ruleEventID, &ev.ID); err != nil {
		return err
	}
	if err := p.occurredAt(f[fOccurredAt], l, &ev.OccurredAtMs); err != nil {
		return err
	}
	denied, bad := consent.Denied(&p.Scanner, f[fConsent])
	if bad != nil {
		field := "consent"
		if bad.Field != "" {
			field += "." + bad.Field
		}
		return invalid(CodeBadRequest, l.at(field), "%s", bad.Message)
	}
	if denied {
		// Validated, never kept: the event is stored without its shopper.
		return p.str(f[fOpaqueUserID], l, "opaqueUserId", ruleOpaqueUserIDNoConsent, nil)
	}
	return p.str(f[fOpaqueUserID], l, "opaqueUserId", ruleOpaqueUserID, &ev.OpaqueUserID)
}

func (p *evParser) interaction(sp jsontext.Span, l evPath, ev *Event, ex *eventExtras) *ValidationError {
	var f [numInteractionFields]jsontext.Span
	names := interactionNames
	if ev.Kind == KindImpression {
		names = names[:fClickType] // clickType is a click field
	}
	p.Fields(sp.Lo, names, f[:])
	if err := p.common(f[:], l, ev); err != nil {
		return err
	}
	if err := p.str(f[fResolvedBidID], l, "resolvedBidId", ruleResolvedBid, &ev.ResolvedBidID); err != nil {
		return err
	}
	hasBid := p.nonEmptyString(f[fResolvedBidID])
	if p.Present(f[fEntity]) {
		if err := p.entity(f[fEntity], l, "entity", &ex.entity); err != nil {
			return err
		}
		ev.Entity = &ex.entity
	} else if !hasBid {
		return invalid(CodeBadRequest, l.at(""), "one of resolvedBidId or entity is required")
	}
	if p.Present(f[fAdditionalAttribution]) {
		if err := p.entity(f[fAdditionalAttribution], l, "additionalAttribution", &ex.attribution); err != nil {
			return err
		}
		ev.AdditionalAttribution = &ex.attribution
	}
	if p.Present(f[fPlacement]) {
		if err := p.placement(f[fPlacement], l, &ex.placement); err != nil {
			return err
		}
		ev.Placement = &ex.placement
	}
	if p.Present(f[fPage]) {
		if err := p.page(f[fPage], l, ex); err != nil {
			return err
		}
		ev.Page = &ex.page
	}
	if p.Present(f[fObject]) {
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

func (p *evParser) purchase(sp jsontext.Span, l evPath, ev *Event) *ValidationError {
	var f [numOtherFields]jsontext.Span
	p.Fields(sp.Lo, purchaseNames, f[:])
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

func (p *evParser) pageView(sp jsontext.Span, l evPath, ev *Event, ex *eventExtras) *ValidationError {
	var f [numOtherFields]jsontext.Span
	p.Fields(sp.Lo, pageViewNames, f[:])
	if err := p.common(f[:], l, ev); err != nil {
		return err
	}
	if !p.Present(f[fOtherTail]) {
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

func (p *evParser) items(sp jsontext.Span, l evPath, ev *Event) *ValidationError {
	if !p.Present(sp) {
		return invalid(CodeNoPurchaseItems, l.at("items"), "is required: a purchase needs at least one item")
	}
	if p.B[sp.Lo] != '[' {
		return invalid(CodeBadRequest, l.at("items"), "must be an array")
	}
	var over bool
	p.list, over = p.Elements(sp.Lo, p.list[:0], MaxItemsPerPurchase)
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
		if p.B[isp.Lo] != '{' {
			return invalid(CodeBadRequest, il.at(""), "must be an object")
		}
		var f [4]jsontext.Span
		p.Fields(isp.Lo, itemNames, f[:])
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

func (p *evParser) entity(sp jsontext.Span, l evPath, field string, dst *Entity) *ValidationError {
	if p.B[sp.Lo] != '{' {
		return invalid(CodeBadRequest, l.at(field), "must be an object")
	}
	var f [2]jsontext.Span
	p.Fields(sp.Lo, entityNames, f[:])
	el := l.sub(field, -1)
	if err := p.str(f[0], el, "id", ruleRequired, &dst.ID); err != nil {
		return err
	}
	return p.enum(f[1], el, "type", true, entityTypes, &dst.Type)
}

func (p *evParser) placement(sp jsontext.Span, l evPath, dst *Placement) *ValidationError {
	if p.B[sp.Lo] != '{' {
		return invalid(CodeBadRequest, l.at("placement"), "must be an object")
	}
	var f [numPlacementFields]jsontext.Span
	p.Fields(sp.Lo, placementNames, f[:])
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
	if sp := f[fPlCategoryIDs]; p.Present(sp) {
		vals, err := p.stringList(sp, pl, "categoryIds", maxCategoryIDs, ruleNonEmpty)
		if err != nil {
			return err
		}
		dst.CategoryIDs = vals
	}
	return p.str(f[fPlSearchQuery], pl, "searchQuery", ruleNonEmpty, &dst.SearchQuery)
}

func (p *evParser) page(sp jsontext.Span, l evPath, ex *eventExtras) *ValidationError {
	if p.B[sp.Lo] != '{' {
		return invalid(CodeBadRequest, l.at("page"), "must be an object")
	}
	var f [3]jsontext.Span
	p.Fields(sp.Lo, pageNames, f[:])
	pl := l.sub("page", -1)
	dst := &ex.page
	if err := p.enum(f[0], pl, "type", true, pageTypes, &dst.Type); err != nil {
		return err
	}
	if err := p.str(f[1], pl, "pageId", ruleRequired, &dst.ID); err != nil {
		return err
	}
	v := f[2]
	if !p.Present(v) {
		return nil
	}
	switch p.B[v.Lo] {
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

func (p *evParser) object(sp jsontext.Span, l evPath, dst *Object) *ValidationError {
	if p.B[sp.Lo] != '{' {
		return invalid(CodeBadRequest, l.at("object"), "must be an object")
	}
	var f [3]jsontext.Span
	p.Fields(sp.Lo, objectNames, f[:])
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
func (p *evParser) stringList(sp jsontext.Span, l evPath, field string, max int, rule strRule) ([]string, *ValidationError) {
	if p.B[sp.Lo] != '[' {
		return nil, invalid(CodeBadRequest, l.at(field), "must be an array of strings")
	}
	var over bool
	p.list, over = p.Elements(sp.Lo, p.list[:0], max)
	if over {
		return nil, invalid(CodeBadRequest, l.at(field), "must have at most %d items", max)
	}
	if len(p.list) == 0 {
		return nil, invalid(CodeBadRequest, l.at(field), "must not be empty")
	}
	vals := make([]string, len(p.list))
	rule.required = true
	for i, esp := range p.list {
		if p.B[esp.Lo] != '"' {
			return nil, invalid(CodeBadRequest, l.at(elemField(field, i)), "must be a string")
		}
		if err := p.str(esp, l, elemField(field, i), rule, &vals[i]); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// ---- scalar fields ----

// nonEmptyString reports whether sp is a string other than "".
func (p *evParser) nonEmptyString(sp jsontext.Span) bool {
	return sp.Hi != 0 && p.B[sp.Lo] == '"' && sp.Hi-sp.Lo > 2
}

// str validates a string field and, if it is kept, arranges for *dst to get
// its value when the event is committed. The field name may be an element
// path such as "categoryIds[2]"; it is only used in messages.
func (p *evParser) str(sp jsontext.Span, l evPath, field string, rule strRule, dst *string) *ValidationError {
	if !p.Present(sp) {
		if rule.required {
			return invalid(rule.missCode, l.at(field), "is required")
		}
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return invalid(CodeBadRequest, l.at(field), "must be a string")
	}
	lo := len(p.arena)
	p.arena = p.Unquote(p.arena, sp)
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
	if dst == nil { // validated only
		p.arena = p.arena[:lo]
		return nil
	}
	p.fix = append(p.fix, strFixup{dst, lo, hi})
	return nil
}

// enum validates a string field against its allowed values and stores the
// matching constant (no allocation).
func (p *evParser) enum(sp jsontext.Span, l evPath, field string, required bool, values []string, dst *string) *ValidationError {
	if !p.Present(sp) {
		if required {
			return invalid(CodeBadRequest, l.at(field), "is required")
		}
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return invalid(CodeBadRequest, l.at(field), "must be a string")
	}
	raw := p.UnquoteTmp(sp)
	for _, v := range values {
		if string(raw) == v {
			*dst = v
			return nil
		}
	}
	return invalid(CodeBadRequest, l.at(field), "must be one of %s", strings.Join(values, ", "))
}

func (p *evParser) occurredAt(sp jsontext.Span, l evPath, dst *int64) *ValidationError {
	if !p.Present(sp) {
		return invalid(CodeBadRequest, l.at("occurredAt"), "is required")
	}
	if p.B[sp.Lo] != '"' {
		return invalid(CodeBadRequest, l.at("occurredAt"), "must be a string")
	}
	ms, subMs, ok := parseRFC3339(p.UnquoteTmp(sp))
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

func (p *evParser) unitPrice(sp jsontext.Span, l evPath, dst *int64) *ValidationError {
	if !p.Present(sp) {
		return invalid(CodeBadRequest, l.at("unitPrice"), "is required")
	}
	if !jsontext.IsNumberStart(p.B[sp.Lo]) {
		return invalid(CodeBadRequest, l.at("unitPrice"), "must be a number")
	}
	d := money.Scale(p.B[sp.Lo:sp.Hi], 6, MaxUnitPriceMicros)
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

func (p *evParser) quantity(sp jsontext.Span, l evPath, dst *int64) *ValidationError {
	if !p.Present(sp) {
		*dst = 1
		return nil
	}
	if !jsontext.IsNumberStart(p.B[sp.Lo]) {
		return invalid(CodeBadRequest, l.at("quantity"), "must be an integer")
	}
	d := money.Scale(p.B[sp.Lo:sp.Hi], 0, MaxQuantity)
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
func (p *evParser) positive32(sp jsontext.Span, l evPath, field string, dst *int32) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if !jsontext.IsNumberStart(p.B[sp.Lo]) {
		return invalid(CodeBadRequest, l.at(field), "must be an integer")
	}
	d := money.Scale(p.B[sp.Lo:sp.Hi], 0, math.MaxInt32)
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

// parseRFC3339 parses an RFC 3339 date-time with a mandatory offset
// (YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm), 'T' and 'Z' in either case) into
// Unix milliseconds, truncating the fraction; subMs reports a non-zero
// fraction below the millisecond.
func parseRFC3339(s []byte) (ms int64, subMs, ok bool) {
	if len(s) < 20 {
		return 0, false, false
	}
	// The digits read inline, not through jsontext.Date: a call an event.
	year, month, day := jsontext.Digits(s[0:4]), jsontext.Digits(s[5:7]), jsontext.Digits(s[8:10])
	hour, minute, sec := jsontext.Digits(s[11:13]), jsontext.Digits(s[14:16]), jsontext.Digits(s[17:19])
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
		oh, om := jsontext.Digits(s[i+1:i+3]), jsontext.Digits(s[i+4:i+6])
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
