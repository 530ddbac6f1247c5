package spend

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRealRedis writes spend with AddSpend and reads it back through a Cache,
// against the real Redis of the test stack (the cluster with
// ENDCAP_TEST_REDIS_CLUSTER=1), with more campaigns than one pipelined read
// holds.
func TestRealRedis(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	berlin := mustLoc(t, "Europe/Berlin")
	mp := "it-" + uuid.NewString() // a marketplace of this test's own
	// The last millisecond of Berlin's yesterday, the cache's clock: the
	// test reads the day of that clock, not of the wall clock's now (as it
	// must were Berlin's midnight to pass while the spend is written).
	y, mo, d := time.Now().In(berlin).Date()
	now := time.Date(y, mo, d, 0, 0, 0, 0, berlin).Add(-time.Millisecond)
	today, yesterday := DayOf(now, berlin), DayOf(now.AddDate(0, 0, -2), berlin)
	const campaigns = 2*readChunk + 500
	ids := make([]string, campaigns)
	for i := range ids {
		ids[i] = fmt.Sprintf("bulk-%d", i)
	}
	t.Cleanup(func() {
		for _, id := range append(ids, "c1") {
			_ = rdb.Del(context.Background(), SpendKey(mp, id)).Err()
		}
	})
	pipe := rdb.Pipeline()
	for i, id := range ids {
		pipe.HSet(ctx, SpendKey(mp, id), DayField(today), i+1, TotalField, i+1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		day    string
		micros int64
	}{{today, 1_250_000}, {today, 750_000}, {yesterday, 5_000_000}} {
		if err := AddSpend(ctx, rdb, mp, "c1", s.day, s.micros); err != nil {
			t.Fatalf("AddSpend: %v", err)
		}
	}
	if ttl, err := rdb.TTL(ctx, SpendKey(mp, "c1")).Result(); err != nil || ttl != -1 {
		t.Errorf("spend hash TTL = %s (%v), want none (-1)", ttl, err)
	}

	c := NewCache(rdb, Options{Timeout: 5 * time.Second, Log: testenv.Logger(t)})
	c.now = func() time.Time { return now }
	if d, tot := c.Spend(mp, berlin, "c1", now); d != 0 || tot != 0 {
		t.Errorf("before the first refresh: Spend = (%d, %d), want (0, 0)", d, tot)
	}
	c.Register(mp, berlin, ids...)
	if err := c.RefreshNow(ctx); err != nil {
		t.Fatalf("RefreshNow: %v", err)
	}
	if d, tot := c.Spend(mp, berlin, "c1", now); d != 2_000_000 || tot != 7_000_000 {
		t.Errorf("Spend(c1) = (%d, %d), want (2000000, 7000000)", d, tot)
	}
	for _, i := range []int{0, readChunk, campaigns - 1} {
		if d, tot := c.Spend(mp, berlin, ids[i], now); d != int64(i+1) || tot != int64(i+1) {
			t.Errorf("Spend(%s) = (%d, %d), want (%d, %d)", ids[i], d, tot, i+1, i+1)
		}
	}
	m := c.reg.Load().m[mp]
	if s := m.snap.Load(); len(s.idx) != campaigns+1 || len(s.entries) != campaigns+1 {
		t.Errorf("snapshot holds %d campaigns (%d entries), want %d", len(s.idx), len(s.entries), campaigns+1)
	}
	if age, ok := c.Age(mp); !ok || age < 0 || age > 10*time.Second {
		t.Errorf("Age = %s, %v", age, ok)
	}
}
