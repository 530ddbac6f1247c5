package catalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/endcap/endcap/internal/idlist"
	"github.com/endcap/endcap/internal/jsontext"
)

// A catalog of a million products is written once through the API and read
// back from Kafka by every process at start, and it lives in every
// process's memory. So a product is kept compact:
//
//   - On the log it is JSON (readable, and what the reporting projector
//     copies): {"name","active","vendors","categories","priceMicros",
//     "qualityScore","details":{description, brand, imageURL, ean, gtin,
//     metadata, globalId, link, variantIds}}, empty values left out. The
//     encoder is hand-written (append-based, no reflection).
//   - In memory, all its texts share one allocation: the name, the vendors'
//     and the categories' lists (packed, internal/idlist) and the detail
//     fields, the latter in a small binary form (tag, length, bytes), which
//     nothing reads until a client GETs the product. The product is one
//     heap object and one pointer (offsets into it), where a plain struct
//     of strings is a dozen objects and a pointer per id: what the garbage
//     collector pays for on every cycle.
//
// The decoder reads what the encoder writes, and falls back to
// encoding/json for any other valid JSON of the same shape (white space,
// another key order, unknown keys).

// Product is a product's stored state; the id is the entity key.
//
// Every API process holds every product's entry (docs/design/performance.md,
// Catalog in memory), so it is 48 bytes: its texts are one string and
// offsets into it.
type Product struct {
	// text holds, in one allocation, the name, the vendors' and the
	// categories' packed lists (idlist) and the binary details (see
	// appendDetailsBin): text[:nameEnd], text[nameEnd:catAt],
	// text[catAt:detAt] and text[detAt:].
	text                  string
	PriceMicros           int64   // 0: no price
	QualityScore          float64 // 0: not set
	nameEnd, catAt, detAt uint32
	Active                bool
	// spilled: the name and the details are on disk (Service.keepProduct),
	// text holds the lists only. Service.full reads them back.
	spilled bool
}

// Name is the product's name ("" while spilled: Service.full reads it).
func (p *Product) Name() string { return p.text[:p.nameEnd] }

// Vendors are the vendors allowed to promote the product.
func (p *Product) Vendors() idlist.List { return idlist.List(p.text[p.nameEnd:p.catAt]) }

// Categories are the product's category ids.
func (p *Product) Categories() idlist.List { return idlist.List(p.text[p.catAt:p.detAt]) }

// details is the binary form of the fields nothing but GET reads.
func (p *Product) details() string { return p.text[p.detAt:] }

// detailFields decodes the fields nothing but GET reads.
func (p *Product) detailFields() productDetails { return decodeDetailsBin(p.details()) }

// setText makes the product's texts: its name, lists and binary details,
// in one allocation.
func (p *Product) setText(name string, vendors, categories idlist.List, details string) {
	all := name + string(vendors) + string(categories) + details
	p.text = all
	p.nameEnd = uint32(len(name))
	p.catAt = p.nameEnd + uint32(len(vendors))
	p.detAt = p.catAt + uint32(len(categories))
}

// set makes the product's texts from its fields, in one allocation.
func (p *Product) set(name string, vendors, categories []string, d *productDetails) {
	b := make([]byte, 0, len(name)+idlist.Size(vendors)+idlist.Size(categories)+len(d.Description)+128)
	b = append(b, name...)
	b = idlist.Append(b, vendors)
	catAt := len(b)
	b = idlist.Append(b, categories)
	detAt := len(b)
	b = appendDetailsBin(b, d)
	p.text, p.nameEnd, p.catAt, p.detAt = string(b), uint32(len(name)), uint32(catAt), uint32(detAt)
}

// setName sets the name, keeping the lists and details.
func (p *Product) setName(name string) {
	p.setText(name, p.Vendors(), p.Categories(), p.details())
}

// setLists sets both lists, keeping the name and details.
func (p *Product) setLists(vendors, categories []string) {
	p.setText(p.Name(), idlist.Of(vendors...), idlist.Of(categories...), p.details())
}

// setDetails sets the details, keeping the name and lists.
func (p *Product) setDetails(d *productDetails) {
	p.setText(p.Name(), p.Vendors(), p.Categories(), string(appendDetailsBin(nil, d)))
}

// --- texts on disk (the view's form) ---

// appendText appends what the view keeps of p on disk: the version it was
// applied at (uvarint), the name's length (uvarint), the name and the
// binary details.
func (p *Product) appendText(b []byte, version int64) []byte {
	b = binary.AppendUvarint(b, uint64(version))
	b = binary.AppendUvarint(b, uint64(p.nameEnd))
	b = append(b, p.Name()...)
	return append(b, p.details()...)
}

// dropText leaves p with its lists (in an allocation of their own), its
// numbers and flags: its name and details are on disk.
func (p *Product) dropText() {
	*p = Product{PriceMicros: p.PriceMicros, QualityScore: p.QualityScore, Active: p.Active, spilled: true,
		text: strings.Clone(p.text[p.nameEnd:p.detAt]), catAt: p.catAt - p.nameEnd, detAt: p.detAt - p.nameEnd}
}

// withText returns p with the name and details of text (appendText's
// form) and the version text was written at.
func (p Product) withText(text []byte) (Product, int64, bool) {
	ver, k := binary.Uvarint(text)
	if k <= 0 {
		return Product{}, 0, false
	}
	text = text[k:]
	n, k := binary.Uvarint(text)
	if k <= 0 || uint64(len(text)-k) < n {
		return Product{}, 0, false
	}
	text = text[k:]
	p.setText(string(text[:n]), p.Vendors(), p.Categories(), string(text[n:]))
	p.spilled = false
	return p, int64(ver), true
}

// --- JSON encoding (the log's form) ---

// appendJSONString appends s as a JSON string (jsontext.AppendString).
func appendJSONString(b []byte, s string) []byte { return jsontext.AppendString(b, s) }

func appendStringList(b []byte, list iter.Seq[string]) []byte {
	b = append(b, '[')
	first := true
	for s := range list {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSON appends the details as a JSON object, empty fields left out
// ("{}" when all are empty).
func (d *productDetails) appendJSON(b []byte) []byte {
	b = append(b, '{')
	n := len(b)
	key := func(name string) {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	str := func(name, v string) {
		if v != "" {
			key(name)
			b = appendJSONString(b, v)
		}
	}
	str("description", d.Description)
	if d.Brand != nil {
		key("brand")
		b = append(b, `{"id":`...)
		b = appendJSONString(b, d.Brand.ID)
		b = append(b, `,"name":`...)
		b = appendJSONString(b, d.Brand.Name)
		b = append(b, '}')
	}
	str("imageURL", d.ImageURL)
	str("ean", d.EAN)
	str("gtin", d.GTIN)
	if len(d.Metadata) > 0 {
		key("metadata")
		b = append(b, d.Metadata...)
	}
	str("globalId", d.GlobalID)
	str("link", d.Link)
	if len(d.VariantIDs) > 0 {
		key("variantIds")
		b = appendStringList(b, slices.Values(d.VariantIDs))
	}
	return append(b, '}')
}

func (d *productDetails) empty() bool {
	return d.Description == "" && d.Brand == nil && d.ImageURL == "" && d.EAN == "" && d.GTIN == "" &&
		len(d.Metadata) == 0 && d.GlobalID == "" && d.Link == "" && len(d.VariantIDs) == 0
}

// errSpilled: a product of the view whose texts are on disk cannot be
// written as it is (Service.full reads them back).
var errSpilled = errors.New("catalog: the product's name and details are on disk")

// MarshalJSON writes the log's form of the product.
func (p Product) MarshalJSON() ([]byte, error) {
	if p.spilled {
		return nil, errSpilled
	}
	var d *productDetails
	if p.details() != "" {
		dd := decodeDetailsBin(p.details())
		d = &dd
	}
	size := 112 + len(p.text)
	if d != nil {
		size += 160 + len(d.Description) + len(d.ImageURL) + len(d.Link) + len(d.Metadata) + 12*len(d.VariantIDs)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"name":`...)
	b = appendJSONString(b, p.Name())
	if p.Active {
		b = append(b, `,"active":true`...)
	} else {
		b = append(b, `,"active":false`...)
	}
	if v := p.Vendors(); v.Len() > 0 {
		b = append(b, `,"vendors":`...)
		b = appendStringList(b, v.All())
	}
	if c := p.Categories(); c.Len() > 0 {
		b = append(b, `,"categories":`...)
		b = appendStringList(b, c.All())
	}
	if p.PriceMicros != 0 {
		b = append(b, `,"priceMicros":`...)
		b = strconv.AppendInt(b, p.PriceMicros, 10)
	}
	if p.QualityScore != 0 {
		b = append(b, `,"qualityScore":`...)
		b = strconv.AppendFloat(b, p.QualityScore, 'g', -1, 64)
	}
	if d != nil && !d.empty() {
		b = append(b, `,"details":`...)
		b = d.appendJSON(b)
	}
	return append(b, '}'), nil
}

// --- binary details (memory's form) ---

// Tags of the binary detail fields: each field is its tag, the uvarint
// length of its bytes, and the bytes.
const (
	tagDescription = 1 + iota
	tagBrandID
	tagBrandName
	tagImageURL
	tagEAN
	tagGTIN
	tagMetadata // compact JSON
	tagGlobalID
	tagLink
	tagVariantID // once per variant id
)

func appendField(b []byte, tag byte, v string) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendDetailsBin appends the binary form of d.
func appendDetailsBin(b []byte, d *productDetails) []byte {
	if d.Description != "" {
		b = appendField(b, tagDescription, d.Description)
	}
	if d.Brand != nil {
		b = appendField(b, tagBrandID, d.Brand.ID)
		b = appendField(b, tagBrandName, d.Brand.Name)
	}
	for _, f := range [...]struct {
		tag byte
		v   string
	}{{tagImageURL, d.ImageURL}, {tagEAN, d.EAN}, {tagGTIN, d.GTIN}, {tagMetadata, string(d.Metadata)}, {tagGlobalID, d.GlobalID}, {tagLink, d.Link}} {
		if f.v != "" {
			b = appendField(b, f.tag, f.v)
		}
	}
	for _, v := range d.VariantIDs {
		b = appendField(b, tagVariantID, v)
	}
	return b
}

// decodeDetailsBin reads what appendDetailsBin wrote. The strings share s.
func decodeDetailsBin(s string) productDetails {
	var d productDetails
	for len(s) > 0 {
		tag := s[0]
		n, k := binary.Uvarint([]byte(s[1:min(len(s), 11)]))
		if k <= 0 || uint64(len(s)-1-k) < n {
			break // cannot happen: written by appendDetailsBin
		}
		v := s[1+k : 1+k+int(n)]
		s = s[1+k+int(n):]
		switch tag {
		case tagDescription:
			d.Description = v
		case tagBrandID:
			if d.Brand == nil {
				d.Brand = &Brand{}
			}
			d.Brand.ID = v
		case tagBrandName:
			if d.Brand == nil {
				d.Brand = &Brand{}
			}
			d.Brand.Name = v
		case tagImageURL:
			d.ImageURL = v
		case tagEAN:
			d.EAN = v
		case tagGTIN:
			d.GTIN = v
		case tagMetadata:
			d.Metadata = json.RawMessage(v)
		case tagGlobalID:
			d.GlobalID = v
		case tagLink:
			d.Link = v
		case tagVariantID:
			d.VariantIDs = append(d.VariantIDs, v)
		}
	}
	return d
}

// --- decoding ---

// productJSON is the log's form for encoding/json (the slow path).
type productJSON struct {
	Name         string          `json:"name"`
	Active       bool            `json:"active"`
	Vendors      []string        `json:"vendors"`
	Categories   []string        `json:"categories"`
	PriceMicros  int64           `json:"priceMicros"`
	QualityScore float64         `json:"qualityScore"`
	Details      *productDetails `json:"details"`
}

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// UnmarshalJSON reads the log's form.
func (p *Product) UnmarshalJSON(data []byte) error {
	bp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bp)
	var spans [24]int
	if p.decode(data, bp, spans[:0]) {
		return nil
	}
	var j productJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	// Build the same compact form from the decoded values.
	b := append((*bp)[:0], j.Name...)
	ends := spans[:0]
	ends = append(ends, len(b))
	for _, s := range j.Vendors {
		b = append(b, s...)
		ends = append(ends, len(b))
	}
	for _, s := range j.Categories {
		b = append(b, s...)
		ends = append(ends, len(b))
	}
	if j.Details != nil {
		if m := j.Details.Metadata; len(m) > 0 {
			var cm bytes.Buffer
			if json.Compact(&cm, m) == nil {
				j.Details.Metadata = cm.Bytes()
			}
			if string(j.Details.Metadata) == "null" {
				j.Details.Metadata = nil
			}
		}
		b = appendDetailsBin(b, j.Details)
	}
	*bp = b
	p.build(b, ends, len(j.Vendors))
	p.Active, p.PriceMicros, p.QualityScore = j.Active, j.PriceMicros, j.QualityScore
	return nil
}

// build makes the product's texts from b, one allocation: b holds the
// name, the list items and the binary details; ends[k] is where item k
// ends (item 0 is the name; items 1 to nVendors are the vendors, the
// others the categories). The lists are packed (idlist) in the allocation.
func (p *Product) build(b []byte, ends []int, nVendors int) {
	nameEnd, items := ends[0], ends[1:]
	listsEnd := nameEnd
	if len(items) > 0 {
		listsEnd = items[len(items)-1]
	}
	vendors, cats := items[:nVendors], items[nVendors:]
	size := len(b)
	if len(vendors) > 0 {
		size += idlist.HeaderSize(len(vendors), vendors[len(vendors)-1]-nameEnd)
	}
	if len(cats) > 0 {
		size += idlist.HeaderSize(len(cats), cats[len(cats)-1]-listEnd(nameEnd, vendors))
	}
	var sb strings.Builder
	sb.Grow(size)
	sb.Write(b[:nameEnd])
	from := nameEnd
	if len(vendors) > 0 {
		writeList(&sb, b, from, vendors)
		from = vendors[len(vendors)-1]
	}
	catAt := sb.Len()
	if len(cats) > 0 {
		writeList(&sb, b, from, cats)
	}
	detAt := sb.Len()
	sb.Write(b[listsEnd:])
	*p = Product{text: sb.String(), nameEnd: uint32(nameEnd), catAt: uint32(catAt), detAt: uint32(detAt)}
}

// listEnd is where the items of ends end (from when there are none).
func listEnd(from int, ends []int) int {
	if len(ends) == 0 {
		return from
	}
	return ends[len(ends)-1]
}

// writeList writes the packed list (idlist) of the items of b that start at
// from and end at ends (absolute in b).
func writeList(sb *strings.Builder, b []byte, from int, ends []int) {
	var hdr [64]byte
	sb.Write(idlist.AppendHeader(hdr[:0], from, ends))
	sb.Write(b[from:ends[len(ends)-1]])
}

// decoder reads the compact JSON the encoder writes.
type decoder struct {
	b   []byte
	i   int
	bad bool
}

func (d *decoder) lit(l string) bool {
	if !d.bad && len(d.b)-d.i >= len(l) && string(d.b[d.i:d.i+len(l)]) == l {
		d.i += len(l)
		return true
	}
	return false
}

func (d *decoder) expect(l string) {
	if !d.lit(l) {
		d.bad = true
	}
}

// str appends the content of the JSON string at the cursor to dst. A
// string that breaks the text rule (jsontext.ValidString; in a record written
// by the encoder only \u0000 can) is bad: encoding/json then reads the
// record.
func (d *decoder) str(dst []byte) []byte {
	if d.bad || d.i >= len(d.b) || d.b[d.i] != '"' {
		d.bad = true
		return dst
	}
	out, end, ok := jsontext.DecodeString(dst, d.b, d.i)
	if !ok {
		d.bad = true
		return dst
	}
	d.i = end
	return out
}

// strList appends the items of ["a","b"] to dst and their ends to ends.
func (d *decoder) strList(dst []byte, ends []int) ([]byte, []int) {
	d.expect("[")
	if d.lit("]") {
		return dst, ends
	}
	for !d.bad {
		dst = d.str(dst)
		ends = append(ends, len(dst))
		if d.lit("]") {
			break
		}
		d.expect(",")
	}
	return dst, ends
}

func (d *decoder) number() []byte {
	lo := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			d.i++
			continue
		}
		break
	}
	if d.i == lo {
		d.bad = true
	}
	return d.b[lo:d.i]
}

// object returns the JSON object at the cursor, assumed valid (the log's
// records were checked by the decoder that handed them over).
func (d *decoder) object() []byte {
	if d.bad || d.i >= len(d.b) || d.b[d.i] != '{' {
		d.bad = true
		return nil
	}
	depth := 0
	for j := d.i; j < len(d.b); j++ {
		switch d.b[j] {
		case '"':
			for j++; j < len(d.b) && d.b[j] != '"'; j++ {
				if d.b[j] == '\\' {
					j++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				o := d.b[d.i : j+1]
				d.i = j + 1
				return o
			}
		}
	}
	d.bad = true
	return nil
}

// field appends one binary detail field whose value is the JSON string at
// the cursor.
func (d *decoder) field(dst []byte, tag byte) []byte {
	dst = append(dst, tag, 0, 0, 0) // room for a uvarint length up to 2^21
	start := len(dst)
	dst = d.str(dst)
	n := len(dst) - start
	if n >= 1<<21 {
		d.bad = true
		return dst
	}
	var lb [3]byte
	k := binary.PutUvarint(lb[:], uint64(n))
	copy(dst[start-3:], lb[:k])
	if k < 3 {
		copy(dst[start-3+k:], dst[start:])
		dst = dst[:len(dst)-(3-k)]
	}
	return dst
}

// details appends the binary form of the details object at the cursor.
func (d *decoder) details(dst []byte) []byte {
	d.expect("{")
	if d.lit("}") {
		return dst
	}
	for !d.bad {
		switch {
		case d.lit(`"description":`):
			dst = d.field(dst, tagDescription)
		case d.lit(`"brand":{"id":`):
			dst = d.field(dst, tagBrandID)
			d.expect(`,"name":`)
			dst = d.field(dst, tagBrandName)
			d.expect("}")
		case d.lit(`"imageURL":`):
			dst = d.field(dst, tagImageURL)
		case d.lit(`"ean":`):
			dst = d.field(dst, tagEAN)
		case d.lit(`"gtin":`):
			dst = d.field(dst, tagGTIN)
		case d.lit(`"metadata":`):
			o := d.object()
			dst = appendField(dst, tagMetadata, string(o))
		case d.lit(`"globalId":`):
			dst = d.field(dst, tagGlobalID)
		case d.lit(`"link":`):
			dst = d.field(dst, tagLink)
		case d.lit(`"variantIds":[`):
			if !d.lit("]") {
				for !d.bad {
					dst = d.field(dst, tagVariantID)
					if d.lit("]") {
						break
					}
					d.expect(",")
				}
			}
		default:
			d.bad = true
		}
		if d.lit("}") {
			break
		}
		d.expect(",")
	}
	return dst
}

// decode reads the encoder's form into p, its texts built in *bp. It
// returns false when data is in another form (p is then unspecified).
func (p *Product) decode(data []byte, bp *[]byte, ends []int) bool {
	d := decoder{b: data}
	b := (*bp)[:0]
	d.expect(`{"name":`)
	b = d.str(b)
	ends = append(ends, len(b))
	active := false
	switch {
	case d.lit(`,"active":true`):
		active = true
	case d.lit(`,"active":false`):
	default:
		return false
	}
	nv := len(ends)
	if d.lit(`,"vendors":`) {
		b, ends = d.strList(b, ends)
	}
	nv = len(ends) - nv
	if d.lit(`,"categories":`) {
		b, ends = d.strList(b, ends)
	}
	var price int64
	var score float64
	if d.lit(`,"priceMicros":`) {
		v, err := strconv.ParseInt(string(d.number()), 10, 64)
		if err != nil {
			return false
		}
		price = v
	}
	if d.lit(`,"qualityScore":`) {
		v, err := strconv.ParseFloat(string(d.number()), 64)
		if err != nil {
			return false
		}
		score = v
	}
	if d.lit(`,"details":`) {
		b = d.details(b)
	}
	d.expect("}")
	*bp = b
	if d.bad || d.i != len(data) {
		return false
	}
	p.build(b, ends, nv)
	p.Active, p.PriceMicros, p.QualityScore = active, price, score
	return true
}
