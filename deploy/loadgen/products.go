package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ProductsConfig configures RunProducts. Zero values take the documented defaults.
type ProductsConfig struct {
	URL         string // base URL; products go to URL + "/public/v1/catalog-search-service/catalogs/products"
	APIKey      string // advanced API key
	Count       int    // products to upsert, default 1,000,000
	BatchSize   int    // products per request, default 500 (the API's maximum)
	Concurrency int    // requests in flight, default 4
	Start       int    // index of the first product: ids are IDPrefix + index (zero-padded to 9 digits)
	IDPrefix    string // default "p-"

	NameLen        int // characters, default 60
	DescriptionLen int // characters, default 500
	Categories     int // per product, default 3, drawn from CategoryPool ("c-<n>")
	CategoryPool   int // default 2000
	VendorPool     int // vendors ("v-<n>"), one per product, default 1000

	Timeout    time.Duration // per request, default 60s
	MaxRetries int           // per batch, on 429, 503 and transport errors, default 20
	Seed       uint64

	// Other bulk upserts through the same machinery (RunSeed): when item is set, it writes entity i (JSON)
	// instead of the generated product, into {"<listKey>": [...]} bodies sent to path.
	item    func(b []byte, i int) []byte
	path    string
	listKey string
}

// ProductsReport is what RunProducts measured.
type ProductsReport struct {
	Products       int64         `json:"products"`   // products in 2xx answers
	Requests       int64         `json:"requests"`   // requests sent, retries included
	OK             int64         `json:"ok"`         // 2xx answers
	Failed         int64         `json:"failed"`     // batches given up (non-retryable status, or retries exhausted)
	Throttled      int64         `json:"throttled"`  // 429 answers (retried after Retry-After)
	Retried        int64         `json:"retried"`    // retries of any cause
	Statuses       map[int]int64 `json:"statuses"`   // per status; 0 = transport error
	Elapsed        time.Duration `json:"elapsed_ms"` // first send to last answer
	ProductsPerSec float64       `json:"products_per_sec"`
	RequestsPerSec float64       `json:"requests_per_sec"`
	BodyBytes      int64         `json:"body_bytes"` // bytes of request bodies sent (retries included)
	P50            time.Duration `json:"p50_ms"`     // latency of answered requests
	P99            time.Duration `json:"p99_ms"`
	Max            time.Duration `json:"max_ms"`
	FirstError     string        `json:"first_error,omitempty"`
	Stopped        string        `json:"stopped"` // "done", "canceled", or "unauthorized" (a 401/403 stopped the run)

	Count       int `json:"count"`
	BatchSize   int `json:"batch_size"`
	Concurrency int `json:"concurrency"`
}

const productsPath = "/public/v1/catalog-search-service/catalogs/products"

func (cfg ProductsConfig) withDefaults() (ProductsConfig, error) {
	if cfg.Count < 0 || cfg.BatchSize < 0 || cfg.Concurrency < 0 || cfg.Start < 0 || cfg.NameLen < 0 ||
		cfg.DescriptionLen < 0 || cfg.Categories < 0 || cfg.CategoryPool < 0 || cfg.VendorPool < 0 || cfg.Timeout < 0 || cfg.MaxRetries < 0 {
		return cfg, errors.New("loadgen: negative value in ProductsConfig")
	}
	orDefault(&cfg.Count, 1_000_000)
	orDefault(&cfg.BatchSize, 500)
	orDefault(&cfg.Concurrency, 4)
	orDefault(&cfg.NameLen, 60)
	orDefault(&cfg.DescriptionLen, 500)
	orDefault(&cfg.Categories, 3)
	orDefault(&cfg.CategoryPool, 2000)
	orDefault(&cfg.VendorPool, 1000)
	orDefault(&cfg.MaxRetries, 20)
	orDefault(&cfg.Timeout, 60*time.Second)
	if cfg.IDPrefix == "" {
		cfg.IDPrefix = "p-"
	}
	switch {
	case cfg.BatchSize > 500:
		return cfg, fmt.Errorf("loadgen: BatchSize %d above the API's 500", cfg.BatchSize)
	case cfg.NameLen > 150 || cfg.DescriptionLen > 5000:
		return cfg, errors.New("loadgen: NameLen above 150 or DescriptionLen above 5000 would be truncated by the API")
	case cfg.Categories > cfg.CategoryPool:
		return cfg, errors.New("loadgen: more Categories per product than CategoryPool")
	case cfg.Concurrency > 1024:
		return cfg, errors.New("loadgen: Concurrency above 1024")
	}
	return cfg, nil
}

// RunProducts bulk-upserts cfg.Count generated products through PUT .../catalogs/products, BatchSize per
// request, Concurrency requests in flight, and reports the throughput. A 429 is retried after its
// Retry-After delay, a 503 or a transport error after a short backoff, each batch at most MaxRetries
// times; other failures count the batch as failed. Product i is the same in every run with the same
// configuration (ids IDPrefix + zero-padded i), so a second run overwrites the first. The error is non-nil
// only for an invalid configuration.
func RunProducts(ctx context.Context, cfg ProductsConfig) (ProductsReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return ProductsReport{}, err
	}
	base, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return ProductsReport{}, fmt.Errorf("loadgen: URL must be http(s)://host[:port], got %q", cfg.URL)
	}
	target := base.String() + productsPath
	if cfg.path != "" {
		target = base.String() + cfg.path
	}

	tr := newTransport(EventsConfig{Concurrency: cfg.Concurrency, Timeout: cfg.Timeout})
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	gen := newProductGen(cfg)
	batches := (cfg.Count + cfg.BatchSize - 1) / cfg.BatchSize
	var next atomic.Int64
	var fatal atomic.Bool // a 401 or 403: every other batch would fail the same way
	var mu sync.Mutex
	rep := ProductsReport{Statuses: map[int]int64{}, Count: cfg.Count, BatchSize: cfg.BatchSize, Concurrency: cfg.Concurrency}
	var lat []time.Duration
	start := time.Now()
	var lastAnswer atomic.Int64

	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			var local ProductsReport
			local.Statuses = map[int]int64{}
			var llat []time.Duration
			for ctx.Err() == nil && !fatal.Load() {
				b := int(next.Add(1) - 1)
				if b >= batches {
					break
				}
				lo := b * cfg.BatchSize
				hi := min(lo+cfg.BatchSize, cfg.Count)
				buf = gen.batch(buf[:0], cfg.Start+lo, cfg.Start+hi)
				if st := sendBatch(ctx, client, target, cfg, buf, hi-lo, &local, &llat); st == http.StatusUnauthorized || st == http.StatusForbidden {
					fatal.Store(true)
				}
				lastAnswer.Store(int64(time.Since(start)))
			}
			mu.Lock()
			rep.Products += local.Products
			rep.Requests += local.Requests
			rep.OK += local.OK
			rep.Failed += local.Failed
			rep.Throttled += local.Throttled
			rep.Retried += local.Retried
			rep.BodyBytes += local.BodyBytes
			for k, v := range local.Statuses {
				rep.Statuses[k] += v
			}
			if rep.FirstError == "" {
				rep.FirstError = local.FirstError
			}
			lat = append(lat, llat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	rep.Elapsed = time.Duration(lastAnswer.Load())
	switch {
	case ctx.Err() != nil:
		rep.Stopped = "canceled"
	case fatal.Load():
		rep.Stopped = "unauthorized"
	default:
		rep.Stopped = "done"
	}
	if s := rep.Elapsed.Seconds(); s > 0 {
		rep.ProductsPerSec = float64(rep.Products) / s
		rep.RequestsPerSec = float64(rep.Requests) / s
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		rep.P50 = lat[len(lat)/2]
		rep.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
		rep.Max = lat[len(lat)-1]
	}
	return rep, nil
}

// sendBatch puts one batch, retrying throttled and unavailable answers, and returns the last status.
func sendBatch(ctx context.Context, client *http.Client, target string, cfg ProductsConfig, body []byte, n int, rep *ProductsReport, lat *[]time.Duration) int {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			rep.Retried++
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, target, bytes.NewReader(body))
		if err != nil {
			rep.Failed++
			return 0
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "endcap-loadgen/1")
		if cfg.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		}
		rep.Requests++
		rep.BodyBytes += int64(len(body))
		t0 := time.Now()
		resp, err := client.Do(req)
		var wait time.Duration
		status := 0
		var snippet []byte
		if err == nil {
			status = resp.StatusCode
			snippet, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			*lat = append(*lat, time.Since(t0))
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
				wait = time.Duration(s) * time.Second
			}
		}
		rep.Statuses[status]++
		switch {
		case status >= 200 && status < 300:
			rep.OK++
			rep.Products += int64(n)
			return status
		case status == http.StatusTooManyRequests:
			rep.Throttled++
			wait = max(wait, 100*time.Millisecond)
		case status == http.StatusServiceUnavailable || status == 0:
			wait = max(wait, time.Duration(100*(attempt+1))*time.Millisecond)
		default:
			attempt = cfg.MaxRetries // not retryable
		}
		if rep.FirstError == "" {
			if err != nil {
				rep.FirstError = err.Error()
			} else {
				rep.FirstError = "HTTP " + strconv.Itoa(status) + ": " + string(snippet[:min(len(snippet), 300)])
			}
		}
		if attempt >= cfg.MaxRetries || ctx.Err() != nil {
			rep.Failed++
			return status
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// productGen writes product batches. Product i's content depends only on i and the configuration, so it
// is safe for concurrent use (it holds only read-only tables).
type productGen struct {
	cfg   ProductsConfig
	text  []byte // word soup that names and descriptions are cut from
	seed  uint64
	width int
}

func newProductGen(cfg ProductsConfig) *productGen {
	words := [...]string{"organic", "cotton", "shirt", "blue", "large", "steel", "bottle", "coffee", "beans", "roasted",
		"wireless", "headphones", "noise", "cancelling", "leather", "wallet", "running", "shoes", "lightweight", "breathable",
		"kitchen", "knife", "stainless", "garden", "hose", "durable", "pack", "of", "six", "premium", "quality", "with",
		"and", "for", "the", "everyday", "use", "classic", "modern", "design", "soft", "warm", "winter", "jacket", "kids",
		"green", "tea", "loose", "leaf", "smart", "watch", "fitness", "tracker", "ceramic", "mug", "handmade", "italian"}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	var text []byte
	for len(text) < 1<<16+cfg.DescriptionLen+cfg.NameLen {
		text = append(text, words[r.IntN(len(words))]...)
		text = append(text, ' ')
	}
	return &productGen{cfg: cfg, text: text, seed: cfg.Seed, width: 9}
}

// mix is a 64-bit hash of i (splitmix64).
func (g *productGen) mix(i, salt uint64) uint64 {
	z := i*0x9e3779b97f4a7c15 + salt + g.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (g *productGen) appendID(b []byte, i int) []byte {
	b = append(b, g.cfg.IDPrefix...)
	s := strconv.Itoa(i)
	for range g.width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// cut returns n characters of the word soup, starting at a place chosen by h, never ending in a space.
func (g *productGen) cut(h uint64, n int) []byte {
	off := int(h % uint64(len(g.text)-n))
	s := g.text[off : off+n]
	if s[n-1] == ' ' || s[0] == ' ' {
		// Keep the length exact: replace edge spaces with a letter.
		c := append([]byte(nil), s...)
		if c[0] == ' ' {
			c[0] = 'x'
		}
		if c[n-1] == ' ' {
			c[n-1] = 'x'
		}
		return c
	}
	return s
}

// product appends product i as JSON.
func (g *productGen) product(b []byte, i int) []byte {
	u := uint64(i)
	b = append(b, `{"id":"`...)
	b = g.appendID(b, i)
	b = append(b, `","name":"`...)
	b = append(b, g.cut(g.mix(u, 1), g.cfg.NameLen)...)
	b = append(b, `","description":"`...)
	b = append(b, g.cut(g.mix(u, 2), g.cfg.DescriptionLen)...)
	b = append(b, `","vendors":["v-`...)
	b = strconv.AppendUint(b, g.mix(u, 3)%uint64(g.cfg.VendorPool), 10)
	b = append(b, `"],"categories":[`...)
	first := g.mix(u, 4) % uint64(g.cfg.CategoryPool)
	for k := range g.cfg.Categories {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `"c-`...)
		// Distinct categories: consecutive ones from a random start.
		b = strconv.AppendUint(b, (first+uint64(k))%uint64(g.cfg.CategoryPool), 10)
		b = append(b, '"')
	}
	h := g.mix(u, 5)
	b = append(b, `],"brand":{"id":"b-`...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `","name":"Brand `...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `"},"imageURL":"https://cdn.example.com/img/`...)
	b = g.appendID(b, i)
	b = append(b, `.jpg","price":`...)
	cents := 99 + h%100000
	b = strconv.AppendUint(b, cents/100, 10)
	b = append(b, '.')
	b = append(b, byte('0'+cents%100/10), byte('0'+cents%10))
	b = append(b, `,"active":true,"quality_score":0.`...)
	b = strconv.AppendUint(b, 1+h%99, 10)
	b = append(b, `,"gtin":"`...)
	b = appendGTIN13(b, 4000000000000+g.mix(u, 6)%1000000000000/10*10)
	b = append(b, `"}`...)
	return b
}

// appendGTIN13 appends the 12 leading digits of n (a 13-digit number) and their check digit.
func appendGTIN13(b []byte, n uint64) []byte {
	var d [13]byte
	s := strconv.AppendUint(d[:0], n, 10)
	sum := 0
	for k := 0; k < 12; k++ {
		w := 1
		if k%2 == 1 {
			w = 3
		}
		sum += int(s[k]-'0') * w
	}
	s[12] = byte('0' + (10-sum%10)%10)
	return append(b, s...)
}

// batch appends the body of products [lo, hi) (or of the configured items).
func (g *productGen) batch(b []byte, lo, hi int) []byte {
	item, key := g.product, "products"
	if g.cfg.item != nil {
		item, key = g.cfg.item, g.cfg.listKey
	}
	b = append(b, `{"`...)
	b = append(b, key...)
	b = append(b, `":[`...)
	for i := lo; i < hi; i++ {
		if i > lo {
			b = append(b, ',')
		}
		b = item(b, i)
	}
	return append(b, "]}"...)
}

// String is a human-readable summary.
func (r ProductsReport) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "products: %d upserted in %.2fs = %.0f products/s (%.1f requests/s, %d per request, %d in flight)\n",
		r.Products, r.Elapsed.Seconds(), r.ProductsPerSec, r.RequestsPerSec, r.BatchSize, r.Concurrency)
	fmt.Fprintf(&sb, "requests: %d sent, %d ok, %d batches failed, %d throttled (429), %d retries; %.1f MB of bodies\n",
		r.Requests, r.OK, r.Failed, r.Throttled, r.Retried, float64(r.BodyBytes)/1e6)
	keys := make([]int, 0, len(r.Statuses))
	for k := range r.Statuses {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sb.WriteString("statuses:")
	for _, k := range keys {
		fmt.Fprintf(&sb, " %d=%d", k, r.Statuses[k])
	}
	fmt.Fprintf(&sb, "\nlatency: p50 %v, p99 %v, max %v\n", r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond))
	if r.FirstError != "" {
		fmt.Fprintf(&sb, "first error: %s\n", r.FirstError)
	}
	fmt.Fprintf(&sb, "stopped: %s", r.Stopped)
	return sb.String()
}

// MarshalJSON writes durations as milliseconds.
func (r ProductsReport) MarshalJSON() ([]byte, error) {
	type plain ProductsReport
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	statuses := make(map[string]int64, len(r.Statuses))
	for k, v := range r.Statuses {
		statuses[strconv.Itoa(k)] = v
	}
	return json.Marshal(struct {
		plain
		Statuses map[string]int64 `json:"statuses"`
		Elapsed  float64          `json:"elapsed_ms"`
		P50      float64          `json:"p50_ms"`
		P99      float64          `json:"p99_ms"`
		Max      float64          `json:"max_ms"`
	}{plain(r), statuses, ms(r.Elapsed), ms(r.P50), ms(r.P99), ms(r.Max)})
}
