package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idlist"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/spill"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
	"github.com/google/uuid"
)

// The service is what the app hands other areas as an entityref.Catalog.
var _ entityref.Catalog = (*catalog.Service)(nil)

// open starts a catalog on the entities topic of brokers and waits until
// its view caught up.
func open(t *testing.T, brokers []string) *catalog.Service {
	t.Helper()
	var svc *catalog.Service
	texts := testenv.SpillStore(t)
	testenv.StateLog(t, brokers, testenv.StateLogOptions{}, func(l *statelog.Log) { svc = catalog.New(l, texts) })
	return svc
}

func ptr[T any](v T) *T { return &v }

func product(id string, vendors ...string) catalog.ProductInput {
	return catalog.ProductInput{ID: ptr(id), Name: ptr("Product " + id), Vendors: vendors, Categories: []string{"c-1"}, Price: ptr(json.Number("9.99"))}
}

func upsert(t *testing.T, svc *catalog.Service, mp string, ps ...catalog.ProductInput) {
	t.Helper()
	if _, err := svc.UpsertProducts(t.Context(), mp, ps, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
}

// productIDs collects, sorted, the ids a walk of the catalog (each) yields.
func productIDs(each func(mp, key string, fn func(entityref.ProductRef) bool), mp, key string) []string {
	var ids []string
	each(mp, key, func(p entityref.ProductRef) bool {
		ids = append(ids, p.ID)
		return true
	})
	slices.Sort(ids)
	return ids
}

func vendorProducts(svc *catalog.Service, mp, vendor string) []string {
	return productIDs(svc.EachProductOfVendor, mp, vendor)
}

func categoryProducts(svc *catalog.Service, mp, cat string) []string {
	return productIDs(svc.EachProductInCategory, mp, cat)
}

// TestCatalogRefs: what other areas read (entityref.Catalog) follows every
// change at once: deactivation, vendor changes, deletion; and each
// marketplace sees only its own catalog.
func TestCatalogRefs(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	svc := open(t, brokers)
	ctx := t.Context()
	const A, B = "mp-a", "mp-b"

	full := product("p-1", "v-1", "v-2")
	full.QualityScore = ptr(json.Number("0.25"))
	upsert(t, svc, A, full, product("p-2", "v-1"), product("p-3"))
	upsert(t, svc, B, product("p-1", "v-9"))

	got, ok := svc.Product(A, "p-1")
	want := entityref.ProductRef{ID: "p-1", Active: true, Vendors: idlist.Of("v-1", "v-2"),
		Categories: idlist.Of("c-1"), PriceMicros: 9_990_000, QualityScore: 0.25}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Product = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := svc.Product(A, "nope"); ok {
		t.Fatal("unknown product found")
	}
	if ids := vendorProducts(svc, A, "v-1"); !reflect.DeepEqual(ids, []string{"p-1", "p-2"}) {
		t.Fatalf("products of v-1: %v", ids)
	}
	if ids := vendorProducts(svc, B, "v-1"); ids != nil {
		t.Fatalf("B sees A's products: %v", ids)
	}
	if ids := vendorProducts(svc, B, "v-9"); !reflect.DeepEqual(ids, []string{"p-1"}) {
		t.Fatalf("B's products of v-9: %v", ids)
	}
	// fn returning false stops the walk.
	n := 0
	svc.EachProductOfVendor(A, "v-1", func(entityref.ProductRef) bool { n++; return false })
	if n != 1 {
		t.Fatalf("walk went on after false: %d calls", n)
	}

	// Deactivation: still there, inactive (campaigns and auctions skip it).
	off := product("p-2", "v-1")
	off.Active = ptr(false)
	upsert(t, svc, A, off)
	if p, ok := svc.Product(A, "p-2"); !ok || p.Active {
		t.Fatalf("deactivated product: %+v %v", p, ok)
	}
	// Moving p-1 from v-2 to v-3 moves it in the index.
	upsert(t, svc, A, product("p-1", "v-1", "v-3"))
	if ids := vendorProducts(svc, A, "v-2"); ids != nil {
		t.Fatalf("v-2 still has %v", ids)
	}
	if ids := vendorProducts(svc, A, "v-3"); !reflect.DeepEqual(ids, []string{"p-1"}) {
		t.Fatalf("v-3 has %v", ids)
	}
	// Deletion: gone for every reader.
	res, err := svc.DeleteProducts(ctx, A, []string{"p-1", "p-404", "p-1"}, true, statelog.MatchAny)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, catalog.DeleteResult{Deleted: []string{"p-1"}, NotFound: []string{"p-404"}}) {
		t.Fatalf("delete result %+v", res)
	}
	if _, ok := svc.Product(A, "p-1"); ok {
		t.Fatal("deleted product still found")
	}
	if ids := vendorProducts(svc, A, "v-1"); !reflect.DeepEqual(ids, []string{"p-2"}) {
		t.Fatalf("v-1 after delete: %v", ids)
	}
	if _, ok := svc.Product(B, "p-1"); !ok {
		t.Fatal("deleting A's p-1 deleted B's")
	}
	// A new product takes the deleted one's place in the collection (its
	// number, which the indexes hold): it is listed under its own vendor
	// only, under its own id.
	upsert(t, svc, A, product("p-new", "v-9"))
	if ids := vendorProducts(svc, A, "v-9"); !reflect.DeepEqual(ids, []string{"p-new"}) {
		t.Fatalf("v-9: %v", ids)
	}
	if ids := vendorProducts(svc, A, "v-3"); len(ids) != 0 {
		t.Fatalf("v-3 after p-1's delete: %v", ids)
	}

	// Vendors and category paths.
	if _, err := svc.UpsertVendors(ctx, A, []catalog.VendorInput{{ID: ptr("v-1"), Name: ptr("Acme"), GlobalID: ptr("G-1")}}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	if v, ok := svc.Vendor(A, "v-1"); !ok || v != (entityref.VendorRef{ID: "v-1", Name: "Acme", GlobalID: "G-1"}) {
		t.Fatalf("Vendor = %+v %v", v, ok)
	}
	if _, ok := svc.Vendor(B, "v-1"); ok {
		t.Fatal("B sees A's vendor")
	}
	cats := []catalog.CategoryInput{
		{ID: ptr("beer"), Name: ptr("Beer"), ParentID: ptr("drinks")},
		{ID: ptr("drinks"), Name: ptr("Drinks"), ParentID: ptr("food")}, // food not known yet
		{ID: ptr("x"), Name: ptr("X"), ParentID: ptr("y")},
		{ID: ptr("y"), Name: ptr("Y"), ParentID: ptr("x")}, // a cycle ends the path
	}
	if _, err := svc.UpsertCategories(ctx, A, cats, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	if p := svc.CategoryPath(A, "beer"); !reflect.DeepEqual(p, []string{"beer", "drinks"}) {
		t.Fatalf("path %v", p)
	}
	if p := svc.CategoryPath(A, "x"); !reflect.DeepEqual(p, []string{"x", "y"}) {
		t.Fatalf("cyclic path %v", p)
	}
	if p := svc.CategoryPath(B, "beer"); p != nil {
		t.Fatalf("B sees A's categories: %v", p)
	}

	// A second process on the same log rebuilds the same view.
	svc2 := open(t, brokers)
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		a, aok := svc.Product(A, id)
		b, bok := svc2.Product(A, id)
		if aok != bok || !reflect.DeepEqual(a, b) {
			t.Fatalf("rebuilt %s: %+v %v, want %+v %v", id, b, bok, a, aok)
		}
	}
	if ids := vendorProducts(svc2, A, "v-1"); !reflect.DeepEqual(ids, []string{"p-2"}) {
		t.Fatalf("rebuilt index: %v", ids)
	}
}

// TestCategoryIndex: EachProductInCategory walks a category's subtree
// through the parents the categories name, yields each product once, and
// follows product moves, deletions and re-parenting at once.
func TestCategoryIndex(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	svc := open(t, brokers)
	ctx := t.Context()
	const A, B = "mp-a", "mp-b"
	cats := []catalog.CategoryInput{
		{ID: ptr("food"), Name: ptr("Food")},
		{ID: ptr("drinks"), Name: ptr("Drinks"), ParentID: ptr("food")},
		{ID: ptr("beer"), Name: ptr("Beer"), ParentID: ptr("drinks")},
		{ID: ptr("wine"), Name: ptr("Wine"), ParentID: ptr("drinks")},
		{ID: ptr("x"), Name: ptr("X"), ParentID: ptr("y")},
		{ID: ptr("y"), Name: ptr("Y"), ParentID: ptr("x")}, // a cycle
	}
	if _, err := svc.UpsertCategories(ctx, A, cats, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	in := func(id string, cats ...string) catalog.ProductInput {
		p := product(id, "v-1")
		p.Categories = cats
		return p
	}
	upsert(t, svc, A, in("p-beer", "beer"), in("p-both", "beer", "wine"), in("p-food", "food"), in("p-none"), in("p-x", "x"))
	upsert(t, svc, B, in("p-b", "beer"))

	check := func(step, mp, cat string, want ...string) {
		t.Helper()
		got := categoryProducts(svc, mp, cat)
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: products in %s/%s = %v, want %v", step, mp, cat, got, want)
		}
	}
	check("start", A, "beer", "p-beer", "p-both")
	check("start", A, "drinks", "p-beer", "p-both") // p-both once, though in two subcategories
	check("start", A, "food", "p-beer", "p-both", "p-food")
	check("start", A, "x", "p-x") // the cycle ends the walk
	check("start", A, "nope")
	check("start", B, "beer", "p-b")
	check("start", B, "food") // B has no categories: beer has no parent there

	upsert(t, svc, A, in("p-both", "wine"), in("p-beer"))
	check("moved", A, "beer")
	check("moved", A, "wine", "p-both")
	check("moved", A, "food", "p-both", "p-food")

	if _, err := svc.DeleteProducts(ctx, A, []string{"p-both"}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	check("deleted", A, "drinks")

	// Re-parenting wine under x moves its products to x's subtree.
	upsert(t, svc, A, in("p-wine", "wine"))
	if _, err := svc.UpsertCategories(ctx, A, []catalog.CategoryInput{{ID: ptr("wine"), Name: ptr("Wine"), ParentID: ptr("x")}}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	check("re-parented", A, "drinks")
	check("re-parented", A, "y", "p-wine", "p-x")

	// Many products in one category, most removed again: the index
	// compacts and still answers.
	var many []catalog.ProductInput
	var want []string
	for i := range 1200 {
		id := fmt.Sprintf("m-%04d", i)
		many = append(many, in(id, "beer"))
		if i%10 == 0 {
			want = append(want, id)
		}
	}
	for i := 0; i < len(many); i += catalog.MaxBatch {
		upsert(t, svc, A, many[i:min(i+catalog.MaxBatch, len(many))]...)
	}
	var gone []string
	for i := range 1200 {
		if i%10 != 0 {
			gone = append(gone, fmt.Sprintf("m-%04d", i))
		}
	}
	for i := 0; i < len(gone); i += catalog.MaxBatch {
		if _, err := svc.DeleteProducts(ctx, A, gone[i:min(i+catalog.MaxBatch, len(gone))], true, statelog.MatchAny); err != nil {
			t.Fatal(err)
		}
	}
	check("compacted", A, "beer", want...)

	// A second process on the same log rebuilds the same index.
	svc2 := open(t, brokers)
	if got := categoryProducts(svc2, A, "food"); !reflect.DeepEqual(got, append(slices.Clone(want), "p-food")) {
		t.Fatalf("rebuilt: %v", got)
	}
}

// TestUpsertRules: the request is checked whole, and the rules that change
// values instead of rejecting them.
func TestUpsertRules(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	svc := open(t, brokers)
	ctx := t.Context()
	const A = "mp-a"

	p := product("p-1")
	p.Name = ptr(strings.Repeat("é", 151))
	p.Description = ptr(strings.Repeat("d", 5001))
	p.Vendors = []string{" ", "v-1", "", "v-1", "v-2"}
	p.Categories = []string{"\t"}
	p.EAN = ptr("4003994155487") // wrong check digit: stored as null
	p.GTIN = ptr("400-6381-33393-1")
	last := product("p-1")
	last.Name = ptr("Second")
	res, err := svc.UpsertProducts(ctx, A, []catalog.ProductInput{p, product("p-2")}, true, statelog.MatchAny)
	if err != nil {
		t.Fatal(err)
	}
	if res.Upserted != 2 || len(res.Warnings) != 3 {
		t.Fatalf("result %+v", res)
	}
	v, ver, err := svc.GetProduct(A, "p-1")
	if err != nil || ver != 1 {
		t.Fatal(err, ver)
	}
	if v.Name != strings.Repeat("é", 150) || len(*v.Description) != 5000 || v.EAN != nil || *v.GTIN != "4006381333931" ||
		!reflect.DeepEqual(v.Vendors, []string{"v-1", "v-2"}) || len(v.Categories) != 0 {
		t.Fatalf("stored %+v", v)
	}
	// A repeated id: the last occurrence wins.
	if res, err := svc.UpsertProducts(ctx, A, []catalog.ProductInput{product("p-1"), last}, true, statelog.MatchAny); err != nil || res.Upserted != 1 {
		t.Fatal(res, err)
	}
	if v, ver, _ := svc.GetProduct(A, "p-1"); v.Name != "Second" || ver != 2 {
		t.Fatalf("after repeat: %q v%d", v.Name, ver)
	}

	// One bad product rejects the request: nothing is written.
	bad := product("p-2")
	bad.Price = ptr(json.Number("0"))
	_, err = svc.UpsertProducts(ctx, A, []catalog.ProductInput{product("p-new"), bad}, true, statelog.MatchAny)
	var verr validation.Errors
	if !errors.As(err, &verr) || len(verr) != 1 || fmt.Sprint(verr[0].Loc) != "[body products 1 price]" {
		t.Fatalf("err %v", err)
	}
	if _, _, err := svc.GetProduct(A, "p-new"); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("p-new written by a rejected request: %v", err)
	}

	// If-Match: one product, its version.
	if _, err := svc.UpsertProducts(ctx, A, []catalog.ProductInput{product("p-1")}, true, 1); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("stale If-Match: %v", err)
	}
	if _, err := svc.UpsertProducts(ctx, A, []catalog.ProductInput{product("p-1")}, true, 2); err != nil {
		t.Fatalf("current If-Match: %v", err)
	}
	if _, err := svc.UpsertProducts(ctx, A, []catalog.ProductInput{product("p-1"), product("p-2")}, true, 3); !errors.As(err, &verr) {
		t.Fatalf("If-Match with two products: %v", err)
	}
	if _, err := svc.DeleteProducts(ctx, A, []string{"p-1"}, true, 1); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("stale If-Match delete: %v", err)
	}
	if _, err := svc.DeleteProducts(ctx, A, []string{"p-404"}, true, 1); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("If-Match delete of a missing product: %v", err)
	}
	if _, err := svc.DeleteProducts(ctx, A, []string{"p-1"}, true, 3); err != nil {
		t.Fatalf("current If-Match delete: %v", err)
	}
}

// TestVendorUUIDs: a vendor is found by its catalog id or by its internal
// UUID, in its own marketplace only; reads show both ids; a catalog id is
// looked up first (even one shaped like another vendor's UUID); and a view
// rebuilt from the log (another process, a restart) resolves the same.
func TestVendorUUIDs(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	svc := open(t, brokers)
	ctx := t.Context()
	A, B := uuid.NewString(), uuid.NewString()
	vendors := func(mp string, ids ...string) {
		t.Helper()
		in := make([]catalog.VendorInput, len(ids))
		for i, id := range ids {
			in[i] = catalog.VendorInput{ID: ptr(id), Name: ptr("Vendor " + id)}
		}
		if _, err := svc.UpsertVendors(ctx, mp, in, true, statelog.MatchAny); err != nil {
			t.Fatal(err)
		}
	}
	// A UUID-shaped catalog id that is v-2's UUID: only a catalog chosen to
	// collide does that.
	collider := vendorid.String(A, "v-2")
	vendors(A, "v-1", "v-2", collider)
	vendors(B, "v-1")
	vendors(A, "v-1") // an update: same vendor, same UUID

	check := func(svc *catalog.Service) {
		t.Helper()
		u1 := vendorid.String(A, "v-1")
		for _, tc := range []struct {
			mp, id, want string // want "": not found
		}{
			{A, "v-1", "v-1"},
			{A, u1, "v-1"},
			{A, strings.ToUpper(u1), "v-1"},
			{B, "v-1", "v-1"},
			{B, u1, ""},                        // A's UUID in B
			{A, vendorid.String(A, "v-9"), ""}, // the UUID of no vendor
			{A, collider, collider},            // a catalog id first
			{A, vendorid.String(A, collider), collider},
			{A, "{" + u1 + "}", ""}, // only the canonical form
			{A, "", ""},
		} {
			v, ok := svc.ResolveVendor(tc.mp, tc.id)
			if ok != (tc.want != "") || v.ID != tc.want {
				t.Errorf("ResolveVendor(%s, %q) = %+v %v, want %q", tc.mp, tc.id, v, ok, tc.want)
			}
			view, _, err := svc.GetVendor(tc.mp, tc.id)
			if (err == nil) != (tc.want != "") || view.ID != tc.want {
				t.Errorf("GetVendor(%s, %q) = %+v %v, want %q", tc.mp, tc.id, view, err, tc.want)
			}
			if err == nil && (view.VendorID != vendorid.String(tc.mp, tc.want) || view.ExternalVendorID != tc.want) {
				t.Errorf("GetVendor(%s, %q): vendorId %s, externalVendorId %s", tc.mp, tc.id, view.VendorID, view.ExternalVendorID)
			}
		}
		// Vendor takes the catalog id only.
		if _, ok := svc.Vendor(A, u1); ok {
			t.Error("Vendor found a vendor by its UUID")
		}
		list, _ := svc.ListVendors(A, "", 10, "")
		if len(list) != 3 {
			t.Fatalf("%d vendors", len(list))
		}
		for _, v := range list {
			if v.VendorID != vendorid.String(A, v.ID) || v.ExternalVendorID != v.ID {
				t.Errorf("listed %+v", v)
			}
		}
	}
	check(svc)
	check(open(t, brokers)) // rebuilt from the log
}

// TestProductTextsOnDisk: a product's name and details live on disk (the
// view keeps what auctions and indexes read), and every read answers as if
// they were in memory: GET, creatives, the console's search by name, after
// a replacement, in a view loaded cold from the topic, and after a delete.
// Short texts stay in memory. A store that cannot be read answers 503-kind
// errors, never a partial product.
func TestProductTextsOnDisk(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	texts := testenv.SpillStore(t)
	var svc *catalog.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{}, func(l *statelog.Log) { svc = catalog.New(l, texts) })
	const mp = "mp-a"
	long := product("p-long", "v-1")
	long.Name = ptr("Delirium Tremens Beer Bottle 330cc x6")
	long.Description = ptr(strings.Repeat("Named \"Best Beer in the World\" in 2008. ", 12))
	long.Brand = &catalog.BrandInput{ID: ptr("b-1"), Name: ptr("Huyghe")}
	long.ImageURL = ptr("https://cdn.example.com/products/p-long.jpg")
	long.Metadata = json.RawMessage(`{"color": "amber"}`)
	long.VariantIDs = []string{"p-long-4", "p-long-12"}
	upsert(t, svc, mp, long, product("p-short", "v-1"))

	want := catalog.ProductView{ID: "p-long", Name: *long.Name, Vendors: []string{"v-1"}, Categories: []string{"c-1"},
		Description: long.Description, Brand: &catalog.Brand{ID: "b-1", Name: "Huyghe"}, ImageURL: long.ImageURL,
		Price: ptr(json.Number("9.99")), Active: true, Metadata: json.RawMessage(`{"color":"amber"}`), VariantIDs: long.VariantIDs}
	get := func(svc *catalog.Service, id string) (catalog.ProductView, int64) {
		t.Helper()
		v, ver, err := svc.GetProduct(mp, id)
		if err != nil {
			t.Fatal(err)
		}
		return v, ver
	}
	if got, ver := get(svc, "p-long"); !reflect.DeepEqual(got, want) || ver != 1 {
		t.Fatalf("GET = %+v (version %d), want %+v (version 1)", got, ver, want)
	}
	if _, err := texts.Get(nil, []byte(mp+"/p-long")); err != nil {
		t.Fatalf("the long product's texts are not on disk: %v", err)
	}
	if _, err := texts.Get(nil, []byte(mp+"/p-short")); !errors.Is(err, spill.ErrMissing) {
		t.Fatalf("a short name went to disk: %v", err)
	}
	if got, _ := get(svc, "p-short"); got.Name != "Product p-short" {
		t.Fatalf("GET p-short: name %q", got.Name)
	}
	cr, ok := svc.Creative(mp, "p-long")
	if !ok || cr.ImageURL != *long.ImageURL || cr.BrandID != "b-1" || cr.BrandName != "Huyghe" || string(cr.Metadata) != `{"color":"amber"}` {
		t.Fatalf("Creative = %+v, %v", cr, ok)
	}
	found, more, err := svc.SearchProducts(context.Background(), mp, "v-1", "tremens", 10)
	if err != nil || more || len(found) != 1 || !reflect.DeepEqual(found[0], want) {
		t.Fatalf("search by name = %+v, %v, %v", found, more, err)
	}

	// A view loaded cold from the topic answers the same.
	texts2 := testenv.SpillStore(t)
	var cold *catalog.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{}, func(l *statelog.Log) { cold = catalog.New(l, texts2) })
	if got, ver := get(cold, "p-long"); !reflect.DeepEqual(got, want) || ver != 1 {
		t.Fatalf("cold view: GET = %+v (version %d)", got, ver)
	}

	// The cold view's store gone (a disk that fails): its product is not
	// answered in part, but with an error of the unavailable kind (503).
	if err := texts2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cold.GetProduct(mp, "p-long"); errkind.KindOf(err) != errkind.Unavailable {
		t.Fatalf("GET with the store closed: %v", err)
	}

	// A replacement replaces the texts; a delete removes them.
	long.Description = ptr("Brewed in Melle.")
	long.Name = ptr(strings.Repeat("Delirium ", 10))
	upsert(t, svc, mp, long)
	if got, ver := get(svc, "p-long"); got.Name != *long.Name || *got.Description != "Brewed in Melle." || ver != 2 {
		t.Fatalf("after the replacement: GET = %+v (version %d)", got, ver)
	}
	if _, err := svc.DeleteProducts(t.Context(), mp, []string{"p-long"}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.GetProduct(mp, "p-long"); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("GET of a deleted product: %v", err)
	}
	if _, err := texts.Get(nil, []byte(mp+"/p-long")); !errors.Is(err, spill.ErrMissing) {
		t.Fatalf("a deleted product's texts stay on disk: %v", err)
	}

}

// namesFiles lists the files of dir whose name starts with "names-" that
// the process has open (its names index), and those on disk.
func namesFiles(t *testing.T, dir string) (open, onDisk []string) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && filepath.Dir(target) == dir && strings.HasPrefix(filepath.Base(target), "names-") {
			open = append(open, target)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "names-") {
			onDisk = append(onDisk, e.Name())
		}
	}
	return open, onDisk
}

// Close releases the names index's files (the console's search): their
// descriptors are closed and the files removed; a search after it is an
// error of the unavailable kind, not a panic.
func TestCloseReleasesNamesFile(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	texts := testenv.SpillStore(t)
	var svc *catalog.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{}, func(l *statelog.Log) { svc = catalog.New(l, texts) })
	const mp = "mp-a"
	// About 100 kB of names: the index writes its first segment to disk.
	var ps []catalog.ProductInput
	for i := range 500 {
		p := product(fmt.Sprintf("p-%03d", i), "v-1")
		p.Name = ptr(fmt.Sprintf("Product %03d ", i) + strings.Repeat("long name ", 18))
		ps = append(ps, p)
	}
	upsert(t, svc, mp, ps...)
	if found, _, err := svc.SearchProducts(t.Context(), mp, "", "product 123", 10); err != nil || len(found) != 1 {
		t.Fatalf("search before Close: %d found, %v", len(found), err)
	}
	open, onDisk := namesFiles(t, texts.Dir())
	if len(open) == 0 || len(onDisk) == 0 {
		t.Fatalf("no names file open (%q) or on disk (%q) in %s", open, onDisk, texts.Dir())
	}
	svc.Close()
	if open, onDisk := namesFiles(t, texts.Dir()); len(open) > 0 || len(onDisk) > 0 {
		t.Fatalf("after Close: open %q, on disk %q", open, onDisk)
	}
	if _, _, err := svc.SearchProducts(t.Context(), mp, "", "product 123", 10); errkind.KindOf(err) != errkind.Unavailable {
		t.Fatalf("search after Close: %v", err)
	}
}
