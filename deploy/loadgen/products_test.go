package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"
)

type genProduct struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Vendors     []string `json:"vendors"`
	Categories  []string `json:"categories"`
	Brand       struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"brand"`
	ImageURL     string      `json:"imageURL"`
	Price        json.Number `json:"price"`
	Active       bool        `json:"active"`
	QualityScore float64     `json:"quality_score"`
	GTIN         string      `json:"gtin"`
}

// catalogServer records the products it receives; answer decides each
// response (nil: 200).
type catalogServer struct {
	mu     sync.Mutex
	seen   map[string]genProduct
	dups   int
	calls  atomic.Int64
	auth   string
	answer func(call int64, w http.ResponseWriter) bool
}

func (s *catalogServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := s.calls.Add(1)
	if r.Method != http.MethodPut || r.URL.Path != productsPath {
		http.Error(w, "wrong route", http.StatusNotFound)
		return
	}
	s.mu.Lock()
	s.auth = r.Header.Get("Authorization")
	s.mu.Unlock()
	if s.answer != nil && s.answer(call, w) {
		return
	}
	b, _ := io.ReadAll(r.Body)
	var body struct{ Products []genProduct }
	if err := json.Unmarshal(b, &body); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	s.mu.Lock()
	for _, p := range body.Products {
		if _, ok := s.seen[p.ID]; ok {
			s.dups++
		}
		s.seen[p.ID] = p
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"upserted": %d, "warnings": []}`, len(body.Products))
}

func gs1OK(d string) bool {
	sum, w := 0, 3
	for i := len(d) - 2; i >= 0; i-- {
		sum += int(d[i]-'0') * w
		w = 4 - w
	}
	return (10-sum%10)%10 == int(d[len(d)-1]-'0')
}

func TestRunProducts(t *testing.T) {
	srv := &catalogServer{seen: map[string]genProduct{}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	rep, err := RunProducts(context.Background(), ProductsConfig{URL: hs.URL, APIKey: "eca_test", Count: 1234, BatchSize: 100, Concurrency: 3, Start: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.Products != 1234 || rep.OK != 13 || rep.Requests != 13 || rep.Failed != 0 || rep.Statuses[200] != 13 || rep.Stopped != "done" {
		t.Fatalf("report %+v", rep)
	}
	if rep.ProductsPerSec <= 0 || rep.P50 <= 0 || rep.Max < rep.P99 || rep.BodyBytes == 0 {
		t.Fatalf("report rates %+v", rep)
	}
	if len(srv.seen) != 1234 || srv.dups != 0 || srv.auth != "Bearer eca_test" {
		t.Fatalf("server saw %d products, %d repeats, auth %q", len(srv.seen), srv.dups, srv.auth)
	}
	for i := 10; i < 1244; i++ {
		id := fmt.Sprintf("p-%09d", i)
		p, ok := srv.seen[id]
		if !ok {
			t.Fatalf("%s not sent", id)
		}
		if utf8.RuneCountInString(p.Name) != 60 || utf8.RuneCountInString(p.Description) != 500 ||
			strings.HasPrefix(p.Name, " ") || strings.HasSuffix(p.Description, " ") {
			t.Fatalf("%s: name %q (%d), description of %d", id, p.Name, len(p.Name), len(p.Description))
		}
		if len(p.Categories) != 3 || p.Categories[0] == p.Categories[1] || p.Categories[1] == p.Categories[2] || len(p.Vendors) != 1 {
			t.Fatalf("%s: categories %v vendors %v", id, p.Categories, p.Vendors)
		}
		if len(p.GTIN) != 13 || !gs1OK(p.GTIN) {
			t.Fatalf("%s: gtin %q", id, p.GTIN)
		}
		if f, err := p.Price.Float64(); err != nil || f <= 0 || p.QualityScore <= 0 || p.QualityScore > 1 || !p.Active ||
			!strings.HasPrefix(p.ImageURL, "https://") || p.Brand.ID == "" || p.Brand.Name == "" {
			t.Fatalf("%s: %+v", id, p)
		}
	}
	if srv.seen["p-000000010"].Description == srv.seen["p-000000011"].Description {
		t.Error("two products share a description")
	}

	// Deterministic: a second run sends the same products.
	first := srv.seen["p-000000500"]
	srv.seen = map[string]genProduct{}
	if _, err := RunProducts(context.Background(), ProductsConfig{URL: hs.URL, Count: 1, Start: 500}); err != nil {
		t.Fatal(err)
	}
	if srv.seen["p-000000500"].Name != first.Name || srv.seen["p-000000500"].GTIN != first.GTIN {
		t.Fatal("product 500 differs between runs")
	}
}

func TestRunProductsRetriesAndFailures(t *testing.T) {
	srv := &catalogServer{seen: map[string]genProduct{}}
	srv.answer = func(call int64, w http.ResponseWriter) bool {
		switch call {
		case 1, 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		case 3:
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		case 4:
			w.WriteHeader(http.StatusBadRequest) // not retried: the batch fails
			_, _ = io.WriteString(w, `{"errCode":"bad_request"}`)
			return true
		}
		return false
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	rep, err := RunProducts(context.Background(), ProductsConfig{URL: hs.URL, Count: 50, BatchSize: 10, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Throttled != 2 || rep.Retried != 3 || rep.Failed != 1 || rep.Products != 40 || rep.OK != 4 || rep.Requests != 8 ||
		rep.Statuses[429] != 2 || rep.Statuses[503] != 1 || rep.Statuses[400] != 1 || !strings.HasPrefix(rep.FirstError, "HTTP 429") {
		t.Fatalf("report %+v", rep)
	}
	if len(srv.seen) != 40 {
		t.Fatalf("server stored %d", len(srv.seen))
	}

	// A 401 stops the run: every batch would fail the same way.
	srv.calls.Store(0)
	srv.answer = func(int64, http.ResponseWriter) bool { return false }
	unauth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer unauth.Close()
	rep, err = RunProducts(context.Background(), ProductsConfig{URL: unauth.URL, Count: 10_000, BatchSize: 10, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != "unauthorized" || rep.Requests > 4 || rep.Products != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestProductsConfig(t *testing.T) {
	for _, cfg := range []ProductsConfig{
		{URL: "http://x", BatchSize: 501},
		{URL: "http://x", Count: -1},
		{URL: "http://x", NameLen: 151},
		{URL: "http://x", Categories: 10, CategoryPool: 5},
		{URL: "ftp://x"},
		{URL: ""},
	} {
		if _, err := RunProducts(context.Background(), cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	cfg, err := ProductsConfig{URL: "http://x"}.withDefaults()
	if err != nil || cfg.Count != 1_000_000 || cfg.BatchSize != 500 || cfg.NameLen != 60 || cfg.DescriptionLen != 500 || cfg.Categories != 3 {
		t.Fatalf("defaults %+v %v", cfg, err)
	}
	// The report marshals durations as milliseconds.
	b, _ := json.Marshal(ProductsReport{Elapsed: 1500e6, Statuses: map[int]int64{200: 1}})
	if !strings.Contains(string(b), `"elapsed_ms":1500`) || !strings.Contains(string(b), `"statuses":{"200":1}`) {
		t.Fatalf("report JSON %s", b)
	}
}
