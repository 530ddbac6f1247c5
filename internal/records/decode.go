package records

import (
	"fmt"
	"unsafe"

	gojson "github.com/goccy/go-json"

	"github.com/endcap/endcap/internal/jsontext"
)

// The fold decodes every record of the events topic, 100,000 and more a
// second in a catch-up. goccy/go-json reads a record by reflection over
// Event's fields, matching every key it meets against them; the records are
// almost all in the one form EncodeEvent writes (the fields in Event's
// order, no white space, the empty ones left out). So that form is read by
// hand in one pass, matching the keys literally in that order, and anything
// else by goccy/go-json, whose answer, error or event, is then the answer:
// a key this version does not know, another order, white space, a string the
// text rule refuses (jsontext.DecodeString: invalid UTF-8, \u0000, a lone
// surrogate), a number with a fraction, an exponent or more digits than the
// field is sure to hold, an empty array, a null.
//
// Allocations: a record's strings are slices of one copy of the record (an
// allocation of its size, holding no pointers; a string with escapes is
// decoded over its own text there), and its
// objects (en, aa, pl, pg with a value of one element, ob) share a second
// allocation; a purchase's items, a placement's categories and a page value
// of several elements take one each. Nothing is shared between records, so
// that an event kept by a sink keeps only its own record's memory.

// DecodeEvent decodes an events-topic record into e, which it overwrites
// whole. The three projectors of the topic decode every record, so this is
// on their hottest path.
func DecodeEvent(b []byte, e *Event) error {
	*e = Event{}
	if readEvent(b, e) {
		return nil
	}
	*e = Event{}
	return decodeGeneral(b, e)
}

// decodeGeneral is DecodeEvent by goccy/go-json. Some broken records make
// it panic (an index out of range on a string cut short after an escape):
// that is an error here, so that a record like that is skipped as
// undecodable rather than stopping the fold on every start.
func decodeGeneral(b []byte, e *Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			*e = Event{}
			err = fmt.Errorf("records: the event record cannot be decoded: %v", p)
		}
	}()
	return gojson.Unmarshal(b, e)
}

// EncodeEvent is the record of e on the events topic.
func EncodeEvent(e *Event) ([]byte, error) { return gojson.Marshal(e) }

// eventParts are the objects of one record, allocated together.
type eventParts struct {
	pl     Placement
	pg     Page
	ob     Object
	en, aa Entity
	value  [1]string // a page value of one element
}

// readEvent reads the form EncodeEvent writes into e (zero); false for
// anything else (e is then partly written).
func readEvent(b []byte, e *Event) bool {
	r := eventReader{b: b}
	r.lit(`{"k":`)
	if r.has(`-`) { // goccy/go-json refuses a negative kind, -0 too
		return false
	}
	k := r.int(3)
	if k > 255 {
		return false
	}
	e.Kind = Kind(k)
	// The strings' values are slices of one copy of the record.
	r.text = make([]byte, len(b))
	copy(r.text, b)
	r.lit(`,"mp":`)
	e.MarketplaceID = r.str()
	r.lit(`,"id":`)
	e.ID = r.str()
	r.lit(`,"at":`)
	e.OccurredAtMs = r.int(18)
	r.lit(`,"rx":`)
	e.ReceivedAtMs = r.int(18)
	r.lit(`,"u":`)
	e.OpaqueUserID = r.str()
	if r.bad {
		return false
	}
	if r.has(`,"rb":`) {
		e.ResolvedBidID = r.str()
	}
	var parts *eventParts
	part := func() *eventParts {
		if parts == nil {
			parts = new(eventParts)
		}
		return parts
	}
	if r.has(`,"en":`) {
		e.Entity = &part().en
		r.entity(e.Entity)
	}
	if r.has(`,"aa":`) {
		e.AdditionalAttribution = &part().aa
		r.entity(e.AdditionalAttribution)
	}
	if r.has(`,"pl":`) {
		e.Placement = &part().pl
		r.placement(e.Placement)
	}
	if r.has(`,"pg":`) {
		p := part()
		e.Page = &p.pg
		r.page(e.Page, &p.value)
	}
	if r.has(`,"ob":`) {
		e.Object = &part().ob
		r.object(e.Object)
	}
	if r.has(`,"xc":`) {
		e.ExternalCampaignID = r.str()
	}
	if r.has(`,"xv":`) {
		e.ExternalVendorID = r.str()
	}
	if r.has(`,"dt":`) {
		e.DeviceType = r.str()
	}
	if r.has(`,"ch":`) {
		e.Channel = r.str()
	}
	if r.has(`,"ct":`) {
		e.ClickType = r.str()
	}
	if r.has(`,"it":`) {
		e.Items = r.items()
	}
	return r.has(`}`) && r.i == len(b)
}

// eventReader walks a record: once bad, every step does nothing.
type eventReader struct {
	b    []byte
	i    int
	text []byte // the record's copy, where its strings' values are
	bad  bool
}

// lit steps over l, which must be next, else the reader is bad.
func (r *eventReader) lit(l string) {
	if !r.has(l) {
		r.bad = true
	}
}

// has steps over l when it is next, and reports whether it was.
func (r *eventReader) has(l string) bool {
	if !r.bad && len(r.b)-r.i >= len(l) && string(r.b[r.i:r.i+len(l)]) == l {
		r.i += len(l)
		return true
	}
	return false
}

// field steps over the key k of an object's optional field (`"k":`) when
// it is next, after a comma unless it is the object's first (*more false),
// and sets *more.
func (r *eventReader) field(more *bool, k string) bool {
	if r.bad {
		return false
	}
	i := r.i
	if *more {
		if i >= len(r.b) || r.b[i] != ',' {
			return false
		}
		i++
	}
	if len(r.b)-i >= len(k) && string(r.b[i:i+len(k)]) == k {
		r.i, *more = i+len(k), true
		return true
	}
	return false
}

// str reads the string that is next. Its value is a slice of r.text, the
// record's copy: a string of plain ASCII (the usual) is its own value there;
// another is decoded over its text in the copy (jsontext.DecodeString:
// never longer than the text, from the record's own bytes).
func (r *eventReader) str() string {
	b, i := r.b, r.i
	if r.bad || i >= len(b) || b[i] != '"' {
		r.bad = true
		return ""
	}
	start := i + 1
	if i = jsontext.PlainEnd(b, start); i < len(b) && b[i] == '"' {
		r.i = i + 1
		if i == start {
			return ""
		}
		// r.text is written once, before any of its strings is made.
		return unsafe.String(&r.text[start], i-start)
	}
	out, end, ok := jsontext.DecodeString(r.text[:start], b, start-1)
	if !ok {
		r.bad = true
		return ""
	}
	r.i = end
	if len(out) == start {
		return ""
	}
	// Written over this string's own text (out never outgrows it), before
	// the string is made: the copy's other strings are not touched.
	return unsafe.String(&out[start], len(out)-start)
}

// int reads the integer that is next, of at most digits digits (at most
// 18, so that it cannot overflow; a longer one, or one with a leading
// zero, a fraction or an exponent, makes the reader bad: goccy/go-json
// reads those).
func (r *eventReader) int(digits int) int64 {
	if r.bad {
		return 0
	}
	b, i := r.b, r.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + int64(c)
	}
	n := i - start
	if n == 0 || n > digits || (n > 1 && b[start] == '0') || (i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) {
		r.bad = true
		return 0
	}
	r.i = i
	if neg {
		return -v
	}
	return v
}

// int32 reads an integer of at most 9 digits.
func (r *eventReader) int32() int32 { return int32(r.int(9)) }

func (r *eventReader) entity(en *Entity) {
	r.lit(`{"t":`)
	en.Type = r.str()
	r.lit(`,"i":`)
	en.ID = r.str()
	r.lit(`}`)
}

func (r *eventReader) placement(p *Placement) {
	r.lit(`{`)
	var more bool
	if r.field(&more, `"p":`) {
		p.Path = r.str()
	}
	if r.field(&more, `"po":`) {
		p.Position = r.int32()
	}
	if r.field(&more, `"pa":`) {
		p.Page = r.int32()
	}
	if r.field(&more, `"ps":`) {
		p.PageSize = r.int32()
	}
	if r.field(&more, `"pr":`) {
		p.ProductID = r.str()
	}
	if r.field(&more, `"ca":`) {
		p.CategoryIDs = r.strs(nil)
	}
	if r.field(&more, `"sq":`) {
		p.SearchQuery = r.str()
	}
	r.lit(`}`)
}

func (r *eventReader) page(p *Page, one *[1]string) {
	r.lit(`{"t":`)
	p.Type = r.str()
	r.lit(`,"i":`)
	p.ID = r.str()
	if r.has(`,"v":`) {
		p.Value = r.strs(one)
	}
	r.lit(`}`)
}

func (r *eventReader) object(o *Object) {
	r.lit(`{"t":`)
	o.Type = r.str()
	if r.has(`,"a":`) {
		o.AssetID = r.str()
	}
	if r.has(`,"c":`) {
		o.ClickType = r.str()
	}
	r.lit(`}`)
}

// strs reads an array of strings (not an empty one: goccy/go-json reads
// that, as an empty slice). One of a single element goes to one, when
// given.
func (r *eventReader) strs(one *[1]string) []string {
	var buf [8]string
	out := buf[:0]
	r.lit(`[`)
	for {
		out = append(out, r.str())
		if r.bad || !r.has(`,`) {
			break
		}
	}
	r.lit(`]`)
	if r.bad {
		return nil
	}
	if len(out) == 1 && one != nil {
		one[0] = out[0]
		return one[:]
	}
	return append([]string(nil), out...)
}

// items reads a purchase's items (not an empty array).
func (r *eventReader) items() []Item {
	var buf [8]Item
	out := buf[:0]
	r.lit(`[`)
	for {
		var it Item
		r.lit(`{"p":`)
		it.ProductID = r.str()
		r.lit(`,"pr":`)
		it.UnitPriceMicros = r.int(18)
		r.lit(`,"q":`)
		it.Quantity = r.int(18)
		if r.has(`,"v":`) {
			it.VendorID = r.str()
		}
		r.lit(`}`)
		out = append(out, it)
		if r.bad || !r.has(`,`) {
			break
		}
	}
	r.lit(`]`)
	if r.bad {
		return nil
	}
	return append([]Item(nil), out...)
}
