// Package catalog owns the marketplace catalog: products, vendors and
// categories, event-sourced on the entities log (storage/statelog) and held
// in memory by every process.
//
// Other areas read it through entityref.Catalog (Vendor, Product,
// EachProductOfVendor). Deactivating a product (active: false) or deleting
// it is visible to them at once, at read time: campaigns and the auction
// must skip a product whose ProductRef.Active is false or that Product no
// longer returns. Nothing else has to be notified, so a product leaves every
// active campaign and every later auction the moment the change is applied.
//
// See docs/reference/catalog.md for the endpoints and every field rule.
package catalog

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unique"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idlist"
	"github.com/endcap/endcap/internal/strset"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/spill"
	"github.com/endcap/endcap/storage/statelog"
)

// Entity types on the entities log.
const (
	TypeProduct  = "product"
	TypeVendor   = "vendor"
	TypeCategory = "category"
)

// Service is the catalog of every marketplace.
type Service struct {
	products   *statelog.Collection[Product]
	vendors    *statelog.Collection[Vendor]
	categories *statelog.Collection[Category]

	// byVendor indexes the products a vendor may promote:
	// marketplace -> vendor -> the products' numbers in their collection
	// (statelog.Collection.ByNum). It is kept by the products'
	// OnChangeNum hook, under the collection's write lock, then idxMu.
	// The sets hold four bytes a member and no pointer: a million products
	// are millions of members (docs/design/performance.md).
	idxMu    sync.RWMutex
	byVendor map[string]map[string]*numSet
	// byCategory indexes products by the categories they list (directly):
	// marketplace -> category -> product numbers; children indexes
	// categories by parent: marketplace -> parent -> child ids. Both serve
	// the auction's category context (EachProductInCategory).
	byCategory map[string]map[string]*numSet
	children   map[string]map[string]*strset.Set
	// byUUID finds a vendor's catalog id from its internal UUID
	// (internal/vendorid): marketplace -> UUID -> catalog id, kept by the
	// vendors' OnChange hook (under idxMu).
	byUUID map[string]map[uuid.UUID]string

	// texts holds every product's name and details on local disk, which
	// only GET, the console's search and creatives read (keepProduct): the
	// view keeps in memory what the auction, campaigns and indexes read.
	texts *spill.Store
	// names is the console's search of every product's id and name (on
	// disk beside texts); keptName is the name keepProduct moved to disk,
	// for indexProduct of the same change (both run in the products'
	// applier, under its write lock).
	names    *nameIndex
	keptName string
}

// New registers the catalog's collections on log; the products' names and
// details go to texts (the caller closes it after the log stopped, and the
// service before it: Close). Call it before the log runs.
func New(log *statelog.Log, texts *spill.Store) *Service {
	s := &Service{
		texts:      texts,
		products:   statelog.NewCollection[Product](log, TypeProduct),
		vendors:    statelog.NewCollection[Vendor](log, TypeVendor),
		categories: statelog.NewCollection[Category](log, TypeCategory),
		byVendor:   map[string]map[string]*numSet{},
		byCategory: map[string]map[string]*numSet{},
		children:   map[string]map[string]*strset.Set{},
		byUUID:     map[string]map[uuid.UUID]string{},
	}
	s.names = newNameIndex("") // the system's temporary directory
	if texts != nil {
		s.names = newNameIndex(texts.Dir())
	}
	s.products.Keep = s.keepProduct
	s.products.OnChangeNum = s.indexProduct
	s.vendors.OnChange = s.indexVendor
	s.categories.OnChange = s.indexCategory
	return s
}

// Close closes and removes the file of the console's product search (the
// names index beside texts): searches after it fail with an error of the
// unavailable kind. Call it once the log has stopped, before texts is
// closed.
func (s *Service) Close() { s.names.close() }

// textKey is a product's key in texts.
func textKey(b []byte, mp, id string) []byte {
	b = append(b, mp...)
	b = append(b, '/')
	return append(b, id...)
}

// minSpill is the size of the texts (name and details) up to which a
// product keeps them in memory: a short name alone costs less there than
// its key and index on disk, and is read without a disk read.
const minSpill = 64

// keepProduct moves a product's name and details to disk as the view
// applies it, unless they are short (minSpill). When the disk does not take them they stay in memory (the
// product is then answered from there), and the error is logged.
func (s *Service) keepProduct(mp, id string, version int64, p *Product) {
	s.keptName = p.Name()
	if len(p.Name())+len(p.details()) <= minSpill {
		return
	}
	bp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bp)
	key := textKey((*bp)[:0], mp, id)
	val := p.appendText(key, version)
	*bp = val
	if err := s.texts.Set(key, val[len(key):]); err != nil {
		slog.Error("catalog: a product's texts stay in memory: the disk store refused them", "marketplace", mp, "product", id, "err", err)
		return
	}
	p.dropText()
}

// errTexts: a product's texts could not be read from disk.
var errTexts = errkind.New(errkind.Unavailable, "the product could not be read right now; retry later")

// full returns a product with its name and details, its version and
// whether it exists. A product replaced or deleted between the read of the
// view and the read of its texts is read again, so that the answer is one
// version of it.
func (s *Service) full(mp, id string) (Product, int64, bool, error) {
	var key []byte
	for range 8 {
		p, ver, ok := s.products.Get(mp, id)
		if !ok || !p.spilled {
			return p, ver, ok, nil
		}
		if key == nil {
			key = textKey(nil, mp, id)
		}
		text, err := s.texts.Get(nil, key)
		if errors.Is(err, spill.ErrMissing) {
			continue // deleted since: read the view again
		}
		if err != nil {
			slog.Error("catalog: a product's texts could not be read from disk", "marketplace", mp, "product", id, "err", err)
			return Product{}, 0, false, errTexts
		}
		q, tv, ok := p.withText(text)
		if !ok {
			slog.Error("catalog: a product's texts on disk are unreadable", "marketplace", mp, "product", id)
			return Product{}, 0, false, errTexts
		}
		if tv == ver {
			return q, ver, true, nil
		}
		// Replaced since the view was read: read both again.
	}
	return Product{}, 0, false, errTexts
}

func (s *Service) indexProduct(mp, id string, num uint32, old, nv *Product) {
	if nv == nil && old != nil && old.spilled {
		if err := s.texts.Delete(textKey(nil, mp, id)); err != nil {
			slog.Error("catalog: a deleted product's texts stay on disk", "marketplace", mp, "product", id, "err", err)
		}
	}
	if nv == nil {
		s.names.remove(num)
	} else {
		s.names.set(mp, num, id, s.keptName)
	}
	s.keptName = ""
	var wasV, nowV, wasC, nowC idlist.List
	if old != nil {
		wasV, wasC = old.Vendors(), old.Categories()
	}
	if nv != nil {
		nowV, nowC = nv.Vendors(), nv.Categories()
	}
	sameV, sameC := wasV == nowV, wasC == nowC // packed lists: equal ids, equal strings
	if sameV && sameC {
		return
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if !sameV {
		reindex(s.byVendor, mp, num, wasV, nowV)
	}
	if !sameC {
		reindex(s.byCategory, mp, num, wasC, nowC)
	}
}

// indexVendor keeps the vendors' UUID index: a vendor enters it when it first
// appears in the catalog, and leaves it only if it is deleted (the API has no
// vendor delete).
func (s *Service) indexVendor(mp, id string, old, nv *Vendor) {
	if (old == nil) == (nv == nil) {
		return // an update: same id, same UUID
	}
	u := vendorid.UUID(mp, id)
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	m := s.byUUID[mp]
	if nv == nil {
		delete(m, u)
		if len(m) == 0 {
			delete(s.byUUID, mp)
		}
		return
	}
	if m == nil {
		m = map[uuid.UUID]string{}
		s.byUUID[mp] = m
	}
	m[u] = strings.Clone(id)
}

// vendorID returns the catalog id of the vendor that id names: id itself
// when a vendor has that catalog id, else the vendor whose internal UUID it
// is. A catalog id is looked up first, so every id that named a vendor before
// vendors had UUIDs still names it, even a catalog id shaped like a UUID; an
// id that is both one vendor's catalog id and another's UUID (which only a
// catalog id chosen to be one can make) names the first.
func (s *Service) vendorID(mp, id string) (string, bool) {
	if _, _, ok := s.vendors.Get(mp, id); ok {
		return id, true
	}
	u, ok := vendorid.Parse(id)
	if !ok {
		return "", false
	}
	s.idxMu.RLock()
	cat, ok := s.byUUID[mp][u]
	s.idxMu.RUnlock()
	return cat, ok
}

func (s *Service) indexCategory(mp, id string, old, nv *Category) {
	var was, now idlist.List
	if old != nil && old.ParentID != "" {
		was = idlist.Of(old.ParentID)
	}
	if nv != nil && nv.ParentID != "" {
		now = idlist.Of(nv.ParentID)
	}
	if was == now {
		return
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	reindex(s.children, mp, id, was, now)
}

// set is a set of ids or of numbers.
type set[M any] interface {
	Add(M) bool
	Remove(M) bool
	Len() int
}

// reindex moves id from the sets of keys was to the sets of keys now in
// idx[mp] (key -> set of ids or numbers).
func reindex[M any, S any, PS interface {
	*S
	set[M]
}](idx map[string]map[string]PS, mp string, id M, was, now idlist.List) {
	m := idx[mp]
	for k := range was.All() {
		if !now.Contains(k) {
			if set := m[k]; set != nil {
				set.Remove(id)
				if set.Len() == 0 {
					delete(m, k)
				}
			}
		}
	}
	if now.Len() > 0 && m == nil {
		m = map[string]PS{}
		idx[mp] = m
	}
	for k := range now.All() {
		set := m[k]
		if set == nil {
			set = PS(new(S))
			// k shares a product's texts: the index keeps its own copy,
			// so that it does not keep a replaced product's alive.
			m[strings.Clone(k)] = set
		}
		set.Add(id)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// --- entityref.Catalog ---

// Vendor returns a vendor of the marketplace.
func (s *Service) Vendor(mp, id string) (entityref.VendorRef, bool) {
	v, _, ok := s.vendors.Get(mp, id)
	if !ok {
		return entityref.VendorRef{}, false
	}
	return entityref.VendorRef{ID: id, Name: v.Name, GlobalID: v.GlobalID}, true
}

// ResolveVendor returns a vendor of the marketplace named by its catalog id
// or its internal UUID (vendorID's rule); the VendorRef's ID is the catalog
// id.
func (s *Service) ResolveVendor(mp, id string) (entityref.VendorRef, bool) {
	cat, ok := s.vendorID(mp, id)
	if !ok {
		return entityref.VendorRef{}, false
	}
	return s.Vendor(mp, cat)
}

// Product returns a product of the marketplace (active or not). Its
// Vendors and Categories are shared with the view: read them, never write.
func (s *Service) Product(mp, id string) (entityref.ProductRef, bool) {
	p, _, ok := s.products.Get(mp, id)
	if !ok {
		return entityref.ProductRef{}, false
	}
	return productRef(id, &p), true
}

func productRef(id string, p *Product) entityref.ProductRef {
	return entityref.ProductRef{
		ID: id, Active: p.Active, Vendors: p.Vendors(), Categories: p.Categories(),
		PriceMicros: p.PriceMicros, QualityScore: p.QualityScore,
	}
}

// EachProductOfVendor calls fn for every product (active or not) whose
// vendors include vendorID, in no order, until fn returns false. It reads
// the vendor index, not every product; fn runs without any lock held.
func (s *Service) EachProductOfVendor(mp, vendorID string, fn func(entityref.ProductRef) bool) {
	s.idxMu.RLock()
	var nums []uint32
	if set := s.byVendor[mp][vendorID]; set != nil {
		nums = set.AppendTo(make([]uint32, 0, set.Len()))
	}
	s.idxMu.RUnlock()
	for _, n := range nums {
		id, p, _, ok := s.products.ByNum(mp, n)
		if !ok || !p.Vendors().Contains(vendorID) {
			continue // changed since the index was read
		}
		if !fn(productRef(id, &p)) {
			return
		}
	}
}

// ListenProducts and ListenCategories register functions called under the
// collections' write locks for every applied product or category change
// (for the auction's index). For an entity new to the catalog (old is nil),
// id is the catalog's own copy of its id, which a listener may keep instead
// of a copy of its own (until ListenProductsRekeyed hands it another). Call
// them before the log runs; fn must not call the catalog.
func (s *Service) ListenProducts(fn func(mp, id string, old, nw *Product)) { s.products.Listen(fn) }

// ListenProductsRekeyed registers a function called, under the products'
// write lock, with every product's marketplace and id when the collection
// copied its ids into new chunks (statelog.Collection.ListenRekeyed): a
// listener that keeps the ids it was handed for new products takes these.
func (s *Service) ListenProductsRekeyed(fn func(ids iter.Seq2[string, string])) {
	s.products.ListenRekeyed(fn)
}

// ListenCategories: see ListenProducts.
func (s *Service) ListenCategories(fn func(mp, id string, old, nw *Category)) {
	s.categories.Listen(fn)
}

// EachProductInCategory calls fn for every product (active or not) that
// lists the category or one of its descendants (through the categories'
// parentId), once each, in no order, until fn returns false. It reads the
// indexes, not every product; fn runs without any lock held.
func (s *Service) EachProductInCategory(mp, categoryID string, fn func(entityref.ProductRef) bool) {
	var nums []uint32
	s.idxMu.RLock()
	seenCat := map[string]bool{categoryID: true}
	queue := []string{categoryID}
	for len(queue) > 0 && len(seenCat) <= maxCategoryTree {
		c := queue[0]
		queue = queue[1:]
		if set := s.byCategory[mp][c]; set != nil {
			nums = set.AppendTo(nums)
		}
		kids := s.children[mp][c]
		if kids == nil {
			continue
		}
		for child := range kids.All() {
			if !seenCat[child] {
				seenCat[child] = true
				queue = append(queue, child)
			}
		}
	}
	s.idxMu.RUnlock()
	multi := len(seenCat) > 1
	var seen map[uint32]bool
	if multi {
		seen = make(map[uint32]bool, len(nums))
	}
	for _, n := range nums {
		if multi {
			if seen[n] {
				continue
			}
			seen[n] = true
		}
		id, p, _, ok := s.products.ByNum(mp, n)
		if !ok || !inAny(p.Categories(), seenCat) {
			continue // changed since the index was read
		}
		if !fn(productRef(id, &p)) {
			return
		}
	}
}

// inAny reports whether list holds one of the ids of set.
func inAny(list idlist.List, set map[string]bool) bool {
	for c := range list.All() {
		if set[c] {
			return true
		}
	}
	return false
}

// maxCategoryTree bounds the categories one EachProductInCategory walks.
const maxCategoryTree = 100_000

// ProductCreative is what a banner or a filter needs of a product beyond
// ProductRef: its image, brand and metadata (decoded on demand: call it for
// a few products, not for every candidate of a large auction).
type ProductCreative struct {
	ImageURL  string
	BrandID   string
	BrandName string
	Metadata  []byte // compact JSON object, or nil
}

// Creative returns a product's creative fields.
func (s *Service) Creative(mp, id string) (ProductCreative, bool) {
	p, _, ok, err := s.full(mp, id)
	if !ok || err != nil {
		return ProductCreative{}, false
	}
	d := p.detailFields()
	out := ProductCreative{ImageURL: d.ImageURL, Metadata: d.Metadata}
	if d.Brand != nil {
		out.BrandID, out.BrandName = d.Brand.ID, d.Brand.Name
	}
	return out, true
}

// ProductImageURL returns a product's imageURL ("" when it has none or is
// unknown).
func (s *Service) ProductImageURL(mp, id string) string {
	p, _, ok, err := s.full(mp, id)
	if !ok || err != nil {
		return ""
	}
	return p.detailFields().ImageURL
}

// CategoryParent returns a category's parentId ("" for a root) and whether
// the category is known.
func (s *Service) CategoryParent(mp, id string) (string, bool) {
	c, _, ok := s.categories.Get(mp, id)
	return c.ParentID, ok
}

// VendorImageURL returns a vendor's logo URL ("" when it has none).
func (s *Service) VendorImageURL(mp, id string) string {
	v, _, _ := s.vendors.Get(mp, id)
	return v.ImageURL
}

// ProductCount is the number of products of a marketplace.
func (s *Service) ProductCount(mp string) int { return s.products.Len(mp) }

// CategoryPath returns the category and its ancestors, nearest first, as
// far as they are known (a parent that was not upserted yet ends the path;
// so does a cycle). It is empty when the category is unknown.
func (s *Service) CategoryPath(mp, id string) []string {
	var path []string
	for id != "" && len(path) < 64 && !contains(path, id) {
		c, _, ok := s.categories.Get(mp, id)
		if !ok {
			break
		}
		path = append(path, unique.Make(id).Value()) // one copy of each id, however many paths hold it
		id = c.ParentID
	}
	return path
}

// --- products ---

// UpsertResult is the answer to a bulk upsert.
type UpsertResult struct {
	Upserted int       `json:"upserted"`
	Warnings []Warning `json:"warnings"`
}

// checkBatch checks the length of a request's list at loc.
func (c *checker) batch(n int, present bool, at ...any) bool {
	switch {
	case !present:
		c.add(validation.Missing, "Field required", at...)
	case n < 1:
		c.add(validation.TooShort, "List should have at least 1 item after validation, not 0", at...)
	case n > MaxBatch:
		c.add(validation.TooLong, "List should have at most "+strconv.Itoa(MaxBatch)+" items after validation, not "+strconv.Itoa(n), at...)
	default:
		return true
	}
	return false
}

// UpsertProducts creates or wholly replaces 1..500 products. The request
// is checked whole: any invalid field rejects it (validation.Errors) and
// nothing is written. When an id repeats, its last occurrence wins.
// expected is statelog.MatchAny, or the version an If-Match header
// demands, which needs exactly one product.
func (s *Service) UpsertProducts(ctx context.Context, mp string, in []ProductInput, present bool, expected statelog.IfMatch) (UpsertResult, error) {
	var c checker
	if !c.batch(len(in), present, "body", "products") {
		return UpsertResult{}, c.errs
	}
	if expected != statelog.MatchAny && len(in) != 1 {
		c.add(validation.ValueError, "If-Match needs exactly one product in the request", "body", "products")
		return UpsertResult{}, c.errs
	}
	ws := make([]statelog.Write[Product], 0, len(in))
	pos := make(map[string]int, len(in))
	for i := range in {
		id, p := c.product(&in[i], []any{"body", "products", i})
		if len(c.errs) > 0 {
			continue
		}
		if j, dup := pos[id]; dup {
			ws[j].Value = p
			continue
		}
		pos[id] = len(ws)
		ws = append(ws, statelog.Write[Product]{ID: id, Expected: statelog.AnyVersion, Value: p})
	}
	if len(c.errs) > 0 {
		return UpsertResult{}, c.errs
	}
	if err := s.putProducts(ctx, mp, ws, expected); err != nil {
		return UpsertResult{}, err
	}
	if c.warnings == nil {
		c.warnings = []Warning{}
	}
	return UpsertResult{Upserted: len(ws), Warnings: c.warnings}, nil
}

func (s *Service) putProducts(ctx context.Context, mp string, ws []statelog.Write[Product], expected statelog.IfMatch) error {
	if expected != statelog.MatchAny {
		w := ws[0]
		if w.Deleted {
			return s.products.Delete(ctx, mp, w.ID, int64(expected))
		}
		_, err := s.products.Put(ctx, mp, w.ID, int64(expected), w.Value)
		return err
	}
	return s.products.PutMany(ctx, mp, ws)
}

// GetProduct returns a product and its version.
func (s *Service) GetProduct(mp, id string) (ProductView, int64, error) {
	p, ver, ok, err := s.full(mp, id)
	if err != nil {
		return ProductView{}, 0, err
	}
	if !ok {
		return ProductView{}, 0, validation.NotFoundf("product %s", id)
	}
	return p.view(id), ver, nil
}

// DeleteResult is the answer to a bulk delete.
type DeleteResult struct {
	Deleted  []string `json:"deleted"`
	NotFound []string `json:"notFound"`
}

// DeleteProducts deletes 1..500 products by id (each 1..255 characters).
// Ids that do not exist in the marketplace are reported, not an error.
// expected is as for UpsertProducts (exactly one id with If-Match; a
// missing product then is a 404).
func (s *Service) DeleteProducts(ctx context.Context, mp string, ids []string, present bool, expected statelog.IfMatch) (DeleteResult, error) {
	var c checker
	if !c.batch(len(ids), present, "body", "ids") {
		return DeleteResult{}, c.errs
	}
	if expected != statelog.MatchAny && len(ids) != 1 {
		c.add(validation.ValueError, "If-Match needs exactly one id in the request", "body", "ids")
		return DeleteResult{}, c.errs
	}
	for i := range ids {
		c.id(&ids[i], nil, "body", "ids", i)
	}
	if len(c.errs) > 0 {
		return DeleteResult{}, c.errs
	}
	res := DeleteResult{Deleted: []string{}, NotFound: []string{}}
	var ws []statelog.Write[Product]
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, _, ok := s.products.Get(mp, id); !ok {
			res.NotFound = append(res.NotFound, id)
			continue
		}
		res.Deleted = append(res.Deleted, id)
		ws = append(ws, statelog.Write[Product]{ID: id, Expected: statelog.AnyVersion, Deleted: true})
	}
	if expected != statelog.MatchAny && len(ws) == 0 {
		return DeleteResult{}, validation.NotFoundf("product %s", ids[0])
	}
	if len(ws) > 0 {
		if err := s.putProducts(ctx, mp, ws, expected); err != nil {
			return DeleteResult{}, err
		}
	}
	return res, nil
}

// --- vendors ---

// UpsertVendors creates or wholly replaces 1..500 vendors (rules as for
// products: checked whole, last occurrence of an id wins, If-Match needs
// exactly one).
func (s *Service) UpsertVendors(ctx context.Context, mp string, in []VendorInput, present bool, expected statelog.IfMatch) (UpsertResult, error) {
	return upsertSimple(ctx, s.vendors, mp, in, present, expected, "vendors", "vendor", (*checker).vendor)
}

// upsertSimple is the bulk upsert of vendors and categories: check the whole
// batch, keep the last occurrence of each id, then write it (last writer
// wins), or write its one item at the If-Match version.
func upsertSimple[In, T any](ctx context.Context, coll *statelog.Collection[T], mp string, in []In, present bool, expected statelog.IfMatch,
	list, noun string, check func(*checker, *In, []any) (string, T)) (UpsertResult, error) {
	var c checker
	if !c.batch(len(in), present, "body", list) {
		return UpsertResult{}, c.errs
	}
	if expected != statelog.MatchAny && len(in) != 1 {
		c.add(validation.ValueError, "If-Match needs exactly one "+noun+" in the request", "body", list)
		return UpsertResult{}, c.errs
	}
	ws := make([]statelog.Write[T], 0, len(in))
	pos := make(map[string]int, len(in))
	for i := range in {
		id, v := check(&c, &in[i], []any{"body", list, i})
		if len(c.errs) > 0 {
			continue
		}
		if j, dup := pos[id]; dup {
			ws[j].Value = v
			continue
		}
		pos[id] = len(ws)
		ws = append(ws, statelog.Write[T]{ID: id, Expected: statelog.AnyVersion, Value: v})
	}
	if len(c.errs) > 0 {
		return UpsertResult{}, c.errs
	}
	var err error
	if expected != statelog.MatchAny {
		_, err = coll.Put(ctx, mp, ws[0].ID, int64(expected), ws[0].Value)
	} else {
		err = coll.PutMany(ctx, mp, ws)
	}
	if err != nil {
		return UpsertResult{}, err
	}
	return UpsertResult{Upserted: len(ws), Warnings: []Warning{}}, nil
}

// GetVendor returns a vendor, named by its catalog id or its internal UUID
// (vendorID's rule), and its version.
func (s *Service) GetVendor(mp, id string) (VendorView, int64, error) {
	cat, ok := s.vendorID(mp, id)
	v, ver, found := s.vendors.Get(mp, cat)
	if !ok || !found {
		return VendorView{}, 0, validation.NotFoundf("vendor %s", id)
	}
	return v.view(mp, cat), ver, nil
}

// ListVendors returns up to limit vendors in id order after the id after,
// only those whose globalId is globalID when it is not empty, and whether
// more follow.
func (s *Service) ListVendors(mp, after string, limit int, globalID string) ([]VendorView, bool) {
	var keep func(string, Vendor) bool
	if globalID != "" {
		keep = func(_ string, v Vendor) bool { return v.GlobalID == globalID }
	}
	ids, vals, more := s.vendors.Page(mp, after, limit, keep)
	out := make([]VendorView, len(ids))
	for i := range ids {
		out[i] = vals[i].view(mp, ids[i])
	}
	return out, more
}

// --- categories ---

// UpsertCategories creates or wholly replaces 1..500 categories. A parentId
// need not exist (categories are often synced in any order).
func (s *Service) UpsertCategories(ctx context.Context, mp string, in []CategoryInput, present bool, expected statelog.IfMatch) (UpsertResult, error) {
	return upsertSimple(ctx, s.categories, mp, in, present, expected, "categories", "category", (*checker).category)
}

// GetCategory returns a category and its version.
func (s *Service) GetCategory(mp, id string) (CategoryView, int64, error) {
	v, ver, ok := s.categories.Get(mp, id)
	if !ok {
		return CategoryView{}, 0, validation.NotFoundf("category %s", id)
	}
	return v.view(id), ver, nil
}

// ListCategories returns up to limit categories in id order after the id
// after (only the children of parentID when it is not empty), and whether
// more follow.
func (s *Service) ListCategories(mp, after string, limit int, parentID string) ([]CategoryView, bool) {
	var keep func(string, Category) bool
	if parentID != "" {
		keep = func(_ string, c Category) bool { return c.ParentID == parentID }
	}
	ids, vals, more := s.categories.Page(mp, after, limit, keep)
	out := make([]CategoryView, len(ids))
	for i := range ids {
		out[i] = vals[i].view(ids[i])
	}
	return out, more
}

// --- search (the console) ---

// MaxSearch is the most results a search returns.
const MaxSearch = 100

// SearchProducts returns the product whose id is q (exactly), then up to
// limit products whose id or name contains q (case-insensitive), by id, and
// whether more matched: a vendor's products when vendor is given (all of
// them when q is empty; the vendor index, a read of each name), else the
// marketplace's (searchAll: a pass over the view and the names on disk,
// within ctx).
func (s *Service) SearchProducts(ctx context.Context, mp, vendor, q string, limit int) ([]ProductView, bool, error) {
	limit = min(max(limit, 1), MaxSearch)
	q = strings.TrimSpace(q)
	if vendor == "" && q != "" {
		return s.searchAll(ctx, mp, q, limit)
	}
	var out []ProductView
	if q != "" {
		p, _, ok, err := s.full(mp, q)
		if err != nil {
			return nil, false, err
		}
		if ok && (vendor == "" || p.Vendors().Contains(vendor)) {
			out = append(out, p.view(q))
		}
	}
	if vendor == "" {
		return out, false, nil
	}
	lower := strings.ToLower(q)
	var ids []string
	s.EachProductOfVendor(mp, vendor, func(p entityref.ProductRef) bool {
		if p.ID != q {
			ids = append(ids, p.ID)
		}
		return true
	})
	sort.Strings(ids)
	found := make([]ProductView, 0, min(len(ids), limit))
	more := false
	for _, id := range ids {
		p, _, ok, err := s.full(mp, id)
		if err != nil {
			return nil, false, err
		}
		if !ok || !(lower == "" || containsFold(id, lower) || containsFold(p.Name(), lower)) {
			continue
		}
		if len(out)+len(found) == limit {
			more = true
			break
		}
		found = append(found, p.view(id))
	}
	return append(out, found...), more, nil
}

// SearchVendors returns up to limit vendors whose id or name contains q
// (case-insensitive; all when q is empty), in id order after the id after,
// and whether more follow.
func (s *Service) SearchVendors(mp, q, after string, limit int) ([]VendorView, bool) {
	q = strings.ToLower(strings.TrimSpace(q))
	var keep func(string, Vendor) bool
	if q != "" {
		keep = func(id string, v Vendor) bool { return containsFold(id, q) || containsFold(v.Name, q) }
	}
	ids, vals, more := s.vendors.Page(mp, after, limit, keep)
	out := make([]VendorView, len(ids))
	for i := range ids {
		out[i] = vals[i].view(mp, ids[i])
	}
	return out, more
}

// VendorProductCount is the number of products a vendor may promote.
func (s *Service) VendorProductCount(mp, vendorID string) int {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	if set := s.byVendor[mp][vendorID]; set != nil {
		return set.Len()
	}
	return 0
}

// containsFold says whether s contains lower (already lower case), ASCII
// case-insensitively without allocating for ASCII s.
func containsFold(s, lower string) bool {
	if len(lower) > len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return strings.Contains(strings.ToLower(s), lower)
		}
	}
	for i := 0; i+len(lower) <= len(s); i++ {
		j := 0
		for ; j < len(lower); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
		}
		if j == len(lower) {
			return true
		}
	}
	return false
}
