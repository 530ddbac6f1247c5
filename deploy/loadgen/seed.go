package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SeedConfig configures RunSeed. Zero values take the documented defaults.
type SeedConfig struct {
	URL    string // base URL of the API
	APIKey string // advanced API key

	Vendors    int // "v-0".."v-<Vendors-1>", default 10,000
	Products   int // "p-000000000"..., default 1,000,000
	Campaigns  int // "seed-0".."seed-<Campaigns-1>" (names), default 100,000
	Categories int // category pool "c-0"..., default 2,000 (the first 100 are top level, the others their children)
	// CappedPercent of the campaigns (drawn by the seed) get a frequency cap of 3 impressions a day per
	// shopper (a campaign restriction), in a phase of its own after the campaigns. Default 0: none.
	CappedPercent int

	NameLen        int // characters of a product name, default 60
	DescriptionLen int // characters of a product description, default 200

	Concurrency int           // requests in flight, default 16
	BatchSize   int           // entities per bulk upsert (catalog phases), default 500 (the API's maximum)
	Timeout     time.Duration // per request, default 60s
	MaxRetries  int           // per request, on 429, 503 and transport errors, default 20
	Seed        uint64        // seeds the content; the same configuration always builds the same marketplace

	// Manifest is the path of the manifest file: read at the start (phases it records as done for the
	// same configuration are skipped unless Force), written after every phase. "" = none.
	Manifest      string
	Force         bool   // redo every phase whatever the manifest says
	MarketplaceID string // recorded in the manifest (the key's marketplace), so that a stale manifest is seen

	Progress      io.Writer     // progress lines (nil = silent)
	ProgressEvery time.Duration // default 5s
}

// The shape of the seeded marketplace. These shares are fixed (not configuration) so that a manifest's
// counts and seed are enough to rebuild the plan: `loadgen auctions` does, to know which products have bids.
const (
	seedPlanVersion     = 1
	seedSecondVendorPct = 30 // products with a second vendor
	seedQualityPct      = 90 // products with a quality_score
	seedInactivePct     = 1  // products with active: false
	seedAutomatedPct    = 5  // automated campaigns (the rest are listings)
	seedCPMPct          = 10 // CPM campaigns (the rest are CPC)
	seedPausedPct       = 2  // campaigns with isActive: false
	seedPlacementPct    = 10 // campaigns targeting one placement id (1–8)
	seedMobilePct       = 5  // campaigns targeting mobile only
	seedCategoryBidPct  = 20 // listings campaigns with a category bid
	seedKeywordBidPct   = 10 // listings campaigns with a keyword bid
	seedMaxProductBids  = 5  // a listings campaign has 1–5 product bids on products of its vendor
	seedTopCategories   = 100

	seedProductPrefix = "p-"
	seedProductWidth  = 9
	seedCampaignName  = "seed-"

	vendorsPath    = "/public/v1/catalog-search-service/catalogs/vendors"
	categoriesPath = "/public/v1/catalog-search-service/catalogs/categories"
	campaignsBase  = "/public/v1/campaign-service"
)

// Seed phases, in order.
const (
	phaseCategories = "categories"
	phaseVendors    = "vendors"
	phaseProducts   = "products"
	phaseCampaigns  = "campaigns"
	// phaseCaps is "caps-<CappedPercent>", run when CappedPercent > 0: a
	// manifest of another share runs it again (it adds caps, never removes).
	phaseCaps = "caps-"
)

var seedPhases = []string{phaseCategories, phaseVendors, phaseProducts, phaseCampaigns}

// phasesOf are the phases cfg runs, in order.
func phasesOf(cfg SeedConfig) []string {
	if cfg.CappedPercent == 0 {
		return seedPhases
	}
	return append(slices.Clip(seedPhases), phaseCaps+strconv.Itoa(cfg.CappedPercent))
}

func (cfg SeedConfig) withDefaults() (SeedConfig, error) {
	if cfg.Vendors < 0 || cfg.Products < 0 || cfg.Campaigns < 0 || cfg.Categories < 0 || cfg.NameLen < 0 ||
		cfg.DescriptionLen < 0 || cfg.Concurrency < 0 || cfg.BatchSize < 0 || cfg.Timeout < 0 ||
		cfg.MaxRetries < 0 || cfg.ProgressEvery < 0 || cfg.CappedPercent < 0 {
		return cfg, errors.New("loadgen: negative value in SeedConfig")
	}
	orDefault(&cfg.Vendors, 10_000)
	orDefault(&cfg.Products, 1_000_000)
	orDefault(&cfg.Campaigns, 100_000)
	orDefault(&cfg.Categories, 2_000)
	orDefault(&cfg.NameLen, 60)
	orDefault(&cfg.DescriptionLen, 200)
	orDefault(&cfg.Concurrency, 16)
	orDefault(&cfg.BatchSize, 500)
	orDefault(&cfg.MaxRetries, 20)
	orDefault(&cfg.Timeout, 60*time.Second)
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	switch {
	case cfg.BatchSize > 500:
		return cfg, fmt.Errorf("loadgen: BatchSize %d above the API's 500", cfg.BatchSize)
	case cfg.NameLen > 150 || cfg.DescriptionLen > 5000:
		return cfg, errors.New("loadgen: NameLen above 150 or DescriptionLen above 5000 would be truncated by the API")
	case cfg.Concurrency > 1024:
		return cfg, errors.New("loadgen: Concurrency above 1024")
	case cfg.CappedPercent > 100:
		return cfg, errors.New("loadgen: CappedPercent above 100")
	}
	return cfg, nil
}

// SeedManifest describes a seeded marketplace: enough for `loadgen auctions` to draw product ids that
// exist (ProductIDPrefix + Products zero-padded to ProductIDWidth digits, from 0 to Products-1) and, by
// rebuilding the plan from the counts and the seed, ids that have bids.
type SeedManifest struct {
	PlanVersion      int      `json:"planVersion"`
	MarketplaceID    string   `json:"marketplaceId,omitempty"`
	Seed             uint64   `json:"seed"`
	ProductIDPrefix  string   `json:"productIdPrefix"`
	ProductIDWidth   int      `json:"productIdWidth"`
	ProductIDExample string   `json:"productIdExample"` // the first id, for people reading the file
	Products         int      `json:"products"`
	Vendors          int      `json:"vendors"`    // "v-<n>"
	Categories       int      `json:"categories"` // "c-<n>"
	Campaigns        int      `json:"campaigns"`
	NameLen          int      `json:"nameLen"`
	DescriptionLen   int      `json:"descriptionLen"`
	Keywords         []string `json:"keywords"` // targets of keyword bids (and searchQuery values of auctions)
	// ProductsWithBids is the number of distinct products with a manual product bid (automated campaigns
	// bid on every product of their vendor in addition).
	ProductsWithBids int       `json:"productsWithBids"`
	Phases           []string  `json:"phases"`   // phases done, in order
	Complete         bool      `json:"complete"` // every phase done without a failure
	UpdatedAt        time.Time `json:"updatedAt"`
}

// sameMarketplace reports whether m was written for the marketplace cfg would build.
func (m SeedManifest) sameMarketplace(cfg SeedConfig) bool {
	return m.PlanVersion == seedPlanVersion && m.Seed == cfg.Seed && m.Products == cfg.Products &&
		m.Vendors == cfg.Vendors && m.Categories == cfg.Categories && m.Campaigns == cfg.Campaigns &&
		m.NameLen == cfg.NameLen && m.DescriptionLen == cfg.DescriptionLen &&
		(cfg.MarketplaceID == "" || m.MarketplaceID == cfg.MarketplaceID)
}

func (m SeedManifest) done(phase string) bool { return slices.Contains(m.Phases, phase) }

// ReadSeedManifest reads a manifest written by RunSeed.
func ReadSeedManifest(path string) (SeedManifest, error) {
	var m SeedManifest
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("loadgen: manifest %s: %w", path, err)
	}
	switch {
	case m.PlanVersion != seedPlanVersion:
		return m, fmt.Errorf("loadgen: manifest %s has plan version %d, this loadgen builds version %d: seed again", path, m.PlanVersion, seedPlanVersion)
	case m.Products < 1 || m.Vendors < 1 || m.Categories < 1 || m.Campaigns < 0 || m.ProductIDWidth < 1 || m.ProductIDPrefix == "":
		return m, fmt.Errorf("loadgen: manifest %s: missing or invalid counts", path)
	}
	return m, nil
}

// writeManifest writes m to path atomically (temporary file and rename).
func writeManifest(path string, m SeedManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// seedPlan is the deterministic content of a seeded marketplace: every function of it depends only on its
// counts and seed.
type seedPlan struct {
	vendors, products, campaigns, categories int
	seed                                     uint64
}

func newSeedPlan(cfg SeedConfig) seedPlan {
	return seedPlan{vendors: cfg.Vendors, products: cfg.Products, campaigns: cfg.Campaigns, categories: cfg.Categories, seed: cfg.Seed}
}

// planOf rebuilds the plan a manifest was written for.
func planOf(m SeedManifest) seedPlan {
	return seedPlan{vendors: m.Vendors, products: m.Products, campaigns: m.Campaigns, categories: m.Categories, seed: m.Seed}
}

// mix is a 64-bit hash of (i, salt) under the plan's seed (splitmix64).
func (p seedPlan) mix(i, salt uint64) uint64 {
	z := i*0x9e3779b97f4a7c15 + salt*0xd1b54a32d192ed03 + p.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// productVendors is product i's vendors: its primary vendor i mod Vendors (so vendor v's products are
// v, v+Vendors, v+2·Vendors...) and, for some products, a second one (-1 if none).
func (p seedPlan) productVendors(i int) (primary, second int) {
	primary, second = i%p.vendors, -1
	if p.vendors > 1 && p.mix(uint64(i), 7)%100 < seedSecondVendorPct {
		second = (primary + 1 + int(p.mix(uint64(i), 8)%uint64(p.vendors-1))) % p.vendors
	}
	return primary, second
}

// productCategories is product i's 1–3 categories: n consecutive ones of the pool from first.
func (p seedPlan) productCategories(i int) (first, n int) {
	h := p.mix(uint64(i), 9)
	return int(h % uint64(p.categories)), min(1+int(h>>32)%3, p.categories)
}

// vendorProducts is the number of products whose primary vendor is v.
func (p seedPlan) vendorProducts(v int) int {
	if v >= p.products {
		return 0
	}
	return (p.products-1-v)/p.vendors + 1
}

// seedCampaign is campaign j of the plan. Money is in cents.
type seedCampaign struct {
	j, vendor     int
	automated     bool
	cpm           bool
	paused        bool
	daily, total  int64 // 0 = absent
	maxBid        int64 // automated only; 0 = absent
	placement     int   // 0 = no placement targeting
	mobile        bool
	products      []int // product bids: product indices, each with amounts[k]
	amounts       []int64
	category      int // category bid target (-1 = none)
	categoryCents int64
	keyword       string // keyword bid target ("" = none)
	keywordCents  int64
}

func (c seedCampaign) name() string { return seedCampaignName + strconv.Itoa(c.j) }

// bids counts the campaign's manual bids.
func (c seedCampaign) bids() int {
	n := len(c.products)
	if c.category >= 0 {
		n++
	}
	if c.keyword != "" {
		n++
	}
	return n
}

// campaign builds campaign j: its vendor is j mod Vendors (so vendor v has campaigns v, v+Vendors...).
func (p seedPlan) campaign(j int) seedCampaign {
	u := uint64(j)
	h := p.mix(u, 20)
	c := seedCampaign{j: j, vendor: j % p.vendors, category: -1}
	c.automated = h%100 < seedAutomatedPct
	c.cpm = (h>>8)%100 < seedCPMPct
	c.paused = (h>>16)%100 < seedPausedPct
	if (h>>24)%100 < seedPlacementPct {
		c.placement = 1 + int((h>>32)%8)
	}
	c.mobile = (h>>40)%100 < seedMobilePct

	b := p.mix(u, 21)
	c.daily = 1000 + int64(b%49001) // 10.00–500.00
	switch (b >> 20) % 10 {
	case 0, 1: // total budget only (not allowed for automated campaigns, which need a daily budget)
		c.total = c.daily * 30
		if !c.automated {
			c.daily = 0
		}
	case 2, 3, 4, 5:
		c.total = c.daily * (10 + int64((b>>28)%50))
	}
	if c.automated {
		if (b>>40)%2 == 0 {
			c.maxBid = 50 + int64((b>>44)%151) // 0.50–2.00
		}
		return c
	}

	nv := p.vendorProducts(c.vendor)
	r := p.mix(u, 22)
	if n := min(1+int(r%seedMaxProductBids), nv); n > 0 {
		start := int((r >> 8) % uint64(nv))
		c.products = make([]int, n)
		c.amounts = make([]int64, n)
		for k := range n {
			c.products[k] = c.vendor + ((start+k)%nv)*p.vendors
			c.amounts[k] = 10 + int64(p.mix(u, 30+uint64(k))%291) // 0.10–3.00
		}
	}
	if (r>>32)%100 < seedCategoryBidPct {
		if len(c.products) > 0 {
			c.category, _ = p.productCategories(c.products[0])
		} else {
			c.category = int((r >> 40) % uint64(p.categories))
		}
		c.categoryCents = 5 + int64(p.mix(u, 23)%146) // 0.05–1.50
	}
	if (r>>48)%100 < seedKeywordBidPct {
		c.keyword = searchTerms[p.mix(u, 24)%uint64(len(searchTerms))]
		c.keywordCents = 5 + int64(p.mix(u, 25)%196) // 0.05–2.00
	}
	return c
}

// biddedProducts lists, in increasing order, the distinct products that have a manual product bid.
func (p seedPlan) biddedProducts() []int32 {
	seen := make([]bool, p.products)
	var out []int32
	for j := range p.campaigns {
		for _, i := range p.campaign(j).products {
			if !seen[i] {
				seen[i] = true
				out = append(out, int32(i))
			}
		}
	}
	slices.Sort(out)
	return out
}

// appendCents appends cents as a decimal amount ("12.5" style is not needed: always two decimals).
func appendCents(b []byte, cents int64) []byte {
	b = strconv.AppendInt(b, cents/100, 10)
	c := cents % 100
	return append(b, '.', byte('0'+c/10), byte('0'+c%10))
}

// seedGen writes the catalog entities of a plan.
type seedGen struct {
	plan seedPlan
	pg   *productGen // word soup, ids and GTINs of loadgen products
}

func newSeedGen(cfg SeedConfig) *seedGen {
	return &seedGen{
		plan: newSeedPlan(cfg),
		pg: newProductGen(ProductsConfig{Seed: cfg.Seed, NameLen: cfg.NameLen, DescriptionLen: cfg.DescriptionLen,
			IDPrefix: seedProductPrefix}),
	}
}

func (g *seedGen) category(b []byte, i int) []byte {
	b = append(b, `{"id":"c-`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","name":"Category `...)
	b = strconv.AppendInt(b, int64(i), 10)
	if i >= seedTopCategories {
		b = append(b, `","parentId":"c-`...)
		b = strconv.AppendInt(b, int64(i%seedTopCategories), 10)
	}
	return append(b, `"}`...)
}

func (g *seedGen) vendor(b []byte, i int) []byte {
	b = append(b, `{"id":"v-`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","name":"Vendor `...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, `"}`...)
}

// product appends product i as JSON: 1–2 vendors, 1–3 categories, a quality score on most.
func (g *seedGen) product(b []byte, i int) []byte {
	u := uint64(i)
	p, pg := g.plan, g.pg
	b = append(b, `{"id":"`...)
	b = pg.appendID(b, i)
	b = append(b, `","name":"`...)
	b = append(b, pg.cut(p.mix(u, 1), pg.cfg.NameLen)...)
	if pg.cfg.DescriptionLen > 0 {
		b = append(b, `","description":"`...)
		b = append(b, pg.cut(p.mix(u, 2), pg.cfg.DescriptionLen)...)
	}
	v1, v2 := p.productVendors(i)
	b = append(b, `","vendors":["v-`...)
	b = strconv.AppendInt(b, int64(v1), 10)
	if v2 >= 0 {
		b = append(b, `","v-`...)
		b = strconv.AppendInt(b, int64(v2), 10)
	}
	b = append(b, `"],"categories":[`...)
	first, n := p.productCategories(i)
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `"c-`...)
		b = strconv.AppendInt(b, int64((first+k)%p.categories), 10)
		b = append(b, '"')
	}
	h := p.mix(u, 5)
	b = append(b, `],"brand":{"id":"b-`...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `","name":"Brand `...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `"},"imageURL":"https://cdn.example.com/img/`...)
	b = pg.appendID(b, i)
	b = append(b, `.jpg","price":`...)
	b = appendCents(b, 99+int64(h>>16)%100000)
	if (h>>40)%100 < seedInactivePct {
		b = append(b, `,"active":false`...)
	} else {
		b = append(b, `,"active":true`...)
	}
	if q := p.mix(u, 6); q%100 < seedQualityPct {
		b = append(b, `,"quality_score":`...)
		b = appendScore(b, 1+int((q>>8)%100))
	}
	b = append(b, `,"gtin":"`...)
	b = appendGTIN13(b, 4000000000000+p.mix(u, 10)%1000000000000/10*10)
	return append(b, `"}`...)
}

// appendScore appends hundredths/100 (1..100) as a decimal in (0, 1].
func appendScore(b []byte, hundredths int) []byte {
	if hundredths >= 100 {
		return append(b, '1')
	}
	b = append(b, '0', '.', byte('0'+hundredths/10))
	if d := hundredths % 10; d != 0 {
		b = append(b, byte('0'+d))
	}
	return b
}

// campaignBody is the POST body of campaign c.
func campaignBody(b []byte, c seedCampaign) []byte {
	b = append(b, `{"name":"`...)
	b = append(b, c.name()...)
	if c.automated {
		b = append(b, `","type":"automated"`...)
	} else {
		b = append(b, `","type":"listings"`...)
	}
	if c.cpm {
		b = append(b, `,"chargeType":"CPM"`...)
	} else {
		b = append(b, `,"chargeType":"CPC"`...)
	}
	if c.daily > 0 {
		b = append(b, `,"dailyBudget":`...)
		b = appendCents(b, c.daily)
	}
	if c.total > 0 {
		b = append(b, `,"totalBudget":`...)
		b = appendCents(b, c.total)
	}
	if c.maxBid > 0 {
		b = append(b, `,"maxBid":`...)
		b = appendCents(b, c.maxBid)
	}
	if c.paused {
		b = append(b, `,"isActive":false`...)
	}
	if c.placement > 0 || c.mobile {
		b = append(b, `,"targeting":{`...)
		if c.placement > 0 {
			b = append(b, `"placementIds":[`...)
			b = strconv.AppendInt(b, int64(c.placement), 10)
			b = append(b, ']')
		}
		if c.mobile {
			if c.placement > 0 {
				b = append(b, ',')
			}
			b = append(b, `"devices":["mobile"]`...)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// seedBid is one manual bid of a campaign.
type seedBid struct {
	targetType, target string
	cents              int64
}

func (g *seedGen) bidsOf(c seedCampaign) []seedBid {
	out := make([]seedBid, 0, c.bids())
	for k, i := range c.products {
		out = append(out, seedBid{"product", string(g.pg.appendID(nil, i)), c.amounts[k]})
	}
	if c.category >= 0 {
		out = append(out, seedBid{"category", "c-" + strconv.Itoa(c.category), c.categoryCents})
	}
	if c.keyword != "" {
		out = append(out, seedBid{"keyword", c.keyword, c.keywordCents})
	}
	return out
}

func bidBody(b []byte, bid seedBid) []byte {
	b = append(b, `{"targetType":"`...)
	b = append(b, bid.targetType...)
	b = append(b, `","target":"`...)
	b = append(b, bid.target...)
	b = append(b, `","bidAmount":`...)
	b = appendCents(b, bid.cents)
	return append(b, '}')
}

// SeedReport is what RunSeed did.
type SeedReport struct {
	Skipped    []string       `json:"skipped"` // phases skipped because the manifest records them as done
	Categories ProductsReport `json:"categories"`
	Vendors    ProductsReport `json:"vendors"`
	Products   ProductsReport `json:"products"`

	CampaignsCreated  int64         `json:"campaigns_created"`
	CampaignsExisting int64         `json:"campaigns_existing"` // found by name (an earlier run)
	BidsCreated       int64         `json:"bids_created"`
	BidsExisting      int64         `json:"bids_existing"`
	CampaignFailures  int64         `json:"campaign_failures"` // campaigns or bids that could not be created
	CampaignRequests  int64         `json:"campaign_requests"` // requests of the campaigns phase, retries included
	Throttled         int64         `json:"throttled"`         // 429 answers in the campaigns phase
	Statuses          map[int]int64 `json:"statuses"`          // campaigns phase; 0 = transport error
	CampaignsElapsed  time.Duration `json:"campaigns_elapsed_ms"`
	CapsCreated       int64         `json:"caps_created"`  // campaigns given a frequency cap (CappedPercent)
	CapsExisting      int64         `json:"caps_existing"` // drawn campaigns that had a restriction already

	Elapsed    time.Duration `json:"elapsed_ms"`
	FirstError string        `json:"first_error,omitempty"`
	// Stopped: "done", "canceled", "unauthorized" (a 401/403), or "failed" (some entity could not be written).
	Stopped  string       `json:"stopped"`
	Manifest SeedManifest `json:"manifest"`
}

// MarshalJSON writes durations as milliseconds.
func (r SeedReport) MarshalJSON() ([]byte, error) {
	type plain SeedReport
	statuses := make(map[string]int64, len(r.Statuses))
	for k, v := range r.Statuses {
		statuses[strconv.Itoa(k)] = v
	}
	return json.Marshal(struct {
		plain
		Statuses         map[string]int64 `json:"statuses"`
		CampaignsElapsed float64          `json:"campaigns_elapsed_ms"`
		Elapsed          float64          `json:"elapsed_ms"`
	}{plain(r), statuses, ms(r.CampaignsElapsed), ms(r.Elapsed)})
}

// String is a human-readable summary.
func (r SeedReport) String() string {
	var sb strings.Builder
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&sb, "skipped (done earlier): %s\n", strings.Join(r.Skipped, ", "))
	}
	for _, ph := range []struct {
		name string
		rep  ProductsReport
	}{{phaseCategories, r.Categories}, {phaseVendors, r.Vendors}, {phaseProducts, r.Products}} {
		if ph.rep.Requests > 0 {
			fmt.Fprintf(&sb, "%-10s %d upserted in %.1fs (%.0f/s), %d batches failed, %d throttled\n",
				ph.name, ph.rep.Products, ph.rep.Elapsed.Seconds(), ph.rep.ProductsPerSec, ph.rep.Failed, ph.rep.Throttled)
		}
	}
	if r.CampaignRequests > 0 {
		fmt.Fprintf(&sb, "campaigns  %d created, %d existing; bids %d created, %d existing; %d failures; %d requests in %.1fs, %d throttled\n",
			r.CampaignsCreated, r.CampaignsExisting, r.BidsCreated, r.BidsExisting, r.CampaignFailures,
			r.CampaignRequests, r.CampaignsElapsed.Seconds(), r.Throttled)
	}
	if r.CapsCreated+r.CapsExisting > 0 {
		fmt.Fprintf(&sb, "caps       %d created, %d existing\n", r.CapsCreated, r.CapsExisting)
	}
	fmt.Fprintf(&sb, "products with a product bid: %d of %d\n", r.Manifest.ProductsWithBids, r.Manifest.Products)
	if r.FirstError != "" {
		fmt.Fprintf(&sb, "first error: %s\n", r.FirstError)
	}
	fmt.Fprintf(&sb, "stopped: %s after %.1fs", r.Stopped, r.Elapsed.Seconds())
	return sb.String()
}

// RunSeed builds a marketplace for auction benchmarks through the public API, in four phases: categories,
// vendors and products (bulk upserts through RunProducts' machinery), then campaigns and their bids (one
// POST each). Everything is deterministic in the configuration, and a re-run is safe: upserts overwrite,
// campaigns are found by name (GET of each vendor's campaigns) and bids by target (GET of an existing
// campaign's bids) before anything is created, and a 422 "already has a bid" counts as existing. Phases that
// the manifest records as done for the same configuration are skipped. The manifest is written after every
// phase; Complete is set when all four are done without a failure.
//
// Rate limits: the catalog class allows 10 requests/s per key and the others 45 per 2 s by default;
// seeding needs them raised (ENDCAP_RATE_LIMIT_CATALOG, ENDCAP_RATE_LIMIT_DEFAULT). 429s are retried after
// Retry-After, and the first one prints a warning.
//
// The error is non-nil for an invalid configuration or a manifest that cannot be written; failed writes
// are counted in the report.
func RunSeed(ctx context.Context, cfg SeedConfig) (SeedReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return SeedReport{}, err
	}
	base, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return SeedReport{}, fmt.Errorf("loadgen: URL must be http(s)://host[:port], got %q", cfg.URL)
	}
	start := time.Now()
	gen := newSeedGen(cfg)
	man := SeedManifest{
		PlanVersion: seedPlanVersion, MarketplaceID: cfg.MarketplaceID, Seed: cfg.Seed,
		ProductIDPrefix: seedProductPrefix, ProductIDWidth: seedProductWidth,
		ProductIDExample: string(gen.pg.appendID(nil, 0)),
		Products:         cfg.Products, Vendors: cfg.Vendors, Categories: cfg.Categories, Campaigns: cfg.Campaigns,
		NameLen: cfg.NameLen, DescriptionLen: cfg.DescriptionLen,
		Keywords:         searchTerms[:],
		ProductsWithBids: len(gen.plan.biddedProducts()),
	}
	if cfg.Manifest != "" && !cfg.Force {
		if old, err := ReadSeedManifest(cfg.Manifest); err == nil && old.sameMarketplace(cfg) {
			man.Phases = old.Phases
		}
	}
	rep := SeedReport{Statuses: map[int]int64{}}
	s := &seeder{cfg: cfg, gen: gen, base: base.String(), rep: &rep}
	tr := newTransport(EventsConfig{Concurrency: cfg.Concurrency, Timeout: cfg.Timeout})
	defer tr.CloseIdleConnections()
	s.client = &http.Client{Transport: tr, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	stopped := "done"
	for _, phase := range phasesOf(cfg) {
		if ctx.Err() != nil {
			stopped = "canceled"
			break
		}
		if man.done(phase) {
			rep.Skipped = append(rep.Skipped, phase)
			continue
		}
		ok, why := s.runPhase(ctx, phase)
		if !ok {
			stopped = why
			break
		}
		man.Phases = append(man.Phases, phase)
		man.UpdatedAt = time.Now().UTC()
		if cfg.Manifest != "" {
			if err := writeManifest(cfg.Manifest, man); err != nil {
				return rep, fmt.Errorf("loadgen: writing the manifest: %w", err)
			}
		}
	}
	if ctx.Err() != nil {
		stopped = "canceled"
	}
	man.Complete = stopped == "done"
	man.UpdatedAt = time.Now().UTC()
	if cfg.Manifest != "" {
		if err := writeManifest(cfg.Manifest, man); err != nil {
			return rep, fmt.Errorf("loadgen: writing the manifest: %w", err)
		}
	}
	rep.Stopped, rep.Manifest, rep.Elapsed = stopped, man, time.Since(start)
	return rep, nil
}

// seeder runs the phases of one RunSeed.
type seeder struct {
	cfg    SeedConfig
	gen    *seedGen
	base   string
	client *http.Client
	rep    *SeedReport

	mu         sync.Mutex // guards rep.Statuses and rep.FirstError during the campaigns phase
	warned429  atomic.Bool
	fatal      atomic.Bool
	vendorDone atomic.Int64
	created    atomic.Int64
	existing   atomic.Int64
	bidsNew    atomic.Int64
	bidsOld    atomic.Int64
	failures   atomic.Int64
	requests   atomic.Int64
	throttled  atomic.Int64
	// progressMu serialises the progress lines: the ticker and the workers
	// (warn429) write them, and Progress need not be safe for concurrent use.
	progressMu sync.Mutex
}

func (s *seeder) progressf(format string, args ...any) {
	if s.cfg.Progress != nil {
		s.progressMu.Lock()
		defer s.progressMu.Unlock()
		fmt.Fprintf(s.cfg.Progress, "seed: "+format+"\n", args...)
	}
}

// every prints line() every ProgressEvery until the returned stop is called.
func (s *seeder) every(line func() string) (stop func()) {
	if s.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.progressf("%s", line())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// runPhase runs one phase; ok is false when the run must stop, why says why.
func (s *seeder) runPhase(ctx context.Context, phase string) (ok bool, why string) {
	if phase == phaseCampaigns {
		return s.campaigns(ctx)
	}
	if strings.HasPrefix(phase, phaseCaps) {
		return s.caps(ctx)
	}
	var n int
	var path, key string
	var item func([]byte, int) []byte
	var dst *ProductsReport
	switch phase {
	case phaseCategories:
		n, path, key, item, dst = s.cfg.Categories, categoriesPath, "categories", s.gen.category, &s.rep.Categories
	case phaseVendors:
		n, path, key, item, dst = s.cfg.Vendors, vendorsPath, "vendors", s.gen.vendor, &s.rep.Vendors
	default:
		n, path, key, item, dst = s.cfg.Products, productsPath, "products", s.gen.product, &s.rep.Products
	}
	var built atomic.Int64
	counted := func(b []byte, i int) []byte {
		built.Add(1)
		return item(b, i)
	}
	s.progressf("%s: upserting %d", phase, n)
	stop := s.every(func() string { return fmt.Sprintf("%s: %d/%d sent", phase, built.Load(), n) })
	r, err := RunProducts(ctx, ProductsConfig{
		URL: s.base, APIKey: s.cfg.APIKey, Count: n, BatchSize: s.cfg.BatchSize, Concurrency: s.cfg.Concurrency,
		Timeout: s.cfg.Timeout, MaxRetries: s.cfg.MaxRetries, Seed: s.cfg.Seed,
		item: counted, path: path, listKey: key,
	})
	stop()
	if err != nil { // the configuration was checked by withDefaults: not expected
		s.rep.FirstError = err.Error()
		return false, "failed"
	}
	*dst = r
	if r.Throttled > 0 {
		s.warn429()
	}
	if r.FirstError != "" && s.rep.FirstError == "" {
		s.rep.FirstError = phase + ": " + r.FirstError
	}
	s.progressf("%s: %d upserted in %.1fs (%.0f/s), %d batches failed", phase, r.Products, r.Elapsed.Seconds(), r.ProductsPerSec, r.Failed)
	switch {
	case r.Stopped != "done":
		return false, r.Stopped
	case r.Failed > 0:
		return false, "failed"
	}
	return true, ""
}

func (s *seeder) warn429() {
	if s.warned429.CompareAndSwap(false, true) {
		s.progressf("WARNING: rate-limited (429). Seeding needs raised limits: start Endcap with " +
			"ENDCAP_RATE_LIMIT_CATALOG=1000000/1s ENDCAP_RATE_LIMIT_DEFAULT=1000000/1s")
	}
}

// campaigns creates the campaigns and bids, one vendor at a time per worker.
func (s *seeder) campaigns(ctx context.Context) (bool, string) {
	t0 := time.Now()
	p := s.gen.plan
	s.progressf("campaigns: %d campaigns over %d vendors", s.cfg.Campaigns, s.cfg.Vendors)
	stop := s.every(func() string {
		return fmt.Sprintf("campaigns: vendors %d/%d, campaigns %d created %d existing, bids %d created %d existing, %d failures",
			s.vendorDone.Load(), min(s.cfg.Vendors, s.cfg.Campaigns), s.created.Load(), s.existing.Load(), s.bidsNew.Load(), s.bidsOld.Load(), s.failures.Load())
	})
	s.eachVendor(ctx, func(v int, buf []byte) []byte { return s.seedVendor(ctx, p, v, buf) })
	stop()
	r := s.rep
	r.CampaignsCreated, r.CampaignsExisting = s.created.Load(), s.existing.Load()
	r.BidsCreated, r.BidsExisting = s.bidsNew.Load(), s.bidsOld.Load()
	r.CampaignFailures, r.CampaignRequests, r.Throttled = s.failures.Load(), s.requests.Load(), s.throttled.Load()
	r.CampaignsElapsed = time.Since(t0)
	s.progressf("campaigns: %d created, %d existing; bids %d created, %d existing; %d failures in %.1fs",
		r.CampaignsCreated, r.CampaignsExisting, r.BidsCreated, r.BidsExisting, r.CampaignFailures, r.CampaignsElapsed.Seconds())
	switch {
	case ctx.Err() != nil:
		return false, "canceled"
	case s.fatal.Load():
		return false, "unauthorized"
	case r.CampaignFailures > 0:
		return false, "failed"
	}
	return true, ""
}

// capSalt draws the capped campaigns.
const capSalt = 0xca95

// capped reports whether the plan's campaign j gets a frequency cap.
func (p seedPlan) capped(j, percent int) bool { return int(p.mix(uint64(j), capSalt)%100) < percent }

// capBody is the restriction of a capped campaign: 3 impressions a day per shopper.
var capBody = []byte(`{"interactionType":"impressions","frequencyType":"daily","level":"campaign","limit":3}`)

// caps gives the drawn campaigns (CappedPercent of them) a frequency cap, unless they have a restriction.
func (s *seeder) caps(ctx context.Context) (bool, string) {
	t0 := time.Now()
	p := s.gen.plan
	var created, existing atomic.Int64
	s.progressf("caps: %d%% of %d campaigns", s.cfg.CappedPercent, s.cfg.Campaigns)
	stop := s.every(func() string {
		return fmt.Sprintf("caps: vendors %d/%d, %d created %d existing, %d failures",
			s.vendorDone.Load(), min(s.cfg.Vendors, s.cfg.Campaigns), created.Load(), existing.Load(), s.failures.Load())
	})
	s.vendorDone.Store(0)
	s.eachVendor(ctx, func(v int, buf []byte) []byte {
		have, ok := s.listCampaigns(ctx, "v-"+strconv.Itoa(v))
		if !ok {
			s.failures.Add(1)
			return buf
		}
		for j := v; j < p.campaigns && ctx.Err() == nil; j += p.vendors {
			id, found := have[p.campaign(j).name()]
			if !found || !p.capped(j, s.cfg.CappedPercent) {
				continue
			}
			path := campaignsBase + "/campaigns/" + id + "/restrictions"
			status, body := s.call(ctx, http.MethodGet, path, nil)
			if status != http.StatusOK {
				s.failures.Add(1)
				continue
			}
			if !bytes.Contains(body, []byte(`"restrictions":[]`)) {
				existing.Add(1)
				continue
			}
			if status, _ = s.call(ctx, http.MethodPost, path, capBody); status != http.StatusCreated {
				s.failures.Add(1)
				continue
			}
			created.Add(1)
		}
		return buf
	})
	stop()
	s.rep.CapsCreated, s.rep.CapsExisting = created.Load(), existing.Load()
	s.progressf("caps: %d created, %d existing, %d failures in %.1fs", created.Load(), existing.Load(), s.failures.Load(), time.Since(t0).Seconds())
	switch {
	case ctx.Err() != nil:
		return false, "canceled"
	case s.fatal.Load():
		return false, "unauthorized"
	case s.failures.Load() > 0:
		return false, "failed"
	}
	return true, ""
}

// eachVendor calls fn for every vendor that has campaigns (v < Vendors and
// v < Campaigns), Concurrency at a time, until ctx ends or a key is refused;
// fn gets and returns a buffer of its worker's.
func (s *seeder) eachVendor(ctx context.Context, fn func(v int, buf []byte) []byte) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range s.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for ctx.Err() == nil && !s.fatal.Load() {
				v := int(next.Add(1) - 1)
				if v >= s.cfg.Vendors || v >= s.cfg.Campaigns {
					return
				}
				buf = fn(v, buf)
				s.vendorDone.Add(1)
			}
		}()
	}
	wg.Wait()
}

// seedVendor creates the missing campaigns of vendor v (j = v, v+Vendors, ...) and their missing bids.
func (s *seeder) seedVendor(ctx context.Context, p seedPlan, v int, buf []byte) []byte {
	vendorID := "v-" + strconv.Itoa(v)
	have, ok := s.listCampaigns(ctx, vendorID)
	if !ok {
		s.failures.Add(1)
		return buf
	}
	for j := v; j < p.campaigns && ctx.Err() == nil && !s.fatal.Load(); j += p.vendors {
		c := p.campaign(j)
		bids := s.gen.bidsOf(c)
		id, found := have[c.name()]
		var held map[string]bool
		if found {
			s.existing.Add(1)
			if len(bids) > 0 {
				if held, ok = s.listBids(ctx, id); !ok {
					s.failures.Add(1)
					continue
				}
			}
		} else {
			buf = campaignBody(buf[:0], c)
			status, body := s.call(ctx, http.MethodPost, campaignsBase+"/vendors/"+url.PathEscape(vendorID)+"/campaigns", buf)
			if status != http.StatusCreated {
				s.failures.Add(1)
				continue
			}
			var out struct{ ID string }
			if err := json.Unmarshal(body, &out); err != nil || out.ID == "" {
				s.failures.Add(1)
				s.noteError(fmt.Sprintf("campaign %s: answer without an id: %.200s", c.name(), body))
				continue
			}
			id = out.ID
			s.created.Add(1)
		}
		for _, bid := range bids {
			if held[bid.targetType+"\x00"+bid.target] {
				s.bidsOld.Add(1)
				continue
			}
			buf = bidBody(buf[:0], bid)
			status, body := s.call(ctx, http.MethodPost, campaignsBase+"/campaigns/"+id+"/bids", buf)
			switch {
			case status == http.StatusCreated:
				s.bidsNew.Add(1)
			case status == http.StatusUnprocessableEntity && bytes.Contains(body, []byte("already has a bid")):
				s.bidsOld.Add(1)
			default:
				s.failures.Add(1)
			}
		}
	}
	return buf
}

// listCampaigns maps the names of vendor's campaigns to their ids (every page).
func (s *seeder) listCampaigns(ctx context.Context, vendorID string) (map[string]string, bool) {
	out := map[string]string{}
	next := ""
	for {
		q := campaignsBase + "/vendors/" + url.PathEscape(vendorID) + "/campaigns?limit=100"
		if next != "" {
			q += "&next_page=" + url.QueryEscape(next)
		}
		status, body := s.call(ctx, http.MethodGet, q, nil)
		if status != http.StatusOK {
			return nil, false
		}
		var page struct {
			HasMore   bool
			NextPage  string
			Campaigns []struct{ ID, Name string }
		}
		if err := json.Unmarshal(body, &page); err != nil {
			s.noteError(fmt.Sprintf("campaign list of %s: %v", vendorID, err))
			return nil, false
		}
		for _, c := range page.Campaigns {
			out[c.Name] = c.ID
		}
		if !page.HasMore || page.NextPage == "" {
			return out, true
		}
		next = page.NextPage
	}
}

// listBids returns the targets ("type\x00target") of a campaign's bids (every page).
func (s *seeder) listBids(ctx context.Context, campaignID string) (map[string]bool, bool) {
	out := map[string]bool{}
	next := ""
	for {
		q := campaignsBase + "/campaigns/" + campaignID + "/bids?limit=100"
		if next != "" {
			q += "&next_page=" + url.QueryEscape(next)
		}
		status, body := s.call(ctx, http.MethodGet, q, nil)
		if status != http.StatusOK {
			return nil, false
		}
		var page struct {
			HasMore  bool
			NextPage string
			Bids     []struct{ TargetType, Target string }
		}
		if err := json.Unmarshal(body, &page); err != nil {
			s.noteError(fmt.Sprintf("bid list of %s: %v", campaignID, err))
			return nil, false
		}
		for _, b := range page.Bids {
			out[b.TargetType+"\x00"+b.Target] = true
		}
		if !page.HasMore || page.NextPage == "" {
			return out, true
		}
		next = page.NextPage
	}
}

func (s *seeder) noteError(msg string) {
	s.mu.Lock()
	if s.rep.FirstError == "" {
		s.rep.FirstError = msg
	}
	s.mu.Unlock()
}

// call sends one request of the campaigns phase (body nil for a GET), retrying 429 after Retry-After and
// 503 and transport errors after a backoff, and returns the last status (0 = transport error) and body.
// A final failure is recorded as the report's first error.
func (s *seeder) call(ctx context.Context, method, path string, body []byte) (int, []byte) {
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
		if err != nil {
			s.noteError(err.Error())
			return 0, nil
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", "endcap-loadgen/1")
		if s.cfg.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
		}
		s.requests.Add(1)
		resp, err := s.client.Do(req)
		status, wait := 0, time.Duration(0)
		var answer []byte
		if err == nil {
			status = resp.StatusCode
			answer, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			resp.Body.Close()
			if err != nil {
				status = 0
			}
			if sec, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
				wait = time.Duration(sec) * time.Second
			}
		}
		s.mu.Lock()
		s.rep.Statuses[status]++
		s.mu.Unlock()
		retry := false
		switch {
		case status >= 200 && status < 300:
			return status, answer
		case status == http.StatusTooManyRequests:
			s.throttled.Add(1)
			s.warn429()
			wait, retry = max(wait, 100*time.Millisecond), true
		case status == http.StatusServiceUnavailable || status == 0:
			wait, retry = max(wait, time.Duration(100*(attempt+1))*time.Millisecond), true
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			s.fatal.Store(true)
		}
		if !retry || attempt >= s.cfg.MaxRetries || ctx.Err() != nil {
			// A duplicate bid is expected on a re-run: not an error worth reporting.
			if !(status == http.StatusUnprocessableEntity && bytes.Contains(answer, []byte("already has a bid"))) {
				if err != nil {
					s.noteError(method + " " + path + ": " + err.Error())
				} else {
					s.noteError(fmt.Sprintf("%s %s: HTTP %d: %.300s", method, path, status, answer))
				}
			}
			return status, answer
		}
		select {
		case <-ctx.Done():
			return status, answer
		case <-time.After(wait):
		}
	}
}
