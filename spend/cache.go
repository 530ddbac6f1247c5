package spend

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
	// IdleAfter: a marketplace (a campaign) no Spend call asked for in this
	// long is dropped from the cache (and no longer read from Redis).
	IdleAfter = 10 * time.Minute
	// readChunk is how many campaigns' spend hashes one pipelined round trip
	// reads (one HMGET each).
	readChunk = 1000
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

// withDefaults is o with the defaults in place of what it leaves unset.
func (o Options) withDefaults() Options {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Cache is an in-memory copy of the spend in Redis, for the auction's hot
// path. Spend reads it without touching Redis; Run refreshes it every
// Options.Refresh. It is safe for concurrent use.
type Cache struct {
	rdb  redis.UniversalClient
	opts Options
	log  *slog.Logger
	now  func() time.Time // the refresh clock; tests replace it

	reg     atomic.Pointer[registry] // copy-on-write; written under regMu
	regM    sync.Mutex
	pass    sync.Mutex // one refresh pass at a time
	refresh refresher  // kicked when a marketplace is registered
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
	camps    sync.Map                      // campaign id → *campaign: those whose spend is read
	snap     atomic.Pointer[snapshot]      // nil until the first successful load
	failing  atomic.Bool                   // the last load failed (log transitions only)
}

// campaign is one cached campaign of a market.
type campaign struct {
	// lastUsed is the unix second of the latest Spend call, as of the last
	// refresh pass: a Spend that finds the campaign in the snapshot marks
	// the snapshot's entry, and the refresh folds the marks in here.
	lastUsed atomic.Int64
	// cur is the campaign's entry in its market's latest snapshot (nil
	// until a load read it), for a Slot's reads: no lookup by id.
	cur atomic.Pointer[spendEntry]
	// m is its market; dropped is set when the refresh drops the campaign
	// or its market as idle: a Slot holding it then resolves it again.
	m       *market
	dropped atomic.Bool
}

// Slot remembers a campaign's record in the cache for its caller (the
// auction index keeps one per campaign), so that CheckSlot reads the
// campaign's spend without looking its id up: at a hundred thousand
// campaigns, the lookup by id in the snapshot's map was a third of an
// auction's time (cache misses on the map and on the keys' bytes). The
// zero Slot is empty; a Slot must not be copied after first use.
type Slot struct{ p atomic.Pointer[campaign] }

// snapshot is the spend of one marketplace's cached campaigns as read from
// Redis at loaded.
type snapshot struct {
	day  string // the local day whose hash was read, YYYY-MM-DD
	zone string // the name of the time zone day is in
	// That local day is [start, end); its week and month are [weekStart,
	// weekEnd) and [monthStart, monthEnd).
	spans
	weekStart, monthStart time.Time
	idx                   map[string]int32 // campaign id → its entry
	entries               []spendEntry
	loaded                time.Time // refresh clock at the start of the load
}

// spendEntry is one campaign of a snapshot: its spend, and its uses. The
// auction's Spend calls read it and mark it (a shared write only when the
// second changed); the campaign registry is not touched on that path.
type spendEntry struct {
	periods               // its spend of the snapshot's day, week and month, and of all time
	lastUsed atomic.Int64 // unix seconds of the latest Spend call that read it
	c        *campaign    // the registry's campaign, whose lastUsed the refresh advances
	s        *snapshot    // the snapshot it is an entry of
}

// NewCache returns a cache reading from rdb. Call Run to keep it fresh.
func NewCache(rdb redis.UniversalClient, o Options) *Cache {
	o = o.withDefaults()
	c := &Cache{rdb: rdb, opts: o, log: o.Log, now: time.Now, refresh: newRefresher()}
	c.reg.Store(&registry{m: map[string]*market{}})
	return c
}

// Spend returns campaignID's spend in marketplace mp: of the local day (in
// loc, the marketplace's time zone; nil means UTC) that holds now, and of all
// time, in micro-units, as of the last refresh. It never blocks on Redis and
// does not allocate (but the first call for a campaign).
//
// When a charge of the campaign was refused for its daily budget today (or
// for its total budget, ever: docs/design/budgets.md, "The cap"), day (or total)
// is at least the spend that charge would have made, which is above the
// budget it was refused for: the auction then sees the campaign at its
// budget, although its spend stays below it, and stops serving it until
// the budget is raised above that (or the local day ends).
//
// A campaign with no spend reads 0. A marketplace or a campaign the cache
// does not hold yet reads 0; the call registers it (the marketplace with
// loc) and wakes the refresh loop, which loads it at once. When now falls
// in another local day than the one last loaded (just after midnight,
// until the next refresh), day spend reads 0. now also marks mp and
// campaignID as in use: a marketplace or campaign not asked for in
// IdleAfter is dropped.
//
// It is the auction's call, once per campaign of an auction: a loaded
// campaign costs a map lookup in the snapshot and a mark in its entry (a
// write only when the second changed), which the refresh folds into the
// campaign registry; only a campaign not loaded yet looks the registry up.
func (c *Cache) Spend(mp string, loc *time.Location, campaignID string, now time.Time) (day, total int64) {
	p, _ := c.spend(mp, orUTC(loc), campaignID, now)
	return p.day, p.total
}

// Spent is Spend with the spend of the local week and month that hold now
// too (read like the day's: 0 outside the snapshot's week or month, until
// the next refresh), refusal hints folded in (the Spent's hints are 0).
func (c *Cache) Spent(mp string, loc *time.Location, campaignID string, now time.Time) Spent {
	p, _ := c.spend(mp, orUTC(loc), campaignID, now)
	return Spent{Day: p.day, Week: p.week, Month: p.month, Total: p.total}
}

// Check is the budget rule (budget.Check) for campaignID of mp, of budgets
// l, on its spend as Spend reads it, at now in loc (nil means UTC). When the
// snapshot's local day holds now in loc's zone, the pacing step uses that
// day's bounds instead of working them out for every campaign (not for a
// campaign with served hours, l.Hours: Check paces over them).
func (c *Cache) Check(mp string, loc *time.Location, campaignID string, l Limits, now time.Time) Verdict {
	loc = orUTC(loc)
	p, s := c.spend(mp, loc, campaignID, now)
	if s != nil && l.Hours == nil {
		return checkInDay(&l, &p, now, &s.spans)
	}
	return Check(l, Spent{Day: p.day, Week: p.week, Month: p.month, Total: p.total}, now, loc)
}

// spend is Spend, loc not nil; in, when not nil, is the snapshot read, whose
// local day [in.start, in.end), in loc's zone, holds now.
func (c *Cache) spend(mp string, loc *time.Location, campaignID string, now time.Time) (p periods, in *snapshot) {
	m := c.reg.Load().m[mp]
	if m == nil {
		c.register(mp, loc, now, campaignID)
		return p, nil
	}
	m.touch(loc, now)
	if s := m.snap.Load(); s != nil {
		if i, ok := s.idx[campaignID]; ok {
			return s.entries[i].read(loc, now)
		}
	}
	// Not loaded yet: registered since the last load, or new.
	cp, ok := m.camps.Load(campaignID)
	if !ok {
		c.addCampaigns(m, now, campaignID)
		return p, nil
	}
	cp.(*campaign).touch(now)
	return p, nil
}

// read returns the entry's spend at now in loc, and its snapshot when the
// snapshot's local day holds now in loc's zone (nil otherwise), and marks
// the entry used.
func (e *spendEntry) read(loc *time.Location, now time.Time) (p periods, in *snapshot) {
	s := e.s
	if sec := now.Unix(); e.lastUsed.Load() < sec {
		e.lastUsed.Store(sec)
	}
	if s.inDay(now, loc) {
		return e.periods, s
	}
	p.total = e.total
	if s.holds(now, loc) {
		p.day = e.day
	}
	if loc.String() == s.zone {
		if !now.Before(s.weekStart) && now.Before(s.weekEnd) {
			p.week = e.week
		}
		if !now.Before(s.monthStart) && now.Before(s.monthEnd) {
			p.month = e.month
		}
	}
	return p, nil
}

// CheckSlot is Check through sl, which remembers campaignID's record in the
// cache: the first call for a Slot (or the first after the refresh dropped
// the campaign as idle) resolves and registers it as Spend does; the others
// read the campaign's latest entry straight from it. sl must only ever be
// used for campaignID of mp.
func (c *Cache) CheckSlot(sl *Slot, mp string, loc *time.Location, campaignID string, l Limits, now time.Time) Verdict {
	loc = orUTC(loc)
	cp := sl.p.Load()
	if cp == nil || cp.dropped.Load() {
		if cp = c.resolve(mp, loc, campaignID, now); cp == nil {
			return Check(l, Spent{}, now, loc) // a marketplace just registered: nothing loaded
		}
		sl.p.Store(cp)
	}
	cp.m.touch(loc, now)
	e := cp.cur.Load()
	if e == nil { // registered since the last load
		cp.touch(now)
		return Check(l, Spent{}, now, loc)
	}
	p, s := e.read(loc, now)
	// Check's last lines, written out: a shared helper costs the gate about 3 %
	// of its instructions (TestPerfBudgetGate), a call it cannot inline.
	if s != nil && l.Hours == nil {
		return checkInDay(&l, &p, now, &s.spans)
	}
	return Check(l, Spent{Day: p.day, Week: p.week, Month: p.month, Total: p.total}, now, loc)
}

// Touch reads where the slot's campaign's spend is, and returns a number of
// what it read: the auction's touch pass calls it for the campaigns it will
// check, so that the misses of many campaigns overlap before each is checked.
func (sl *Slot) Touch() int {
	cp := sl.p.Load()
	if cp == nil {
		return 0
	}
	if e := cp.cur.Load(); e != nil {
		return int(e.day & 1)
	}
	return 0
}

// resolve returns campaignID's record in mp, registering both as Spend
// does (nil when the marketplace was not registered before this call).
func (c *Cache) resolve(mp string, loc *time.Location, campaignID string, now time.Time) *campaign {
	m := c.reg.Load().m[mp]
	if m == nil {
		c.register(mp, loc, now, campaignID)
		if m = c.reg.Load().m[mp]; m == nil {
			return nil
		}
	}
	m.touch(loc, now)
	if cp, ok := m.camps.Load(campaignID); ok {
		return cp.(*campaign)
	}
	c.addCampaigns(m, now, campaignID)
	if cp, ok := m.camps.Load(campaignID); ok {
		return cp.(*campaign)
	}
	return nil
}

// Register adds mp (in time zone loc; nil means UTC) and the given
// campaigns of it to the cache ahead of the first Spend calls, so that a
// RefreshNow before serving loads them. It counts as a use of them.
// Registering a cached marketplace updates its zone.
func (c *Cache) Register(mp string, loc *time.Location, campaignIDs ...string) {
	loc, now := orUTC(loc), c.now()
	m := c.reg.Load().m[mp]
	if m == nil {
		c.register(mp, loc, now, campaignIDs...)
		return
	}
	m.touch(loc, now)
	c.addCampaigns(m, now, campaignIDs...)
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
	return c.refresh.run(ctx, c.opts.Refresh, c.RefreshNow) // a pass logs and counts its failures
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
	for _, m := range c.reg.Load().m {
		m.snap.Load().foldUses()
	}
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

// register publishes a registry with mp (and campaignIDs of it) added,
// unless it already is.
func (c *Cache) register(mp string, loc *time.Location, now time.Time, campaignIDs ...string) {
	c.regM.Lock()
	defer c.regM.Unlock()
	old := c.reg.Load().m
	if m := old[mp]; m != nil { // registered meanwhile
		m.touch(loc, now)
		c.addCampaigns(m, now, campaignIDs...)
		return
	}
	m := &market{id: mp, since: c.now()}
	m.loc.Store(loc)
	m.lastUsed.Store(now.Unix())
	for _, id := range campaignIDs {
		cp := &campaign{m: m}
		cp.lastUsed.Store(now.Unix())
		m.camps.Store(id, cp)
	}
	next := make(map[string]*market, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[mp] = m
	c.reg.Store(&registry{m: next})
	telemetry.BudgetMarketplaces.Set(float64(len(next)))
	c.refresh.Kick()
}

// addCampaigns adds the campaigns m does not hold yet, and wakes the
// refresh loop when there was one.
func (c *Cache) addCampaigns(m *market, now time.Time, campaignIDs ...string) {
	added := false
	for _, id := range campaignIDs {
		cp := &campaign{m: m}
		cp.lastUsed.Store(now.Unix())
		if got, loaded := m.camps.LoadOrStore(id, cp); loaded {
			got.(*campaign).touch(now)
		} else {
			added = true
		}
	}
	if added {
		c.refresh.Kick()
	}
}

// dropIdle publishes a registry without the marketplaces not used since
// now-IdleAfter, drops the campaigns of the others not used since then, and
// returns the marketplaces kept.
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
				m.camps.Range(func(_, cp any) bool {
					cp.(*campaign).dropped.Store(true)
					return true
				})
				c.log.Info("budget: marketplace idle, dropped from spend cache", "marketplace", id,
					"last_used", time.Unix(m.lastUsed.Load(), 0).UTC())
			}
		}
		c.reg.Store(&registry{m: next})
	}
	campaigns := 0
	for _, m := range kept {
		m.camps.Range(func(id, cp any) bool {
			if cp.(*campaign).lastUsed.Load() < cutoff {
				m.camps.Delete(id)
				cp.(*campaign).dropped.Store(true)
			} else {
				campaigns++
			}
			return true
		})
	}
	telemetry.BudgetMarketplaces.Set(float64(len(kept)))
	telemetry.BudgetCampaigns.Set(float64(campaigns))
	return kept
}

// load reads the spend of m's campaigns, of its local day at now and of
// all time, and publishes them as m's snapshot. On failure the last
// snapshot stays.
func (c *Cache) load(ctx context.Context, m *market, now time.Time) error {
	loc := m.loc.Load()
	start, end := dayBounds(now, loc)
	day := DayOf(start, loc)
	sp := spans{start: start, end: end, weekEnd: PeriodEnd(start, PeriodWeek, loc), monthEnd: PeriodEnd(start, PeriodMonth, loc)}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var (
		ids   []string
		camps []*campaign
	)
	m.camps.Range(func(id, cp any) bool {
		ids = append(ids, id.(string))
		camps = append(camps, cp.(*campaign))
		return true
	})
	entries := make([]spendEntry, len(ids))
	err := c.read(ctx, m.id, day, ids, entries)
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
	idx := make(map[string]int32, len(ids))
	s := &snapshot{day: day, zone: loc.String(), spans: sp,
		weekStart: PeriodStart(start, PeriodWeek, loc), monthStart: PeriodStart(start, PeriodMonth, loc),
		idx: idx, entries: entries, loaded: now}
	for i, id := range ids {
		idx[id] = int32(i)
		entries[i].c, entries[i].s = camps[i], s
	}
	prev := m.snap.Swap(s)
	for i, cp := range camps {
		cp.cur.Store(&entries[i])
	}
	// The uses of the replaced snapshot since RefreshNow folded them (a
	// Spend that loaded it just before the swap).
	prev.foldUses()
	return nil
}

// foldUses advances the registry's campaigns' lastUsed to the uses marked in
// s's entries. s may be nil.
func (s *snapshot) foldUses() {
	if s == nil {
		return
	}
	for i := range s.entries {
		e := &s.entries[i]
		if sec := e.lastUsed.Load(); sec != 0 {
			e.c.touchAt(sec)
		}
	}
}

// read reads the spend hashes of campaigns ids of marketplace mp into
// into[i] (len(ids) of them): each campaign's spend of day and of all time,
// each at least its refusal hint (the spend the campaign's last charge
// refused for that budget would have made, set by the charge script). One
// HMGET per campaign, readChunk of them pipelined per round trip (on a
// cluster, split by master). A missing hash or field is 0.
func (c *Cache) read(ctx context.Context, mp, day string, ids []string, into []spendEntry) error {
	df, wf, mf := DayField(day), WeekField(WeekOf(day)), MonthField(MonthOf(day))
	for from := 0; from < len(ids); from += readChunk {
		chunk := ids[from:min(from+readChunk, len(ids))]
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, len(chunk))
		for i, id := range chunk {
			cmds[i] = pipe.HMGet(ctx, SpendKey(mp, id), df, TotalField, "!"+df, "!"+TotalField, wf, mf, "!"+wf, "!"+mf)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("HMGET of %d spend hashes: %w", len(chunk), err)
		}
		for i, id := range chunk {
			var v [8]int64
			for j, x := range cmds[i].Val() {
				if x == nil {
					continue
				}
				s, _ := x.(string)
				var err error
				if v[j], err = strconv.ParseInt(s, 10, 64); err != nil {
					return fmt.Errorf("%s: field %q holds %q, not an integer", SpendKey(mp, id), cmds[i].Args()[2+j], s)
				}
			}
			e := &into[from+i]
			e.day, e.total, e.week, e.month = max(v[0], v[2]), max(v[1], v[3]), max(v[4], v[6]), max(v[5], v[7])
		}
	}
	return nil
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

// touch records a use of the campaign at now (a shared write only when the
// second changed).
func (cp *campaign) touch(now time.Time) { cp.touchAt(now.Unix()) }

// touchAt records a use of the campaign at unix second sec, unless a later
// one is recorded. Spend (a campaign not loaded yet) and the refresh's fold
// may record at once: the latest stays.
func (cp *campaign) touchAt(sec int64) {
	for {
		cur := cp.lastUsed.Load()
		if cur >= sec || cp.lastUsed.CompareAndSwap(cur, sec) {
			return
		}
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

// inDay reports whether the snapshot was read in loc's zone and its local
// day, [s.start, s.end), holds now.
func (s *snapshot) inDay(now time.Time, loc *time.Location) bool {
	return loc.String() == s.zone && !now.Before(s.start) && now.Before(s.end)
}
