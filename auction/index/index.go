// Package index is the auction's in-memory index of entity state: products,
// categories, campaigns and bids of every marketplace, arranged the way an
// auction reads them, with pointers instead of keys.
//
// An auction of 500 products costs one map lookup per product: the product's
// entry points at its vendors' entries (their category bids and automated
// campaigns) and holds its own product bids. The views it is built from
// (catalog, campaigns: the entities log) call its Changed functions for
// every applied change, under their write locks; auctions read it through
// Read, under its read lock. Entries are updated in place: a reader keeps no
// pointer after its Read callback returns.
//
// Ids that repeat across entities (vendors, categories) are interned with
// package unique, as the catalog interns them, so comparisons of two ids
// mostly compare pointers.
package index

import (
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"
	"unsafe"

	"github.com/endcap/endcap/internal/idlist"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/spend"
)

// Index is the auction index of every marketplace.
type Index struct {
	mu      sync.RWMutex
	markets map[string]*Market
}

// New returns an empty index. Feed it with Register.
func New() *Index { return &Index{markets: map[string]*Market{}} }

// Register makes the views feed the index. Call it before the log runs.
func (ix *Index) Register(cat *catalog.Service, camps *campaigns.Service) {
	cat.ListenProducts(ix.ProductChanged)
	cat.ListenProductsRekeyed(ix.ProductsRekeyed)
	cat.ListenCategories(ix.CategoryChanged)
	camps.ListenCampaigns(ix.CampaignChanged)
	camps.ListenBids(ix.BidChanged)
}

// Read runs fn with the index of a marketplace (never nil) under the read
// lock. fn must not call the catalog or campaigns services (their appliers
// wait for this lock while holding theirs).
func (ix *Index) Read(mp string, fn func(*Market)) {
	m := ix.RLock(mp)
	defer ix.RUnlock()
	fn(m)
}

// RLock takes the read lock and returns the index of a marketplace (never
// nil); RUnlock releases it. Between the two, the same rules as in Read's
// fn apply. Hold it briefly: a change waiting for the write lock holds up
// every new reader, so an auction reads in short sections (a few dozen
// products each) rather than all at once.
func (ix *Index) RLock(mp string) *Market {
	ix.mu.RLock()
	if m := ix.markets[mp]; m != nil {
		return m
	}
	return emptyMarket
}

// RUnlock releases the read lock taken by RLock.
func (ix *Index) RUnlock() { ix.mu.RUnlock() }

var emptyMarket = newMarket()

// Market is the index of one marketplace.
type Market struct {
	products   productTable
	vendors    map[string]*Vendor
	categories map[Cat]*Category
	camps      map[string]*Camp
	campNum    uint32 // the last Camp.Num given
	keyword    map[string][]*Bid
	banners    map[string]*Camp
	// bidSlab is what is left of the chunk newBid hands bids out of, and
	// freeBids the bids removed, for reuse (the products' entries are the
	// table's).
	bidSlab  []Bid
	freeBids []*Bid
	// ids holds the products' ids (the entries' ID).
	ids idArena
	// capped counts the campaigns with an active frequency cap
	// (Gate.Capped).
	capped int
}

// Capped reports whether some campaign of the marketplace has an active
// frequency cap: an auction with a shopper then starts reading the
// shopper's counts before it meets one.
func (m *Market) Capped() bool { return m.capped > 0 }

// productChunk is how many product entries one allocation holds. The
// garbage collector finds the span of every pointer it follows, a cache miss
// when the spans are many: a million entries allocated one by one fill
// 23,000 spans, in chunks a thousand (docs/design/performance.md).
const productChunk = 1024

// bidChunk is how many bid entries one allocation holds (as productChunk).
const bidChunk = 512

// newBid returns an entry for a new bid, reused or out of a chunk.
func (m *Market) newBid() *Bid {
	if n := len(m.freeBids); n > 0 {
		b := m.freeBids[n-1]
		m.freeBids = m.freeBids[:n-1]
		return b
	}
	if len(m.bidSlab) == 0 {
		m.bidSlab = make([]Bid, bidChunk)
	}
	b := &m.bidSlab[0]
	m.bidSlab = m.bidSlab[1:]
	return b
}

// freeBid keeps a removed bid's entry for reuse (no reader holds it:
// readers keep no entry beyond their Read).
func (m *Market) freeBid(b *Bid) {
	*b = Bid{}
	m.freeBids = append(m.freeBids, b)
}

func newMarket() *Market {
	return &Market{
		products: newProductTable(), vendors: map[string]*Vendor{}, categories: map[Cat]*Category{},
		camps: map[string]*Camp{}, keyword: map[string][]*Bid{}, banners: map[string]*Camp{},
	}
}

// Product is a product of the catalog (Known), or a placeholder holding the
// bids on a product the catalog does not have (not Known).
//
// A million products are a million entries in memory in every API process,
// so an entry is small: 64 bytes, one cache line (the chunks of
// productChunk entries are page-aligned), which is all an auction reads of
// it, for every id of its context. Its vendors and categories share one
// array of pointers (a *Vendor and a Cat are both one pointer), inline when
// they are at most len(refs) together (nearly all products), else one
// allocation of their own that refs[0] points to. Its id (ID) is the
// catalog's copy, or a placeholder's in the market's arena (idArena), held
// as a pointer and a length.
type Product struct {
	id           *byte   // ID's bytes, idLen of them
	QualityScore float64 // 0: not set
	// bids points to the product bids (Bids), of every campaign and
	// state, in an array of bidCap(nb) or more: a pointer and a count
	// where a slice took 24 bytes.
	bids *BidRef
	// refs holds the vendors' entries, then the categories' handles (nv
	// and nc of them), or, when there are more than len(refs), refs[0]
	// points to an array of them.
	refs [inlineRefs]unsafe.Pointer
	// meta is the number of bids (its low 30 bits: more than a billion
	// bids would not fit in memory), then the flags known and active.
	meta   uint32
	idLen  uint16
	nv, nc uint8
}

// An entry is one cache line.
var _ [64 - unsafe.Sizeof(Product{})]byte
var _ [unsafe.Sizeof(Product{}) - 64]byte

const (
	productKnown  = 1 << 30
	productActive = 1 << 31
	bidCount      = productKnown - 1
)

// MaxIDBytes is the longest product id the index holds (an entry keeps its
// length in 16 bits): the catalog's ids and the bids' targets are at most
// 255 characters, 1,020 bytes.
const MaxIDBytes = 1<<16 - 1

// ID is the product's id.
func (p *Product) ID() string { return unsafe.String(p.id, int(p.idLen)) }

// setID makes id the entry's id (the entry keeps its bytes).
func (p *Product) setID(id string) { p.id, p.idLen = unsafe.StringData(id), uint16(len(id)) }

// Known reports whether the catalog has the product (else the entry holds
// bids on an id it does not have).
func (p *Product) Known() bool { return p.meta&productKnown != 0 }

// Active is the catalog's active flag of the product.
func (p *Product) Active() bool { return p.meta&productActive != 0 }

// nb is the number of product bids.
func (p *Product) nb() uint32 { return p.meta & bidCount }

// Bids are the product bids (shared with the index: read them, never
// write).
func (p *Product) Bids() []BidRef { return unsafe.Slice(p.bids, p.nb()) }

// bidCap is the room of the bids' array of a product with n bids: the
// smallest power of two at least n.
func bidCap(n uint32) uint32 {
	c := uint32(1)
	for c < n {
		c *= 2
	}
	return c
}

// addBid appends r to the product's bids, into a new array twice as long
// when the present one is full.
func (p *Product) addBid(r BidRef) {
	if n := p.nb(); n == 0 || n == bidCap(n) {
		arr := make([]BidRef, max(1, 2*n))
		copy(arr, p.Bids())
		p.bids = &arr[0]
	}
	p.meta++
	p.Bids()[p.nb()-1] = r
}

// removeBid removes the bid of b, if the product has it (its last bid takes
// its place).
func (p *Product) removeBid(b *Bid) {
	bs := p.Bids()
	for i := range bs {
		if bs[i].Bid == b {
			bs[i] = bs[len(bs)-1]
			bs[len(bs)-1] = BidRef{}
			p.meta--
			if p.nb() == 0 {
				p.bids = nil
			}
			return
		}
	}
}

// inlineRefs is how many vendors and categories together Product keeps
// inline (one vendor and three categories, the typical product).
const inlineRefs = 4

// A Cat is stored in Product.refs as the one pointer it is.
var _ [unsafe.Sizeof(Cat{}) - unsafe.Sizeof(unsafe.Pointer(nil))]byte

// lists is the array of the vendors' and categories' pointers.
func (p *Product) lists() *unsafe.Pointer {
	if int(p.nv)+int(p.nc) > inlineRefs {
		return (*unsafe.Pointer)(p.refs[0])
	}
	return &p.refs[0]
}

// Vendors are the entries of the vendors allowed to promote the product
// (shared with the index: read them, never write).
func (p *Product) Vendors() []*Vendor {
	return unsafe.Slice((**Vendor)(unsafe.Pointer(p.lists())), p.nv)
}

// Categories are the handles of the product's category ids (shared with
// the index: read them, never write).
func (p *Product) Categories() []Cat {
	base := unsafe.Add(unsafe.Pointer(p.lists()), uintptr(p.nv)*unsafe.Sizeof(unsafe.Pointer(nil)))
	return unsafe.Slice((*Cat)(base), p.nc)
}

// init makes p the empty entry of id.
func (p *Product) init(id string) {
	*p = Product{}
	p.setID(id)
}

// set records what the catalog says of the product.
func (p *Product) set(active bool, qualityScore float64) {
	p.meta = p.meta&bidCount | productKnown
	if active {
		p.meta |= productActive
	}
	p.QualityScore = qualityScore
}

// removeProduct removes p from the products, its entry kept for reuse.
func (m *Market) removeProduct(p *Product) {
	id := p.ID()
	rekey := !p.Known() && m.ids.drop(id) // a known product's id is the catalog's
	m.products.remove(id)
	if rekey {
		m.rekey()
	}
}

// setLists makes Vendors the entries of the vendor ids vs and Categories
// the handles of cs, unless they already are.
func (p *Product) setLists(m *Market, vs, cs idlist.List) {
	nv, nc := vs.Len(), cs.Len()
	if nv == int(p.nv) && nc == int(p.nc) && equalIDs(vs, p.Vendors(), func(v *Vendor) string { return v.ID }) &&
		equalIDs(cs, p.Categories(), Cat.Value) {
		return
	}
	n := nv + nc
	var arr []unsafe.Pointer
	if n <= inlineRefs {
		p.refs = [inlineRefs]unsafe.Pointer{}
		arr = p.refs[:n]
	} else {
		arr = make([]unsafe.Pointer, n)
		p.refs = [inlineRefs]unsafe.Pointer{unsafe.Pointer(&arr[0])}
	}
	i := 0
	for v := range vs.All() {
		arr[i] = unsafe.Pointer(m.vendor(v))
		i++
	}
	for c := range cs.All() {
		h := CatOf(c)
		arr[i] = *(*unsafe.Pointer)(unsafe.Pointer(&h))
		i++
	}
	p.nv, p.nc = uint8(nv), uint8(nc)
}

// equalIDs reports whether ids are the ids of list, in order.
func equalIDs[T any](ids idlist.List, list []T, id func(T) string) bool {
	i := 0
	for s := range ids.All() {
		if i >= len(list) || id(list[i]) != s {
			return false
		}
		i++
	}
	return i == len(list)
}

// forget drops what the catalog said of the product (it was deleted).
func (p *Product) forget() {
	p.meta, p.QualityScore = p.meta&bidCount, 0
	p.refs, p.nv, p.nc = [inlineRefs]unsafe.Pointer{}, 0, 0
}

// BidRef is a product bid as its product holds it: what an auction checks
// first (flag, vendor) and what it keeps (id, amount) beside the pointers, so
// that a bid that cannot compete costs no read of its entry or campaign.
// The index updates it with the bid and with its campaign.
type BidRef struct {
	Bid    *Bid
	Camp   *Camp
	Vendor *Vendor // the campaign's vendor; nil while the campaign is not Known
	ID     string
	Amount int64
	Active bool
}

func refOf(b *Bid) BidRef {
	r := BidRef{Bid: b, Camp: b.Camp, ID: b.B.ID, Amount: b.B.AmountMicros, Active: b.B.Active}
	if b.Camp.Gate.Known {
		r.Vendor = b.Camp.Vendor
	}
	return r
}

// refresh rewrites the product's copy of bid b.
func (p *Product) refresh(b *Bid) {
	bs := p.Bids()
	for i := range bs {
		if bs[i].Bid == b {
			bs[i] = refOf(b)
			return
		}
	}
}

// HasVendor reports whether vendor v may promote the product.
func (p *Product) HasVendor(v *Vendor) bool { return slices.Contains(p.Vendors(), v) }

// Vendor is what an auction needs of a vendor beyond product bids.
type Vendor struct {
	ID        string
	Category  []CatRef // category bids of the vendor's known campaigns
	Automated []*Camp  // automated campaigns of the vendor
}

// CatRef is a category bid with its category beside it, so that an auction
// matches categories without reading the bid.
type CatRef struct {
	Target Cat
	Bid    *Bid
}

// Cat is a category id as a unique handle: two are equal when their ids are,
// and comparing them compares one pointer. The zero Cat is no category.
type Cat = unique.Handle[string]

// CatOf returns the handle of a category id.
func CatOf(id string) Cat { return unique.Make(id) }

// Category is a category with its parent, for category paths.
type Category struct {
	ID     Cat
	Parent Cat // zero for a root
}

// Camp is a campaign (Known), or a placeholder holding the bids of a
// campaign not applied yet or deleted (not Known).
type Camp struct {
	// Gate comes first: an auction reads it for every campaign it meets,
	// and most campaigns go no further.
	Gate Gate
	// Num numbers the campaign within its marketplace's index, for as long
	// as the entry lives: a key for an auction's maps without a pointer.
	Num uint32
	// Spend is the budget gate's memory of where the campaign's spend is
	// (spend.Cache.CheckSlot): the auction reads the spend without looking
	// the campaign's id up.
	Spend spend.Slot
	// Info is what an auction keeps of a campaign it may rank: immutable,
	// replaced on every change (nil while not Known), so that an auction
	// keeps one pointer where it would copy five (pointer writes cost
	// while the garbage collector marks), and reads it after the index's
	// lock is released.
	Info   *CampInfo
	C      campaigns.Campaign
	Vendor *Vendor
	bids   map[string]*Bid // by bid key
	// Hours are the campaign's served hours (its timetable; nil: every
	// hour), Negatives its negative keywords (nil: none), bidNegatives
	// those of its bids that have some, by bid id. Gate's Scheduled,
	// Negative and BidNegative say whether there are any.
	Hours        *spend.Hours
	Negatives    *campaigns.Negatives
	bidNegatives map[string]*campaigns.Negatives
}

// BidNegatives returns the negative keywords of the campaign's bid id (nil:
// none).
func (c *Camp) BidNegatives(id string) *campaigns.Negatives { return c.bidNegatives[id] }

// CampInfo is an immutable copy of the campaign fields an auction's
// ranking and winners read.
type CampInfo struct {
	ID, VendorID, Name string
	CPM                bool
	Segments           []string
	// Caps are the campaign's active frequency caps (Gate.Capped);
	// CapsSkip: it sits out the auctions of a shopper they cannot count.
	Caps     []Cap
	CapsSkip bool
	// CapHash is freqcap.CampaignHash of ID when it has caps: a shopper's
	// counts tell at once whether they hold any of it (freqcap.Counts.Has).
	CapHash uint64
}

// Cap is an active frequency cap of a campaign (campaigns.Restriction):
// at most Limit interactions (freqcap.Impression or freqcap.Click) of a
// shopper in the period of Frequency ("daily", "weekly", "monthly"), with
// the campaign or, when Bid, with each of its bids.
type Cap struct {
	Frequency string
	Kind      byte
	Bid       bool
	Limit     int64
}

// capsOf returns the active restrictions of c as Caps.
func capsOf(c *campaigns.Campaign) []Cap {
	var out []Cap
	for _, r := range c.Restrictions {
		if !r.Active {
			continue
		}
		t := r.Type()
		k := byte(freqcap.Impression)
		if t.InteractionType == campaigns.InteractionClicks {
			k = freqcap.Click
		}
		out = append(out, Cap{Frequency: t.FrequencyType, Kind: k, Bid: t.Level == campaigns.LevelBid, Limit: r.Limit})
	}
	return out
}

// Gate is what decides, in one cache line, whether a campaign may compete
// at an instant, before its targeting and budget: a compact copy of its
// type, state and dates.
type Gate struct {
	// StartMs and EndMs are the campaign's dates in Unix milliseconds,
	// rounded up: at (whole ms) is within them when StartMs <= at < EndMs,
	// exactly as campaigns.Status says running. EndMs is MaxInt64 when the
	// campaign has no end date.
	StartMs, EndMs int64
	Kind           Kind
	Known          bool
	Active         bool
	// Targeted: the campaign targets placements, devices, locations or
	// segments (read C.Targeting); Segmented: segments among them.
	// Budgeted: it has a daily, weekly, monthly or total budget, Limits
	// (copies of C's, so that the budget check reads no more of the entry;
	// Limits.Hours is left nil: the engine sets it from Camp.Hours).
	Targeted, Segmented, Budgeted bool
	// Capped: the campaign has an active frequency cap (Info.Caps).
	Capped bool
	Limits spend.Limits
	// MaxBidMicros is C's, the automated bid's ceiling (0: none): with
	// Limits.DailyMicros, all that campaigns.AutomatedBid reads.
	MaxBidMicros int64
	// Scheduled: the campaign has a timetable (Camp.Hours); Negative: it
	// has negative keywords (Camp.Negatives); BidNegative: some of its bids
	// have (Camp.BidNegatives).
	Scheduled, Negative, BidNegative bool
}

// Kind is a campaign type as a bit, to test against a set of types.
type Kind uint8

// The campaign types.
const (
	KindListings Kind = 1 << iota
	KindAutomated
	KindBanners
)

func kindOf(typ string) Kind {
	switch typ {
	case campaigns.TypeListings:
		return KindListings
	case campaigns.TypeAutomated:
		return KindAutomated
	case campaigns.TypeBanners:
		return KindBanners
	}
	return 0
}

// Running reports whether the campaign is known, active and within its
// dates at atMs (Unix milliseconds), and of one of kinds.
func (g *Gate) Running(kinds Kind, atMs int64) bool {
	return g.Known && g.Kind&kinds != 0 && g.Active && atMs >= g.StartMs && atMs < g.EndMs
}

// ceilMs is t in Unix milliseconds, rounded up.
func ceilMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

func gateOf(c *campaigns.Campaign) Gate {
	// An archived campaign is never running again: it is inactive here from
	// the moment the archive is applied, whatever its clock says.
	g := Gate{StartMs: ceilMs(c.StartDate), EndMs: math.MaxInt64, Kind: kindOf(c.Type), Known: true, Active: c.Active && !c.Archived(),
		Budgeted: c.DailyBudgetMicros != 0 || c.WeeklyBudgetMicros != 0 || c.MonthlyBudgetMicros != 0 || c.TotalBudgetMicros != 0,
		Limits: spend.Limits{DailyMicros: c.DailyBudgetMicros, WeeklyMicros: c.WeeklyBudgetMicros, MonthlyMicros: c.MonthlyBudgetMicros,
			TotalMicros: c.TotalBudgetMicros}, MaxBidMicros: c.MaxBidMicros}
	if c.EndDate != nil {
		g.EndMs = ceilMs(*c.EndDate)
	}
	g.Scheduled, g.Negative = len(c.Timetables) > 0, len(c.NegativeKeywords) > 0
	t := &c.Targeting
	g.Segmented = len(t.Segments) > 0
	g.Capped = c.Capped()
	g.Targeted = len(t.PlacementIDs) > 0 || len(t.Devices) > 0 || len(t.Locations) > 0 || g.Segmented
	return g
}

// Bid is a bid with its campaign.
type Bid struct {
	B    BidFields
	Camp *Camp
}

// BidFields are the fields of a bid an auction reads (of campaigns.Bid:
// not its campaign id, which Camp has, nor its timestamps): a bid entry is
// half the size and has half the pointers, of which the index holds
// hundreds of thousands for the garbage collector to mark.
type BidFields struct {
	ID, TargetType, Target string
	AmountMicros           int64
	Active                 bool
}

func fieldsOf(b *campaigns.Bid) BidFields {
	// TargetType is the campaigns package's constant (its decoder makes it
	// so): compared with the constants, equal strings share their bytes.
	return BidFields{ID: b.ID, Target: b.Target, AmountMicros: b.AmountMicros, Active: b.Active, TargetType: b.TargetType}
}

// Product returns a product by id (nil when neither it nor bids on it are known).
func (m *Market) Product(id string) *Product { return m.products.get(id) }

// Products appends the refs of ids (0 where neither the product nor bids
// on it are known) to out: many lookups at once, faster than one Product
// call per id (see productTable). Read them with ProductAt. Keep the number
// it returns somewhere (its value means nothing).
func (m *Market) Products(ids []string, out []ProductRef) ([]ProductRef, uint64) {
	return m.products.lookup(ids, out)
}

// ProductAt is the entry of a ref Products returned (nil for 0), valid
// within the Index.Read that returned the ref.
func (m *Market) ProductAt(r ProductRef) *Product { return m.products.at(r) }

// Keyword returns the bids on a normalised keyword.
func (m *Market) Keyword(k string) []*Bid { return m.keyword[k] }

// EachBanners calls fn for every banners campaign until it returns false.
func (m *Market) EachBanners(fn func(*Camp) bool) {
	for _, c := range m.banners {
		if !fn(c) {
			return
		}
	}
}

// EachBid calls fn for every bid of a campaign until it returns false.
func (c *Camp) EachBid(fn func(*Bid) bool) {
	for _, b := range c.bids {
		if !fn(b) {
			return
		}
	}
}

// AppendPath appends a category and its ancestors, nearest first, to dst,
// as far as they are known (at most 64; a cycle ends the path). An unknown
// category still names itself.
func (m *Market) AppendPath(dst []Cat, id Cat) []Cat {
	start := len(dst)
	for id != (Cat{}) && len(dst)-start < 64 && !slices.Contains(dst[start:], id) {
		dst = append(dst, id)
		c := m.categories[id]
		if c == nil {
			break
		}
		id = c.Parent
	}
	return dst
}

// ---- maintenance (under ix.mu) ----

func intern(s string) string { return unique.Make(s).Value() }

func (ix *Index) market(mp string) *Market {
	m := ix.markets[mp]
	if m == nil {
		m = newMarket()
		ix.markets[mp] = m
	}
	return m
}

func (m *Market) vendor(id string) *Vendor {
	v := m.vendors[id]
	if v == nil {
		v = &Vendor{ID: intern(id)}
		m.vendors[v.ID] = v
	}
	return v
}

// product returns the entry of id, made when absent (a placeholder, not
// Known, with a copy of id in the market's id arena).
func (m *Market) product(id string) *Product {
	p := m.products.get(id)
	if p == nil {
		p = m.products.add(m.ids.add(id))
	}
	return p
}

// idArena holds the ids of the placeholders (bids on products the catalog
// does not have), packed into shared allocations of idChunk bytes. A known
// product's entry keeps the catalog's copy of its id instead (the catalog
// packs its ids the same way: statelog's keyArena), so that an API process
// holds each product's id once (docs/design/performance.md, Catalog in
// memory). Bytes are only appended; a removed placeholder's id is counted
// dead, and when the dead bytes outgrow the live ones (and minRekey), the
// market copies the live ids into new chunks (rekey), and the old ones are
// freed.
type idArena struct {
	cur        []byte
	live, dead int
}

const (
	idChunk  = 64 << 10
	minRekey = 1 << 20
)

// add returns a copy of id in the arena.
func (a *idArena) add(id string) string {
	a.live += len(id)
	if len(id) > idChunk/8 {
		return strings.Clone(id)
	}
	if cap(a.cur)-len(a.cur) < len(id) {
		a.cur = make([]byte, 0, idChunk)
	}
	start := len(a.cur)
	a.cur = append(a.cur, id...)
	return unsafe.String(&a.cur[start], len(id)) // never written again
}

// drop counts id as removed, and reports whether a rekey is due.
func (a *idArena) drop(id string) bool {
	a.live -= len(id)
	a.dead += len(id)
	return a.dead > max(a.live, minRekey)
}

// rekey copies every placeholder's id into new chunks.
func (m *Market) rekey() {
	m.ids = idArena{}
	for _, p := range m.products.all() {
		if !p.Known() {
			p.setID(m.ids.add(p.ID()))
		}
	}
}

func (m *Market) camp(id string) *Camp {
	c := m.camps[id]
	if c == nil {
		m.campNum++
		c = &Camp{Num: m.campNum, bids: map[string]*Bid{}}
		m.camps[id] = c
	}
	return c
}

func removePtr[T any](list []*T, p *T) []*T {
	if i := slices.Index(list, p); i >= 0 {
		list[i] = list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
	}
	return list
}

func removeCat(list []CatRef, b *Bid) []CatRef {
	for i := range list {
		if list[i].Bid == b {
			list[i] = list[len(list)-1]
			list[len(list)-1] = CatRef{}
			return list[:len(list)-1]
		}
	}
	return list
}

// ProductChanged applies a product change. When the product is new to the
// catalog (old is nil), id is the catalog's copy of its id (statelog's
// listeners get it), which the entry keeps: no second copy.
func (ix *Index) ProductChanged(mp, id string, old, nw *catalog.Product) {
	if len(id) > MaxIDBytes {
		return // not the catalog's: its ids are shorter
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	m := ix.market(mp)
	if nw == nil {
		p := m.products.get(id)
		if p == nil {
			return
		}
		if p.nb() == 0 {
			m.removeProduct(p)
			return
		}
		// A placeholder now, with an id of its own: the catalog's copy
		// goes at its next rekey.
		p.forget()
		p.setID(m.ids.add(p.ID()))
		return
	}
	p := m.products.get(id)
	switch {
	case p == nil && old == nil:
		p = m.products.add(id)
	case p == nil: // a change of a product the index has not seen (not from the catalog's view)
		p = m.products.add(m.ids.add(id))
	case !p.Known() && old == nil: // a placeholder becomes the catalog's product
		if m.ids.drop(p.ID()) {
			defer m.rekey()
		}
		p.setID(id)
	}
	p.set(nw.Active, nw.QualityScore)
	p.setLists(m, nw.Vendors(), nw.Categories())
}

// ProductsRekeyed takes the catalog's new copies of its products' ids
// (marketplace, id), after the catalog copied them into new chunks: the
// known products' entries keep those, so that the old chunks are freed.
func (ix *Index) ProductsRekeyed(ids iter.Seq2[string, string]) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for mp, id := range ids {
		m := ix.markets[mp]
		if m == nil {
			continue
		}
		if p := m.products.get(id); p != nil && p.Known() {
			p.setID(id)
		}
	}
}

// CategoryChanged applies a category change.
func (ix *Index) CategoryChanged(mp, id string, _, nw *catalog.Category) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	m := ix.market(mp)
	h := CatOf(id)
	if nw == nil {
		delete(m.categories, h)
		return
	}
	c := m.categories[h]
	if c == nil {
		c = &Category{ID: h}
		m.categories[h] = c
	}
	c.Parent = Cat{}
	if nw.ParentID != "" {
		c.Parent = CatOf(nw.ParentID)
	}
}

// CampaignChanged applies a campaign change.
func (ix *Index) CampaignChanged(mp, id string, _, nw *campaigns.Campaign) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	m := ix.market(mp)
	c := m.camp(id)
	m.detach(c)
	if c.Gate.Capped {
		m.capped--
	}
	if nw == nil {
		c.Gate, c.Info, c.C, c.Vendor = Gate{}, nil, campaigns.Campaign{}, nil
		c.Hours, c.Negatives = nil, nil
		c.Gate.BidNegative = len(c.bidNegatives) > 0
		m.refreshProductBids(c)
		if len(c.bids) == 0 {
			delete(m.camps, id)
		}
		return
	}
	c.C = *nw
	c.Gate = gateOf(nw)
	if c.Gate.Capped {
		m.capped++
	}
	c.Gate.BidNegative = len(c.bidNegatives) > 0
	c.Hours, c.Negatives = campaigns.ServedHours(nw.Timetables), campaigns.CompileNegatives(nw.NegativeKeywords)
	c.Vendor = m.vendor(nw.VendorID)
	c.C.VendorID = c.Vendor.ID
	// Type and ChargeType are the campaigns package's constants (its decoder
	// makes them so): an auction compares them with the constants, so equal
	// strings share their bytes and the comparison reads no cold memory.
	c.Info = &CampInfo{ID: c.C.ID, VendorID: c.C.VendorID, Name: c.C.Name, CPM: c.C.ChargeType == campaigns.ChargeCPM,
		Segments: c.C.Targeting.Segments, Caps: capsOf(&c.C), CapsSkip: c.C.CapsWithoutShopper == campaigns.CapsSkip}
	if len(c.Info.Caps) > 0 {
		c.Info.CapHash = freqcap.CampaignHash(c.C.ID)
	}
	m.attach(c)
	m.refreshProductBids(c)
}

// refreshProductBids rewrites the products' copies of a campaign's product
// bids (its vendor or its being Known changed).
func (m *Market) refreshProductBids(c *Camp) {
	for _, b := range c.bids {
		if b.B.TargetType == campaigns.TargetProduct {
			if p := m.products.get(b.B.Target); p != nil {
				p.refresh(b)
			}
		}
	}
}

// detach removes a known campaign from its vendor's lists and the banners.
func (m *Market) detach(c *Camp) {
	if !c.Gate.Known {
		return
	}
	v := c.Vendor
	for _, b := range c.bids {
		if b.B.TargetType == campaigns.TargetCategory {
			v.Category = removeCat(v.Category, b)
		}
	}
	v.Automated = removePtr(v.Automated, c)
	delete(m.banners, c.C.ID)
}

// attach adds a known campaign to its vendor's lists and the banners.
func (m *Market) attach(c *Camp) {
	v := c.Vendor
	for _, b := range c.bids {
		if b.B.TargetType == campaigns.TargetCategory {
			v.Category = append(v.Category, CatRef{Target: CatOf(b.B.Target), Bid: b})
		}
	}
	switch c.C.Type {
	case campaigns.TypeAutomated:
		v.Automated = append(v.Automated, c)
	case campaigns.TypeBanners:
		m.banners[c.C.ID] = c
	}
}

// bidNegatives keeps the campaigns' negative keywords of their bids (and
// their gates' BidNegative) in step with a bid change.
func (m *Market) bidNegatives(old, nw *campaigns.Bid) {
	set := func(c *Camp, id string, n *campaigns.Negatives) {
		if n != nil {
			if c.bidNegatives == nil {
				c.bidNegatives = map[string]*campaigns.Negatives{}
			}
			c.bidNegatives[id] = n
		} else {
			delete(c.bidNegatives, id)
		}
		c.Gate.BidNegative = len(c.bidNegatives) > 0
	}
	if old != nil && len(old.NegativeKeywords) > 0 && (nw == nil || nw.ID != old.ID || nw.CampaignID != old.CampaignID) {
		if c := m.camps[old.CampaignID]; c != nil {
			set(c, old.ID, nil)
		}
	}
	if nw != nil && (len(nw.NegativeKeywords) > 0 || old != nil && len(old.NegativeKeywords) > 0) {
		set(m.camp(nw.CampaignID), nw.ID, campaigns.CompileNegatives(nw.NegativeKeywords))
	}
}

// BidChanged applies a bid change (key: the bid's entity key).
func (ix *Index) BidChanged(mp, key string, old, nw *campaigns.Bid) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	m := ix.market(mp)
	m.bidNegatives(old, nw)
	if old != nil && (nw == nil || nw.CampaignID != old.CampaignID || nw.TargetType != old.TargetType || nw.Target != old.Target) {
		if c := m.camps[old.CampaignID]; c != nil {
			if b := c.bids[key]; b != nil {
				m.unlink(c, b)
				delete(c.bids, key)
				m.freeBid(b)
			}
			if !c.Gate.Known && len(c.bids) == 0 {
				delete(m.camps, old.CampaignID)
			}
		}
	}
	if nw == nil {
		return
	}
	c := m.camp(nw.CampaignID)
	if b := c.bids[key]; b != nil {
		b.B = fieldsOf(nw) // the same key: the same campaign and target; amount or flag changed
		if nw.TargetType == campaigns.TargetProduct {
			if p := m.products.get(nw.Target); p != nil {
				p.refresh(b)
			}
		}
		return
	}
	b := m.newBid()
	*b = Bid{B: fieldsOf(nw), Camp: c}
	c.bids[key] = b
	switch nw.TargetType {
	case campaigns.TargetProduct:
		if len(nw.Target) > MaxIDBytes {
			break // no product has it (MaxIDBytes)
		}
		p := m.product(nw.Target)
		p.addBid(refOf(b))
	case campaigns.TargetKeyword:
		m.keyword[nw.Target] = append(m.keyword[nw.Target], b)
	case campaigns.TargetCategory:
		if c.Gate.Known {
			c.Vendor.Category = append(c.Vendor.Category, CatRef{Target: CatOf(nw.Target), Bid: b})
		}
	}
}

func (m *Market) unlink(c *Camp, b *Bid) {
	switch b.B.TargetType {
	case campaigns.TargetProduct:
		if p := m.products.get(b.B.Target); p != nil {
			p.removeBid(b)
			if !p.Known() && p.nb() == 0 {
				m.removeProduct(p)
			}
		}
	case campaigns.TargetKeyword:
		if l := removePtr(m.keyword[b.B.Target], b); len(l) > 0 {
			m.keyword[b.B.Target] = l
		} else {
			delete(m.keyword, b.B.Target)
		}
	case campaigns.TargetCategory:
		if c.Gate.Known {
			c.Vendor.Category = removeCat(c.Vendor.Category, b)
		}
	}
}
