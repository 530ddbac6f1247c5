package spend

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/testkit/testenv"
)

// chargeEnv is a real Redis (the cluster, with ENDCAP_TEST_REDIS_CLUSTER=1)
// and a marketplace id of the test's own.
func chargeEnv(t *testing.T) (context.Context, redis.UniversalClient, string) {
	t.Helper()
	rdb := testenv.Get(t).Redis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, rdb, "charge-" + uuid.NewString()
}

// replicas is what the tests ask ApplyCharges to wait for: a replica of
// every master on the test cluster, none on one server.
func replicas() int {
	if testenv.RedisClusterMode() {
		return 1
	}
	return 0
}

// daySpend and totalSpend are a campaign's spend of a day and of all time.
func daySpend(t testing.TB, ctx context.Context, rdb redis.UniversalClient, mp, camp, day string) int64 {
	t.Helper()
	d, _, err := ReadSpend(ctx, rdb, mp, camp, day)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func totalSpend(t testing.TB, ctx context.Context, rdb redis.UniversalClient, mp, camp string) int64 {
	t.Helper()
	_, tot, err := ReadSpend(ctx, rdb, mp, camp, "2000-01-01")
	if err != nil {
		t.Fatal(err)
	}
	return tot
}

// keep sets every charge's marker to expire in d.
func keep(cs []Charge, d time.Duration) []Charge {
	until := time.Now().Add(d)
	for i := range cs {
		cs[i].KeepUntil = until
	}
	return cs
}

// markerOwner is the owner of key's marker in campaign camp's epoch, "" if
// it has none.
func markerOwner(t testing.TB, ctx context.Context, rdb redis.UniversalClient, mp, camp string, epoch int64, key string) string {
	t.Helper()
	v, err := rdb.HGet(ctx, MarkerBucketKey(mp, camp, epoch, buckets(t, ctx, rdb, mp, camp, epoch), key), key).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}

// markerTTL is the TTL of the hash that holds key's marker.
func markerTTL(t testing.TB, ctx context.Context, rdb redis.UniversalClient, mp, camp string, epoch int64, key string) time.Duration {
	t.Helper()
	ttl, err := rdb.TTL(ctx, MarkerBucketKey(mp, camp, epoch, buckets(t, ctx, rdb, mp, camp, epoch), key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ttl
}

// buckets is the bucket count the script chose for campaign camp's epoch.
func buckets(t testing.TB, ctx context.Context, rdb redis.UniversalClient, mp, camp string, epoch int64) uint32 {
	t.Helper()
	b, _ := epochMeta(t, ctx, rdb, mp, camp, epoch)
	return b
}

// epochMeta is the bucket count and the number of markers of campaign
// camp's epoch, as the script keeps them.
func epochMeta(t testing.TB, ctx context.Context, rdb redis.UniversalClient, mp, camp string, epoch int64) (uint32, int64) {
	t.Helper()
	v, err := rdb.HGet(ctx, MarkerMetaKey(mp, camp, epoch), MarkerMetaField).Result()
	if err != nil {
		t.Fatalf("epoch %d of %s: %v", epoch, camp, err)
	}
	bs, ns, _ := strings.Cut(v, ":")
	b, err1 := strconv.ParseUint(bs, 10, 32)
	n, err2 := strconv.ParseInt(ns, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("epoch %d of %s is described as %q", epoch, camp, v)
	}
	return uint32(b), n
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
		got, err := ApplyCharges(ctx, rdb, keep(tc.charges, time.Hour), replicas())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: outcomes %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, c := range []struct {
		camp, field string
		want        int64
	}{
		{"c1", DayField(day), 1_250_000}, {"c1", DayField(day2), 750_000}, {"c1", TotalField, 2_000_000},
		{"c2", DayField(day), 500_000}, {"c2", TotalField, 500_000},
		{"c3", DayField(day), 0}, {"c3", TotalField, 0},
		{"c4", DayField(day), big}, {"c4", TotalField, big},
	} {
		if got := hget(t, ctx, rdb, SpendKey(mp, c.camp), c.field); got != c.want {
			t.Errorf("%s %s = %d, want %d", SpendKey(mp, c.camp), c.field, got, c.want)
		}
	}
	if ok, _ := rdb.HExists(ctx, SpendKey(mp, "c3"), DayField(day)).Result(); ok {
		t.Error("a zero charge created a spend field")
	}
	if v := markerOwner(t, ctx, rdb, mp, "c1", 0, "a1:1:c"); v != "0:1" {
		t.Errorf("marker owner %q, want 0:1 (the first record)", v)
	}
	if ttl := markerTTL(t, ctx, rdb, mp, "c3", 0, "a3:1:i"); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("marker TTL %s, want about 1h", ttl)
	}
	later := Charge{MarketplaceID: mp, Key: "a5:1:c", Owner: "0:5", CampaignID: "c5", Day: day, Micros: 1, KeepUntil: time.Now().Add(3 * time.Hour)}
	if _, err := ApplyCharges(ctx, rdb, []Charge{later}, replicas()); err != nil {
		t.Fatal(err)
	}
	if ttl := markerTTL(t, ctx, rdb, mp, "c5", 0, "a5:1:c"); ttl <= 3*time.Hour-time.Minute || ttl > 3*time.Hour {
		t.Errorf("marker TTL %s, want about 3h (its KeepUntil)", ttl)
	}
	if ttl, _ := rdb.TTL(ctx, SpendKey(mp, "c1")).Result(); ttl != -1 {
		t.Errorf("spend hash TTL %s, want none", ttl)
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
			outcomes[w], errs[w] = ApplyCharges(ctx, rdb, keep(cs, time.Hour), replicas())
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
			total += totalSpend(t, ctx, rdb, m, "c"+strconv.Itoa(c))
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
	if _, err := ApplyCharges(ctx, rdb, keep(c, time.Hour), replicas()); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c = append(c, Charge{MarketplaceID: mp, Key: "k2", Owner: "0:1", CampaignID: "c", Day: "2025-01-01", Micros: 7})
	got, err := ApplyCharges(ctx, rdb, keep(c, time.Hour), replicas())
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != ChargeReplayed || got[1] != ChargeApplied {
		t.Errorf("outcomes %v, want [replayed applied]", got)
	}
	if n := totalSpend(t, ctx, rdb, mp, "c"); n != 12 {
		t.Errorf("spend %d, want 12", n)
	}
}

// cutProxy forwards TCP connections to Redis and, when cut is set, drops
// the next reply it would pass back and closes that connection: Redis has
// run the command, the client never hears of it.
type cutProxy struct {
	addr   string
	target string
	cut    atomic.Bool
	cuts   atomic.Int32
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &cutProxy{addr: ln.Addr().String(), target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.handle(c)
		}
	}()
	return p
}

func (p *cutProxy) handle(c net.Conn) {
	defer c.Close()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	go func() {
		_, _ = io.Copy(s, c)
		_ = s.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if p.cut.CompareAndSwap(true, false) {
				p.cuts.Add(1)
				return // the reply is lost with the connection
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestApplyChargesReplyLost: Redis applies a call's charges but the
// connection breaks before the reply arrives. Whether the client retries
// by itself (go-redis, MaxRetries) or the caller calls again after the
// error, the charges come back replayed (which the pipeline treats as
// charged) and spend moved exactly once.
func TestApplyChargesReplyLost(t *testing.T) {
	if testenv.RedisClusterMode() {
		t.Skip("the proxy stands for one server")
	}
	ctx, _, mp := chargeEnv(t)
	p := newCutProxy(t, testenv.Get(t).RedisAddr)
	for _, tc := range []struct {
		name    string
		retries int // go-redis MaxRetries: -1 none
	}{{"the client retries", 1}, {"the caller retries", -1}} {
		rdb := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: tc.retries})
		defer rdb.Close()
		m := mp + "-" + strconv.Itoa(tc.retries+1)
		// A first call loads the script: the cut reply below is the script's own.
		if _, err := ApplyCharges(ctx, rdb, keep([]Charge{{MarketplaceID: m, Key: "warm", Owner: "0:0", CampaignID: "c", Day: "2025-01-01", Micros: 1}}, time.Hour), replicas()); err != nil {
			t.Fatal(err)
		}
		cs := keep([]Charge{
			{MarketplaceID: m, Key: "a", Epoch: 9, Owner: "1:1", CampaignID: "c", Day: "2025-01-01", Micros: 100},
			{MarketplaceID: m, Key: "b", Epoch: 9, Owner: "1:2", CampaignID: "c", Day: "2025-01-01", Micros: 20},
		}, time.Hour)
		p.cut.Store(true)
		got, err := ApplyCharges(ctx, rdb, cs, replicas())
		if tc.retries < 0 {
			if err == nil {
				t.Fatalf("%s: no error with the reply lost and no retry", tc.name)
			}
			got, err = ApplyCharges(ctx, rdb, cs, replicas())
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if p.cuts.Swap(0) != 1 {
			t.Fatalf("%s: the proxy did not cut a reply", tc.name)
		}
		if want := []ChargeOutcome{ChargeReplayed, ChargeReplayed}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: outcomes %v, want %v (applied by the call whose reply was lost)", tc.name, got, want)
		}
		if n := totalSpend(t, ctx, rdb, m, "c"); n != 121 {
			t.Errorf("%s: spend %d, want 121 (each charge once)", tc.name, n)
		}
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
		{"key too long", func(c *Charge) { c.Key = strings.Repeat("k", MaxChargeKey+1) }},
		{"negative epoch", func(c *Charge) { c.Epoch = -1 }},
		{"epoch too large", func(c *Charge) { c.Epoch = MaxEpoch + 1 }},
		{"empty owner", func(c *Charge) { c.Owner = "" }},
		{"empty campaign", func(c *Charge) { c.CampaignID = "" }},
		{"campaign beginning with !", func(c *Charge) { c.CampaignID = "!c" }},
		{"bad day", func(c *Charge) { c.Day = "2025-1-1" }},
		{"negative amount", func(c *Charge) { c.Micros = -1 }},
		{"marker expiry now", func(c *Charge) { c.KeepUntil = time.Now() }},
		{"marker expiry in the past", func(c *Charge) { c.KeepUntil = time.Now().Add(-time.Hour) }},
		{"no marker expiry", func(c *Charge) { c.KeepUntil = time.Time{} }},
	}
	for _, tc := range tests {
		c := ok
		tc.edit(&c)
		if _, err := ApplyCharges(ctx, rdb, []Charge{ok, c}, replicas()); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if n, _ := rdb.Exists(ctx, MarkerMetaKey(mp, "c", 0), SpendKey(mp, "c")).Result(); n != 0 {
		t.Errorf("a rejected call wrote %d keys", n)
	}
}

// TestOldDayFields: a charge that writes a new day field of a campaign
// deletes its day fields (and their refusal hints) older than
// DayFieldsKept, and its week and month fields (and hints) of weeks and
// months that ended before that day, but those of the call itself (a
// lagging replay of an old day keeps its own); recent ones and the total
// stay.
func TestOldDayFields(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	now := time.Now()
	day := func(daysAgo int) string { return DayOf(now.AddDate(0, 0, -daysAgo), time.UTC) }
	w := func(d string) string { return WeekField(WeekOf(d)) }
	m := func(d string) string { return MonthField(MonthOf(d)) }
	k := SpendKey(mp, "c")
	if err := rdb.HSet(ctx, k, DayField(day(40)), 1, "!"+DayField(day(40)), 9, DayField(day(36)), 2, DayField(day(10)), 3, TotalField, 6,
		w(day(10)), 3, m(day(10)), 3, w(day(45)), 5, "!"+w(day(45)), 7, m(day(70)), 4).Err(); err != nil {
		t.Fatal(err)
	}
	c := func(key, d string) Charge {
		return Charge{MarketplaceID: mp, Key: key, Owner: "0:" + key, CampaignID: "c", Day: d, Micros: 10, KeepUntil: now.Add(time.Hour)}
	}
	// A day already there: nothing is deleted.
	if _, err := ApplyCharges(ctx, rdb, []Charge{c("a", day(10))}, replicas()); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.HLen(ctx, k).Result(); n != 10 {
		t.Errorf("%d fields after a charge of an existing day, want 10", n)
	}
	// A new day, with one of an old day in the same call.
	if _, err := ApplyCharges(ctx, rdb, []Charge{c("b", day(0)), c("old", day(38))}, replicas()); err != nil {
		t.Fatal(err)
	}
	got, err := rdb.HGetAll(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]int{DayField(day(0)): 10, DayField(day(38)): 10, DayField(day(10)): 13, TotalField: 36, w(day(10)): 13, m(day(10)): 13}
	for _, d := range []string{day(0), day(38)} {
		sums[w(d)] += 10
		sums[m(d)] += 10
	}
	want := map[string]string{}
	for f, v := range sums {
		want[f] = strconv.Itoa(v)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("spend hash %v, want %v", got, want)
	}
}

// TestKeyHash: the bucket hash is FNV-1a 32 (its published test vectors):
// changing it would move every existing marker to another bucket.
func TestKeyHash(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
	}{{"", 0x811c9dc5}, {"a", 0xe40c292c}, {"foobar", 0xbf9cf968}} {
		if got := keyHash(c.in); got != c.want {
			t.Errorf("keyHash(%q) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

// setMarkers says epoch of campaign camp got n markers, as the script
// counts them (the next epoch sizes its buckets from it).
func setMarkers(t testing.TB, ctx context.Context, rdb redis.UniversalClient, mp, camp string, epoch, n int64) {
	t.Helper()
	if err := rdb.HSet(ctx, MarkerMetaKey(mp, camp, epoch), MarkerMetaField, strconv.Itoa(MinMarkerBuckets)+":"+strconv.FormatInt(n, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Expire(ctx, MarkerMetaKey(mp, camp, epoch), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMarkerBuckets: an epoch's bucket count follows the markers of the
// epoch before (about MarkersPerBucket a bucket, a power of two within the
// bounds), is chosen once, and every marker of the epoch is found in the
// bucket it names, whatever happens to the count afterwards.
func TestMarkerBuckets(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	tests := []struct {
		prev int64 // markers of the epoch before; -1: none recorded
		want uint32
	}{
		{-1, MinMarkerBuckets},
		{0, MinMarkerBuckets},
		{MinMarkerBuckets * MarkersPerBucket, MinMarkerBuckets},
		{MinMarkerBuckets*MarkersPerBucket + 1, 2 * MinMarkerBuckets},
		{100_000, 2048},
		{1 << 40, MaxMarkerBuckets},
	}
	for i, tc := range tests {
		epoch := int64(1000 + 10*i)
		if tc.prev >= 0 {
			setMarkers(t, ctx, rdb, mp, "c", epoch-1, tc.prev)
		}
		c := Charge{MarketplaceID: mp, Key: "k" + strconv.Itoa(i), Epoch: epoch, Owner: "0:1", CampaignID: "c", Day: "2025-01-01", Micros: 1}
		if _, err := ApplyCharges(ctx, rdb, keep([]Charge{c}, time.Hour), replicas()); err != nil {
			t.Fatal(err)
		}
		if got := buckets(t, ctx, rdb, mp, "c", epoch); got != tc.want {
			t.Errorf("%d markers before: %d buckets, want %d", tc.prev, got, tc.want)
		}
		// The count of the epoch before changes: this epoch keeps its buckets.
		setMarkers(t, ctx, rdb, mp, "c", epoch-1, 1<<30)
		c.Key, c.Owner = c.Key+"-2", "0:2"
		if _, err := ApplyCharges(ctx, rdb, keep([]Charge{c}, time.Hour), replicas()); err != nil {
			t.Fatal(err)
		}
		if got := buckets(t, ctx, rdb, mp, "c", epoch); got != tc.want {
			t.Errorf("%d markers before, then more: %d buckets, want still %d", tc.prev, got, tc.want)
		}
		if got := markerOwner(t, ctx, rdb, mp, "c", epoch, c.Key); got != "0:2" {
			t.Errorf("marker not in its bucket: owner %q", got)
		}
		if _, n := epochMeta(t, ctx, rdb, mp, "c", epoch); n != 2 {
			t.Errorf("epoch counted %d markers, want 2", n)
		}
	}
}

// TestMarkerEpochs: a key is one charge within its epoch; the same key in
// another epoch (another auction hour) is another charge; epochs of other
// marketplaces do not mix.
func TestMarkerEpochs(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	c := func(mp string, epoch int64, owner string) Charge {
		return Charge{MarketplaceID: mp, Key: "same", Epoch: epoch, Owner: owner, CampaignID: "c", Day: "2025-01-01", Micros: 10}
	}
	got, err := ApplyCharges(ctx, rdb, keep([]Charge{c(mp, 7, "0:1"), c(mp, 8, "0:2"), c(mp+"-x", 7, "0:3"), c(mp, 7, "0:4")}, time.Hour), replicas())
	if err != nil {
		t.Fatal(err)
	}
	want := []ChargeOutcome{ChargeApplied, ChargeApplied, ChargeApplied, ChargeDuplicate}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if n := totalSpend(t, ctx, rdb, mp, "c"); n != 20 {
		t.Errorf("spend %d, want 20", n)
	}
}

// TestLegacyMarkers: a charge applied by a build that kept one string key
// per marker is not applied again: its owner replays, another record is a
// duplicate (and the owner is carried into the hash); without a legacy key,
// or when none exists, the charge is applied as usual.
func TestLegacyMarkers(t *testing.T) {
	if testenv.RedisClusterMode() {
		t.Skip("a cluster never held the earlier layouts")
	}
	ctx, rdb, mp := chargeEnv(t)
	legacy := "ec:charged:{" + mp + "}:0197afbba67b7718991a1b1c1d1e1f20:1:c"
	if err := rdb.Set(ctx, legacy, "4:40", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	c := func(key, owner, legacy string) Charge {
		return Charge{MarketplaceID: mp, Key: key, Epoch: 5, Owner: owner, CampaignID: "c", Day: "2025-01-01", Micros: 7, LegacyMarker: legacy}
	}
	steps := []struct {
		name string
		c    Charge
		want ChargeOutcome
	}{
		{"the legacy owner replays", c("w1", "4:40", legacy), ChargeReplayed},
		{"another record", c("w1", "5:50", legacy), ChargeDuplicate},
		{"no legacy marker exists", c("w2", "5:51", "ec:charged:{"+mp+"}:00000000000000000000000000000000:1:c"), ChargeApplied},
		{"no legacy key given", c("w3", "5:52", ""), ChargeApplied},
	}
	for _, s := range steps {
		got, err := ApplyCharges(ctx, rdb, keep([]Charge{s.c}, time.Hour), replicas())
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != s.want {
			t.Errorf("%s: %v, want %v", s.name, got[0], s.want)
		}
	}
	if got := markerOwner(t, ctx, rdb, mp, "c", 5, "w1"); got != "4:40" {
		t.Errorf("carried owner %q, want 4:40", got)
	}
	if n := totalSpend(t, ctx, rdb, mp, "c"); n != 14 {
		t.Errorf("spend %d, want 14 (the two new charges only)", n)
	}
	if _, err := ApplyCharges(ctx, rdb, keep([]Charge{c("w4", "1:1", "ec:charged:{other}:x")}, time.Hour), replicas()); err == nil {
		t.Error("a legacy key of another marketplace was accepted")
	}
}

// TestMarkerExpiry: a marker hash expires at the latest KeepUntil of its
// markers: a later one extends it, an earlier one never shortens it.
func TestMarkerExpiry(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const epoch = 42
	at := func(d time.Duration, key, owner string) Charge {
		return Charge{MarketplaceID: mp, Key: key, Epoch: epoch, Owner: owner, CampaignID: "c", Day: "2025-01-01", Micros: 1, KeepUntil: time.Now().Add(d)}
	}
	// Keys of one bucket: the epoch has MinMarkerBuckets buckets (one).
	var keys []string
	for i := 0; len(keys) < 3; i++ {
		if k := "k" + strconv.Itoa(i); keyHash(k)%MinMarkerBuckets == 0 {
			keys = append(keys, k)
		}
	}
	steps := []struct {
		c    Charge
		want ChargeOutcome
		ttl  time.Duration
	}{
		{at(2*time.Hour, keys[0], "0:1"), ChargeApplied, 2 * time.Hour},
		{at(5*time.Hour, keys[1], "0:2"), ChargeApplied, 5 * time.Hour},  // another marker, kept longer
		{at(time.Hour, keys[2], "0:3"), ChargeApplied, 5 * time.Hour},    // kept shorter: no change
		{at(9*time.Hour, keys[0], "0:1"), ChargeReplayed, 9 * time.Hour}, // a late replay extends it
	}
	for i, s := range steps {
		got, err := ApplyCharges(ctx, rdb, []Charge{s.c}, replicas())
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != s.want {
			t.Errorf("step %d: %v, want %v", i, got[0], s.want)
		}
		if ttl := markerTTL(t, ctx, rdb, mp, "c", epoch, s.c.Key); ttl <= s.ttl-time.Minute || ttl > s.ttl {
			t.Errorf("step %d: bucket TTL %s, want about %s", i, ttl, s.ttl)
		}
		if ttl, _ := rdb.TTL(ctx, MarkerMetaKey(mp, "c", epoch)).Result(); ttl <= s.ttl-time.Minute || ttl > s.ttl {
			t.Errorf("step %d: meta TTL %s, want about %s (the epoch's latest)", i, ttl, s.ttl)
		}
	}
}

// TestMarkerMemory: markers of a busy epoch, sized from the epoch before,
// stay in listpack hashes and cost well under the 214 bytes of a string
// marker (measured with MEMORY USAGE, keys with their hashes included). The
// keys are those of the charging pipeline: 18 bytes. Campaigns with few
// markers an hour pay for their hash and its meta hash: measured too.
func TestMarkerMemory(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	cases := []struct {
		name                string
		campaigns, per, max int // campaigns, markers of each in the hour, at most bytes a marker
	}{
		{"one busy campaign", 1, 20_000, 64},
		{"100 markers a campaign", 200, 100, 64},
		{"10 markers a campaign", 1_000, 10, 64},
		{"one marker a campaign", 2_000, 1, 256},
	}
	for ci, tc := range cases {
		epoch := int64(500_000 + 10*ci)
		var cs []Charge
		for c := range tc.campaigns {
			camp := fmt.Sprintf("c%d-%s", c, uuid.NewString()) // a campaign id as long as the API's
			setMarkers(t, ctx, rdb, mp, camp, epoch-1, int64(tc.per))
			for i := range tc.per {
				id := uuid.New()
				cs = append(cs, Charge{MarketplaceID: mp, Key: string(id[:]) + "\x01i", Epoch: epoch, Owner: "3:" + strconv.Itoa(10_000_000+i),
					CampaignID: camp, Day: "2025-01-01", Micros: 1})
			}
		}
		if _, err := ApplyCharges(ctx, rdb, keep(cs, time.Hour), replicas()); err != nil {
			t.Fatal(err)
		}
		var bytes int64
		var hashes int
		seen := map[string]bool{}
		for _, c := range cs {
			if seen[c.CampaignID] {
				continue
			}
			seen[c.CampaignID] = true
			b := buckets(t, ctx, rdb, mp, c.CampaignID, epoch)
			var keys []string // bucket 0 holds the epoch's description too
			for i := range b {
				keys = append(keys, MarkerPrefix(mp, c.CampaignID)+strconv.FormatInt(epoch, 10)+":"+strconv.Itoa(int(i)))
			}
			for _, key := range keys {
				enc, err := rdb.ObjectEncoding(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if enc != "listpack" {
					t.Fatalf("%s: %s is a %s, want a listpack (%d buckets for %d markers)", tc.name, key, enc, b, tc.per)
				}
				m, err := rdb.MemoryUsage(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				bytes += m + int64(len(key)) + 40 // MEMORY USAGE leaves out the key's name and its expiry entry
				hashes++
			}
		}
		per := float64(bytes) / float64(len(cs))
		t.Logf("%s: %d markers of %d campaigns in %d hashes: %.1f bytes a marker", tc.name, len(cs), tc.campaigns, hashes, per)
		if per > float64(tc.max) {
			t.Errorf("%s: %.1f bytes a marker, want at most %d", tc.name, per, tc.max)
		}
	}
}

// BenchmarkApplyCharges: one call of 10,000 first-time charges of one
// marketplace (20 chunks), 4 campaigns, against the real Redis. ns/op is per
// call; see the charges/s metric.
func BenchmarkApplyCharges(b *testing.B) {
	rdb := testenv.Get(b).Redis(b)
	ctx := context.Background()
	mp := "bench-" + uuid.NewString()
	const n, epoch = 10_000, 1_000
	// The epoch's buckets are sized for all the markers the benchmark sets,
	// as they are for a steady charge rate.
	for c := range 4 {
		setMarkers(b, ctx, rdb, mp, "c"+strconv.Itoa(c), epoch-1, int64(n*b.N/4))
	}
	cs := make([]Charge, n)
	for i := range cs {
		cs[i] = Charge{MarketplaceID: mp, Epoch: epoch, Owner: "0:" + strconv.Itoa(i), CampaignID: "c" + strconv.Itoa(i%4), Day: "2025-01-01", Micros: 2_500}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i := range cs {
			id := uuid.New()
			cs[i].Key = string(id[:]) + "\x01i"
		}
		b.StartTimer()
		if _, err := ApplyCharges(ctx, rdb, keep(cs, time.Hour), replicas()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "charges/s")
	b.StopTimer()

	for c := range 4 {
		_ = rdb.Del(ctx, SpendKey(mp, "c"+strconv.Itoa(c))).Err()
	}
}
