package budget

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/redisstore"
)

// chargeEnv is a real Redis and a marketplace id of the test's own.
func chargeEnv(t *testing.T) (context.Context, redis.UniversalClient, string) {
	t.Helper()
	env := testenv.Get(t)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, rdb, "charge-" + uuid.NewString()
}

// keep sets every charge's marker to expire in d.
func keep(cs []Charge, d time.Duration) []Charge {
	until := time.Now().Add(d)
	for i := range cs {
		cs[i].KeepUntil = until
	}
	return cs
}

func hget(t *testing.T, ctx context.Context, rdb redis.UniversalClient, key, field string) int64 {
	t.Helper()
	v, err := rdb.HGet(ctx, key, field).Result()
	if err == redis.Nil {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApplyChargesExactlyOnce: first application, a replay of the same
// owners, duplicates from other owners, a key twice in one call, a zero
// amount and an amount Lua numbers cannot hold, against the real Redis.
func TestApplyChargesExactlyOnce(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const day, day2 = "2025-03-04", "2025-03-05"
	const big = 1<<53 + 1 // a float64 (Lua number) would round it to 2^53
	first := []Charge{
		{MarketplaceID: mp, Key: "a1:1:c", Owner: "0:1", CampaignID: "c1", Day: day, Micros: 1_250_000},
		{MarketplaceID: mp, Key: "a1:2:c", Owner: "0:2", CampaignID: "c2", Day: day, Micros: 500_000},
		{MarketplaceID: mp, Key: "a2:1:c", Owner: "1:7", CampaignID: "c1", Day: day2, Micros: 750_000},
		{MarketplaceID: mp, Key: "a1:1:c", Owner: "2:9", CampaignID: "c1", Day: day, Micros: 1_250_000}, // same key, other record
		{MarketplaceID: mp, Key: "a3:1:i", Owner: "0:3", CampaignID: "c3", Day: day, Micros: 0},
		{MarketplaceID: mp, Key: "a4:1:c", Owner: "0:4", CampaignID: "c4", Day: day, Micros: big},
	}
	tests := []struct {
		name    string
		charges []Charge
		want    []ChargeOutcome
	}{
		{"first pass", first, []ChargeOutcome{ChargeApplied, ChargeApplied, ChargeApplied, ChargeDuplicate, ChargeApplied, ChargeApplied}},
		{"replay of the same records", first, []ChargeOutcome{ChargeReplayed, ChargeReplayed, ChargeReplayed, ChargeDuplicate, ChargeReplayed, ChargeReplayed}},
		{"duplicates from new records", []Charge{
			{MarketplaceID: mp, Key: "a1:2:c", Owner: "5:5", CampaignID: "c2", Day: day, Micros: 500_000},
			{MarketplaceID: mp, Key: "a2:1:c", Owner: "5:6", CampaignID: "c1", Day: day, Micros: 750_000},
		}, []ChargeOutcome{ChargeDuplicate, ChargeDuplicate}},
		{"nothing", nil, []ChargeOutcome{}},
	}
	for _, tc := range tests {
		got, err := ApplyCharges(ctx, rdb, keep(tc.charges, time.Hour))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: outcomes %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, c := range []struct {
		key, field string
		want       int64
	}{
		{DayKey(mp, day), "c1", 1_250_000}, {DayKey(mp, day2), "c1", 750_000}, {TotalKey(mp), "c1", 2_000_000},
		{DayKey(mp, day), "c2", 500_000}, {TotalKey(mp), "c2", 500_000},
		{DayKey(mp, day), "c3", 0}, {TotalKey(mp), "c3", 0},
		{DayKey(mp, day), "c4", big}, {TotalKey(mp), "c4", big},
	} {
		if got := hget(t, ctx, rdb, c.key, c.field); got != c.want {
			t.Errorf("%s %s = %d, want %d", c.key, c.field, got, c.want)
		}
	}
	if ok, _ := rdb.HExists(ctx, DayKey(mp, day), "c3").Result(); ok {
		t.Error("a zero charge created a spend field")
	}
	if v, _ := rdb.Get(ctx, ChargeMarkerKey(mp, "a1:1:c")).Result(); v != "0:1" {
		t.Errorf("marker owner %q, want 0:1 (the first record)", v)
	}
	if ttl, _ := rdb.TTL(ctx, ChargeMarkerKey(mp, "a3:1:i")).Result(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("marker TTL %s, want about 1h", ttl)
	}
	later := Charge{MarketplaceID: mp, Key: "a5:1:c", Owner: "0:5", CampaignID: "c5", Day: day, Micros: 1, KeepUntil: time.Now().Add(3 * time.Hour)}
	if _, err := ApplyCharges(ctx, rdb, []Charge{later}); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := rdb.TTL(ctx, ChargeMarkerKey(mp, "a5:1:c")).Result(); ttl <= 3*time.Hour-time.Minute || ttl > 3*time.Hour {
		t.Errorf("marker TTL %s, want about 3h (its KeepUntil)", ttl)
	}
	if ttl, _ := rdb.TTL(ctx, DayKey(mp, day)).Result(); ttl <= DayTTL-time.Minute || ttl > DayTTL {
		t.Errorf("day hash TTL %s, want about %s", ttl, DayTTL)
	}
	if ttl, _ := rdb.TTL(ctx, TotalKey(mp)).Result(); ttl != -1 {
		t.Errorf("total hash TTL %s, want none", ttl)
	}
}

// TestApplyChargesConcurrent: many writers race to apply overlapping
// charges with different owners, in chunks across several marketplaces;
// each key moves spend exactly once and every outcome lands at its index.
func TestApplyChargesConcurrent(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	mps := []string{mp + "-a", mp + "-b", mp + "-c"}
	const keys, writers, price = 1_300, 6, 1_000 // > 2 chunks per marketplace
	var wg sync.WaitGroup
	outcomes := make([][]ChargeOutcome, writers)
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cs []Charge
			for k := range keys {
				cs = append(cs, Charge{MarketplaceID: mps[k%len(mps)], Key: strconv.Itoa(k), Owner: fmt.Sprintf("%d:%d", w, k),
					CampaignID: "c" + strconv.Itoa(k%7), Day: "2025-01-01", Micros: price})
			}
			outcomes[w], errs[w] = ApplyCharges(ctx, rdb, keep(cs, time.Hour))
		}()
	}
	wg.Wait()
	for w := range writers {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
	}
	for k := range keys {
		applied := 0
		for w := range writers {
			switch outcomes[w][k] {
			case ChargeApplied:
				applied++
			case ChargeDuplicate:
			default:
				t.Fatalf("key %d writer %d: %v", k, w, outcomes[w][k])
			}
		}
		if applied != 1 {
			t.Fatalf("key %d applied %d times", k, applied)
		}
	}
	var total int64
	for _, m := range mps {
		for c := range 7 {
			total += hget(t, ctx, rdb, TotalKey(m), "c"+strconv.Itoa(c))
		}
	}
	if total != keys*price {
		t.Errorf("total spend %d, want %d", total, keys*price)
	}
}

// TestApplyChargesAfterScriptFlush: Redis forgets its scripts (restart);
// the next call loads the script again and succeeds.
func TestApplyChargesAfterScriptFlush(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	c := []Charge{{MarketplaceID: mp, Key: "k", Owner: "0:0", CampaignID: "c", Day: "2025-01-01", Micros: 5}}
	if _, err := ApplyCharges(ctx, rdb, keep(c, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c = append(c, Charge{MarketplaceID: mp, Key: "k2", Owner: "0:1", CampaignID: "c", Day: "2025-01-01", Micros: 7})
	got, err := ApplyCharges(ctx, rdb, keep(c, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != ChargeReplayed || got[1] != ChargeApplied {
		t.Errorf("outcomes %v, want [replayed applied]", got)
	}
	if n := hget(t, ctx, rdb, TotalKey(mp), "c"); n != 12 {
		t.Errorf("spend %d, want 12", n)
	}
}

func TestApplyChargesRejects(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	ok := Charge{MarketplaceID: mp, Key: "k", Owner: "0:0", CampaignID: "c", Day: "2025-01-01", Micros: 1, KeepUntil: time.Now().Add(time.Hour)}
	tests := []struct {
		name string
		edit func(*Charge)
	}{
		{"empty marketplace", func(c *Charge) { c.MarketplaceID = "" }},
		{"brace in marketplace", func(c *Charge) { c.MarketplaceID = "a}b" }},
		{"empty key", func(c *Charge) { c.Key = "" }},
		{"empty owner", func(c *Charge) { c.Owner = "" }},
		{"empty campaign", func(c *Charge) { c.CampaignID = "" }},
		{"bad day", func(c *Charge) { c.Day = "2025-1-1" }},
		{"negative amount", func(c *Charge) { c.Micros = -1 }},
		{"marker expiry now", func(c *Charge) { c.KeepUntil = time.Now() }},
		{"marker expiry in the past", func(c *Charge) { c.KeepUntil = time.Now().Add(-time.Hour) }},
		{"no marker expiry", func(c *Charge) { c.KeepUntil = time.Time{} }},
	}
	for _, tc := range tests {
		c := ok
		tc.edit(&c)
		if _, err := ApplyCharges(ctx, rdb, []Charge{ok, c}); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if n, _ := rdb.Exists(ctx, ChargeMarkerKey(mp, "k"), TotalKey(mp)).Result(); n != 0 {
		t.Errorf("a rejected call wrote %d keys", n)
	}
}

// BenchmarkApplyCharges: one call of 10,000 first-time charges of one
// marketplace (20 chunks), 4 campaigns, against the real Redis. ns/op is per
// call; see the charges/s metric.
func BenchmarkApplyCharges(b *testing.B) {
	env := testenv.Get(b)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr})
	defer rdb.Close()
	ctx := context.Background()
	mp := "bench-" + uuid.NewString()
	const n = 10_000
	cs := make([]Charge, n)
	for i := range cs {
		cs[i] = Charge{MarketplaceID: mp, Owner: "0:" + strconv.Itoa(i), CampaignID: "c" + strconv.Itoa(i%4), Day: "2025-01-01", Micros: 2_500}
	}
	b.ResetTimer()
	for it := range b.N {
		for i := range cs {
			cs[i].Key = strconv.Itoa(it) + ":" + strconv.Itoa(i)
		}
		if _, err := ApplyCharges(ctx, rdb, keep(cs, time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "charges/s")
	b.StopTimer()

	_ = rdb.Del(ctx, TotalKey(mp), DayKey(mp, "2025-01-01")).Err()
}
