package budget

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/redisstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRealRedis writes spend with AddSpend and reads it back through a Cache,
// against the real Redis of the test stack, with a hash large enough that
// HSCAN needs several round trips.
func TestRealRedis(t *testing.T) {
	env := testenv.Get(t)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	berlin := mustLoc(t, "Europe/Berlin")
	mp := "it-" + uuid.NewString() // a marketplace of this test's own
	now := time.Now()
	today, yesterday := DayOf(now, berlin), DayOf(now.AddDate(0, 0, -2), berlin)
	t.Cleanup(func() {
		_ = rdb.Del(context.Background(), DayKey(mp, today), DayKey(mp, yesterday), TotalKey(mp)).Err()
	})

	const campaigns = 2*scanCount + 500
	pipe := rdb.Pipeline()
	for i := range campaigns {
		pipe.HSet(ctx, DayKey(mp, today), fmt.Sprintf("bulk-%d", i), i+1)
		pipe.HSet(ctx, TotalKey(mp), fmt.Sprintf("bulk-%d", i), i+1)
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
	if ttl, err := rdb.TTL(ctx, DayKey(mp, today)).Result(); err != nil || ttl <= DayTTL-time.Minute || ttl > DayTTL {
		t.Errorf("day hash TTL = %s (%v), want about %s", ttl, err, DayTTL)
	}
	if ttl, err := rdb.TTL(ctx, TotalKey(mp)).Result(); err != nil || ttl != -1 {
		t.Errorf("total hash TTL = %s (%v), want none (-1)", ttl, err)
	}

	if _, cur, err := rdb.HScan(ctx, TotalKey(mp), 0, "", scanCount).Result(); err != nil || cur == 0 {
		t.Fatalf("first HSCAN page: cursor %d, err %v; want more pages, or the test does not cover paging", cur, err)
	}

	c := NewCache(rdb, Options{Timeout: 5 * time.Second, Log: testenv.Logger(t)})
	if d, tot := c.Spend(mp, berlin, "c1", now); d != 0 || tot != 0 {
		t.Errorf("before the first refresh: Spend = (%d, %d), want (0, 0)", d, tot)
	}
	if err := c.RefreshNow(ctx); err != nil {
		t.Fatalf("RefreshNow: %v", err)
	}
	if d, tot := c.Spend(mp, berlin, "c1", now); d != 2_000_000 || tot != 7_000_000 {
		t.Errorf("Spend(c1) = (%d, %d), want (2000000, 7000000)", d, tot)
	}
	for _, i := range []int{0, scanCount, campaigns - 1} {
		id := fmt.Sprintf("bulk-%d", i)
		if d, tot := c.Spend(mp, berlin, id, now); d != int64(i+1) || tot != int64(i+1) {
			t.Errorf("Spend(%s) = (%d, %d), want (%d, %d)", id, d, tot, i+1, i+1)
		}
	}
	m := c.reg.Load().m[mp]
	if s := m.snap.Load(); len(s.daySpend) != campaigns+1 || len(s.total) != campaigns+1 {
		t.Errorf("snapshot holds %d day and %d total campaigns, want %d", len(s.daySpend), len(s.total), campaigns+1)
	}
	if age, ok := c.Age(mp); !ok || age < 0 || age > 10*time.Second {
		t.Errorf("Age = %s, %v", age, ok)
	}
}
