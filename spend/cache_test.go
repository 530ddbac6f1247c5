package spend

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/telemetry"
)

// fakeClock is a settable refresh clock.
type fakeClock struct{ ns atomic.Int64 }

func (f *fakeClock) now() time.Time      { return time.Unix(0, f.ns.Load()) }
func (f *fakeClock) set(t time.Time)     { f.ns.Store(t.UnixNano()) }
func (f *fakeClock) add(d time.Duration) { f.ns.Add(int64(d)) }

func newClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.set(t)
	return c
}

// setup returns a miniredis server, a client of it, and a cache on that
// client whose refresh clock is clk.
func setup(t *testing.T, clk *fakeClock) (*miniredis.Miniredis, redis.UniversalClient, *Cache) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	c := NewCache(rdb, Options{Timeout: 500 * time.Millisecond})
	c.now = clk.now
	return mr, rdb, c
}

func add(t *testing.T, rdb redis.UniversalClient, mp, campaign, day string, micros int64) {
	t.Helper()
	if err := AddSpend(t.Context(), rdb, mp, campaign, day, micros); err != nil {
		t.Fatalf("AddSpend: %v", err)
	}
}

func refresh(t *testing.T, c *Cache) {
	t.Helper()
	if err := c.RefreshNow(t.Context()); err != nil {
		t.Fatalf("RefreshNow: %v", err)
	}
}

// wantSpend checks one Spend answer.
func wantSpend(t *testing.T, c *Cache, mp string, loc *time.Location, campaign string, now time.Time, day, total int64) {
	t.Helper()
	d, tot := c.Spend(mp, loc, campaign, now)
	if d != day || tot != total {
		t.Errorf("Spend(%s, %s, %s) = (%d, %d), want (%d, %d)", mp, campaign, now.Format(time.RFC3339), d, tot, day, total)
	}
}

func TestAddSpend(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr, rdb, _ := setup(t, clk)
	add(t, rdb, "mp1", "c1", "2024-05-10", 1_500_000)
	add(t, rdb, "mp1", "c1", "2024-05-10", 500_000) // not idempotent: adds up
	add(t, rdb, "mp1", "c2", "2024-05-10", 7)
	add(t, rdb, "mp1", "c1", "2024-05-09", 3)
	c1, c2 := SpendKey("mp1", "c1"), SpendKey("mp1", "c2")
	if c1 != "ec:spend:{"+Tag("mp1", "c1")+"}:mp1:c1" || len(Tag("mp1", "c1")) != 16 || Tag("mp1", "c1") == Tag("mp1", "c2") || Tag("mp1", "c1") == Tag("mp", "1c1") {
		t.Errorf("spend keys %s, %s", c1, c2)
	}
	checks := []struct{ key, field, want string }{
		{c1, "d:2024-05-10", "2000000"},
		{c2, "d:2024-05-10", "7"},
		{c1, "d:2024-05-09", "3"},
		{c1, "t", "2000003"},
		{c2, "t", "7"},
	}
	for _, ck := range checks {
		if got := mr.HGet(ck.key, ck.field); got != ck.want {
			t.Errorf("HGET %s %s = %q, want %q", ck.key, ck.field, got, ck.want)
		}
	}
	if ttl := mr.TTL(c1); ttl != 0 {
		t.Errorf("spend hash TTL = %s, want none", ttl)
	}
	d, tot, err := ReadSpend(t.Context(), rdb, "mp1", "c1", "2024-05-10")
	if err != nil || d != 2_000_000 || tot != 2_000_003 {
		t.Errorf("ReadSpend = %d, %d, %v; want 2000000, 2000003", d, tot, err)
	}
	if d, tot, err := ReadSpend(t.Context(), rdb, "mp1", "none", "2024-05-10"); err != nil || d != 0 || tot != 0 {
		t.Errorf("ReadSpend of a campaign without spend = %d, %d, %v; want 0, 0", d, tot, err)
	}
}

func TestAddSpendRejectsBadInput(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr, rdb, _ := setup(t, clk)
	tests := []struct {
		name, mp, campaign, day string
		micros                  int64
		want                    string
	}{
		{"empty marketplace", "", "c1", "2024-05-10", 1, "empty marketplace"},
		{"brace in marketplace", "a}b", "c1", "2024-05-10", 1, "brace"},
		{"empty campaign", "mp", "", "2024-05-10", 1, "empty campaign"},
		{"campaign beginning with !", "mp", "!c", "2024-05-10", 1, "begins with"},
		{"bad day", "mp", "c1", "2024-13-01", 1, "not a YYYY-MM-DD"},
		{"day not zero-padded", "mp", "c1", "2024-5-10", 1, "not a YYYY-MM-DD"},
		{"zero micros", "mp", "c1", "2024-05-10", 0, "must be positive"},
		{"negative micros", "mp", "c1", "2024-05-10", -1, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := AddSpend(t.Context(), rdb, tt.mp, tt.campaign, tt.day, tt.micros)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Errorf("rejected calls wrote %v", keys)
	}
}

func TestSpendUnknownIsZero(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	now := clk.now()
	add(t, rdb, "mp1", "c1", "2024-05-10", 100)
	// Not loaded yet: everything reads 0, and the call registers mp1.
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 0, 0)
	if _, ok := c.Age("mp1"); ok {
		t.Error("Age reports a snapshot before any refresh")
	}
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 100, 100)
	wantSpend(t, c, "mp1", time.UTC, "unknown-campaign", now, 0, 0)
	// A marketplace with no spend at all loads as empty.
	wantSpend(t, c, "mp2", time.UTC, "c1", now, 0, 0)
	refresh(t, c)
	if _, ok := c.Age("mp2"); !ok {
		t.Error("mp2 not loaded after a refresh")
	}
	wantSpend(t, c, "mp2", time.UTC, "c1", now, 0, 0)
	// Marketplaces do not see each other's spend.
	wantSpend(t, c, "mp2", time.UTC, "c1", now, 0, 0)
}

func TestRefreshPicksUpSpend(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	now := clk.now()
	c.Register("mp1", time.UTC, "c1")
	add(t, rdb, "mp1", "c1", "2024-05-09", 1_000) // yesterday: total only
	add(t, rdb, "mp1", "c1", "2024-05-10", 250)
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 250, 1_250)
	add(t, rdb, "mp1", "c1", "2024-05-10", 50)
	add(t, rdb, "mp1", "c2", "2024-05-10", 9)
	// Served from memory until the next refresh.
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 250, 1_250)
	wantSpend(t, c, "mp1", time.UTC, "c2", now, 0, 0)
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 300, 1_300)
	wantSpend(t, c, "mp1", time.UTC, "c2", now, 9, 9)
}

func TestDayRollover(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	// 23:59:30 CEST on 2024-05-10.
	clk := newClock(utc("2024-05-10T21:59:30Z"))
	_, rdb, c := setup(t, clk)
	c.Register("mp1", berlin, "c1")
	add(t, rdb, "mp1", "c1", "2024-05-10", 700)
	refresh(t, c)
	wantSpend(t, c, "mp1", berlin, "c1", utc("2024-05-10T21:59:50Z"), 700, 700)
	// Past local midnight, before a refresh: day spend of the new day is 0.
	wantSpend(t, c, "mp1", berlin, "c1", utc("2024-05-10T22:00:00Z"), 0, 700)
	wantSpend(t, c, "mp1", berlin, "c1", utc("2024-05-10T22:00:10Z"), 0, 700)
	// The refresh after midnight reads the new day's hash.
	clk.set(utc("2024-05-10T22:00:20Z"))
	add(t, rdb, "mp1", "c1", "2024-05-11", 40)
	refresh(t, c)
	wantSpend(t, c, "mp1", berlin, "c1", utc("2024-05-10T22:00:30Z"), 40, 740)
	// A time before the loaded day (a late caller) reads 0 day spend too.
	wantSpend(t, c, "mp1", berlin, "c1", utc("2024-05-10T21:59:59Z"), 0, 740)
}

func TestZoneChange(t *testing.T) {
	tokyo := mustLoc(t, "Asia/Tokyo")
	// 20:00Z on 2024-05-10 is 05:00 on 2024-05-11 in Tokyo.
	clk := newClock(utc("2024-05-10T20:00:00Z"))
	_, rdb, c := setup(t, clk)
	now := clk.now()
	c.Register("mp1", time.UTC, "c1")
	add(t, rdb, "mp1", "c1", "2024-05-10", 5)
	add(t, rdb, "mp1", "c1", "2024-05-11", 7)
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 5, 12)
	// Asked in Tokyo time: the snapshot holds another local day.
	wantSpend(t, c, "mp1", tokyo, "c1", now, 0, 12)
	refresh(t, c) // loads the zone the last call used
	wantSpend(t, c, "mp1", tokyo, "c1", now, 7, 12)
	// A zone with the same name but another *Location is the same zone.
	wantSpend(t, c, "mp1", mustLoc(t, "Asia/Tokyo"), "c1", now, 7, 12)
}

func TestMarketplaceExpiry(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	start := clk.now()
	add(t, rdb, "busy", "c1", "2024-05-10", 3)
	add(t, rdb, "idle", "c1", "2024-05-10", 4)
	c.Spend("busy", time.UTC, "c1", start)
	select {
	case <-c.refresh.kick:
	default:
		t.Error("registering a marketplace did not wake the refresh loop")
	}
	c.Spend("idle", time.UTC, "c1", start)
	refresh(t, c)
	wantSpend(t, c, "busy", time.UTC, "c1", start, 3, 3)
	wantSpend(t, c, "idle", time.UTC, "c1", start, 4, 4)

	c.Spend("busy", time.UTC, "c1", start.Add(9*time.Minute))
	clk.set(start.Add(IdleAfter)) // idle was last asked for exactly IdleAfter ago: kept
	refresh(t, c)
	if _, ok := c.Age("idle"); !ok {
		t.Fatal("idle dropped at exactly IdleAfter")
	}
	clk.set(start.Add(IdleAfter + time.Second))
	refresh(t, c)
	if _, ok := c.Age("idle"); ok {
		t.Error("idle still cached after IdleAfter without a call")
	}
	if _, ok := c.Age("busy"); !ok {
		t.Error("busy dropped although used 9 minutes after start")
	}
	if got := len(c.reg.Load().m); got != 1 {
		t.Errorf("cache holds %d marketplaces, want 1", got)
	}
	// Asked for again: registered again, loaded by the next refresh.
	now := clk.now()
	wantSpend(t, c, "idle", time.UTC, "c1", now, 0, 0)
	refresh(t, c)
	wantSpend(t, c, "idle", time.UTC, "c1", now, 4, 4)
}

func TestRedisDownKeepsLastSnapshot(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr, rdb, c := setup(t, clk)
	now := clk.now()
	c.Register("mp1", time.UTC, "c1")
	add(t, rdb, "mp1", "c1", "2024-05-10", 10)
	refresh(t, c)
	if age, ok := c.Age("mp1"); !ok || age != 0 {
		t.Fatalf("Age = %s, %v; want 0, true", age, ok)
	}
	errsBefore := testutil.ToFloat64(telemetry.BudgetRefreshes.WithLabelValues("error"))

	mr.Close()
	clk.add(5 * time.Second)
	err := c.RefreshNow(t.Context())
	if err == nil || !strings.Contains(err.Error(), `marketplace "mp1"`) {
		t.Fatalf("RefreshNow with Redis down = %v, want an error naming mp1", err)
	}
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 10, 10)
	if age, ok := c.Age("mp1"); !ok || age != 5*time.Second {
		t.Errorf("Age = %s, %v; want 5s, true", age, ok)
	}
	if got := testutil.ToFloat64(telemetry.BudgetRefreshes.WithLabelValues("error")) - errsBefore; got != 1 {
		t.Errorf("error count rose by %v, want 1", got)
	}
	if got := testutil.ToFloat64(telemetry.BudgetSnapshotAge); got != 5 {
		t.Errorf("max snapshot age gauge = %v, want 5", got)
	}

	// Back up, with the data it had.
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	add(t, rdb, "mp1", "c1", "2024-05-10", 1)
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 11, 11)
	if age, ok := c.Age("mp1"); !ok || age != 0 {
		t.Errorf("Age after recovery = %s, %v; want 0, true", age, ok)
	}
}

func TestCorruptValueKeepsLastSnapshot(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr, rdb, c := setup(t, clk)
	now := clk.now()
	c.Register("mp1", time.UTC, "c1", "c2")
	add(t, rdb, "mp1", "c1", "2024-05-10", 10)
	refresh(t, c)
	mr.HSet(SpendKey("mp1", "c2"), TotalField, "lots")
	add(t, rdb, "mp1", "c1", "2024-05-10", 5)
	err := c.RefreshNow(t.Context())
	if err == nil || !strings.Contains(err.Error(), `"lots", not an integer`) {
		t.Fatalf("RefreshNow = %v, want a not-an-integer error", err)
	}
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 10, 10)
}

func TestOneFailingMarketplaceDoesNotStopOthers(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr, rdb, c := setup(t, clk)
	now := clk.now()
	c.Register("bad", time.UTC, "c1")
	c.Register("good", time.UTC, "c1")
	mr.HSet(SpendKey("bad", "c1"), DayField("2024-05-10"), "x")
	add(t, rdb, "good", "c1", "2024-05-10", 8)
	err := c.RefreshNow(t.Context())
	if err == nil || !strings.Contains(err.Error(), `"bad"`) || strings.Contains(err.Error(), `"good"`) {
		t.Fatalf("RefreshNow = %v, want an error for bad only", err)
	}
	wantSpend(t, c, "good", time.UTC, "c1", now, 8, 8)
}

func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := NewCache(rdb, Options{Refresh: time.Hour}) // only registration wakes it here
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	now := time.Now()
	add(t, rdb, "mp1", "c1", DayOf(now, time.UTC), 21)
	wantSpend(t, c, "mp1", time.UTC, "c1", now, 0, 0) // registers, wakes Run
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d, tot := c.Spend("mp1", time.UTC, "c1", now); d == 21 && tot == 21 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not load a newly registered marketplace")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

func TestDefaults(t *testing.T) {
	c := NewCache(nil, Options{})
	if c.opts.Refresh != DefaultRefresh || c.opts.Timeout != DefaultTimeout || c.log == nil {
		t.Errorf("defaults not applied: %+v", c.opts)
	}
}

// TestConcurrentSpend runs readers against refreshes, registrations and
// expiry; run with -race.
func TestConcurrentSpend(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	for i := range 4 {
		add(t, rdb, fmt.Sprintf("mp%d", i), "c1", "2024-05-10", int64(i+1))
		if i%2 == 0 {
			c.Register(fmt.Sprintf("mp%d", i), time.UTC, "c1") // the others register from Spend
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer wg.Wait()
	defer close(stop) // also when a refresh below fails the test
	for g := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				mp := fmt.Sprintf("mp%d", (g+n)%4)
				d, tot := c.Spend(mp, time.UTC, "c1", clk.now())
				if d != 0 && d != int64((g+n)%4+1) || d != tot {
					t.Errorf("Spend(%s) = (%d, %d)", mp, d, tot)
					return
				}
				runtime.Gosched() // leave the CPU to the refreshes on small machines
			}
		})
	}
	for i := range 20 {
		refresh(t, c)
		if i == 10 {
			clk.add(IdleAfter / 2) // readers keep every marketplace in use
		}
	}
	for i := range 4 {
		wantSpend(t, c, fmt.Sprintf("mp%d", i), time.UTC, "c1", clk.now(), int64(i+1), int64(i+1))
	}
}

func BenchmarkSpend(b *testing.B) {
	berlin := mustLoc(b, "Europe/Berlin")
	mr := miniredis.RunT(b)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	now := time.Now()
	day := DayOf(now, berlin)
	const campaigns = 10_000
	ids := make([]string, campaigns)
	for i := range ids {
		ids[i] = fmt.Sprintf("campaign-%d", i)
		mr.HSet(SpendKey("mp", ids[i]), DayField(day), fmt.Sprint(i+1), TotalField, fmt.Sprint(i+1))
	}
	c := NewCache(rdb, Options{})
	c.Register("mp", berlin, ids...)
	if err := c.RefreshNow(b.Context()); err != nil {
		b.Fatal(err)
	}
	if d, _ := c.Spend("mp", berlin, ids[42], now); d != 43 {
		b.Fatalf("day spend = %d, want 43", d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			d, _ := c.Spend("mp", berlin, ids[i%campaigns], now)
			if d == 0 {
				b.Error("zero spend")
				return
			}
			i++
		}
	})
}

func TestCanceledRefreshIsNotARedisFailure(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, _, c := setup(t, clk)
	c.Register("mp1", time.UTC, "c1")
	before := testutil.ToFloat64(telemetry.BudgetRefreshes.WithLabelValues("error"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.RefreshNow(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("RefreshNow on a canceled context = %v, want context.Canceled", err)
	}
	if got := testutil.ToFloat64(telemetry.BudgetRefreshes.WithLabelValues("error")) - before; got != 0 {
		t.Errorf("error count rose by %v on shutdown", got)
	}
	if c.reg.Load().m["mp1"].failing.Load() {
		t.Error("marketplace marked failing on shutdown")
	}
}

// TestCacheRefusalHints: a refusal hint ("!" and the field of a budget's
// counter) raises its campaign's spend as the cache reports it to at least
// the hint, for the budget it is of (today's day field for the daily
// budget, the total field); a hint of another day is not read.
func TestCacheRefusalHints(t *testing.T) {
	now := utc("2024-05-10T12:00:00Z")
	clk := newClock(now)
	mr, _, c := setup(t, clk)
	for _, kv := range [][3]string{
		{"c", "d:2024-05-10", "100"}, {"c", "!d:2024-05-10", "400"},
		{"d", "!d:2024-05-10", "50"},
		{"e", "d:2024-05-10", "500"}, {"e", "!d:2024-05-10", "300"},
		{"f", "!d:2024-05-09", "900"}, // yesterday's: not read
		{"c", "t", "100"}, {"e", "t", "500"}, {"f", "!t", "70"},
	} {
		mr.HSet(SpendKey("mp1", kv[0]), kv[1], kv[2])
	}
	c.Register("mp1", time.UTC, "c", "d", "e", "f")
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "c", now, 400, 100)
	wantSpend(t, c, "mp1", time.UTC, "d", now, 50, 0)
	wantSpend(t, c, "mp1", time.UTC, "e", now, 500, 500)
	wantSpend(t, c, "mp1", time.UTC, "f", now, 0, 70)
}

// TestCampaignExpiry: a campaign no Spend asked for in IdleAfter is no
// longer read (its marketplace stays while others are asked for); asked
// for again, it is registered and loaded again.
func TestCampaignExpiry(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	start := clk.now()
	add(t, rdb, "mp1", "busy", "2024-05-10", 3)
	add(t, rdb, "mp1", "idle", "2024-05-10", 4)
	c.Register("mp1", time.UTC, "busy", "idle")
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "idle", start, 4, 4)
	c.Spend("mp1", time.UTC, "busy", start.Add(9*time.Minute))
	clk.set(start.Add(IdleAfter + time.Second))
	refresh(t, c)
	m := c.reg.Load().m["mp1"]
	if _, ok := m.camps.Load("idle"); ok {
		t.Error("idle campaign still read after IdleAfter without a call")
	}
	if _, ok := m.camps.Load("busy"); !ok {
		t.Error("busy campaign dropped")
	}
	if got := testutil.ToFloat64(telemetry.BudgetCampaigns); got != 1 {
		t.Errorf("campaigns gauge = %v, want 1", got)
	}
	now := clk.now()
	wantSpend(t, c, "mp1", time.UTC, "idle", now, 0, 0) // registers it again
	refresh(t, c)
	wantSpend(t, c, "mp1", time.UTC, "idle", now, 4, 4)
	wantSpend(t, c, "mp1", time.UTC, "busy", now, 3, 3)
}

// TestManyCampaigns: a marketplace with more campaigns than one pipelined
// read holds loads them all.
func TestManyCampaigns(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr, _, c := setup(t, clk)
	const n = readChunk*2 + 17
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
		mr.HSet(SpendKey("mp1", ids[i]), DayField("2024-05-10"), fmt.Sprint(i), TotalField, fmt.Sprint(2*i))
	}
	c.Register("mp1", time.UTC, ids...)
	refresh(t, c)
	for i, id := range ids {
		if d, tot := c.Spend("mp1", time.UTC, id, clk.now()); d != int64(i) || tot != int64(2*i) {
			t.Fatalf("Spend(%s) = %d, %d; want %d, %d", id, d, tot, i, 2*i)
		}
	}
}

// TestCampaignUseFolded: a campaign the auction reads from the snapshot
// (its uses marked there, not in the registry) stays cached past IdleAfter
// as long as it is asked for, its uses folded in at each refresh, a use
// just before a snapshot is replaced included; once it is no longer asked
// for, it is dropped IdleAfter after its last use.
func TestCampaignUseFolded(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	start := clk.now()
	add(t, rdb, "mp1", "used", "2024-05-10", 3)
	add(t, rdb, "mp1", "other", "2024-05-10", 4)
	c.Register("mp1", time.UTC, "used", "other")
	refresh(t, c)
	m := c.reg.Load().m["mp1"]
	for step := 1; step <= 4; step++ { // 4 × 6 minutes: past IdleAfter twice
		clk.add(6 * time.Minute)
		wantSpend(t, c, "mp1", time.UTC, "used", clk.now(), 3, 3)
		wantSpend(t, c, "mp1", time.UTC, "other", clk.now(), 4, 4)
		refresh(t, c)
	}
	cp, ok := m.camps.Load("used")
	if !ok {
		t.Fatal("a campaign asked for every 6 minutes was dropped")
	}
	if got, want := cp.(*campaign).lastUsed.Load(), start.Add(24*time.Minute).Unix(); got != want {
		t.Errorf("lastUsed = %d, want %d (its last Spend)", got, want)
	}
	// A use marked in a snapshot after RefreshNow folded it, just before the
	// snapshot is replaced, is folded once it is replaced.
	s := m.snap.Load()
	last := start.Add(25 * time.Minute)
	s.entries[s.idx["other"]].lastUsed.Store(last.Unix())
	m.touch(time.UTC, last) // as that Spend did
	clk.set(last)
	if err := c.load(t.Context(), m, last); err != nil {
		t.Fatal(err)
	}
	cpo, _ := m.camps.Load("other")
	if got := cpo.(*campaign).lastUsed.Load(); got != last.Unix() {
		t.Errorf("other: lastUsed = %d, want %d (the use on the replaced snapshot)", got, last.Unix())
	}
	// "used" is no longer asked for: dropped IdleAfter after its last use,
	// "other" after its own.
	clk.set(start.Add(24*time.Minute + IdleAfter + time.Second))
	refresh(t, c)
	if _, ok := m.camps.Load("used"); ok {
		t.Error("used still cached IdleAfter after its last use")
	}
	if _, ok := m.camps.Load("other"); !ok {
		t.Error("other dropped before IdleAfter after its last use")
	}
}

// TestCacheCheckAgreesWithCheck: the cache's Check, which paces with its
// snapshot's local day, gives budget.Check's verdict on the spend Spend
// reads, in zones with and without daylight saving, on the days it starts
// and ends, after the snapshot's day and after a change of zone.
func TestCacheCheckAgreesWithCheck(t *testing.T) {
	berlin, havana := mustLoc(t, "Europe/Berlin"), mustLoc(t, "America/Havana")
	for _, tc := range []struct {
		name   string
		loc    *time.Location
		loaded string // the refresh clock of the load
		at     []string
	}{
		{"utc", time.UTC, "2024-05-10T00:30:00Z", []string{"2024-05-10T00:00:00Z", "2024-05-10T06:00:00Z", "2024-05-10T12:00:00Z", "2024-05-10T23:59:59Z", "2024-05-11T00:00:01Z"}},
		{"berlin, summer time starts", berlin, "2024-03-31T00:30:00+01:00", []string{"2024-03-31T01:59:59+01:00", "2024-03-31T03:00:00+02:00", "2024-03-31T12:00:00+02:00", "2024-03-31T23:59:00+02:00"}},
		{"berlin, summer time ends", berlin, "2024-10-27T00:30:00+02:00", []string{"2024-10-27T02:30:00+02:00", "2024-10-27T02:30:00+01:00", "2024-10-27T18:00:00+01:00"}},
		{"havana, no midnight", havana, "2024-03-10T01:30:00-04:00", []string{"2024-03-10T01:00:00-04:00", "2024-03-10T13:00:00-04:00", "2024-03-09T23:00:00-05:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loaded := utc(tc.loaded)
			clk := newClock(loaded)
			_, rdb, c := setup(t, clk)
			day := DayOf(loaded, tc.loc)
			spends := []int64{0, 1_000, 20_000, 45_000, 60_000, 99_999, 100_000, 150_000}
			ids := make([]string, len(spends))
			for i, sp := range spends {
				ids[i] = fmt.Sprintf("c%d", i)
				if sp != 0 {
					add(t, rdb, "mp", ids[i], day, sp)
				}
			}
			c.Register("mp", tc.loc, ids...)
			refresh(t, c)
			for _, at := range tc.at {
				now := utc(at)
				for _, l := range []Limits{{DailyMicros: 100_000}, {DailyMicros: 100_000, TotalMicros: 120_000}, {TotalMicros: 50_000}, {DailyMicros: 10},
					{WeeklyMicros: 100_000}, {WeeklyMicros: 700_000}, {MonthlyMicros: 150_000}, {MonthlyMicros: 3_000_000, TotalMicros: 120_000}} {
					for _, id := range ids {
						sp := c.Spent("mp", tc.loc, id, now)
						want := Check(l, sp, now, tc.loc)
						if got := c.Check("mp", tc.loc, id, l, now); got != want {
							t.Errorf("at %s, %+v, %s (spend %+v): Check = %v, budget.Check = %v", at, l, id, sp, got, want)
						}
					}
				}
			}
			// Another zone than the snapshot's: the same verdicts too.
			for _, id := range ids {
				now := loaded.Add(3 * time.Hour)
				d, tot := c.Spend("mp", time.UTC, id, now)
				l := Limits{DailyMicros: 100_000}
				if got, want := c.Check("mp", time.UTC, id, l, now), Check(l, Spent{Day: d, Total: tot}, now, time.UTC); got != want {
					t.Errorf("zone changed, %s: Check = %v, budget.Check = %v", id, got, want)
				}
			}
		})
	}
}

// TestCheckSlot: a Slot's answers are Check's, through a registration, a
// load, new spend, a day rollover, a zone change, and the campaign or its
// marketplace dropped as idle and asked for again (the Slot then finds the
// new record).
func TestCheckSlot(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	start := clk.now()
	day := Limits{DailyMicros: 100, TotalMicros: 1_000}
	var sl, other Slot
	agree := func(step string, mp string, loc *time.Location, id string, sl *Slot, now time.Time, want Verdict) {
		t.Helper()
		got := c.CheckSlot(sl, mp, loc, id, day, now)
		if ref := c.Check(mp, loc, id, day, now); got != ref || got != want {
			t.Errorf("%s: CheckSlot = %v, Check = %v, want %v", step, got, ref, want)
		}
	}
	add(t, rdb, "mp1", "c1", "2024-05-10", 150)
	add(t, rdb, "mp1", "c2", "2024-05-10", 20)
	agree("before any load", "mp1", time.UTC, "c1", &sl, start, OK)
	refresh(t, c)
	agree("loaded", "mp1", time.UTC, "c1", &sl, start, DailyExhausted)
	agree("another campaign", "mp1", time.UTC, "c2", &other, start, OK) // registered by this call
	refresh(t, c)
	add(t, rdb, "mp1", "c2", "2024-05-10", 90)
	agree("new spend, not refreshed", "mp1", time.UTC, "c2", &other, start, OK)
	refresh(t, c)
	agree("new spend, refreshed", "mp1", time.UTC, "c2", &other, start, DailyExhausted)
	agree("the next day, before a refresh", "mp1", time.UTC, "c1", &sl, utc("2024-05-11T00:00:01Z"), OK)
	agree("another zone", "mp1", berlin, "c1", &sl, start, DailyExhausted)

	// c1 idle (only c2 asked for), then dropped: the Slot resolves again.
	before := sl.p.Load()
	lastUse := utc("2024-05-11T00:00:01Z") // c1's latest use above
	clk.set(lastUse.Add(IdleAfter / 2))
	c.CheckSlot(&other, "mp1", time.UTC, "c2", day, clk.now())
	clk.set(lastUse.Add(IdleAfter + time.Second))
	refresh(t, c)
	if !before.dropped.Load() {
		t.Fatal("c1's record not marked dropped")
	}
	now := clk.now() // 2024-05-11, after midnight
	add(t, rdb, "mp1", "c1", "2024-05-11", 150)
	agree("dropped, asked again", "mp1", time.UTC, "c1", &sl, now, OK)
	if sl.p.Load() == before {
		t.Error("the Slot kept the dropped record")
	}
	refresh(t, c)
	agree("dropped, reloaded", "mp1", time.UTC, "c1", &sl, now, DailyExhausted)

	// The whole marketplace idle and dropped, then asked for again.
	rec := sl.p.Load()
	clk.set(now.Add(IdleAfter + time.Second))
	refresh(t, c)
	if _, ok := c.Age("mp1"); ok || !rec.dropped.Load() {
		t.Fatalf("marketplace kept (%v) or its campaign not marked dropped (%v)", ok, rec.dropped.Load())
	}
	now = clk.now()
	agree("marketplace dropped, asked again", "mp1", time.UTC, "c1", &sl, now, OK)
	refresh(t, c)
	agree("marketplace reloaded", "mp1", time.UTC, "c1", &sl, now, DailyExhausted)
}

// TestCheckSlotConcurrent: Slots read while refreshes replace snapshots and
// drop and register campaigns (run with -race).
func TestCheckSlotConcurrent(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	_, rdb, c := setup(t, clk)
	for i := 1; i < 8; i++ { // c0 has no spend
		add(t, rdb, "mp1", fmt.Sprintf("c%d", i), "2024-05-10", int64(50*i))
	}
	slots := make([]Slot, 8)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (n + g) % 8
				v := c.CheckSlot(&slots[i], "mp1", time.UTC, fmt.Sprintf("c%d", i), Limits{DailyMicros: 100}, clk.now())
				if v != OK && v != DailyExhausted {
					t.Errorf("verdict %v", v)
					return
				}
			}
		})
	}
	for range 20 {
		clk.add(IdleAfter / 3)
		refresh(t, c)
	}
	close(stop)
	wg.Wait()
	// Asked for again (the readers may not have run between the refreshes,
	// which then dropped the campaigns as idle) and loaded.
	for i := range slots {
		c.CheckSlot(&slots[i], "mp1", time.UTC, fmt.Sprintf("c%d", i), Limits{DailyMicros: 100}, clk.now())
	}
	refresh(t, c)
	for i := range slots {
		want := OK
		if 50*i >= 100 {
			want = DailyExhausted
		}
		if got := c.CheckSlot(&slots[i], "mp1", time.UTC, fmt.Sprintf("c%d", i), Limits{DailyMicros: 100}, clk.now()); got != want {
			t.Errorf("c%d: %v, want %v", i, got, want)
		}
	}
}
