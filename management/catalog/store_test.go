package catalog

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/endcap/endcap/internal/jsontext"
)

func fullProduct() Product {
	var p Product
	p.setName("Delirium \"Tremens\" Beer 330cc \\ x6 — ünïcødé 🍺 \u2028 <b>&")
	p.Active = true
	p.PriceMicros = 18_990_000
	p.QualityScore = 0.5
	p.setLists([]string{"v-1", "vendör \"2\""}, []string{"c-1", "c-2", "c/3"})
	p.setDetails(&productDetails{
		Description: "Named \"Best Beer in the World\"\n\tin 2008.\x01 ok",
		Brand:       &Brand{ID: "b-1", Name: "Huyghe"},
		ImageURL:    "https://cdn.example.com/p/1.jpg",
		EAN:         "4003994155486",
		GTIN:        "00012345678905",
		Metadata:    json.RawMessage(`{"color":"red","tags":["a","b"],"nested":{"x":"}"}}`),
		GlobalID:    "G-1",
		Link:        "https://shop.example.com/p/1",
		VariantIDs:  []string{"p-1-a", "p-1-b"},
	})
	return p
}

// stored returns p as the collection holds it: encoded, then decoded.
func stored(t *testing.T, p Product) (Product, []byte) {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(raw) {
		t.Fatalf("invalid JSON: %s", raw)
	}
	var q Product
	if err := json.Unmarshal(raw, &q); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return q, raw
}

// A product's entry holds its texts as one string and offsets: 48 bytes
// (every API process holds one per product).
func TestProductSize(t *testing.T) {
	if s := unsafe.Sizeof(Product{}); s != 48 {
		t.Fatalf("a product is %d bytes, want 48", s)
	}
}

func TestProductRoundTrip(t *testing.T) {
	cases := map[string]Product{"full": fullProduct()}
	var empty Product
	empty.setName("x")
	cases["bare"] = empty
	inactive := fullProduct()
	inactive.Active = false
	inactive.setLists(nil, []string{"c-9"})
	cases["categories only, inactive"] = inactive
	vendorsOnly := fullProduct()
	vendorsOnly.setLists([]string{"v-9"}, nil)
	vendorsOnly.setDetails(&productDetails{Description: "d"})
	cases["vendors only"] = vendorsOnly

	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			q, raw := stored(t, p)
			if got, want := q.view("id"), p.view("id"); !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the product:\n got %+v\nwant %+v\n raw %s", got, want, raw)
			}
			// The decoded form encodes to the same bytes.
			if raw2, _ := json.Marshal(q); !bytes.Equal(raw, raw2) {
				t.Fatalf("re-encoding differs:\n%s\n%s", raw, raw2)
			}
			// encoding/json reads the same values.
			var j productJSON
			if err := json.Unmarshal(raw, &j); err != nil {
				t.Fatal(err)
			}
			if j.Name != p.Name() || j.Active != p.Active || j.PriceMicros != p.PriceMicros || !reflect.DeepEqual(nonNil(j.Vendors), nonNil(p.Vendors().Strings())) {
				t.Fatalf("encoding/json reads %+v", j)
			}
		})
	}
}

// The slow path (any other valid JSON of the same shape) gives the same
// product as the fast path.
func TestProductDecodeOtherForms(t *testing.T) {
	p := fullProduct()
	want := p.view("id")
	_, raw := stored(t, p)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	// Reordered keys and an unknown field.
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["future"] = 1
	reordered, _ := json.Marshal(m) // keys sorted: active, categories, details, ...
	for name, form := range map[string][]byte{"indented": pretty.Bytes(), "reordered": reordered} {
		var q Product
		if err := json.Unmarshal(form, &q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := q.view("id")
		var gm, wm any
		_ = json.Unmarshal(got.Metadata, &gm)
		_ = json.Unmarshal(want.Metadata, &wm)
		if !reflect.DeepEqual(gm, wm) {
			t.Errorf("%s: metadata %s, want %s", name, got.Metadata, want.Metadata)
		}
		got.Metadata = want.Metadata
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v\nwant %+v", name, got, want)
		}
	}
	var q Product
	if err := json.Unmarshal([]byte(`{"name":"x","priceMicros":"a"}`), &q); err == nil {
		t.Error("a string price decoded")
	}
}

// Escapes that the encoder never writes but JSON allows (\/, \uXXXX,
// surrogate pairs, lone surrogates) decode as encoding/json decodes them.
func TestProductDecodeEscapes(t *testing.T) {
	raw := `{"name":"a\/b \u00e9 \ud83c\udf7a \ud800 x\"y","active":true,"vendors":["v\u002d1"],` +
		`"details":{"description":"line\nnext \\ \b\f\r\t","brand":{"id":"b","name":"\u0042rand"}}}`
	var q Product
	if err := json.Unmarshal([]byte(raw), &q); err != nil {
		t.Fatal(err)
	}
	var j productJSON
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		t.Fatal(err)
	}
	d := q.detailFields()
	if q.Name() != j.Name || q.Vendors().At(0) != j.Vendors[0] || d.Description != j.Details.Description || *d.Brand != *j.Details.Brand {
		t.Fatalf("got %q %q %q %+v, encoding/json got %q %q %q %+v", q.Name(), q.Vendors(), d.Description, d.Brand,
			j.Name, j.Vendors, j.Details.Description, j.Details.Brand)
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	alphabet := []string{"a", "é", "\"", "\\", "\n", "\x00", "\x1f", "\u2028", "\u2029", "🍺", "<", ">", "&", "\xff", "\xc3", "/"}
	for range 3000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q: decodes to %q, encoding/json's to %q", s, back, wantBack)
		}
	}
}

// FuzzProductDecode: the fast decoder never accepts what encoding/json
// would read differently.
func FuzzProductDecode(f *testing.F) {
	p := fullProduct()
	raw, _ := json.Marshal(p)
	f.Add(raw)
	f.Add([]byte(`{"name":"x","active":false}`))
	f.Add([]byte(`{"name":"x","active":true,"details":{"metadata":{"a":[1,{"b":"}"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var q Product
		if err := json.Unmarshal(data, &q); err != nil {
			return
		}
		var j productJSON
		if err := json.Unmarshal(data, &j); err != nil {
			return // the fast path may accept a form encoding/json rejects only for types: not here
		}
		if q.Name() != j.Name || q.Active != j.Active || q.PriceMicros != j.PriceMicros ||
			!reflect.DeepEqual(nonNil(q.Vendors().Strings()), nonNil(j.Vendors)) || !reflect.DeepEqual(nonNil(q.Categories().Strings()), nonNil(j.Categories)) {
			t.Fatalf("fast %+v vs encoding/json %+v for %s", q, j, data)
		}
		var jd productDetails
		if j.Details != nil {
			jd = *j.Details
		}
		qd := q.detailFields()
		var qm, jm any
		_ = json.Unmarshal(qd.Metadata, &qm)
		_ = json.Unmarshal(jd.Metadata, &jm)
		if string(jd.Metadata) == "null" {
			jm = nil
		}
		qd.Metadata, jd.Metadata = nil, nil
		qd.VariantIDs, jd.VariantIDs = nonNil(qd.VariantIDs), nonNil(jd.VariantIDs)
		if !reflect.DeepEqual(qd, jd) || !reflect.DeepEqual(qm, jm) {
			t.Fatalf("details: fast %+v %v vs encoding/json %+v %v for %s", qd, qm, jd, jm, data)
		}
	})
}

func BenchmarkProductDecode(b *testing.B) {
	p := fullProduct()
	p.setDetails(&productDetails{Description: strings.Repeat("lorem ipsum ", 42), Brand: &Brand{ID: "b-1", Name: "Brand 1"},
		ImageURL: "https://cdn.example.com/img/p-000000042.jpg", GTIN: "4006381333931"})
	raw, _ := json.Marshal(p)
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			var q Product
			if err := q.UnmarshalJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The first pass of a parser on jsontext.Scanner, alone (the
	// package's doc says why the catalog's decoders do without it).
	b.Run("scanner Valid", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		var s jsontext.Scanner
		for b.Loop() {
			if !s.Valid(raw) {
				b.Fatal("invalid")
			}
		}
	})
}
