// Package loadgen is Endcap's load generator for POST /v2/events, plus a bare Gin server that serves as the
// comparison baseline (the HTTP + JSON-body floor of the machine).
//
// RunEvents drives Concurrency keep-alive connections against one host, either closed-loop (each worker
// sends its next request as soon as the previous one is answered) or open-loop at a fixed target rate, and
// reports throughput and exact latency percentiles for a measured window that follows a warmup.
//
// The generator is built to cost the server as little CPU as possible on a shared machine: request bodies
// are written with append/strconv into reused per-worker buffers (no encoding/json, no fmt on the hot path),
// one tuned http.Transport is shared by all workers, and latencies are kept in preallocated per-worker slices
// that are merged once at the end.
package loadgen

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// EventsConfig configures RunEvents. Zero values take the documented defaults.
type EventsConfig struct {
	URL         string        // base URL, e.g. http://127.0.0.1:8080 (the generator posts to URL + "/v2/events")
	APIKey      string        // sent as "Authorization: Bearer <APIKey>" when not empty
	Duration    time.Duration // measured window; default 30s; the run stops by itself
	Warmup      time.Duration // default 2s, not counted; negative = no warmup
	Concurrency int           // workers / connections, default 32 (at most 4096)
	Rate        float64       // target requests per second across workers; 0 = closed loop, as fast as the server answers
	BatchSize   int           // events per request, default 50, spread 60/25/5/10 over impressions/clicks/purchases/pageviews, each array ≤ 50 (so at most 200)
	Users       int           // distinct opaqueUserIds ("u-0".."u-<Users-1>", drawn uniformly), default 100000
	Products    int           // distinct product ids ("p-0".., drawn uniformly), default 10000
	Timeout     time.Duration // per request, default 5s
	Seed        int64         // seeds the content (users, products, prices...); event ids are always run-unique
	MaxRequests int64         // 0 = unlimited; bounds the number of requests sent in the whole run (warmup included)
	SlowAfter   time.Duration // a request slower than this counts as slow in Report.Timeline; default 10ms
	// IDPrefix (1–8 lowercase hex digits, optional) replaces the start of every event id's run-random part,
	// so that the events of one run can be counted where they are stored (event_id LIKE '<IDPrefix>%').
	IDPrefix string
	// RecordFailures keeps, in Report.Failures, the key of every request of the run that was not answered
	// 2xx (warmup and abandoned ones included): with the event ids' layout (RequestKey) it tells which
	// stored events came from requests answered 503, answered otherwise, or not answered at all.
	RecordFailures bool
}

const (
	defaultDuration    = 30 * time.Second
	defaultWarmup      = 2 * time.Second
	defaultConcurrency = 32
	defaultBatchSize   = 50
	defaultUsers       = 100000
	defaultProducts    = 10000
	defaultTimeout     = 5 * time.Second
	defaultSlowAfter   = 10 * time.Millisecond

	maxConcurrency = 4096 // the worker number takes 12 bits of the event id
	maxPerArray    = 50   // wire contract: each events array holds at most 50 items
	maxBatchSize   = 4 * maxPerArray
	eventsPath     = "/v2/events"
)

// withDefaults returns cfg with defaults filled in, or an error for values that cannot work.
func (cfg EventsConfig) withDefaults() (EventsConfig, error) {
	if cfg.Duration < 0 || cfg.Concurrency < 0 || cfg.Rate < 0 || cfg.BatchSize < 0 ||
		cfg.Users < 0 || cfg.Products < 0 || cfg.Timeout < 0 || cfg.MaxRequests < 0 || cfg.SlowAfter < 0 {
		return cfg, errors.New("loadgen: negative value in EventsConfig")
	}
	if cfg.Duration == 0 {
		cfg.Duration = defaultDuration
	}
	switch {
	case cfg.Warmup == 0:
		cfg.Warmup = defaultWarmup
	case cfg.Warmup < 0:
		cfg.Warmup = 0
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = defaultConcurrency
	}
	if cfg.Concurrency > maxConcurrency {
		return cfg, fmt.Errorf("loadgen: Concurrency %d above %d", cfg.Concurrency, maxConcurrency)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = defaultBatchSize
	}
	if cfg.BatchSize > maxBatchSize {
		return cfg, fmt.Errorf("loadgen: BatchSize %d above %d (4 arrays of at most %d)", cfg.BatchSize, maxBatchSize, maxPerArray)
	}
	if cfg.Users == 0 {
		cfg.Users = defaultUsers
	}
	if cfg.Products == 0 {
		cfg.Products = defaultProducts
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.SlowAfter == 0 {
		cfg.SlowAfter = defaultSlowAfter
	}
	if err := checkIDPrefix(cfg.IDPrefix); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// checkIDPrefix accepts "" or 1–8 lowercase hex digits (the first group of a UUID-shaped id).
func checkIDPrefix(p string) error {
	if len(p) > 8 {
		return fmt.Errorf("loadgen: id prefix %q longer than 8 hex digits", p)
	}
	for i := 0; i < len(p); i++ {
		if !strings.ContainsRune(hexDigits, rune(p[i])) {
			return fmt.Errorf("loadgen: id prefix %q is not lowercase hex digits", p)
		}
	}
	return nil
}

// targetURL parses base and appends path.
func targetURL(base, path string) (*url.URL, error) {
	if base == "" {
		return nil, errors.New("loadgen: empty URL")
	}
	u, err := url.Parse(strings.TrimRight(base, "/") + path)
	if err != nil {
		return nil, fmt.Errorf("loadgen: bad URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("loadgen: URL %q must be http(s)://host[:port]", base)
	}
	return u, nil
}

// mix is the share of each kind in a batch: impressions, clicks, purchases, pageviews.
var mix = [4]float64{0.60, 0.25, 0.05, 0.10}

// splitBatch spreads n events over the four kinds by the largest-remainder method (so the counts add up
// to n and follow the mix as closely as integers allow), then moves any excess above 50 to the kinds that
// still have room, in mix order.
func splitBatch(n int) [4]int {
	var out [4]int
	var rem [4]float64
	used := 0
	for i, w := range mix {
		x := w * float64(n)
		out[i] = int(x)
		rem[i] = x - float64(out[i])
		used += out[i]
	}
	for ; used < n; used++ {
		best := 0
		for i := 1; i < 4; i++ {
			if rem[i] > rem[best]+1e-9 {
				best = i
			}
		}
		out[best]++
		rem[best] = -1
	}
	excess := 0
	for i := range out {
		if out[i] > maxPerArray {
			excess += out[i] - maxPerArray
			out[i] = maxPerArray
		}
	}
	for i := 0; excess > 0 && i < 4; i++ {
		room := maxPerArray - out[i]
		if room > excess {
			room = excess
		}
		out[i] += room
		excess -= room
	}
	return out
}

// orDefault sets *v to d when it is the zero value (a setting left out).
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
