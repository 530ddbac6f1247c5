package catalog

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A catalog of a million products is written once through the API and read
// back from Kafka by every process at start, so the product state has a
// hand-written JSON encoding (append-based, no reflection) and a decoder
// for exactly that encoding that makes one string allocation per product.
// Anything the fast decoder does not recognise (escapes in a name, another
// field order, white space) goes through encoding/json instead, so any
// valid JSON of the same shape decodes.

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; HTML characters are not escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendStringList(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// MarshalJSON writes the stored form: {"name","active","vendors",
// "categories","priceMicros","qualityScore","details"}, empty ones left out.
func (p Product) MarshalJSON() ([]byte, error) {
	return p.appendJSON(make([]byte, 0, 96+len(p.Name)+len(p.Details)+16*(len(p.Vendors)+len(p.Categories)))), nil
}

func (p *Product) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, p.Name)
	if p.Active {
		b = append(b, `,"active":true`...)
	} else {
		b = append(b, `,"active":false`...)
	}
	if len(p.Vendors) > 0 {
		b = append(b, `,"vendors":`...)
		b = appendStringList(b, p.Vendors)
	}
	if len(p.Categories) > 0 {
		b = append(b, `,"categories":`...)
		b = appendStringList(b, p.Categories)
	}
	if p.PriceMicros != 0 {
		b = append(b, `,"priceMicros":`...)
		b = strconv.AppendInt(b, p.PriceMicros, 10)
	}
	if p.QualityScore != 0 {
		b = append(b, `,"qualityScore":`...)
		b = strconv.AppendFloat(b, p.QualityScore, 'g', -1, 64)
	}
	if p.Details != "" {
		b = append(b, `,"details":`...)
		b = append(b, p.Details...)
	}
	return append(b, '}')
}

// productJSON is the stored form for encoding/json (the slow path).
type productJSON struct {
	Name         string          `json:"name"`
	Active       bool            `json:"active"`
	Vendors      []string        `json:"vendors"`
	Categories   []string        `json:"categories"`
	PriceMicros  int64           `json:"priceMicros"`
	QualityScore float64         `json:"qualityScore"`
	Details      json.RawMessage `json:"details"`
}

// UnmarshalJSON reads the stored form.
func (p *Product) UnmarshalJSON(data []byte) error {
	if p.decodeFast(data) {
		return nil
	}
	var j productJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*p = Product{Name: j.Name, Active: j.Active, PriceMicros: j.PriceMicros, QualityScore: j.QualityScore}
	if len(j.Details) > 0 && string(j.Details) != "null" {
		p.Details = string(j.Details)
	}
	lists := make([]string, 0, len(j.Vendors)+len(j.Categories))
	lists = append(append(lists, j.Vendors...), j.Categories...)
	p.setLists(lists, len(j.Vendors))
	return nil
}

// setLists points Vendors and Categories into one backing array.
func (p *Product) setLists(lists []string, nVendors int) {
	p.Vendors, p.Categories = nil, nil
	if nVendors > 0 {
		p.Vendors = lists[:nVendors:nVendors]
	}
	if len(lists) > nVendors {
		p.Categories = lists[nVendors:len(lists):len(lists)]
	}
}

// fastScanner reads the compact JSON that appendJSON writes.
type fastScanner struct {
	b  []byte
	i  int
	ok bool
}

func (s *fastScanner) lit(l string) bool {
	if s.ok && len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

func (s *fastScanner) expect(l string) {
	if !s.lit(l) {
		s.ok = false
	}
}

// str reads a string without escapes and returns its content's span.
func (s *fastScanner) str() (lo, hi int) {
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != '"' {
		s.ok = false
		return 0, 0
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			lo, hi = s.i+1, j
			s.i = j + 1
			return lo, hi
		case c == '\\' || c < 0x20:
			s.ok = false
			return 0, 0
		}
	}
	s.ok = false
	return 0, 0
}

// strList reads ["a","b"] as spans.
func (s *fastScanner) strList(spans [][2]int) [][2]int {
	s.expect("[")
	if s.lit("]") {
		return spans
	}
	for s.ok {
		lo, hi := s.str()
		spans = append(spans, [2]int{lo, hi})
		if s.lit("]") {
			return spans
		}
		s.expect(",")
	}
	return spans
}

// number reads a JSON number's span.
func (s *fastScanner) number() (lo, hi int) {
	lo = s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.i++
			continue
		}
		break
	}
	if s.i == lo {
		s.ok = false
	}
	return lo, s.i
}

// object skips a JSON object (assumed valid: the log's JSON was checked by
// the decoder that handed it over) and returns its span.
func (s *fastScanner) object() (lo, hi int) {
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != '{' {
		s.ok = false
		return 0, 0
	}
	lo = s.i
	depth := 0
	for j := s.i; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			for j++; j < len(s.b) && s.b[j] != '"'; j++ {
				if s.b[j] == '\\' {
					j++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i = j + 1
				return lo, s.i
			}
		}
	}
	s.ok = false
	return 0, 0
}

// decodeFast decodes what appendJSON wrote, with one string allocation for
// every text of the product and one array for both lists. It returns false
// (leaving p unspecified) for anything else.
func (p *Product) decodeFast(data []byte) bool {
	s := fastScanner{b: data, ok: true}
	var spans [16][2]int
	lists := spans[:0]
	s.expect(`{"name":`)
	nlo, nhi := s.str()
	active := false
	switch {
	case s.lit(`,"active":true`):
		active = true
	case s.lit(`,"active":false`):
	default:
		return false
	}
	nVendors := 0
	if s.lit(`,"vendors":`) {
		lists = s.strList(lists)
		nVendors = len(lists)
	}
	if s.lit(`,"categories":`) {
		lists = s.strList(lists)
	}
	var price int64
	if s.lit(`,"priceMicros":`) {
		lo, hi := s.number()
		v, err := strconv.ParseInt(string(data[lo:hi]), 10, 64)
		if err != nil {
			return false
		}
		price = v
	}
	var score float64
	if s.lit(`,"qualityScore":`) {
		lo, hi := s.number()
		v, err := strconv.ParseFloat(string(data[lo:hi]), 64)
		if err != nil {
			return false
		}
		score = v
	}
	dlo, dhi := 0, 0
	if s.lit(`,"details":`) {
		dlo, dhi = s.object()
	}
	s.expect("}")
	if !s.ok || s.i != len(data) {
		return false
	}
	// One string holds the name, the list items and the details.
	size := nhi - nlo + dhi - dlo
	for _, sp := range lists {
		size += sp[1] - sp[0]
	}
	var sb strings.Builder
	sb.Grow(size)
	sb.Write(data[nlo:nhi])
	for _, sp := range lists {
		sb.Write(data[sp[0]:sp[1]])
	}
	sb.Write(data[dlo:dhi])
	all := sb.String()
	off := 0
	take := func(n int) string {
		v := all[off : off+n]
		off += n
		return v
	}
	*p = Product{Name: take(nhi - nlo), Active: active, PriceMicros: price, QualityScore: score}
	if len(lists) > 0 {
		arr := make([]string, len(lists))
		for k, sp := range lists {
			arr[k] = take(sp[1] - sp[0])
		}
		p.setLists(arr, nVendors)
	}
	p.Details = take(dhi - dlo)
	return true
}
