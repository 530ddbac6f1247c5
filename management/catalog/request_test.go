package catalog

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/jsontext"
)

// stdDecode is what the handler falls back to.
func stdDecode(body []byte) ([]ProductInput, bool, error) {
	var v struct {
		Products []ProductInput `json:"products"`
	}
	err := json.Unmarshal(body, &v)
	return v.Products, v.Products != nil, err
}

var requestSamples = []string{
	`{"products": [` + catalogSampleProduct + `]}`,
	`{"products":[{"id":"a","name":"b"},{"id":"c","name":"d","price":1e2,"quality_score":0.5,"active":false}]}`,
	"{\n  \"products\" : [\n    {\n      \"id\" : \"a\" ,\n      \"name\" : \"b\"\n    }\n  ]\n}\n",
	`{"products": []}`,
	`{"products": null}`,
	`{}`,
	`{"other": [1, {"a": "\"}"}], "products": [{"id": "x", "name": "y"}], "more": null}`,
	`{"products": [null, {"id": null, "name": null, "vendors": null, "brand": null, "metadata": null, "active": null, "price": null}]}`,
	`{"products": [{"id": "é\u00e9\ud83c\udf7a\"\\\/\n", "name": "x\ty", "vendors": ["a", null, ""], "categories": []}]}`,
	`{"products": [{"id": "a", "id": "b", "name": "n", "brand": {"id": "1"}, "brand": {"name": "2"}, "vendors": ["x"], "vendors": ["y"]}]}`,
	`{"products": [{"id": "a", "Name": "case"}]}`,
	`{"Products": [{"id": "a"}]}`,
	`{"products": [{"id": "a", "price": "12.5"}]}`,
	`{"products": [{"id": 5}]}`,
	`{"products": {"id": "a"}}`,
	`[]`,
	`{"products": [{"id": "a", "metadata": {"k": [1, 2, {"x": null}], "s": "}]"}}]}`,
	`{"products": [{"id": "a", "unknown": {"deep": [[["\\"]]]}, "ſ": 1, "name": "n"}]}`,
	`{"products": [{"id": "\xff\xfe", "name": "bad utf8 \xc3"}]}`,
	`{"products": [{"id": "a"}]} x`,
	`{"products": [{"id": "a",}]}`,
}

const catalogSampleProduct = `{"id": "p-1", "name": "Delirium", "vendors": ["v-1", " ", "v-2"], "categories": ["beer"],
  "description": "Named \"Best\"", "brand": {"id": "b-1", "name": "Huyghe"}, "imageURL": "https://cdn.example.com/p.jpg",
  "price": 18.99, "active": true, "ean": "4003994155486", "gtin": "400-3994 155486", "quality_score": 0.5,
  "metadata": {"color": "amber"}, "globalId": "G", "link": "https://shop.example.com/p", "variantIds": ["a", "b"], "future": true}`

func checkSameAsStd(t *testing.T, body []byte) bool {
	t.Helper()
	got, present, ok := DecodeProducts(body)
	if !ok {
		return false
	}
	want, wantPresent, err := stdDecode(body)
	if err != nil {
		t.Fatalf("fast decoder accepted what encoding/json rejects (%v): %q", err, body)
	}
	if present != wantPresent || !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("fast decoder differs for %q:\n got %v %s\nwant %v %s", body, present, gj, wantPresent, wj)
	}
	return true
}

func TestDecodeProducts(t *testing.T) {
	fast := 0
	for _, s := range requestSamples {
		if checkSameAsStd(t, []byte(s)) {
			fast++
		}
	}
	// The common forms take the fast path.
	for _, s := range requestSamples[:10] {
		if _, _, ok := DecodeProducts([]byte(s)); !ok {
			t.Errorf("not decoded fast: %s", s)
		}
	}
	// The unusual ones are left to encoding/json.
	for _, s := range requestSamples[10:] {
		if _, _, ok := DecodeProducts([]byte(s)); ok && !strings.Contains(s, "metadata") && !strings.Contains(s, "unknown") {
			t.Errorf("decoded fast: %s", s)
		}
	}
	t.Logf("%d of %d samples decoded fast", fast, len(requestSamples))
}

func FuzzDecodeProducts(f *testing.F) {
	for _, s := range requestSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSameAsStd(t, body)
	})
}

func BenchmarkDecodeProducts(b *testing.B) {
	items := make([]string, 500)
	for i := range items {
		items[i] = catalogSampleProduct
	}
	body := []byte(`{"products": [` + strings.Join(items, ",") + `]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := DecodeProducts(body); !ok {
				b.Fatal("not fast")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := stdDecode(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The text rule's pass over the body that the API adds to the fast
	// decoder's (api bodyText; docs/reference/errors.md).
	b.Run("text rule", func(b *testing.B) {
		for b.Loop() {
			if !jsontext.TextOK(body) {
				b.Fatal("refused")
			}
		}
	})
	// The first pass of a parser on jsontext.Scanner, alone (the
	// package's doc says why the catalog's decoders do without it).
	b.Run("scanner Valid", func(b *testing.B) {
		var s jsontext.Scanner
		for b.Loop() {
			if !s.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}
