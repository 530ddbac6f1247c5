package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/testkit/testenv"
	"github.com/google/uuid"
)

// Helpers of the catalog tests (cat*).

const (
	catProducts   = "/public/v1/catalog-search-service/catalogs/products"
	catVendors    = "/public/v1/catalog-search-service/catalogs/vendors"
	catCategories = "/public/v1/catalog-search-service/catalogs/categories"
)

// catStart starts a system whose catalog limit is distinct from the
// default one (so the headers tell the class) and high enough for a test.
func catStart(t *testing.T) (*system, config.Config) {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitCatalog = "3000/1s"
	cfg.RateLimitDefault = "5000/1s"
	return startSystem(t, cfg), cfg
}

func catDo(t *testing.T, s *system, method, path, key string, body any, hdr map[string]string) response {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	return s.request(t, method, path, key, b, hdr)
}

// catOK checks the status and that the response went through the
// "catalog" rate limit.
func catOK(t *testing.T, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if r.Header.Get("X-RateLimit-Limit") != "3000" || r.Header.Get("X-RateLimit-Remaining") == "" || r.Header.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("missing X-RateLimit-* headers of the catalog class: %v", r.Header)
	}
}

func catETag(t *testing.T, r response, want string) {
	t.Helper()
	if got := r.Header.Get("ETag"); got != `"`+want+`"` {
		t.Fatalf("ETag %q, want %q", got, `"`+want+`"`)
	}
}

func cat404(t *testing.T, r response) {
	t.Helper()
	if r.Status != 404 {
		t.Fatalf("status %d, want 404: %s", r.Status, r.Body)
	}
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	if m["errCode"] != "resource_not_found" || m["docUrl"] == "" || m["message"] == "" {
		t.Fatalf("404 body: %s", r.Body)
	}
}

// catPages follows a list to its end with limit and returns every item's
// id, checking hasMore/nextPage on every page.
func catPages(t *testing.T, s *system, path, key string, limit int) []string {
	t.Helper()
	var ids []string
	next := ""
	for page := 0; ; page++ {
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		if next != "" {
			q.Set("next_page", next)
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		r := catDo(t, s, "GET", path+sep+q.Encode(), key, nil, nil)
		catOK(t, r, 200)
		var body struct {
			HasMore  bool              `json:"hasMore"`
			Response []json.RawMessage `json:"response"`
			NextPage *string           `json:"nextPage"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || body.Response == nil {
			t.Fatalf("list body: %s", r.Body)
		}
		for _, raw := range body.Response {
			var item struct{ ID string }
			_ = json.Unmarshal(raw, &item)
			ids = append(ids, item.ID)
		}
		if len(body.Response) > limit {
			t.Fatalf("page of %d items, limit %d", len(body.Response), limit)
		}
		if body.HasMore != (body.NextPage != nil) || (body.NextPage != nil && *body.NextPage == "") {
			t.Fatalf("hasMore %v with nextPage %v", body.HasMore, body.NextPage)
		}
		if !body.HasMore {
			return ids
		}
		next = *body.NextPage
		if page > 100 {
			t.Fatal("list does not end")
		}
	}
}

const catFullProduct = `{
  "id": "p-1",
  "name": "Delirium Tremens Beer Bottle 330cc x6",
  "vendors": ["v-1", "  ", "v-2", "v-1", ""],
  "categories": ["beer", "belgian"],
  "description": "Named \"Best Beer in the World\" in 2008.",
  "brand": {"id": "b-1", "name": "Huyghe"},
  "imageURL": "https://cdn.example.com/products/p-1.jpg",
  "price": 18.99,
  "active": true,
  "ean": "4003994155486",
  "gtin": "400-3994 155486",
  "quality_score": 0.5,
  "metadata": {"color": "amber", "abv": 8.5, "tags": ["strong", "blond"]},
  "globalId": "PROD-12345",
  "link": "https://shop.example.com/p-1",
  "variantIds": ["p-1-4", "p-1-12"],
  "someFutureField": true
}`

const catFullProductJSON = `{
  "id": "p-1", "name": "Delirium Tremens Beer Bottle 330cc x6", "vendors": ["v-1", "v-2"], "categories": ["beer", "belgian"],
  "description": "Named \"Best Beer in the World\" in 2008.", "brand": {"id": "b-1", "name": "Huyghe"},
  "imageURL": "https://cdn.example.com/products/p-1.jpg", "price": 18.99, "active": true, "ean": "4003994155486",
  "gtin": "4003994155486", "quality_score": 0.5, "metadata": {"color": "amber", "abv": 8.5, "tags": ["strong", "blond"]},
  "globalId": "PROD-12345", "link": "https://shop.example.com/p-1", "variantIds": ["p-1-4", "p-1-12"]
}`

const catMinimalJSON = `{
  "id": "p/2", "name": "Minimal", "vendors": [], "categories": [], "description": null, "brand": null, "imageURL": null,
  "price": null, "active": true, "ean": null, "gtin": null, "quality_score": null, "metadata": null, "globalId": null,
  "link": null, "variantIds": []
}`

// TestCatalogProducts: upsert → get → update → deactivate → delete, with
// exact bodies, ETags, If-Match and the rate-limit class.
func TestCatalogProducts(t *testing.T) {
	s, _ := catStart(t)
	A := s.AdvancedKey

	long := strings.Repeat("ñ", 151)
	body := `{"products": [` + catFullProduct + `,
	  {"id": "p/2", "name": "Minimal"},
	  {"id": "p-3", "name": "` + long + `", "description": "` + strings.Repeat("d", 5001) + `", "ean": "4003994155487",
	   "vendors": ["v-1"], "price": 0.000001, "active": false, "metadata": {}}
	]}`
	r := catDo(t, s, "PUT", catProducts, A, body, nil)
	catOK(t, r, 200)
	sameJSON(t, r.Body, `{"upserted": 3, "warnings": [
	  {"loc": ["body", "products", 2, "name"], "msg": "truncated to 150 characters"},
	  {"loc": ["body", "products", 2, "description"], "msg": "truncated to 5000 characters"},
	  {"loc": ["body", "products", 2, "ean"], "msg": "not a well-formed EAN-13; stored as null"}
	]}`)

	r = catDo(t, s, "GET", catProducts+"/p-1", A, nil, nil)
	catOK(t, r, 200)
	catETag(t, r, "1")
	sameJSON(t, r.Body, catFullProductJSON)
	r = catDo(t, s, "GET", catProducts+"/p/2", A, nil, nil) // ids may hold slashes
	catOK(t, r, 200)
	sameJSON(t, r.Body, catMinimalJSON)
	r = catDo(t, s, "GET", catProducts+"/p%2F2", A, nil, nil) // escaped or not
	catOK(t, r, 200)
	sameJSON(t, r.Body, catMinimalJSON)
	r = catDo(t, s, "GET", catProducts+"/p-3", A, nil, nil)
	catOK(t, r, 200)
	var p3 map[string]any
	_ = json.Unmarshal(r.Body, &p3)
	if p3["name"] != strings.Repeat("ñ", 150) || len(p3["description"].(string)) != 5000 || p3["ean"] != nil ||
		p3["active"] != false || p3["price"] != 0.000001 || fmt.Sprint(p3["metadata"]) != "map[]" {
		t.Fatalf("p-3 stored as %s", r.Body)
	}
	cat404(t, catDo(t, s, "GET", catProducts+"/p-404", A, nil, nil))

	// Update: the upsert replaces the whole product; a repeated id in one
	// request keeps its last occurrence.
	r = catDo(t, s, "PUT", catProducts, A, `{"products": [
	  {"id": "p/2", "name": "first"},
	  {"id": "p/2", "name": "Minimal v2", "active": false, "price": "12.5", "vendors": ["v-3"]}]}`, nil)
	catOK(t, r, 200)
	sameJSON(t, r.Body, `{"upserted": 1, "warnings": []}`)
	r = catDo(t, s, "GET", catProducts+"/p/2", A, nil, nil)
	catETag(t, r, "2")
	sameJSON(t, r.Body, strings.NewReplacer(`"Minimal"`, `"Minimal v2"`, `"active": true`, `"active": false`,
		`"price": null`, `"price": 12.5`, `"vendors": []`, `"vendors": ["v-3"]`).Replace(catMinimalJSON))

	// If-Match: a single product at a version; a stale one is a 409.
	one := `{"products": [{"id": "p/2", "name": "Minimal v3"}]}`
	r = catDo(t, s, "PUT", catProducts, A, one, map[string]string{"If-Match": `"1"`})
	if r.Status != 409 || !strings.Contains(string(r.Body), `"errCode":"invalid_operation"`) {
		t.Fatalf("stale If-Match: %d %s", r.Status, r.Body)
	}
	catOK(t, catDo(t, s, "PUT", catProducts, A, one, map[string]string{"If-Match": `"2"`}), 200)
	catETag(t, catDo(t, s, "GET", catProducts+"/p/2", A, nil, nil), "3")
	expect422Locs(t, catDo(t, s, "PUT", catProducts, A, `{"products": [{"id": "a", "name": "a"}, {"id": "b", "name": "b"}]}`,
		map[string]string{"If-Match": `"3"`}), "body.products")
	r = catDo(t, s, "DELETE", catProducts, A, `{"ids": ["p/2"]}`, map[string]string{"If-Match": `"2"`})
	if r.Status != 409 {
		t.Fatalf("stale If-Match delete: %d %s", r.Status, r.Body)
	}
	cat404(t, catDo(t, s, "DELETE", catProducts, A, `{"ids": ["p-404"]}`, map[string]string{"If-Match": `"1"`}))

	// Delete: existing ids are deleted, unknown ones reported.
	r = catDo(t, s, "DELETE", catProducts, A, `{"ids": ["p-1", "p-404", "p-1", "p/2"]}`, nil)
	catOK(t, r, 200)
	sameJSON(t, r.Body, `{"deleted": ["p-1", "p/2"], "notFound": ["p-404"]}`)
	cat404(t, catDo(t, s, "GET", catProducts+"/p-1", A, nil, nil))
	cat404(t, catDo(t, s, "GET", catProducts+"/p/2", A, nil, nil))
	catOK(t, catDo(t, s, "GET", catProducts+"/p-3", A, nil, nil), 200)
	sameJSON(t, catDo(t, s, "DELETE", catProducts, A, `{"ids": ["p-1"]}`, nil).Body, `{"deleted": [], "notFound": ["p-1"]}`)
	// A deleted product can be created again.
	catOK(t, catDo(t, s, "PUT", catProducts, A, `{"products": [{"id": "p-1", "name": "again"}]}`, nil), 200)
	r = catDo(t, s, "GET", catProducts+"/p-1", A, nil, nil)
	catOK(t, r, 200)
	catETag(t, r, "3")

	// The marketplace key is not for /public/v1.
	if r := catDo(t, s, "GET", catProducts+"/p-1", s.MarketplaceKey, nil, nil); r.Status != 403 {
		t.Fatalf("marketplace key: %d %s", r.Status, r.Body)
	}
}

// TestCatalogProductValidation: every rule of an upsert and a delete, with
// its loc; a rejected request writes nothing.
func TestCatalogProductValidation(t *testing.T) {
	s, _ := catStart(t)
	A := s.AdvancedKey
	put := func(products ...string) response {
		return catDo(t, s, "PUT", catProducts, A, `{"products": [`+strings.Join(products, ",")+`]}`, nil)
	}
	ok := `{"id": "ok", "name": "fine"}`
	with := func(fields string) string { return `{"id": "x", "name": "n", ` + fields + `}` }
	p := "body.products.1."
	for _, c := range []struct {
		name string
		r    response
		locs []string
	}{
		{"products missing", catDo(t, s, "PUT", catProducts, A, `{}`, nil), []string{"body.products"}},
		{"products null", catDo(t, s, "PUT", catProducts, A, `{"products": null}`, nil), []string{"body.products"}},
		{"products empty", put(), []string{"body.products"}},
		{"501 products", put(strings.Repeat(ok+",", 500) + ok), []string{"body.products"}},
		{"empty body", catDo(t, s, "PUT", catProducts, A, ``, nil), []string{"body"}},
		{"not JSON", catDo(t, s, "PUT", catProducts, A, `{"products": [`, nil), []string{"body"}},
		{"trailing data", catDo(t, s, "PUT", catProducts, A, `{"products": []} {}`, nil), []string{"body"}},
		{"wrong type", put(ok, `{"id": "x", "name": 5}`), []string{"body.products.name"}},
		{"id missing", put(ok, `{"name": "n"}`), []string{p + "id"}},
		{"id empty", put(ok, `{"id": "", "name": "n"}`), []string{p + "id"}},
		{"id 256", put(ok, `{"id": "`+strings.Repeat("i", 256)+`", "name": "n"}`), []string{p + "id"}},
		{"name missing", put(ok, `{"id": "x"}`), []string{p + "name"}},
		{"name empty", put(ok, `{"id": "x", "name": ""}`), []string{p + "name"}},
		{"description empty", put(ok, with(`"description": ""`)), []string{p + "description"}},
		{"vendor 256", put(ok, with(`"vendors": ["v", "`+strings.Repeat("v", 256)+`"]`)), []string{p + "vendors.1"}},
		{"category 256", put(ok, with(`"categories": ["`+strings.Repeat("c", 256)+`"]`)), []string{p + "categories.0"}},
		{"101 categories", put(ok, with(`"categories": [`+catIDs("c", 101)+`]`)), []string{p + "categories"}},
		{"brand without name", put(ok, with(`"brand": {"id": "b"}`)), []string{p + "brand.name"}},
		{"brand empty id", put(ok, with(`"brand": {"id": "", "name": "B"}`)), []string{p + "brand.id"}},
		{"imageURL empty", put(ok, with(`"imageURL": ""`)), []string{p + "imageURL"}},
		{"imageURL relative", put(ok, with(`"imageURL": "/img/1.jpg"`)), []string{p + "imageURL"}},
		{"link ftp", put(ok, with(`"link": "ftp://x.example.com/a"`)), []string{p + "link"}},
		{"price 0", put(ok, with(`"price": 0`)), []string{p + "price"}},
		{"price negative", put(ok, with(`"price": -1.5`)), []string{p + "price"}},
		{"price below a micro-unit", put(ok, with(`"price": 0.0000001`)), []string{p + "price"}},
		{"price too large", put(ok, with(`"price": 1e10`)), []string{p + "price"}},
		{"price not a number", put(ok, with(`"price": "cheap"`)), []string{"body"}},
		{"quality 0", put(ok, with(`"quality_score": 0`)), []string{p + "quality_score"}},
		{"quality 1.01", put(ok, with(`"quality_score": 1.01`)), []string{p + "quality_score"}},
		{"gtin check digit", put(ok, with(`"gtin": "4003994155487"`)), []string{p + "gtin"}},
		{"gtin letters", put(ok, with(`"gtin": "ABC-123"`)), []string{p + "gtin"}},
		{"gtin 11 digits", put(ok, with(`"gtin": "40039941554"`)), []string{p + "gtin"}},
		{"metadata array", put(ok, with(`"metadata": [1, 2]`)), []string{p + "metadata"}},
		{"metadata string", put(ok, with(`"metadata": "x"`)), []string{p + "metadata"}},
		{"globalId empty", put(ok, with(`"globalId": ""`)), []string{p + "globalId"}},
		{"51 variants", put(ok, with(`"variantIds": [`+catIDs("v", 51)+`]`)), []string{p + "variantIds"}},
		{"empty variant", put(ok, with(`"variantIds": ["a", ""]`)), []string{p + "variantIds.1"}},
		{"several errors", put(`{"id": ""}`, with(`"price": 0, "quality_score": 2`)),
			[]string{"body.products.0.id", "body.products.0.name", p + "price", p + "quality_score"}},
	} {
		t.Run(c.name, func(t *testing.T) { expect422Locs(t, c.r, c.locs...) })
	}
	cat404(t, catDo(t, s, "GET", catProducts+"/ok", A, nil, nil)) // nothing was written

	// Values that are not errors.
	r := put(with(`"ean": "not an ean", "gtin": " ", "vendors": [" ", ""], "metadata": null, "brand": null, "price": 1e2`))
	catOK(t, r, 200)
	sameJSON(t, r.Body, `{"upserted": 1, "warnings": [{"loc": ["body", "products", 0, "ean"], "msg": "not a well-formed EAN-13; stored as null"}]}`)
	r = catDo(t, s, "GET", catProducts+"/x", A, nil, nil)
	var x map[string]any
	_ = json.Unmarshal(r.Body, &x)
	if x["ean"] != nil || x["gtin"] != nil || fmt.Sprint(x["vendors"]) != "[]" || x["price"] != 100.0 {
		t.Fatalf("stored %s", r.Body)
	}

	// Delete.
	del := func(body string) response { return catDo(t, s, "DELETE", catProducts, A, body, nil) }
	expect422Locs(t, del(`{}`), "body.ids")
	expect422Locs(t, del(`{"ids": []}`), "body.ids")
	expect422Locs(t, del(`{"ids": [`+catIDs("p", 501)+`]}`), "body.ids")
	expect422Locs(t, del(`{"ids": ["x", ""]}`), "body.ids.1")
	expect422Locs(t, del(`{"ids": ["`+strings.Repeat("i", 256)+`"]}`), "body.ids.0")
	expect422Locs(t, del(`{"ids": "x"}`), "body.ids")
	catOK(t, catDo(t, s, "GET", catProducts+"/x", A, nil, nil), 200) // nothing was deleted
	sameJSON(t, del(`{"ids": [`+catIDs("p", 500)+`]}`).Body, `{"deleted": [], "notFound": [`+catIDs("p", 500)+`]}`)
}

func catIDs(prefix string, n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf(`"%s-%d"`, prefix, i)
	}
	return strings.Join(ids, ",")
}

// TestCatalogVendorsAndCategories: upsert, get, the paginated lists with
// their filters and cursors, updates and the 422s.
// catVendorIDs is the JSON of a vendor's ids beside the spec's fields.
func catVendorIDs(mp, id string) string {
	return fmt.Sprintf(`"vendorId": %q, "externalVendorId": %q`, vendorid.String(mp, id), id)
}

func TestCatalogVendorsAndCategories(t *testing.T) {
	s, _ := catStart(t)
	A := s.AdvancedKey

	r := catDo(t, s, "PUT", catVendors, A, `{"vendors": [
	  {"id": "v-3", "name": "Gamma", "globalId": "G-2"},
	  {"id": "v-1", "name": "Alpha", "imageURL": "https://cdn.example.com/v-1.png", "merchant_center_id": 123456789, "globalId": "G-1"},
	  {"id": "v-2", "name": "Beta"},
	  {"id": "v-5", "name": "Epsilon", "globalId": "G-1"},
	  {"id": "v-4", "name": "Delta", "merchant_center_id": 1e3}
	]}`, nil)
	catOK(t, r, 200)
	sameJSON(t, r.Body, `{"upserted": 5, "warnings": []}`)
	ids := func(id string) string { return catVendorIDs(s.Marketplace.ID, id) }
	v1 := `{"id": "v-1", "name": "Alpha", "imageURL": "https://cdn.example.com/v-1.png", "merchant_center_id": 123456789, "globalId": "G-1", ` + ids("v-1") + `}`
	// By its catalog id or its UUID (any case): the same vendor.
	u1 := vendorid.String(s.Marketplace.ID, "v-1")
	for _, id := range []string{"v-1", u1, strings.ToUpper(u1)} {
		r = catDo(t, s, "GET", catVendors+"/"+id, A, nil, nil)
		catOK(t, r, 200)
		catETag(t, r, "1")
		sameJSON(t, r.Body, v1)
	}
	cat404(t, catDo(t, s, "GET", catVendors+"/v-404", A, nil, nil))
	cat404(t, catDo(t, s, "GET", catVendors+"/"+vendorid.String(s.Marketplace.ID, "v-404"), A, nil, nil))
	cat404(t, catDo(t, s, "GET", catVendors+"/"+vendorid.String(uuid.NewString(), "v-1"), A, nil, nil)) // another marketplace's v-1

	// The spec's list: default page, pages of 2, the global_id filter.
	r = catDo(t, s, "GET", catVendors, A, nil, nil)
	catOK(t, r, 200)
	sameJSON(t, r.Body, `{"hasMore": false, "nextPage": null, "response": [`+v1+`,
	  {"id": "v-2", "name": "Beta", "imageURL": null, "merchant_center_id": null, "globalId": null, `+ids("v-2")+`},
	  {"id": "v-3", "name": "Gamma", "imageURL": null, "merchant_center_id": null, "globalId": "G-2", `+ids("v-3")+`},
	  {"id": "v-4", "name": "Delta", "imageURL": null, "merchant_center_id": 1000, "globalId": null, `+ids("v-4")+`},
	  {"id": "v-5", "name": "Epsilon", "imageURL": null, "merchant_center_id": null, "globalId": "G-1", `+ids("v-5")+`}]}`)
	if ids := catPages(t, s, catVendors, A, 2); fmt.Sprint(ids) != "[v-1 v-2 v-3 v-4 v-5]" {
		t.Fatalf("pages: %v", ids)
	}
	if ids := catPages(t, s, catVendors+"?global_id=G-1", A, 1); fmt.Sprint(ids) != "[v-1 v-5]" {
		t.Fatalf("global_id pages: %v", ids)
	}
	sameJSON(t, catDo(t, s, "GET", catVendors+"?global_id=G-404", A, nil, nil).Body, `{"hasMore": false, "response": [], "nextPage": null}`)
	// A cursor continues only its own list.
	var page struct{ NextPage string }
	_ = json.Unmarshal(catDo(t, s, "GET", catVendors+"?limit=1&global_id=G-1", A, nil, nil).Body, &page)
	expect422Locs(t, catDo(t, s, "GET", catVendors+"?next_page="+page.NextPage, A, nil, nil), "query.next_page")
	expect422Locs(t, catDo(t, s, "GET", catCategories+"?next_page="+page.NextPage+"&parent_id=G-1", A, nil, nil), "query.next_page")
	expect422Locs(t, catDo(t, s, "GET", catVendors+"?next_page=forged", A, nil, nil), "query.next_page")
	expect422Locs(t, catDo(t, s, "GET", catVendors+"?limit=0", A, nil, nil), "query.limit")
	expect422Locs(t, catDo(t, s, "GET", catVendors+"?limit=501", A, nil, nil), "query.limit")

	// Update replaces the vendor; If-Match on one vendor.
	r = catDo(t, s, "PUT", catVendors, A, `{"vendors": [{"id": "v-1", "name": "Alpha 2"}]}`, map[string]string{"If-Match": `"1"`})
	catOK(t, r, 200)
	r = catDo(t, s, "GET", catVendors+"/v-1", A, nil, nil)
	catETag(t, r, "2")
	sameJSON(t, r.Body, `{"id": "v-1", "name": "Alpha 2", "imageURL": null, "merchant_center_id": null, "globalId": null, `+ids("v-1")+`}`)
	if r := catDo(t, s, "PUT", catVendors, A, `{"vendors": [{"id": "v-1", "name": "x"}]}`, map[string]string{"If-Match": `"1"`}); r.Status != 409 {
		t.Fatalf("stale If-Match: %d %s", r.Status, r.Body)
	}
	v := "body.vendors.0."
	for _, c := range []struct{ body, loc string }{
		{`{}`, "body.vendors"},
		{`{"vendors": []}`, "body.vendors"},
		{`{"vendors": [{"name": "n"}]}`, v + "id"},
		{`{"vendors": [{"id": "v"}]}`, v + "name"},
		{`{"vendors": [{"id": "v", "name": ""}]}`, v + "name"},
		{`{"vendors": [{"id": "v", "name": "n", "merchant_center_id": 1.5}]}`, v + "merchant_center_id"},
		{`{"vendors": [{"id": "v", "name": "n", "merchant_center_id": 0}]}`, v + "merchant_center_id"},
		{`{"vendors": [{"id": "v", "name": "n", "imageURL": "logo.png"}]}`, v + "imageURL"},
		{`{"vendors": [{"id": "v", "name": "n", "globalId": ""}]}`, v + "globalId"},
	} {
		expect422Locs(t, catDo(t, s, "PUT", catVendors, A, c.body, nil), c.loc)
	}

	// Categories.
	r = catDo(t, s, "PUT", catCategories, A, `{"categories": [
	  {"id": "beer", "name": "Beer", "parentId": "drinks"},
	  {"id": "drinks", "name": "Drinks"},
	  {"id": "wine", "name": "Wine", "parentId": "drinks"},
	  {"id": "cheese", "name": "Cheese", "parentId": "food"}
	]}`, nil)
	catOK(t, r, 200)
	sameJSON(t, r.Body, `{"upserted": 4, "warnings": []}`)
	r = catDo(t, s, "GET", catCategories+"/beer", A, nil, nil)
	catOK(t, r, 200)
	catETag(t, r, "1")
	sameJSON(t, r.Body, `{"id": "beer", "name": "Beer", "parentId": "drinks"}`)
	cat404(t, catDo(t, s, "GET", catCategories+"/food", A, nil, nil))
	if ids := catPages(t, s, catCategories, A, 3); fmt.Sprint(ids) != "[beer cheese drinks wine]" {
		t.Fatalf("category pages: %v", ids)
	}
	if ids := catPages(t, s, catCategories+"?parent_id=drinks", A, 1); fmt.Sprint(ids) != "[beer wine]" {
		t.Fatalf("children of drinks: %v", ids)
	}
	catOK(t, catDo(t, s, "PUT", catCategories, A, `{"categories": [{"id": "beer", "name": "Beers"}]}`, nil), 200)
	r = catDo(t, s, "GET", catCategories+"/beer", A, nil, nil)
	catETag(t, r, "2")
	sameJSON(t, r.Body, `{"id": "beer", "name": "Beers", "parentId": null}`)
	c := "body.categories.0."
	for _, cc := range []struct{ body, loc string }{
		{`{"categories": []}`, "body.categories"},
		{`{"categories": [{"name": "n"}]}`, c + "id"},
		{`{"categories": [{"id": "c"}]}`, c + "name"},
		{`{"categories": [{"id": "c", "name": "n", "parentId": ""}]}`, c + "parentId"},
		{`{"categories": [{"id": "c", "name": "n", "parentId": "c"}]}`, c + "parentId"},
	} {
		expect422Locs(t, catDo(t, s, "PUT", catCategories, A, cc.body, nil), cc.loc)
	}
}

// TestCatalogIsolation: marketplace B's key sees nothing of A's catalog on
// any route and cannot change it; the same ids in B are B's own.
func TestCatalogIsolation(t *testing.T) {
	s, _ := catStart(t)
	A, B := s.AdvancedKey, otherMarketplace(t, s)
	catOK(t, catDo(t, s, "PUT", catProducts, A, `{"products": [{"id": "p-1", "name": "A's"}]}`, nil), 200)
	catOK(t, catDo(t, s, "PUT", catVendors, A, `{"vendors": [{"id": "v-1", "name": "A's", "globalId": "G"}]}`, nil), 200)
	catOK(t, catDo(t, s, "PUT", catCategories, A, `{"categories": [{"id": "c-1", "name": "A's"}]}`, nil), 200)

	cat404(t, catDo(t, s, "GET", catProducts+"/p-1", B, nil, nil))
	cat404(t, catDo(t, s, "GET", catVendors+"/v-1", B, nil, nil))
	cat404(t, catDo(t, s, "GET", catCategories+"/c-1", B, nil, nil))
	empty := `{"hasMore": false, "response": [], "nextPage": null}`
	sameJSON(t, catDo(t, s, "GET", catVendors, B, nil, nil).Body, empty)
	sameJSON(t, catDo(t, s, "GET", catVendors+"?global_id=G", B, nil, nil).Body, empty)
	sameJSON(t, catDo(t, s, "GET", catCategories, B, nil, nil).Body, empty)
	// A's cursor is not B's.
	catOK(t, catDo(t, s, "PUT", catVendors, A, `{"vendors": [{"id": "v-2", "name": "A's"}]}`, nil), 200)
	var page struct{ NextPage string }
	_ = json.Unmarshal(catDo(t, s, "GET", catVendors+"?limit=1", A, nil, nil).Body, &page)
	expect422Locs(t, catDo(t, s, "GET", catVendors+"?limit=1&next_page="+page.NextPage, B, nil, nil), "query.next_page")

	// B deletes "p-1": not found in B, A's stays.
	sameJSON(t, catDo(t, s, "DELETE", catProducts, B, `{"ids": ["p-1"]}`, nil).Body, `{"deleted": [], "notFound": ["p-1"]}`)
	cat404(t, catDo(t, s, "DELETE", catProducts, B, `{"ids": ["p-1"]}`, map[string]string{"If-Match": `"1"`}))
	// B's upserts of the same ids create B's own entities.
	catOK(t, catDo(t, s, "PUT", catProducts, B, `{"products": [{"id": "p-1", "name": "B's"}]}`, nil), 200)
	catOK(t, catDo(t, s, "PUT", catVendors, B, `{"vendors": [{"id": "v-1", "name": "B's"}]}`, nil), 200)
	catOK(t, catDo(t, s, "PUT", catCategories, B, `{"categories": [{"id": "c-1", "name": "B's"}]}`, nil), 200)
	for _, path := range []string{catProducts + "/p-1", catVendors + "/v-1", catCategories + "/c-1"} {
		r := catDo(t, s, "GET", path, A, nil, nil)
		catETag(t, r, "1")
		if !strings.Contains(string(r.Body), `"name":"A's"`) {
			t.Fatalf("A's %s after B's writes: %s", path, r.Body)
		}
		r = catDo(t, s, "GET", path, B, nil, nil)
		catETag(t, r, "1")
		if !strings.Contains(string(r.Body), `"name":"B's"`) {
			t.Fatalf("B's %s: %s", path, r.Body)
		}
	}
	if ids := catPages(t, s, catVendors, B, 10); fmt.Sprint(ids) != "[v-1]" {
		t.Fatalf("B's vendors: %v", ids)
	}
	sameJSON(t, catDo(t, s, "DELETE", catProducts, B, `{"ids": ["p-1"]}`, nil).Body, `{"deleted": ["p-1"], "notFound": []}`)
	catOK(t, catDo(t, s, "GET", catProducts+"/p-1", A, nil, nil), 200)
}

// TestCatalogRestart: a second process on the same Kafka rebuilds every
// product, vendor and category, with their versions.
func TestCatalogRestart(t *testing.T) {
	s, cfg := catStart(t)
	A := s.AdvancedKey
	catOK(t, catDo(t, s, "PUT", catProducts, A, `{"products": [`+catFullProduct+`, {"id": "p/2", "name": "Minimal"}, {"id": "gone", "name": "x"}]}`, nil), 200)
	catOK(t, catDo(t, s, "PUT", catProducts, A, `{"products": [{"id": "p/2", "name": "Minimal"}]}`, nil), 200)
	catOK(t, catDo(t, s, "DELETE", catProducts, A, `{"ids": ["gone"]}`, nil), 200)
	catOK(t, catDo(t, s, "PUT", catVendors, A, `{"vendors": [{"id": "v-1", "name": "Alpha", "merchant_center_id": 7, "globalId": "G-1"}, {"id": "v-2", "name": "Beta"}]}`, nil), 200)
	catOK(t, catDo(t, s, "PUT", catCategories, A, `{"categories": [{"id": "beer", "name": "Beer", "parentId": "drinks"}]}`, nil), 200)

	s2 := startSystem(t, cfg)
	r := catDo(t, s2, "GET", catProducts+"/p-1", A, nil, nil)
	catOK(t, r, 200)
	catETag(t, r, "1")
	sameJSON(t, r.Body, catFullProductJSON)
	r = catDo(t, s2, "GET", catProducts+"/p/2", A, nil, nil)
	catETag(t, r, "2")
	sameJSON(t, r.Body, catMinimalJSON)
	cat404(t, catDo(t, s2, "GET", catProducts+"/gone", A, nil, nil))
	// The restarted process finds a vendor by its catalog id and by its
	// UUID, the same as before the restart.
	for _, id := range []string{"v-1", vendorid.String(s.Marketplace.ID, "v-1")} {
		r = catDo(t, s2, "GET", catVendors+"/"+id, A, nil, nil)
		catETag(t, r, "1")
		sameJSON(t, r.Body, `{"id": "v-1", "name": "Alpha", "imageURL": null, "merchant_center_id": 7, "globalId": "G-1", `+catVendorIDs(s.Marketplace.ID, "v-1")+`}`)
	}
	if ids := catPages(t, s2, catVendors, A, 1); fmt.Sprint(ids) != "[v-1 v-2]" {
		t.Fatalf("rebuilt vendors: %v", ids)
	}
	sameJSON(t, catDo(t, s2, "GET", catCategories+"/beer", A, nil, nil).Body, `{"id": "beer", "name": "Beer", "parentId": "drinks"}`)
	// The restarted process takes writes that the first one sees.
	catOK(t, catDo(t, s2, "PUT", catProducts, A, `{"products": [{"id": "p-1", "name": "from s2"}]}`, nil), 200)
	testenv.Eventually(t, 5*time.Second, func() error {
		r := catDo(t, s, "GET", catProducts+"/p-1", A, nil, nil)
		if r.Header.Get("ETag") != `"2"` {
			return testenv.Errorf("first process still has %s", r.Header.Get("ETag"))
		}
		return nil
	})
}
