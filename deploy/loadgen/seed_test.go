package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func smallSeed(url string) SeedConfig {
	return SeedConfig{URL: url, APIKey: "eca_test", Vendors: 7, Products: 300, Campaigns: 60, Categories: 30,
		Concurrency: 4, BatchSize: 40, Seed: 3, MaxRetries: 5, Timeout: 5 * time.Second}
}

func TestSeedPlanInvariants(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  SeedConfig
	}{
		{"small", SeedConfig{Vendors: 7, Products: 300, Campaigns: 600, Categories: 30, Seed: 1}},
		{"more vendors than products", SeedConfig{Vendors: 50, Products: 20, Campaigns: 200, Categories: 5, Seed: 2}},
		{"one vendor", SeedConfig{Vendors: 1, Products: 10, Campaigns: 40, Categories: 1, Seed: 3}},
		{"default sizes", SeedConfig{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			p := newSeedPlan(cfg)
			// Every product has 1–2 distinct vendors and its primary vendor lists it.
			perVendor := make([]int, cfg.Vendors)
			for i := range min(cfg.Products, 20000) {
				v1, v2 := p.productVendors(i)
				if v1 != i%cfg.Vendors || v2 == v1 || v2 >= cfg.Vendors || (cfg.Vendors == 1 && v2 != -1) {
					t.Fatalf("product %d vendors %d, %d", i, v1, v2)
				}
				first, n := p.productCategories(i)
				if n < 1 || n > 3 || n > cfg.Categories || first < 0 || first >= cfg.Categories {
					t.Fatalf("product %d categories %d+%d", i, first, n)
				}
				perVendor[v1]++
			}
			if cfg.Products <= 20000 {
				for v, n := range perVendor {
					if n != p.vendorProducts(v) {
						t.Fatalf("vendor %d has %d products, vendorProducts says %d", v, n, p.vendorProducts(v))
					}
				}
			}
			var automated, withCategory, withKeyword, listings int
			for j := range min(cfg.Campaigns, 20000) {
				c := p.campaign(j)
				if c.vendor != j%cfg.Vendors || c.name() != "seed-"+strconv.Itoa(j) {
					t.Fatalf("campaign %d: vendor %d name %s", j, c.vendor, c.name())
				}
				if c.daily == 0 && c.total == 0 || c.total > 0 && c.daily > c.total {
					t.Fatalf("campaign %d budgets daily %d total %d", j, c.daily, c.total)
				}
				if c.placement < 0 || c.placement > 8 {
					t.Fatalf("campaign %d placement %d", j, c.placement)
				}
				if c.automated {
					automated++
					if c.daily == 0 || c.bids() != 0 {
						t.Fatalf("automated campaign %d: daily %d, %d bids", j, c.daily, c.bids())
					}
					continue
				}
				listings++
				if c.maxBid != 0 {
					t.Fatalf("listings campaign %d has maxBid", j)
				}
				nv := p.vendorProducts(c.vendor)
				if len(c.products) > seedMaxProductBids || (nv > 0 && len(c.products) == 0) || len(c.products) > nv {
					t.Fatalf("campaign %d: %d product bids, vendor has %d products", j, len(c.products), nv)
				}
				seen := map[int]bool{}
				for k, i := range c.products {
					v1, _ := p.productVendors(i)
					if i < 0 || i >= cfg.Products || v1 != c.vendor || seen[i] {
						t.Fatalf("campaign %d (vendor %d) bids on product %d (vendor %d), seen %v", j, c.vendor, i, v1, seen[i])
					}
					seen[i] = true
					if a := c.amounts[k]; a < 10 || a > 300 {
						t.Fatalf("campaign %d bid amount %d cents", j, a)
					}
				}
				if c.category >= 0 {
					withCategory++
					if c.category >= cfg.Categories || c.categoryCents <= 0 {
						t.Fatalf("campaign %d category bid %d (%d cents)", j, c.category, c.categoryCents)
					}
				}
				if c.keyword != "" {
					withKeyword++
				}
			}
			if n := min(cfg.Campaigns, 20000); n >= 600 {
				// The shares are roughly those of the constants.
				if automated == 0 || automated > n/10 || withCategory < listings/10 || withKeyword < listings/20 {
					t.Errorf("of %d campaigns: %d automated, %d with a category bid, %d with a keyword bid", n, automated, withCategory, withKeyword)
				}
			}
			if p2 := newSeedPlan(cfg); fmt.Sprint(p2.campaign(5)) != fmt.Sprint(p.campaign(5)) {
				t.Error("plan not deterministic")
			}
		})
	}
}

// seedProduct is a generated product as the catalog API reads it.
type seedProduct struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Description  *string  `json:"description"`
	Vendors      []string `json:"vendors"`
	Categories   []string `json:"categories"`
	Price        float64  `json:"price"`
	Active       *bool    `json:"active"`
	QualityScore *float64 `json:"quality_score"`
	GTIN         string   `json:"gtin"`
}

func TestSeedProductsJSON(t *testing.T) {
	cfg, _ := SeedConfig{Vendors: 10, Products: 2000, Categories: 50, Seed: 9, DescriptionLen: 120}.withDefaults()
	g := newSeedGen(cfg)
	var withScore, withTwo, inactive int
	for i := range cfg.Products {
		b := g.product(nil, i)
		var p seedProduct
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("product %d: %v\n%s", i, err, b)
		}
		if want := fmt.Sprintf("p-%09d", i); p.ID != want {
			t.Fatalf("id %q, want %q", p.ID, want)
		}
		if len(p.Name) != cfg.NameLen || p.Description == nil || len(*p.Description) != cfg.DescriptionLen {
			t.Fatalf("product %d name %q description %v", i, p.Name, p.Description)
		}
		v1, v2 := g.plan.productVendors(i)
		want := []string{"v-" + strconv.Itoa(v1)}
		if v2 >= 0 {
			want = append(want, "v-"+strconv.Itoa(v2))
			withTwo++
		}
		if !slices.Equal(p.Vendors, want) {
			t.Fatalf("product %d vendors %v, want %v", i, p.Vendors, want)
		}
		if n := len(p.Categories); n < 1 || n > 3 || len(slices.Compact(slices.Sorted(slices.Values(p.Categories)))) != n {
			t.Fatalf("product %d categories %v", i, p.Categories)
		}
		if p.QualityScore != nil {
			withScore++
			if q := *p.QualityScore; q <= 0 || q > 1 {
				t.Fatalf("product %d quality score %v", i, q)
			}
		}
		if p.Active == nil {
			t.Fatalf("product %d without active", i)
		} else if !*p.Active {
			inactive++
		}
		if p.Price <= 0 || len(p.GTIN) != 13 || !gs1OK(p.GTIN) {
			t.Fatalf("product %d price %v gtin %q", i, p.Price, p.GTIN)
		}
		if !bytes.Equal(b, g.product(nil, i)) {
			t.Fatalf("product %d not deterministic", i)
		}
	}
	n := cfg.Products
	if withScore < n*80/100 || withScore == n || withTwo < n*20/100 || withTwo > n*40/100 || inactive == 0 || inactive > n*3/100 {
		t.Errorf("of %d products: %d with a score, %d with two vendors, %d inactive", n, withScore, withTwo, inactive)
	}
	other, _ := SeedConfig{Vendors: 10, Products: 2000, Categories: 50, Seed: 10, DescriptionLen: 120}.withDefaults()
	if bytes.Equal(newSeedGen(other).product(nil, 7), g.product(nil, 7)) {
		t.Error("the seed does not change the products")
	}
}

func TestSeedVendorsCategoriesJSON(t *testing.T) {
	cfg, _ := SeedConfig{Categories: 250}.withDefaults()
	g := newSeedGen(cfg)
	for _, i := range []int{0, 99, 100, 249} {
		var c struct{ ID, Name, ParentID string }
		if err := json.Unmarshal(g.category(nil, i), &c); err != nil {
			t.Fatal(err)
		}
		wantParent := ""
		if i >= 100 {
			wantParent = "c-" + strconv.Itoa(i%100)
		}
		if c.ID != "c-"+strconv.Itoa(i) || c.Name == "" || c.ParentID != wantParent {
			t.Errorf("category %d: %+v", i, c)
		}
	}
	var v struct{ ID, Name string }
	if err := json.Unmarshal(g.vendor(nil, 42), &v); err != nil || v.ID != "v-42" || v.Name != "Vendor 42" {
		t.Errorf("vendor: %+v %v", v, err)
	}
}

func TestCampaignAndBidBodies(t *testing.T) {
	cfg, _ := SeedConfig{Vendors: 20, Products: 1000, Campaigns: 2000, Categories: 40, Seed: 5}.withDefaults()
	g := newSeedGen(cfg)
	types := map[string]int{}
	for j := range cfg.Campaigns {
		c := g.plan.campaign(j)
		var in struct {
			Name, Type, ChargeType           string
			DailyBudget, TotalBudget, MaxBid *json.Number
			IsActive                         *bool
			Targeting                        *struct {
				PlacementIDs []int    `json:"placementIds"`
				Devices      []string `json:"devices"`
			}
		}
		b := campaignBody(nil, c)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil {
			t.Fatalf("campaign %d: %v\n%s", j, err, b)
		}
		types[in.Type]++
		if in.Name != c.name() || (in.ChargeType != "CPC" && in.ChargeType != "CPM") {
			t.Fatalf("campaign %d: %s", j, b)
		}
		if in.Type == "automated" && in.DailyBudget == nil || in.DailyBudget == nil && in.TotalBudget == nil {
			t.Fatalf("campaign %d budgets: %s", j, b)
		}
		if in.MaxBid != nil && in.Type != "automated" {
			t.Fatalf("campaign %d: maxBid on %s", j, in.Type)
		}
		for _, m := range []*json.Number{in.DailyBudget, in.TotalBudget, in.MaxBid} {
			if m == nil {
				continue
			}
			if f, err := m.Float64(); err != nil || f <= 0 || !strings.Contains(m.String(), ".") || len(m.String())-strings.Index(m.String(), ".") != 3 {
				t.Fatalf("campaign %d money %q", j, m)
			}
		}
		if in.Targeting != nil {
			if len(in.Targeting.PlacementIDs) == 0 && len(in.Targeting.Devices) == 0 {
				t.Fatalf("campaign %d empty targeting: %s", j, b)
			}
			for _, id := range in.Targeting.PlacementIDs {
				if id < 1 || id > 8 {
					t.Fatalf("campaign %d placement %d", j, id)
				}
			}
		}
		bids := g.bidsOf(c)
		if len(bids) != c.bids() {
			t.Fatalf("campaign %d: %d bids, %d planned", j, len(bids), c.bids())
		}
		for _, bid := range bids {
			var in struct {
				TargetType, Target string
				BidAmount          json.Number
			}
			bb := bidBody(nil, bid)
			if err := json.Unmarshal(bb, &in); err != nil {
				t.Fatalf("bid %s: %v", bb, err)
			}
			if f, _ := in.BidAmount.Float64(); f <= 0 || in.Target == "" {
				t.Fatalf("bid %s", bb)
			}
			switch in.TargetType {
			case "product":
				if !strings.HasPrefix(in.Target, "p-") || len(in.Target) != 11 {
					t.Fatalf("bid %s", bb)
				}
			case "category":
				if !strings.HasPrefix(in.Target, "c-") {
					t.Fatalf("bid %s", bb)
				}
			case "keyword":
				if in.Target != strings.ToLower(strings.TrimSpace(in.Target)) {
					t.Fatalf("bid %s: keyword not normalised", bb)
				}
			default:
				t.Fatalf("bid %s", bb)
			}
		}
	}
	if types["listings"] < cfg.Campaigns*85/100 || types["automated"] == 0 || len(types) != 2 {
		t.Errorf("types %v", types)
	}
}

func TestAppendScoreAndCents(t *testing.T) {
	for _, tc := range []struct {
		h    int
		want string
	}{{1, "0.01"}, {5, "0.05"}, {10, "0.1"}, {50, "0.5"}, {57, "0.57"}, {99, "0.99"}, {100, "1"}} {
		if got := string(appendScore(nil, tc.h)); got != tc.want {
			t.Errorf("appendScore(%d) = %q, want %q", tc.h, got, tc.want)
		}
	}
	for _, tc := range []struct {
		c    int64
		want string
	}{{5, "0.05"}, {10, "0.10"}, {99, "0.99"}, {100, "1.00"}, {123456, "1234.56"}} {
		if got := string(appendCents(nil, tc.c)); got != tc.want {
			t.Errorf("appendCents(%d) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

// fakeAPI is an in-memory stand-in for the catalog and campaign routes the seed uses, with the rules that
// matter to it: a campaign's vendor must exist, a product bid's product must exist and list the campaign's
// vendor, one bid per target, lists paged by 100 (a cursor is the offset).
type fakeAPI struct {
	mu         sync.Mutex
	categories map[string]bool
	vendors    map[string]bool
	products   map[string][]string // id → vendors
	campaigns  map[string]*fakeCampaign
	byVendor   map[string][]string // vendor → campaign ids in creation order
	nextID     int
	calls      atomic.Int64
	throttle   func(call int64) bool // answer 429 to this call
	bodyErrors []string
}

type fakeCampaign struct {
	vendor, name string
	bids         []string // "type\x00target"
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{categories: map[string]bool{}, vendors: map[string]bool{}, products: map[string][]string{},
		campaigns: map[string]*fakeCampaign{}, byVendor: map[string][]string{}}
}

func (f *fakeAPI) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"detail":[{"loc":["body"],"msg":%q,"type":"value_error"}]}`, msg)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := f.calls.Add(1)
	if r.Header.Get("Authorization") != "Bearer eca_test" {
		f.fail(w, http.StatusUnauthorized, "key")
		return
	}
	if f.throttle != nil && f.throttle(call) {
		w.Header().Set("Retry-After", "0")
		f.fail(w, http.StatusTooManyRequests, "slow down")
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	path := r.URL.Path
	const cat = "/public/v1/catalog-search-service/catalogs/"
	const cs = "/public/v1/campaign-service/"
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPut && strings.HasPrefix(path, cat):
		var in struct {
			Categories, Vendors []struct{ ID, Name string }
			Products            []struct {
				ID      string
				Vendors []string
			}
		}
		if err := json.Unmarshal(body, &in); err != nil {
			f.bodyErrors = append(f.bodyErrors, err.Error())
			f.fail(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		n := 0
		switch strings.TrimPrefix(path, cat) {
		case "categories":
			for _, c := range in.Categories {
				f.categories[c.ID] = true
			}
			n = len(in.Categories)
		case "vendors":
			for _, v := range in.Vendors {
				f.vendors[v.ID] = true
			}
			n = len(in.Vendors)
		case "products":
			for _, p := range in.Products {
				f.products[p.ID] = p.Vendors
			}
			n = len(in.Products)
		}
		fmt.Fprintf(w, `{"upserted":%d,"warnings":[]}`, n)
	case strings.HasPrefix(path, cs+"vendors/") && strings.HasSuffix(path, "/campaigns"):
		vendor := strings.TrimSuffix(strings.TrimPrefix(path, cs+"vendors/"), "/campaigns")
		if !f.vendors[vendor] {
			http.Error(w, `{"errCode":"resource_not_found"}`, http.StatusNotFound)
			return
		}
		if r.Method == http.MethodGet {
			ids := f.byVendor[vendor]
			off, _ := strconv.Atoi(r.URL.Query().Get("next_page"))
			end := min(off+100, len(ids))
			type item struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			}
			out := struct {
				HasMore   bool   `json:"hasMore"`
				Campaigns []item `json:"campaigns"`
				NextPage  string `json:"nextPage,omitempty"`
			}{Campaigns: []item{}}
			for _, id := range ids[off:end] {
				out.Campaigns = append(out.Campaigns, item{id, f.campaigns[id].name})
			}
			if end < len(ids) {
				out.HasMore, out.NextPage = true, strconv.Itoa(end)
			}
			json.NewEncoder(w).Encode(out)
			return
		}
		var in struct{ Name, Type string }
		if err := json.Unmarshal(body, &in); err != nil || in.Name == "" || in.Type == "" {
			f.bodyErrors = append(f.bodyErrors, string(body))
			f.fail(w, http.StatusUnprocessableEntity, "bad campaign")
			return
		}
		f.nextID++
		id := fmt.Sprintf("0193%08d-0000-7000-8000-000000000000", f.nextID)
		f.campaigns[id] = &fakeCampaign{vendor: vendor, name: in.Name}
		f.byVendor[vendor] = append(f.byVendor[vendor], id)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q,"vendorId":%q,"name":%q}`, id, vendor, in.Name)
	case strings.HasPrefix(path, cs+"campaigns/") && strings.HasSuffix(path, "/bids"):
		c := f.campaigns[strings.TrimSuffix(strings.TrimPrefix(path, cs+"campaigns/"), "/bids")]
		if c == nil {
			http.Error(w, `{"errCode":"resource_not_found"}`, http.StatusNotFound)
			return
		}
		if r.Method == http.MethodGet {
			type item struct {
				TargetType string `json:"targetType"`
				Target     string `json:"target"`
			}
			out := struct {
				HasMore bool   `json:"hasMore"`
				Bids    []item `json:"bids"`
			}{Bids: []item{}}
			for _, k := range c.bids {
				tt, tg, _ := strings.Cut(k, "\x00")
				out.Bids = append(out.Bids, item{tt, tg})
			}
			json.NewEncoder(w).Encode(out)
			return
		}
		var in struct {
			TargetType, Target string
			BidAmount          json.Number
		}
		if err := json.Unmarshal(body, &in); err != nil {
			f.bodyErrors = append(f.bodyErrors, string(body))
			f.fail(w, http.StatusUnprocessableEntity, "bad bid")
			return
		}
		if in.TargetType == "product" && !slices.Contains(f.products[in.Target], c.vendor) {
			f.bodyErrors = append(f.bodyErrors, "product "+in.Target+" not of vendor "+c.vendor)
			f.fail(w, http.StatusUnprocessableEntity, "product not found")
			return
		}
		key := in.TargetType + "\x00" + in.Target
		if slices.Contains(c.bids, key) {
			f.fail(w, http.StatusUnprocessableEntity, "the campaign already has a bid on this "+in.TargetType)
			return
		}
		c.bids = append(c.bids, key)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"b"}`)
	default:
		http.Error(w, `{"errCode":"resource_not_found"}`, http.StatusNotFound)
	}
}

func (f *fakeAPI) bidCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.campaigns {
		n += len(c.bids)
	}
	return n
}

func TestRunSeedAgainstFakeAPI(t *testing.T) {
	api := newFakeAPI()
	api.throttle = func(call int64) bool { return call%17 == 0 } // some 429s, retried
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := smallSeed(srv.URL)
	cfg.Manifest = filepath.Join(t.TempDir(), "dev", "seed.json")
	cfg.MarketplaceID = "mp-1"
	var progress bytes.Buffer
	cfg.Progress, cfg.ProgressEvery = &progress, time.Millisecond

	rep, err := RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", rep)
	if rep.Stopped != "done" || !rep.Manifest.Complete || rep.CampaignFailures != 0 || len(api.bodyErrors) > 0 {
		t.Fatalf("stopped %q complete %v failures %d, server rejected: %v", rep.Stopped, rep.Manifest.Complete, rep.CampaignFailures, api.bodyErrors)
	}
	plan := newSeedPlan(cfg)
	wantBids := 0
	for j := range cfg.Campaigns {
		wantBids += plan.campaign(j).bids()
	}
	if len(api.categories) != 30 || len(api.vendors) != 7 || len(api.products) != 300 || len(api.campaigns) != 60 || api.bidCount() != wantBids {
		t.Fatalf("server has %d categories, %d vendors, %d products, %d campaigns, %d bids (want %d)",
			len(api.categories), len(api.vendors), len(api.products), len(api.campaigns), api.bidCount(), wantBids)
	}
	if rep.CampaignsCreated != 60 || rep.BidsCreated != int64(wantBids) || rep.Throttled == 0 || rep.Products.Products != 300 {
		t.Errorf("report: %+v", rep)
	}
	if !strings.Contains(progress.String(), "WARNING: rate-limited") {
		t.Errorf("no rate-limit warning in progress:\n%s", progress.String())
	}
	m, err := ReadSeedManifest(cfg.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Complete || !slices.Equal(m.Phases, seedPhases) || m.Products != 300 || m.ProductIDExample != "p-000000000" ||
		m.MarketplaceID != "mp-1" || m.ProductsWithBids != len(plan.biddedProducts()) || m.ProductsWithBids == 0 {
		t.Errorf("manifest %+v", m)
	}

	// Same configuration again: every phase is skipped.
	calls := api.calls.Load()
	rep2, err := RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep2.Skipped, seedPhases) || api.calls.Load() != calls || !rep2.Manifest.Complete {
		t.Errorf("re-run: skipped %v, %d more calls", rep2.Skipped, api.calls.Load()-calls)
	}

	// Forced: campaigns and bids are found, nothing is duplicated.
	cfg.Force = true
	rep3, err := RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep3.Stopped != "done" || rep3.CampaignsCreated != 0 || rep3.CampaignsExisting != 60 || rep3.BidsCreated != 0 ||
		rep3.BidsExisting != int64(wantBids) || len(api.campaigns) != 60 || api.bidCount() != wantBids {
		t.Errorf("forced re-run: %+v; server %d campaigns %d bids", rep3, len(api.campaigns), api.bidCount())
	}

	// Another marketplace: the manifest does not apply.
	cfg.Force, cfg.MarketplaceID = false, "mp-2"
	calls = api.calls.Load()
	rep4, err := RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep4.Skipped) != 0 || api.calls.Load() == calls {
		t.Errorf("manifest of another marketplace was used: skipped %v", rep4.Skipped)
	}
}

// A campaign that existed with some of its bids (an interrupted run) gets the missing ones only.
func TestRunSeedCompletesPartialCampaign(t *testing.T) {
	api := newFakeAPI()
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := smallSeed(srv.URL)
	if rep, err := RunSeed(context.Background(), cfg); err != nil || rep.Stopped != "done" {
		t.Fatalf("%v %s", err, rep)
	}
	total := api.bidCount()
	api.mu.Lock()
	for _, c := range api.campaigns {
		if len(c.bids) > 1 {
			c.bids = c.bids[:1]
		}
	}
	api.mu.Unlock()
	removed := total - api.bidCount()
	if removed == 0 {
		t.Fatal("no campaign with two bids")
	}
	rep, err := RunSeed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BidsCreated != int64(removed) || api.bidCount() != total || rep.CampaignsCreated != 0 {
		t.Errorf("created %d bids (want %d), server %d bids (want %d)", rep.BidsCreated, removed, api.bidCount(), total)
	}
}

func TestRunSeedFailures(t *testing.T) {
	t.Run("unauthorized stops", func(t *testing.T) {
		api := newFakeAPI()
		srv := httptest.NewServer(api)
		defer srv.Close()
		cfg := smallSeed(srv.URL)
		cfg.APIKey = "wrong"
		cfg.Manifest = filepath.Join(t.TempDir(), "m.json")
		rep, err := RunSeed(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, merr := ReadSeedManifest(cfg.Manifest)
		if rep.Stopped != "unauthorized" || rep.Manifest.Complete || merr != nil || m.Complete || len(m.Phases) != 0 || rep.FirstError == "" {
			t.Errorf("stopped %q complete %v manifest %+v %v first error %q", rep.Stopped, rep.Manifest.Complete, m, merr, rep.FirstError)
		}
	})
	t.Run("rejected bids fail the run", func(t *testing.T) {
		api := newFakeAPI()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/bids") {
				api.fail(w, http.StatusUnprocessableEntity, "no")
				return
			}
			api.ServeHTTP(w, r)
		}))
		defer srv.Close()
		cfg := smallSeed(srv.URL)
		cfg.Manifest = filepath.Join(t.TempDir(), "m.json")
		rep, err := RunSeed(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := ReadSeedManifest(cfg.Manifest)
		if rep.Stopped != "failed" || rep.CampaignFailures == 0 || m.Complete || slices.Contains(m.Phases, phaseCampaigns) ||
			!slices.Contains(m.Phases, phaseProducts) || !strings.Contains(rep.FirstError, "422") {
			t.Errorf("stopped %q failures %d phases %v first error %q", rep.Stopped, rep.CampaignFailures, m.Phases, rep.FirstError)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		for _, cfg := range []SeedConfig{{URL: "ftp://x"}, {URL: "http://x", Vendors: -1}, {URL: "http://x", BatchSize: 501}, {URL: "http://x", NameLen: 151}} {
			if _, err := RunSeed(context.Background(), cfg); err == nil {
				t.Errorf("%+v accepted", cfg)
			}
		}
	})
}

func TestReadSeedManifestRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"junk":    `{`,
		"version": `{"planVersion":99,"products":10,"vendors":1,"categories":1,"productIdPrefix":"p-","productIdWidth":9}`,
		"counts":  `{"planVersion":1,"products":0,"vendors":1,"categories":1,"productIdPrefix":"p-","productIdWidth":9}`,
	} {
		p := filepath.Join(dir, name)
		if err := writeFile(p, body); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSeedManifest(p); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := ReadSeedManifest(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }
