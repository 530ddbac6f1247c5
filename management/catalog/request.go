package catalog

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/endcap/endcap/internal/jsontext"
)

// DecodeProducts decodes the body of a bulk upsert, {"products": [...]},
// the way encoding/json decodes it into struct{ Products []ProductInput },
// about five times faster: 500 products are ≈ 420 KB, and a catalog import
// sends thousands of them. Strings without escapes share the body's memory
// (the caller must not modify body afterwards), so a product costs a few
// allocations instead of one per field.
//
// It returns ok=false for any body it does not decode exactly as
// encoding/json would (invalid JSON, a value of an unexpected type, a key
// that matches a field only case-insensitively, ...): the caller then
// decodes with encoding/json, which accepts or reports it. present is
// whether "products" was given and not null.
func DecodeProducts(body []byte) (products []ProductInput, present, ok bool) {
	p := reqParser{s: unsafe.String(unsafe.SliceData(body), len(body))}
	p.ws()
	if !p.eat('{') {
		return nil, false, false
	}
	p.ws()
	if p.eat('}') {
		return nil, false, p.end()
	}
	for {
		key, kok := p.key()
		if !kok {
			return nil, false, false
		}
		switch {
		case key == "products":
			switch {
			case p.lit("null"):
				products, present = nil, false
			case p.peek('['):
				products = p.productList()
				present = true
			default:
				return nil, false, false
			}
		case foldsToKey(key, []string{"products"}):
			return nil, false, false
		default:
			p.skip()
		}
		if p.bad {
			return nil, false, false
		}
		p.ws()
		if p.eat('}') {
			break
		}
		if !p.eat(',') {
			return nil, false, false
		}
		p.ws()
	}
	if !p.end() {
		return nil, false, false
	}
	return products, present, true
}

// reqParser reads the body and checks its syntax as it goes (strings,
// numbers, literals, structure); the values it passes over (unknown fields,
// metadata) are checked with json.Valid. Anything it doubts is bad: the
// caller then lets encoding/json decide.
type reqParser struct {
	s   string
	i   int
	bad bool

	strs []string // backing of the *string fields, allocated in chunks
}

// body is the bytes of s, for jsontext.
func (p *reqParser) body() []byte { return unsafe.Slice(unsafe.StringData(p.s), len(p.s)) }

func (p *reqParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *reqParser) end() bool {
	p.ws()
	return p.i == len(p.s)
}

func (p *reqParser) peek(c byte) bool { return p.i < len(p.s) && p.s[p.i] == c }

func (p *reqParser) eat(c byte) bool {
	if p.peek(c) {
		p.i++
		return true
	}
	return false
}

func (p *reqParser) lit(l string) bool {
	if strings.HasPrefix(p.s[p.i:], l) {
		p.i += len(l)
		return true
	}
	return false
}

// str reads a string; without escapes it is a substring of the body. A
// string with escapes (or bytes that are not UTF-8) is decoded by
// jsontext.DecodeString, which leaves one that breaks the text rule to
// encoding/json (the API refuses it after either decoder).
func (p *reqParser) str() string {
	if !p.peek('"') {
		p.bad = true
		return ""
	}
	// The usual string, short and plain, is read here: for keys and ids of
	// a few bytes this loop is faster than DecodeString's word-at-a-time one.
	start := p.i + 1
	j := start
	ascii := true
	for j < len(p.s) && p.s[j] != '"' && p.s[j] != '\\' {
		c := p.s[j]
		if c < 0x20 {
			p.bad = true
			return ""
		}
		ascii = ascii && c < utf8.RuneSelf
		j++
	}
	if j < len(p.s) && p.s[j] == '"' && (ascii || utf8.ValidString(p.s[start:j])) {
		p.i = j + 1
		return p.s[start:j]
	}
	out, end, ok := jsontext.DecodeString(nil, p.body(), p.i)
	if !ok {
		p.bad = true
		return ""
	}
	p.i = end
	return string(out)
}

// skipStr passes over a string without decoding it.
func (p *reqParser) skipStr() {
	for j := p.i + 1; j < len(p.s); j++ {
		switch p.s[j] {
		case '\\':
			j++
		case '"':
			p.i = j + 1
			return
		default:
			if p.s[j] < 0x20 {
				p.bad = true
				return
			}
		}
	}
	p.bad = true
}

// key reads `"key" :` and returns the key.
func (p *reqParser) key() (string, bool) {
	k := p.str()
	p.ws()
	if p.bad || !p.eat(':') {
		return "", false
	}
	p.ws()
	return k, true
}

// skip passes over any value, checking it.
func (p *reqParser) skip() {
	switch {
	case p.peek('"'):
		p.str()
	case p.peek('{'), p.peek('['):
		start := p.i
		depth := 0
		for p.i < len(p.s) && !p.bad {
			switch p.s[p.i] {
			case '"':
				p.skipStr()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					p.i++
					if !json.Valid(unsafe.Slice(unsafe.StringData(p.s[start:p.i]), p.i-start)) {
						p.bad = true
					}
					return
				}
			}
			p.i++
		}
		p.bad = true
	case p.lit("true"), p.lit("false"), p.lit("null"):
	default:
		p.num()
	}
}

// num reads a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *reqParser) num() string {
	start := p.i
	if start >= len(p.s) {
		p.bad = true
		return ""
	}
	end, ok := jsontext.ValidNumber(p.body(), start)
	if !ok {
		p.bad = true
		return ""
	}
	p.i = end
	return p.s[start:end]
}

// raw returns the span of any value.
func (p *reqParser) raw() string {
	start := p.i
	p.skip()
	return p.s[start:p.i]
}

// newStr stores v where a *string field can point, in chunks of 64.
func (p *reqParser) newStr(v string) *string {
	if len(p.strs) == cap(p.strs) {
		p.strs = make([]string, 0, 64)
	}
	p.strs = append(p.strs, v)
	return &p.strs[len(p.strs)-1]
}

// optStr reads a string or null into a *string field.
func (p *reqParser) optStr() *string {
	if p.lit("null") {
		return nil
	}
	if !p.peek('"') {
		p.bad = true
		return nil
	}
	return p.newStr(p.str())
}

// number reads a number (or null) into a *json.Number field. A string is
// left to encoding/json, which has its own rules for quoted numbers.
func (p *reqParser) number() *json.Number {
	if p.lit("null") {
		return nil
	}
	if p.i >= len(p.s) || !(p.s[p.i] == '-' || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
		p.bad = true
		return nil
	}
	return (*json.Number)(p.newStr(p.num()))
}

// strList reads an array of strings (null items are "", as encoding/json
// makes them) or null.
func (p *reqParser) strList() []string {
	if p.lit("null") {
		return nil
	}
	if !p.eat('[') {
		p.bad = true
		return nil
	}
	list := []string{}
	p.ws()
	if p.eat(']') {
		return list
	}
	for !p.bad {
		switch {
		case p.lit("null"):
			list = append(list, "")
		case p.peek('"'):
			list = append(list, p.str())
		default:
			p.bad = true
			return nil
		}
		p.ws()
		if p.eat(']') {
			return list
		}
		if !p.eat(',') {
			p.bad = true
			return nil
		}
		p.ws()
	}
	return nil
}

func (p *reqParser) productList() []ProductInput {
	p.eat('[')
	list := []ProductInput{}
	p.ws()
	if p.eat(']') {
		return list
	}
	for !p.bad {
		if p.lit("null") {
			list = append(list, ProductInput{}) // as encoding/json does
		} else {
			list = append(list, ProductInput{})
			p.product(&list[len(list)-1])
		}
		p.ws()
		if p.eat(']') {
			return list
		}
		if !p.eat(',') {
			p.bad = true
			return nil
		}
		p.ws()
	}
	return nil
}

// productKeys are the JSON names of ProductInput's fields.
var productKeys = [...]string{"id", "name", "vendors", "categories", "description", "brand", "imageURL", "price",
	"active", "ean", "gtin", "quality_score", "metadata", "globalId", "link", "variantIds"}

// foldsToKey reports whether encoding/json could match key k to one of
// keys other than exactly (it matches names case-insensitively, with a
// few Unicode foldings): then the fast decoder leaves the body to it.
func foldsToKey(k string, keys []string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, f := range keys {
		if strings.EqualFold(k, f) {
			return true
		}
	}
	return false
}

// product reads one product object. A field given twice keeps its last
// value, as with encoding/json.
func (p *reqParser) product(in *ProductInput) {
	if !p.eat('{') {
		p.bad = true
		return
	}
	p.ws()
	if p.eat('}') {
		return
	}
	for !p.bad {
		k, ok := p.key()
		if !ok {
			p.bad = true
			return
		}
		switch k {
		case "id":
			in.ID = p.optStr()
		case "name":
			in.Name = p.optStr()
		case "vendors":
			in.Vendors = p.strList()
		case "categories":
			in.Categories = p.strList()
		case "description":
			in.Description = p.optStr()
		case "brand":
			in.Brand = p.brand(in.Brand)
		case "imageURL":
			in.ImageURL = p.optStr()
		case "price":
			in.Price = p.number()
		case "active":
			switch {
			case p.lit("true"):
				t := true
				in.Active = &t
			case p.lit("false"):
				f := false
				in.Active = &f
			case p.lit("null"):
				in.Active = nil
			default:
				p.bad = true
			}
		case "ean":
			in.EAN = p.optStr()
		case "gtin":
			in.GTIN = p.optStr()
		case "quality_score":
			in.QualityScore = p.number()
		case "metadata":
			in.Metadata = json.RawMessage(p.raw())
		case "globalId":
			in.GlobalID = p.optStr()
		case "link":
			in.Link = p.optStr()
		case "variantIds":
			in.VariantIDs = p.strList()
		default:
			if foldsToKey(k, productKeys[:]) {
				p.bad = true // encoding/json would match it case-insensitively
				return
			}
			p.skip()
		}
		p.ws()
		if p.eat('}') {
			return
		}
		if !p.eat(',') {
			p.bad = true
			return
		}
		p.ws()
	}
}

// brand reads the brand object or null; like encoding/json, a second
// "brand" key fills the same object.
func (p *reqParser) brand(b *BrandInput) *BrandInput {
	if p.lit("null") {
		return nil
	}
	if !p.eat('{') {
		p.bad = true
		return nil
	}
	if b == nil {
		b = &BrandInput{}
	}
	p.ws()
	if p.eat('}') {
		return b
	}
	for !p.bad {
		k, ok := p.key()
		if !ok {
			p.bad = true
			return nil
		}
		switch k {
		case "id":
			b.ID = p.optStr()
		case "name":
			b.Name = p.optStr()
		default:
			if foldsToKey(k, []string{"id", "name"}) {
				p.bad = true
				return nil
			}
			p.skip()
		}
		p.ws()
		if p.eat('}') {
			return b
		}
		if !p.eat(',') {
			p.bad = true
			return nil
		}
		p.ws()
	}
	return nil
}
