package catalog

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/validation"
)

// Field limits of a product (spec "Product"; the ones the spec leaves open
// are documented in docs/reference/catalog.md).
const (
	MaxBatch          = 500  // products, vendors, categories or ids per request
	MaxIDLen          = 255  // product, vendor, category, brand ids; globalId; variant ids
	MaxNameLen        = 150  // product names are truncated to it
	MaxDescriptionLen = 5000 // descriptions are truncated to it
	MaxVariantIDs     = 50
	MaxListItems      = 100      // vendors and categories of one product
	MaxURLLen         = 2048     // imageURL, link
	MaxBrandNameLen   = 255      // brand.name
	MaxMetadataBytes  = 16 << 10 // metadata, compact JSON
)

// productDetails are the product fields nothing but GET reads.
type productDetails struct {
	Description string          `json:"description,omitempty"`
	Brand       *Brand          `json:"brand,omitempty"`
	ImageURL    string          `json:"imageURL,omitempty"`
	EAN         string          `json:"ean,omitempty"`
	GTIN        string          `json:"gtin,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	GlobalID    string          `json:"globalId,omitempty"`
	Link        string          `json:"link,omitempty"`
	VariantIDs  []string        `json:"variantIds,omitempty"`
}

// Brand of a product.
type Brand struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ProductInput is one product of an upsert request, as decoded from JSON.
// Pointers tell an absent (or null) field from an empty one.
type ProductInput struct {
	ID           *string         `json:"id"`
	Name         *string         `json:"name"`
	Vendors      []string        `json:"vendors"`
	Categories   []string        `json:"categories"`
	Description  *string         `json:"description"`
	Brand        *BrandInput     `json:"brand"`
	ImageURL     *string         `json:"imageURL"`
	Price        *json.Number    `json:"price"`
	Active       *bool           `json:"active"`
	EAN          *string         `json:"ean"`
	GTIN         *string         `json:"gtin"`
	QualityScore *json.Number    `json:"quality_score"`
	Metadata     json.RawMessage `json:"metadata"`
	GlobalID     *string         `json:"globalId"`
	Link         *string         `json:"link"`
	VariantIDs   []string        `json:"variantIds"`
}

// BrandInput is a product's brand as sent.
type BrandInput struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
}

// Warning is a change the service made to an accepted value (a truncated
// name, an ean stored as null), reported in the upsert response.
type Warning struct {
	Loc []any  `json:"loc"`
	Msg string `json:"msg"`
}

// ProductView is a product on the wire (GET). Absent optional values are
// null; lists are [] when empty.
type ProductView struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Vendors      []string        `json:"vendors"`
	Categories   []string        `json:"categories"`
	Description  *string         `json:"description"`
	Brand        *Brand          `json:"brand"`
	ImageURL     *string         `json:"imageURL"`
	Price        *json.Number    `json:"price"`
	Active       bool            `json:"active"`
	EAN          *string         `json:"ean"`
	GTIN         *string         `json:"gtin"`
	QualityScore *float64        `json:"quality_score"`
	Metadata     json.RawMessage `json:"metadata"`
	GlobalID     *string         `json:"globalId"`
	Link         *string         `json:"link"`
	VariantIDs   []string        `json:"variantIds"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// view renders a stored product.
func (p *Product) view(id string) ProductView {
	v := ProductView{
		ID: id, Name: p.Name(), Active: p.Active,
		Vendors: nonNil(p.Vendors().Strings()), Categories: nonNil(p.Categories().Strings()),
	}
	if p.PriceMicros > 0 {
		n := json.Number(money.Micros(p.PriceMicros).String())
		v.Price = &n
	}
	if p.QualityScore > 0 {
		q := p.QualityScore
		v.QualityScore = &q
	}
	d := p.detailFields()
	v.Description, v.Brand, v.ImageURL = strPtr(d.Description), d.Brand, strPtr(d.ImageURL)
	v.EAN, v.GTIN, v.GlobalID, v.Link = strPtr(d.EAN), strPtr(d.GTIN), strPtr(d.GlobalID), strPtr(d.Link)
	v.VariantIDs = nonNil(d.VariantIDs)
	v.Metadata = d.Metadata
	if len(v.Metadata) == 0 {
		v.Metadata = json.RawMessage("null")
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checker accumulates the errors of one request.
type checker struct {
	errs     validation.Errors
	warnings []Warning
}

func (c *checker) add(typ, msg string, loc ...any) { c.errs.Add(typ, msg, loc...) }

func loc(base []any, more ...any) []any {
	out := make([]any, 0, len(base)+len(more))
	return append(append(out, base...), more...)
}

// id checks a required identifier of 1..MaxIDLen characters.
func (c *checker) id(s *string, at []any, path ...any) string {
	switch {
	case s == nil:
		c.add(validation.Missing, "Field required", loc(at, path...)...)
	case *s == "":
		c.add(validation.TooShort, "String should have at least 1 character", loc(at, path...)...)
	case runeLen(*s) > MaxIDLen:
		c.add(validation.TooLong, "String should have at most "+strconv.Itoa(MaxIDLen)+" characters", loc(at, path...)...)
	default:
		return *s
	}
	return ""
}

// optString checks an optional string of 1..maxLen characters (null: "").
func (c *checker) optString(s *string, maxLen int, at []any, path ...any) string {
	switch {
	case s == nil:
		return ""
	case *s == "":
		c.add(validation.TooShort, "String should have at least 1 character", loc(at, path...)...)
	case runeLen(*s) > maxLen:
		c.add(validation.TooLong, "String should have at most "+strconv.Itoa(maxLen)+" characters", loc(at, path...)...)
	default:
		return *s
	}
	return ""
}

// url checks an optional absolute http(s) URL.
func (c *checker) url(s *string, at []any, path ...any) string {
	v := c.optString(s, MaxURLLen, at, path...)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add(validation.ValueError, "Input should be a valid absolute http or https URL", loc(at, path...)...)
		return ""
	}
	return v
}

// idList drops blank entries (the spec ignores them), checks the others'
// length, and removes repeats, keeping the first.
func (c *checker) idList(items []string, at []any, path ...any) []string {
	if len(items) == 0 {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, s := range items {
		if isBlank(s) {
			continue
		}
		if runeLen(s) > MaxIDLen {
			c.add(validation.TooLong, "String should have at most "+strconv.Itoa(MaxIDLen)+" characters", loc(loc(at, path...), i)...)
			continue
		}
		dup := false
		for _, o := range out {
			if o == s {
				dup = true
				break
			}
		}
		if !dup {
			if len(out) == MaxListItems {
				c.add(validation.TooLong, "List should have at most "+strconv.Itoa(MaxListItems)+" items after validation", loc(at, path...)...)
				return nil
			}
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out[:len(out):len(out)]
}

// product validates one product of an upsert; at is its location
// ("body", "products", i).
func (c *checker) product(in *ProductInput, at []any) (string, Product) {
	id := c.id(in.ID, at, "id")
	var p Product
	var d productDetails
	var name string

	switch {
	case in.Name == nil:
		c.add(validation.Missing, "Field required", loc(at, "name")...)
	case *in.Name == "":
		c.add(validation.TooShort, "String should have at least 1 character", loc(at, "name")...)
	default:
		var cut bool
		if name, cut = truncateRunes(*in.Name, MaxNameLen); cut {
			c.warnings = append(c.warnings, Warning{Loc: loc(at, "name"), Msg: "truncated to " + strconv.Itoa(MaxNameLen) + " characters"})
		}
	}
	vendors, categories := c.idList(in.Vendors, at, "vendors"), c.idList(in.Categories, at, "categories")

	if in.Description != nil {
		if *in.Description == "" {
			c.add(validation.TooShort, "String should have at least 1 character", loc(at, "description")...)
		} else {
			var cut bool
			if d.Description, cut = truncateRunes(*in.Description, MaxDescriptionLen); cut {
				c.warnings = append(c.warnings, Warning{Loc: loc(at, "description"), Msg: "truncated to " + strconv.Itoa(MaxDescriptionLen) + " characters"})
			}
		}
	}
	if in.Brand != nil {
		b := Brand{ID: c.id(in.Brand.ID, at, "brand", "id")}
		switch bn := in.Brand.Name; {
		case bn == nil:
			c.add(validation.Missing, "Field required", loc(at, "brand", "name")...)
		default:
			b.Name = c.optString(bn, MaxBrandNameLen, at, "brand", "name")
		}
		d.Brand = &b
	}
	d.ImageURL = c.url(in.ImageURL, at, "imageURL")
	d.Link = c.url(in.Link, at, "link")

	if in.Price != nil {
		m, problem, number := priceMicros(string(*in.Price))
		switch {
		case !number:
			c.add(validation.TypeError, "Input should be a valid number", loc(at, "price")...)
		case problem == money.OK:
			p.PriceMicros = m
		case problem == money.NotPositive:
			c.add(validation.ValueError, "Input should be greater than 0", loc(at, "price")...)
		case problem == money.TooSmall:
			c.add(validation.ValueError, "Input should be at least 0.000001 (prices are kept to the micro-unit)", loc(at, "price")...)
		case problem == money.TooLarge:
			c.add(validation.ValueError, "Input should be at most "+money.Micros(maxPriceMicros).String(), loc(at, "price")...)
		}
	}
	p.Active = in.Active == nil || *in.Active

	if in.EAN != nil {
		var dropped bool
		if d.EAN, dropped = normalizeEAN(*in.EAN); dropped {
			c.warnings = append(c.warnings, Warning{Loc: loc(at, "ean"), Msg: "not a well-formed EAN-13; stored as null"})
		}
	}
	if in.GTIN != nil {
		g, ok, msg := normalizeGTIN(*in.GTIN)
		if !ok {
			c.add(validation.ValueError, msg, loc(at, "gtin")...)
		}
		d.GTIN = g
	}
	if in.QualityScore != nil {
		f, err := in.QualityScore.Float64()
		switch {
		case err != nil:
			c.add(validation.TypeError, "Input should be a valid number", loc(at, "quality_score")...)
		case !validScore(f):
			c.add(validation.ValueError, "Input should be greater than 0 and less than or equal to 1", loc(at, "quality_score")...)
		default:
			p.QualityScore = f
		}
	}
	if m := bytes.TrimSpace(in.Metadata); len(m) > 0 && !bytes.Equal(m, []byte("null")) {
		if m[0] != '{' {
			c.add(validation.TypeError, "Input should be a valid object", loc(at, "metadata")...)
		} else {
			var buf bytes.Buffer
			if err := json.Compact(&buf, m); err != nil {
				c.add(validation.TypeError, "Input should be a valid object", loc(at, "metadata")...)
			} else if buf.Len() > MaxMetadataBytes {
				c.add(validation.TooLong, "metadata should be at most "+strconv.Itoa(MaxMetadataBytes)+" bytes of compact JSON", loc(at, "metadata")...)
			} else {
				d.Metadata = buf.Bytes()
			}
		}
	}
	d.GlobalID = c.optString(in.GlobalID, MaxIDLen, at, "globalId")

	if len(in.VariantIDs) > MaxVariantIDs {
		c.add(validation.TooLong, "List should have at most "+strconv.Itoa(MaxVariantIDs)+" items after validation, not "+strconv.Itoa(len(in.VariantIDs)), loc(at, "variantIds")...)
	} else if len(in.VariantIDs) > 0 {
		vs := make([]string, len(in.VariantIDs))
		for i := range in.VariantIDs {
			vs[i] = c.id(&in.VariantIDs[i], at, "variantIds", i)
		}
		d.VariantIDs = vs
	}

	if len(c.errs) == 0 {
		p.set(name, vendors, categories, &d)
	}
	return id, p
}
