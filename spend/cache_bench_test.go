package spend

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// BenchmarkCacheRefresh: one refresh pass of a Cache holding one
// marketplace of 10,000 campaigns (each with spend today), against the real
// Redis (the cluster with ENDCAP_TEST_REDIS_CLUSTER=1). ns/op is the pass's
// wall time; redis-µs/refresh is the time Redis (all masters) spent in the
// commands of the pass (INFO commandstats).
func BenchmarkCacheRefresh(b *testing.B) {
	rdb := testenv.Get(b).Redis(b)
	ctx := context.Background()
	mp := "bench-" + uuid.NewString()
	const campaigns = 10_000
	today := DayOf(time.Now(), time.UTC)
	ids := make([]string, campaigns)
	pipe := rdb.Pipeline()
	for i := range ids {
		ids[i] = uuid.NewString()
		pipe.HSet(ctx, SpendKey(mp, ids[i]), DayField(today), i+1, TotalField, 10*(i+1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		p := rdb.Pipeline()
		for _, id := range ids {
			p.Del(ctx, SpendKey(mp, id))
		}
		_, _ = p.Exec(ctx)
	})
	c := NewCache(rdb, Options{Timeout: 10 * time.Second})
	c.Register(mp, time.UTC, ids...)
	if err := c.RefreshNow(ctx); err != nil {
		b.Fatal(err)
	}
	if d, tot := c.Spend(mp, time.UTC, ids[9], time.Now()); d != 10 || tot != 100 {
		b.Fatalf("spend %d, %d", d, tot)
	}
	resetStats(b, ctx, rdb)
	b.ResetTimer()
	for range b.N {
		if err := c.RefreshNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(commandMicros(b, ctx, rdb, "")/float64(b.N), "redis-µs/refresh")
}

// resetStats resets the command statistics of every master.
func resetStats(b *testing.B, ctx context.Context, rdb redis.UniversalClient) {
	if err := redisstore.ForEachMaster(ctx, rdb, func(ctx context.Context, m *redis.Client) error { return m.ConfigResetStat(ctx).Err() }); err != nil {
		b.Fatal(err)
	}
}

// commandMicros is the time every master spent in command cmd ("" every
// command but INFO and CONFIG) since the statistics were reset, in
// microseconds (INFO commandstats).
func commandMicros(b testing.TB, ctx context.Context, rdb redis.UniversalClient, cmd string) float64 {
	var mu sync.Mutex
	var sum float64
	err := redisstore.ForEachMaster(ctx, rdb, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			name = strings.TrimPrefix(name, "cmdstat_")
			if !ok || (cmd != "" && name != cmd) || (cmd == "" && (name == "info" || strings.HasPrefix(name, "config"))) {
				continue
			}
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					f, _ := strconv.ParseFloat(v, 64)
					mu.Lock()
					sum += f
					mu.Unlock()
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return sum
}
