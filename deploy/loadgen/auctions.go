package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	auctionsPath      = "/v2/auctions"
	maxAuctionIDs     = 10000 // wire contract: products.ids has 1–10000 items
	maxAuctionSlots   = 40
	maxAuctionsPerReq = 5
	maxResolvedBidID  = 200
	defaultAuctionIDs = 500
	defaultSlots      = 5
	defaultBidShare   = 0.25
)

// AuctionsConfig configures RunAuctions. Zero values take the documented defaults unless said otherwise.
type AuctionsConfig struct {
	URL         string        // base URL; the generator posts to URL + "/v2/auctions"
	APIKey      string        // marketplace key, sent as "Authorization: Bearer <APIKey>" when not empty
	Duration    time.Duration // measured window, default 30s
	Warmup      time.Duration // default 2s, not counted; negative = no warmup
	Concurrency int           // workers / connections, default 32
	Rate        float64       // requests per second (open loop); 0 = closed loop
	Timeout     time.Duration // per request, default 5s
	MaxRequests int64         // 0 = unlimited
	SlowAfter   time.Duration // a request slower than this counts as slow in Report.Timeline; default 10ms
	Seed        int64         // seeds the drawing of ids

	IDs      int // product ids per auction, default 500 (1–10000, at most the manifest's product count)
	Slots    int // slots per auction, default 5 (1–40)
	Auctions int // auctions per request, default 1 (1–5)

	// Manifest is the seeded marketplace (RunSeed): the product id space and, rebuilt from it, the products
	// with a product bid. nil: the marketplace the default SeedConfig builds.
	Manifest *SeedManifest
	// BidShare is the share of ids drawn from the products with a product bid; the others are drawn
	// uniformly from every product (some of which have bids too). Taken as is: 0 = uniform only.
	BidShare float64
	// Zipf, when > 1, draws the ids that BidShare does not by popularity instead of uniformly: product
	// rank r (ranks scattered over the id space) with probability ∝ 1/r^Zipf, as the products of
	// search and category pages are (a few appear in many auctions). 0: uniform.
	Zipf float64
	// QualityScores adds products.qualityScores (0.01–1.00) to every auction.
	QualityScores bool
	// CategoryShare and QueryShare are the shares of auctions that also carry a category ({"id": "c-N"}) or a
	// searchQuery (a keyword of the manifest); at most one of the two per auction. Taken as is (0 = none).
	CategoryShare, QueryShare float64
	// Shoppers, when > 0, gives every auction an opaqueUserId drawn uniformly from "u-0".."u-<Shoppers-1>"
	// (what frequency caps count: a seed with CappedPercent makes the auction read the shopper's counts).
	// 0: no opaqueUserId.
	Shoppers int
	// Check decodes every measured 2xx answer with encoding/json and checks it against the contract
	// (one result per auction, ranks 1.., at most Slots winners, winner ids among the auction's ids,
	// resolvedBidId URL-safe base64 under 200 characters, campaignId set). Without it answers are only
	// scanned for their results and winners (cheaper on a shared machine).
	Check bool
}

func (cfg AuctionsConfig) withDefaults() (AuctionsConfig, error) {
	if cfg.IDs < 0 || cfg.Slots < 0 || cfg.Auctions < 0 || cfg.BidShare < 0 || cfg.CategoryShare < 0 || cfg.QueryShare < 0 || cfg.Shoppers < 0 {
		return cfg, errors.New("loadgen: negative value in AuctionsConfig")
	}
	if cfg.IDs == 0 {
		cfg.IDs = defaultAuctionIDs
	}
	if cfg.Slots == 0 {
		cfg.Slots = defaultSlots
	}
	if cfg.Auctions == 0 {
		cfg.Auctions = 1
	}
	if cfg.Manifest == nil {
		m := DefaultSeedManifest()
		cfg.Manifest = &m
	}
	m := cfg.Manifest
	switch {
	case cfg.IDs > maxAuctionIDs:
		return cfg, fmt.Errorf("loadgen: IDs %d above the contract's %d", cfg.IDs, maxAuctionIDs)
	case cfg.Slots > maxAuctionSlots:
		return cfg, fmt.Errorf("loadgen: Slots %d above the contract's %d", cfg.Slots, maxAuctionSlots)
	case cfg.Auctions > maxAuctionsPerReq:
		return cfg, fmt.Errorf("loadgen: Auctions %d above the contract's %d per request", cfg.Auctions, maxAuctionsPerReq)
	case cfg.BidShare > 1 || cfg.CategoryShare+cfg.QueryShare > 1:
		return cfg, errors.New("loadgen: BidShare above 1, or CategoryShare + QueryShare above 1")
	case m.Products < 1 || m.ProductIDPrefix == "" || m.ProductIDWidth < 1 || m.Categories < 1:
		return cfg, errors.New("loadgen: the manifest has no product id space")
	case cfg.IDs > m.Products:
		return cfg, fmt.Errorf("loadgen: %d ids per auction but only %d products in the manifest", cfg.IDs, m.Products)
	case cfg.QueryShare > 0 && len(m.Keywords) == 0:
		return cfg, errors.New("loadgen: QueryShare needs keywords in the manifest")
	}
	return cfg, nil
}

// DefaultSeedManifest is the manifest of the marketplace the default SeedConfig builds (no phase done).
func DefaultSeedManifest() SeedManifest {
	cfg, _ := SeedConfig{}.withDefaults()
	p := newSeedPlan(cfg)
	return SeedManifest{
		PlanVersion: seedPlanVersion, Seed: cfg.Seed, ProductIDPrefix: seedProductPrefix, ProductIDWidth: seedProductWidth,
		ProductIDExample: seedProductPrefix + strings.Repeat("0", seedProductWidth),
		Products:         cfg.Products, Vendors: cfg.Vendors, Categories: cfg.Categories, Campaigns: cfg.Campaigns,
		NameLen: cfg.NameLen, DescriptionLen: cfg.DescriptionLen, Keywords: searchTerms[:],
		ProductsWithBids: len(p.biddedProducts()),
	}
}

// AuctionsReport is what RunAuctions measured: the Report of the HTTP run (Events counts auctions) and
// what the answers held. Results, winners and the rest count measured 2xx answers only.
type AuctionsReport struct {
	Report
	Results           int64   // auction results read
	Winners           int64   // winners in them
	WinnersPerAuction float64 // Winners / Results
	EmptyAuctions     int64   // results without winners and without error (only with Check)
	AuctionErrors     int64   // results with "error": true
	BadAnswers        int64   // 2xx answers that break the contract (a scan or, with Check, the full check)
	FirstBadAnswer    string  // what was wrong with the first of them, and the start of its body

	IDsPerAuction      int
	Slots              int
	AuctionsPerRequest int
	BidShare           float64
	Checked            bool
}

type auctionsReportJSON struct {
	Requests          int64            `json:"requests"`
	OK                int64            `json:"ok"`
	Failed            int64            `json:"failed"`
	Statuses          map[string]int64 `json:"statuses"`
	Auctions          int64            `json:"auctions"`
	Elapsed           float64          `json:"elapsed_ms"`
	AuctionsPerSec    float64          `json:"auctions_per_sec"`
	RequestsPerSec    float64          `json:"requests_per_sec"`
	P50               float64          `json:"p50_ms"`
	P90               float64          `json:"p90_ms"`
	P99               float64          `json:"p99_ms"`
	P999              float64          `json:"p999_ms"`
	Max               float64          `json:"max_ms"`
	Mean              float64          `json:"mean_ms"`
	LatencyExact      bool             `json:"latency_exact"`
	FirstError        string           `json:"first_error,omitempty"`
	Results           int64            `json:"results"`
	Winners           int64            `json:"winners"`
	WinnersPerAuction float64          `json:"winners_per_auction"`
	EmptyAuctions     int64            `json:"empty_auctions"`
	AuctionErrors     int64            `json:"auction_errors"`
	BadAnswers        int64            `json:"bad_answers"`
	FirstBadAnswer    string           `json:"first_bad_answer,omitempty"`
	WarmupRequests    int64            `json:"warmup_requests"`
	Abandoned         int64            `json:"abandoned"`
	Stopped           string           `json:"stopped"`
	Concurrency       int              `json:"concurrency"`
	TargetRate        float64          `json:"target_rate"`
	Unsent            int64            `json:"unsent"`
	IDsPerAuction     int              `json:"ids_per_auction"`
	Slots             int              `json:"slots"`
	AuctionsPerReq    int              `json:"auctions_per_request"`
	BidShare          float64          `json:"bid_share"`
	Checked           bool             `json:"checked"`
	Timeline          []secondJSON     `json:"timeline,omitempty"`
	MeasureStart      time.Time        `json:"measure_start"`
}

// MarshalJSON writes the report with durations as milliseconds (the names of Report's JSON, with
// auctions in place of events).
func (r AuctionsReport) MarshalJSON() ([]byte, error) {
	j := r.Report.toJSON()
	return json.Marshal(auctionsReportJSON{
		Requests: j.Requests, OK: j.OK, Failed: j.Failed, Statuses: j.Statuses, Auctions: j.Events,
		Elapsed: j.Elapsed, AuctionsPerSec: j.EventsPerSec, RequestsPerSec: j.RequestsPerSec,
		P50: j.P50, P90: j.P90, P99: j.P99, P999: j.P999, Max: j.Max, Mean: j.Mean, LatencyExact: j.LatencyExact,
		FirstError: j.FirstError, Results: r.Results, Winners: r.Winners, WinnersPerAuction: r.WinnersPerAuction,
		EmptyAuctions: r.EmptyAuctions, AuctionErrors: r.AuctionErrors, BadAnswers: r.BadAnswers,
		FirstBadAnswer: r.FirstBadAnswer, WarmupRequests: j.WarmupRequests, Abandoned: j.Abandoned,
		Stopped: j.Stopped, Concurrency: j.Concurrency, TargetRate: j.TargetRate, Unsent: j.Unsent,
		IDsPerAuction: r.IDsPerAuction, Slots: r.Slots, AuctionsPerReq: r.AuctionsPerRequest,
		BidShare: r.BidShare, Checked: r.Checked, Timeline: j.Timeline, MeasureStart: j.MeasureStart,
	})
}

// String is a human-readable multi-line summary.
func (r AuctionsReport) String() string {
	var b strings.Builder
	mode := "closed loop"
	if r.TargetRate > 0 {
		mode = fmt.Sprintf("open loop at %.0f req/s", r.TargetRate)
	}
	fmt.Fprintf(&b, "POST /v2/auctions: %s, concurrency %d, %d auction(s)/request, %d ids, %d slots, bid share %.2f, measured %.3fs (stopped: %s)\n",
		mode, r.Concurrency, r.AuctionsPerRequest, r.IDsPerAuction, r.Slots, r.BidShare, r.Elapsed.Seconds(), r.Stopped)
	fmt.Fprintf(&b, "  requests  %d (ok %d, failed %d)  %.1f req/s, %.1f auctions/s\n", r.Requests, r.OK, r.Failed, r.RequestsPerSec, r.EventsPerSec)
	r.writeStatuses(&b)
	r.writeLatency(&b)
	empty := ""
	if r.Checked {
		empty = fmt.Sprintf(", %d empty", r.EmptyAuctions)
	}
	fmt.Fprintf(&b, "  answers   %d results, %d winners (%.2f per auction)%s, %d auction errors, %d bad answers\n",
		r.Results, r.Winners, r.WinnersPerAuction, empty, r.AuctionErrors, r.BadAnswers)
	fmt.Fprintf(&b, "  run       warmup requests %d, abandoned at stop %d\n", r.WarmupRequests, r.Abandoned)
	if r.Unsent > 0 {
		fmt.Fprintf(&b, "  WARNING   %d scheduled requests were never sent: the target rate was not held\n", r.Unsent)
	}
	if r.FirstError != "" {
		fmt.Fprintf(&b, "  first error: %s\n", r.FirstError)
	}
	if r.FirstBadAnswer != "" {
		fmt.Fprintf(&b, "  first bad answer: %s\n", r.FirstBadAnswer)
	}
	return b.String()
}

// RunAuctions posts generated listings auctions to cfg.URL + "/v2/auctions" with RunEvents' machinery
// (same open/closed loop, same latency from the scheduled send time, same report) and reads every answer.
// The error is non-nil only for an invalid configuration.
func RunAuctions(ctx context.Context, cfg AuctionsConfig) (AuctionsReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return AuctionsReport{}, err
	}
	base, err := EventsConfig{URL: cfg.URL, APIKey: cfg.APIKey, Duration: cfg.Duration, Warmup: cfg.Warmup,
		Concurrency: cfg.Concurrency, Rate: cfg.Rate, Timeout: cfg.Timeout, MaxRequests: cfg.MaxRequests, SlowAfter: cfg.SlowAfter}.withDefaults()
	if err != nil {
		return AuctionsReport{}, err
	}
	sp := newIDSpace(*cfg.Manifest)
	var bodies []*auctionBody // one per worker; runLoad creates them before it starts the workers
	rep, err := runLoad(ctx, base, loadTarget{
		path:     auctionsPath,
		readBody: true,
		newBody: func(worker int, _ [8]byte) requestBody {
			ab := newAuctionBody(&cfg, sp, worker)
			bodies = append(bodies, ab)
			return ab
		},
	})
	if err != nil {
		return AuctionsReport{}, err
	}
	rep.BatchSize = cfg.Auctions
	out := AuctionsReport{Report: rep, IDsPerAuction: cfg.IDs, Slots: cfg.Slots, AuctionsPerRequest: cfg.Auctions,
		BidShare: cfg.BidShare, Checked: cfg.Check}
	for _, ab := range bodies {
		st := &ab.st
		out.Results += st.results
		out.Winners += st.winners
		out.EmptyAuctions += st.empty
		out.AuctionErrors += st.errors
		out.BadAnswers += st.bad
		if out.FirstBadAnswer == "" {
			out.FirstBadAnswer = st.firstBad
		}
	}
	if out.Results > 0 {
		out.WinnersPerAuction = float64(out.Winners) / float64(out.Results)
	}
	return out, nil
}

// idSpace is the product id space of a manifest, shared read-only by the workers.
type idSpace struct {
	prefix     string
	width      int
	count      int
	bidded     []int32 // products with a product bid, sorted
	categories int
	keywords   []string
}

func newIDSpace(m SeedManifest) *idSpace {
	sp := &idSpace{prefix: m.ProductIDPrefix, width: m.ProductIDWidth, count: m.Products, categories: m.Categories, keywords: m.Keywords}
	if m.Vendors > 0 && m.Campaigns > 0 {
		sp.bidded = planOf(m).biddedProducts()
	}
	return sp
}

func (sp *idSpace) appendID(b []byte, i int32) []byte {
	b = append(b, sp.prefix...)
	var d [12]byte
	s := strconv.AppendInt(d[:0], int64(i), 10)
	for range sp.width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// parseID is the index of a product id of the space, or -1.
func (sp *idSpace) parseID(id string) int32 {
	rest, ok := strings.CutPrefix(id, sp.prefix)
	if !ok || len(rest) < sp.width {
		return -1
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 || n >= int64(sp.count) || string(sp.appendID(nil, int32(n))) != id {
		return -1
	}
	return int32(n)
}

// auctionStats are a worker's counts of what the answers held.
type auctionStats struct {
	results, winners, empty, errors, bad int64
	firstBad                             string
}

// auctionBody writes /v2/auctions bodies (one per worker, not safe for concurrent use) and reads their
// answers. Deterministic for a given Seed and worker.
type auctionBody struct {
	cfg  *AuctionsConfig
	sp   *idSpace
	rng  *rand.Rand
	zipf *rand.Zipf // nil: uniform
	seen idSet      // the ids of the auction being written
	last [][]int32  // the ids of each auction of the last body, sorted (Check only)
	st   auctionStats
}

func newAuctionBody(cfg *AuctionsConfig, sp *idSpace, worker int) *auctionBody {
	a := &auctionBody{
		cfg:  cfg,
		sp:   sp,
		rng:  rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(worker)+0x5851f42d4c957f2d)),
		seen: newIDSet(cfg.IDs),
	}
	if cfg.Zipf > 1 {
		a.zipf = rand.NewZipf(a.rng, cfg.Zipf, 1, uint64(sp.count-1))
	}
	if cfg.Check {
		a.last = make([][]int32, cfg.Auctions)
		for k := range a.last {
			a.last[k] = make([]int32, 0, cfg.IDs)
		}
	}
	return a
}

func (a *auctionBody) events() int { return a.cfg.Auctions }

func (a *auctionBody) sizeHint() int {
	per := len(a.sp.prefix) + max(a.sp.width, 10) + 3
	if a.cfg.QualityScores {
		per += 5
	}
	head := 160
	if a.cfg.Shoppers > 0 {
		head += len(`,"opaqueUserId":"u-"`) + 20
	}
	return 64 + a.cfg.Auctions*(head+a.cfg.IDs*per)
}

// draw picks a product not yet in the current auction.
func (a *auctionBody) draw() int32 {
	var i int32
	if len(a.sp.bidded) > 0 && a.cfg.BidShare > 0 && a.rng.Float64() < a.cfg.BidShare {
		i = a.sp.bidded[a.rng.IntN(len(a.sp.bidded))]
	} else if a.zipf != nil {
		// Popularity rank → product: a fixed odd multiplier modulo count scatters the popular
		// products over the id space (so they are not all p-0000000…).
		r := a.zipf.Uint64()
		i = int32((r*2654435761 + 12345) % uint64(a.sp.count))
	} else {
		i = int32(a.rng.IntN(a.sp.count))
	}
	// Already drawn: take the next free index (IDs ≤ count, so there is one). Rare when IDs ≪ count.
	for !a.seen.add(i) {
		if i++; int(i) >= a.sp.count {
			i = 0
		}
	}
	return i
}

// idSet is a set of at most n product indices, emptied in O(1): an open-addressing table at most half
// full whose slots count only when stamped with the current generation (a map costs 3× the body here).
type idSet struct {
	keys  []int32
	stamp []uint32
	gen   uint32
	mask  uint32
}

func newIDSet(n int) idSet {
	size := 16
	for size < 2*n {
		size *= 2
	}
	return idSet{keys: make([]int32, size), stamp: make([]uint32, size), gen: 1, mask: uint32(size - 1)}
}

// reset empties the set.
func (s *idSet) reset() {
	if s.gen++; s.gen == 0 { // wrapped: old stamps could match again
		clear(s.stamp)
		s.gen = 1
	}
}

// add inserts i and reports whether it was absent.
func (s *idSet) add(i int32) bool {
	h := (uint32(i) * 0x9e3779b1) & s.mask
	for s.stamp[h] == s.gen {
		if s.keys[h] == i {
			return false
		}
		h = (h + 1) & s.mask
	}
	s.keys[h], s.stamp[h] = i, s.gen
	return true
}

// build appends one request body to dst[:0].
func (a *auctionBody) build(dst []byte, _ time.Time) []byte {
	cfg := a.cfg
	dst = append(dst[:0], `{"auctions":[`...)
	for k := range cfg.Auctions {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"listings","slots":`...)
		dst = strconv.AppendInt(dst, int64(cfg.Slots), 10)
		dst = append(dst, `,"products":{"ids":[`...)
		a.seen.reset()
		if a.last != nil {
			a.last[k] = a.last[k][:0]
		}
		for n := range cfg.IDs {
			i := a.draw()
			if a.last != nil {
				a.last[k] = append(a.last[k], i)
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = a.sp.appendID(dst, i)
			dst = append(dst, '"')
		}
		if a.last != nil {
			slices.Sort(a.last[k])
		}
		if cfg.QualityScores {
			dst = append(dst, `],"qualityScores":[`...)
			for n := range cfg.IDs {
				if n > 0 {
					dst = append(dst, ',')
				}
				dst = appendScore(dst, 1+a.rng.IntN(100))
			}
		}
		dst = append(dst, "]}"...)
		if r := a.rng.Float64(); r < cfg.CategoryShare {
			dst = append(dst, `,"category":{"id":"c-`...)
			dst = strconv.AppendInt(dst, int64(a.rng.IntN(a.sp.categories)), 10)
			dst = append(dst, `"}`...)
		} else if r < cfg.CategoryShare+cfg.QueryShare {
			dst = append(dst, `,"searchQuery":"`...)
			dst = append(dst, a.sp.keywords[a.rng.IntN(len(a.sp.keywords))]...)
			dst = append(dst, '"')
		}
		if cfg.Shoppers > 0 {
			dst = append(dst, `,"opaqueUserId":"u-`...)
			dst = strconv.AppendInt(dst, int64(a.rng.IntN(cfg.Shoppers)), 10)
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// inspect reads the answer of the last body built.
func (a *auctionBody) inspect(body []byte) {
	if a.cfg.Check {
		if why := a.check(body); why != "" {
			a.bad(why, body)
		}
		return
	}
	results, winners, errs := scanAnswer(body)
	a.st.results += int64(results)
	a.st.winners += int64(winners)
	a.st.errors += int64(errs)
	if results != a.cfg.Auctions {
		a.bad(fmt.Sprintf("%d results for %d auctions", results, a.cfg.Auctions), body)
	}
}

func (a *auctionBody) bad(why string, body []byte) {
	a.st.bad++
	if a.st.firstBad == "" {
		a.st.firstBad = fmt.Sprintf("%s: %.300s", why, body)
	}
}

var (
	keyResultType    = []byte(`"resultType"`)
	keyResolvedBidID = []byte(`"resolvedBidId"`)
	keyError         = []byte(`"error"`)
)

// scanAnswer counts, without decoding, the results of an answer (its "resultType" keys), the winners (its
// "resolvedBidId" keys) and the results with "error": true. Key names cannot appear inside the answer's
// string values here (ids and resolved bid ids have no quotes), so counting keys is exact for the contract's
// shape; Check does the full decoding.
func scanAnswer(b []byte) (results, winners, errs int) {
	results = countKey(b, keyResultType)
	winners = countKey(b, keyResolvedBidID)
	for rest := b; ; {
		i := bytes.Index(rest, keyError)
		if i < 0 {
			break
		}
		rest = rest[i+len(keyError):]
		v, ok := afterColon(rest)
		if ok && bytes.HasPrefix(v, []byte("true")) {
			errs++
		}
	}
	return results, winners, errs
}

// countKey counts the occurrences of key followed by a colon (so that a key, not a string value).
func countKey(b, key []byte) int {
	n := 0
	for {
		i := bytes.Index(b, key)
		if i < 0 {
			return n
		}
		b = b[i+len(key):]
		if _, ok := afterColon(b); ok {
			n++
		}
	}
}

// afterColon skips white space, a colon and white space, and returns the rest.
func afterColon(b []byte) ([]byte, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != ':' {
		return nil, false
	}
	return bytes.TrimLeft(b[1:], " \t\r\n"), true
}

type auctionAnswer struct {
	Results *[]struct {
		ResultType string `json:"resultType"`
		Winners    *[]struct {
			Rank          int    `json:"rank"`
			Type          string `json:"type"`
			ID            string `json:"id"`
			ResolvedBidID string `json:"resolvedBidId"`
			CampaignID    string `json:"campaignId"`
		} `json:"winners"`
		Error *bool `json:"error"`
	} `json:"results"`
}

// check decodes an answer and checks it against the contract and the request; it counts results,
// winners, empty results and errors, and returns what is wrong ("" if nothing).
func (a *auctionBody) check(body []byte) string {
	var ans auctionAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return "not the answer's JSON: " + err.Error()
	}
	if ans.Results == nil {
		return "no results"
	}
	res := *ans.Results
	if len(res) != a.cfg.Auctions {
		return fmt.Sprintf("%d results for %d auctions", len(res), a.cfg.Auctions)
	}
	for k, r := range res {
		a.st.results++
		switch {
		case r.ResultType != "listings":
			return fmt.Sprintf("results[%d].resultType %q, want listings", k, r.ResultType)
		case r.Error == nil:
			return fmt.Sprintf("results[%d].error missing", k)
		case r.Winners == nil:
			return fmt.Sprintf("results[%d].winners missing", k)
		}
		ws := *r.Winners
		a.st.winners += int64(len(ws))
		switch {
		case *r.Error && len(ws) > 0:
			return fmt.Sprintf("results[%d] has error true and %d winners", k, len(ws))
		case *r.Error:
			a.st.errors++
		case len(ws) == 0:
			a.st.empty++
		case len(ws) > a.cfg.Slots:
			return fmt.Sprintf("results[%d] has %d winners for %d slots", k, len(ws), a.cfg.Slots)
		}
		for n, w := range ws {
			at := fmt.Sprintf("results[%d].winners[%d]", k, n)
			switch {
			case w.Rank != n+1:
				return fmt.Sprintf("%s.rank %d, want %d", at, w.Rank, n+1)
			case w.Type != "product":
				return fmt.Sprintf("%s.type %q, want product", at, w.Type)
			case w.CampaignID == "":
				return at + ".campaignId missing"
			case !validResolvedBidID(w.ResolvedBidID):
				return fmt.Sprintf("%s.resolvedBidId %q is not 1–%d characters of URL-safe base64", at, w.ResolvedBidID, maxResolvedBidID)
			}
			i := a.sp.parseID(w.ID)
			if _, found := slices.BinarySearch(a.last[k], i); i < 0 || !found {
				return fmt.Sprintf("%s.id %q was not among the auction's ids", at, w.ID)
			}
		}
	}
	return ""
}

// validResolvedBidID: URL-safe base64 without padding, 1–200 characters.
func validResolvedBidID(s string) bool {
	if s == "" || len(s) > maxResolvedBidID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
