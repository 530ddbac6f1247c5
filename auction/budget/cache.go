package budget

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/telemetry"
)

// Cache defaults and limits.
const (
	DefaultRefresh = time.Second
	DefaultTimeout = time.Second
	// IdleAfter: a marketplace no Spend call asked for in this long is dropped
	// from the cache (and no longer read from Redis).
	IdleAfter = 10 * time.Minute
	// scanCount is the COUNT hint of each HSCAN: how many fields Redis returns
	// per round trip of a large hash (a small hash comes back whole at once).
	scanCount = 1000
	// parallelLoads is how many marketplaces one refresh pass loads at once.
	parallelLoads = 8
)

// Options configure a Cache.
type Options struct {
	// Refresh is the interval between refresh passes (default 1s).
	Refresh time.Duration
	// Timeout bounds the Redis reads of one marketplace in a pass (default 1s).
	Timeout time.Duration
	// Log receives refresh failures and recoveries (default: discarded).
	Log *slog.Logger
}

// Cache is an in-memory copy of the spend in Redis, for the auction's hot
// path. Spend reads it without touching Redis; Run refreshes it every
// Options.Refresh. It is safe for concurrent use.
type Cache struct {
	rdb  redis.UniversalClient
	opts Options
	log  *slog.Logger
	now  func() time.Time // the refresh clock; tests replace it

	reg  atomic.Pointer[registry] // copy-on-write; written under regMu
	regM sync.Mutex
	pass sync.Mutex    // one refresh pass at a time
	kick chan struct{} // a marketplace was registered: refresh now
}

// registry is the set of cached marketplaces by id. It is never modified once
// published; registration and expiry publish a new one.
type registry struct{ m map[string]*market }

// market is one cached marketplace.
type market struct {
	id       string
	loc      atomic.Pointer[time.Location] // its time zone, as last asked with
	lastUsed atomic.Int64                  // unix seconds of the latest Spend call
	since    time.Time                     // when it was registered (refresh clock)
	snap     atomic.Pointer[snapshot]      // nil until the first successful load
	failing  atomic.Bool                   // the last load failed (log transitions only)
}

// snapshot is one marketplace's spend as read from Redis at loaded.
type snapshot struct {
	day        string    // the local day whose hash was read, YYYY-MM-DD
	zone       string    // the name of the time zone day is in
	start, end time.Time // that local day is [start, end)
	daySpend   map[string]int64
	total      map[string]int64
	loaded     time.Time // refresh clock at the start of the load
}

// NewCache returns a cache reading from rdb. Call Run to keep it fresh.
func NewCache(rdb redis.UniversalClient, o Options) *Cache {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Cache{rdb: rdb, opts: o, log: log, now: time.Now, kick: make(chan struct{}, 1)}
	c.reg.Store(&registry{m: map[string]*market{}})
	return c
}

// Spend returns campaignID's spend in marketplace mp: of the local day (in
// loc, the marketplace's time zone; nil means UTC) that holds now, and of all
// time, in micro-units, as of the last refresh. It never blocks on Redis and
// does not allocate.
//
// When a charge of the campaign was refused for its daily budget today (or
// for its total budget, ever: docs/budgets.md, "The cap"), day (or total)
// is at least the spend that charge would have made, which is above the
// budget it was refused for: the auction then sees the campaign at its
// budget, although its spend stays below it, and stops serving it until
// the budget is raised above that (or the local day ends).
//
// A campaign with no spend reads 0. A marketplace the cache does not hold
// yet reads 0 for every campaign; the call registers it (with loc) and wakes
// the refresh loop, which loads it at once. When now falls in another local
// day than the one last loaded (just after midnight, until the next refresh),
// day spend reads 0. now also marks mp as in use: a marketplace not asked for
// in IdleAfter is dropped.
func (c *Cache) Spend(mp string, loc *time.Location, campaignID string, now time.Time) (day, total int64) {
	loc = orUTC(loc)
	m := c.reg.Load().m[mp]
	if m == nil {
		c.register(mp, loc, now)
		return 0, 0
	}
	m.touch(loc, now)
	s := m.snap.Load()
	if s == nil {
		return 0, 0
	}
	if s.holds(now, loc) {
		day = s.daySpend[campaignID]
	}
	return day, s.total[campaignID]
}

// Register adds mp (in time zone loc; nil means UTC) to the cache ahead of
// the first Spend call, so that a RefreshNow before serving loads it. It
// counts as a use of mp. Registering a cached marketplace updates its zone.
func (c *Cache) Register(mp string, loc *time.Location) {
	loc, now := orUTC(loc), c.now()
	if m := c.reg.Load().m[mp]; m != nil {
		m.touch(loc, now)
		return
	}
	c.register(mp, loc, now)
}

// Age is how old mp's snapshot is (refresh clock), and false when the cache
// holds no snapshot of mp (never loaded, or not registered).
func (c *Cache) Age(mp string) (time.Duration, bool) {
	m := c.reg.Load().m[mp]
	if m == nil {
		return 0, false
	}
	s := m.snap.Load()
	if s == nil {
		return 0, false
	}
	return c.now().Sub(s.loaded), true
}

// Run refreshes the cache every Options.Refresh, and at once when a new
// marketplace is registered, until ctx ends; it then returns ctx's error.
// Failures are logged and counted, and leave the last snapshot in place.
func (c *Cache) Run(ctx context.Context) error {
	t := time.NewTicker(c.opts.Refresh)
	defer t.Stop()
	for {
		_ = c.RefreshNow(ctx) // logged and counted per marketplace
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-c.kick:
		}
	}
}

// RefreshNow runs one refresh pass: it drops marketplaces idle for
// IdleAfter, then loads every other one's spend of its current local day and
// all-time spend, each bounded by Options.Timeout, and swaps the new
// snapshots in. A marketplace that fails keeps its last snapshot; the errors
// are returned joined.
func (c *Cache) RefreshNow(ctx context.Context) error {
	c.pass.Lock()
	defer c.pass.Unlock()
	began := c.now()
	markets := c.dropIdle(began)
	errs := make([]error, len(markets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelLoads)
	for i, m := range markets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = c.load(ctx, m, began)
		})
	}
	wg.Wait()
	telemetry.BudgetRefreshDuration.Observe(c.now().Sub(began).Seconds())
	c.observeAges(markets)
	return errors.Join(errs...)
}

// register publishes a registry with mp added, unless it already is.
func (c *Cache) register(mp string, loc *time.Location, now time.Time) {
	c.regM.Lock()
	defer c.regM.Unlock()
	old := c.reg.Load().m
	if m := old[mp]; m != nil { // registered meanwhile
		m.touch(loc, now)
		return
	}
	m := &market{id: mp, since: c.now()}
	m.loc.Store(loc)
	m.lastUsed.Store(now.Unix())
	next := make(map[string]*market, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[mp] = m
	c.reg.Store(&registry{m: next})
	telemetry.BudgetMarketplaces.Set(float64(len(next)))
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// dropIdle publishes a registry without the marketplaces not used since
// now-IdleAfter and returns the ones kept.
func (c *Cache) dropIdle(now time.Time) []*market {
	c.regM.Lock()
	defer c.regM.Unlock()
	old := c.reg.Load().m
	cutoff := now.Add(-IdleAfter).Unix()
	kept := make([]*market, 0, len(old))
	for _, m := range old {
		if m.lastUsed.Load() >= cutoff {
			kept = append(kept, m)
		}
	}
	if len(kept) < len(old) {
		next := make(map[string]*market, len(kept))
		for _, m := range kept {
			next[m.id] = m
		}
		for id, m := range old {
			if next[id] == nil {
				c.log.Info("budget: marketplace idle, dropped from spend cache", "marketplace", id,
					"last_used", time.Unix(m.lastUsed.Load(), 0).UTC())
			}
		}
		c.reg.Store(&registry{m: next})
	}
	telemetry.BudgetMarketplaces.Set(float64(len(kept)))
	return kept
}

// load reads m's spend of its local day at now and its all-time spend, and
// publishes them as m's snapshot. On failure the last snapshot stays.
func (c *Cache) load(ctx context.Context, m *market, now time.Time) error {
	loc := m.loc.Load()
	start, end := dayBounds(now, loc)
	day := DayOf(start, loc)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	prev := m.snap.Load()
	var hintDay, hintTotal int
	if prev != nil {
		hintTotal = len(prev.total)
		if prev.day == day {
			hintDay = len(prev.daySpend)
		}
	}
	daySpend, err := c.scan(ctx, DayKey(m.id, day), hintDay)
	var total map[string]int64
	if err == nil {
		total, err = c.scan(ctx, TotalKey(m.id), hintTotal)
	}
	if err == nil {
		foldRefusals(daySpend)
		foldRefusals(total)
	}
	if err != nil && parent.Err() != nil {
		return err // shutting down: not a Redis failure
	}
	if err != nil {
		telemetry.BudgetRefreshes.WithLabelValues("error").Inc()
		if !m.failing.Swap(true) {
			c.log.Warn("budget: spend refresh failed; serving the last snapshot", "marketplace", m.id, "err", err)
		}
		return fmt.Errorf("budget: refresh marketplace %q: %w", m.id, err)
	}
	telemetry.BudgetRefreshes.WithLabelValues("ok").Inc()
	if m.failing.Swap(false) {
		c.log.Info("budget: spend refresh recovered", "marketplace", m.id)
	}
	m.snap.Store(&snapshot{day: day, zone: loc.String(), start: start, end: end,
		daySpend: daySpend, total: total, loaded: now})
	return nil
}

// scan reads a hash of field → integer with HSCAN (which, unlike HGETALL,
// does not block Redis for long on a big hash). A missing key is empty.
func (c *Cache) scan(ctx context.Context, key string, hint int) (map[string]int64, error) {
	out := make(map[string]int64, hint)
	var cursor uint64
	for {
		kv, next, err := c.rdb.HScan(ctx, key, cursor, "", scanCount).Result()
		if err != nil {
			return nil, fmt.Errorf("HSCAN %s: %w", key, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			v, err := strconv.ParseInt(kv[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: field %q holds %q, not an integer", key, kv[i], kv[i+1])
			}
			out[kv[i]] = v
		}
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}

// foldRefusals replaces the refusal hints of a spend hash (field "!" and a
// campaign id: the spend the campaign's last charge refused for this
// budget would have made, set by the charge script) by their campaign's
// spend, when that is lower.
func foldRefusals(m map[string]int64) {
	for f, v := range m {
		if len(f) > 1 && f[0] == '!' {
			delete(m, f)
			if camp := f[1:]; m[camp] < v {
				m[camp] = v
			}
		}
	}
}

// observeAges sets the max-age gauge over the marketplaces of a pass.
func (c *Cache) observeAges(markets []*market) {
	now := c.now()
	var oldest time.Duration
	for _, m := range markets {
		from := m.since
		if s := m.snap.Load(); s != nil {
			from = s.loaded
		}
		oldest = max(oldest, now.Sub(from))
	}
	telemetry.BudgetSnapshotAge.Set(oldest.Seconds())
}

// touch records a use of m at now with time zone loc. It writes shared memory
// only when the second or the zone changed, so that concurrent readers do not
// contend on it.
func (m *market) touch(loc *time.Location, now time.Time) {
	if sec := now.Unix(); m.lastUsed.Load() < sec {
		m.lastUsed.Store(sec)
	}
	if cur := m.loc.Load(); cur != loc && cur.String() != loc.String() {
		m.loc.Store(loc) // the marketplace's zone changed: the next load uses it
	}
}

// holds reports whether now falls in the snapshot's local day, for a reader
// in time zone loc.
func (s *snapshot) holds(now time.Time, loc *time.Location) bool {
	if loc.String() == s.zone {
		return !now.Before(s.start) && now.Before(s.end)
	}
	return DayOf(now, loc) == s.day // zone changed since the load: rare, allocates
}
