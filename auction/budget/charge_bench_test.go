package budget

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/redisstore"
)

// BenchmarkApplyChargesCampaigns: one call of 10,000 first-time charges of
// one marketplace (20 chunks) spread over 1,000 campaigns, as a batch of a
// busy marketplace has them, against the real Redis. ns/op is per call; see
// the charges/s metric, and redis-µs/charge: the time Redis spent in the
// script (INFO commandstats), which the load of other processes on the
// machine disturbs less than the wall clock.
func BenchmarkApplyChargesCampaigns(b *testing.B) { benchCharges(b, 1_000, nil) }

// BenchmarkApplyChargesFewCampaigns: the same with 4 campaigns.
func BenchmarkApplyChargesFewCampaigns(b *testing.B) { benchCharges(b, 4, nil) }

// benchCharges runs the benchmark with charges over campaigns campaigns;
// setLimits (if not nil) gives each charge its campaign's budgets.
func benchCharges(b *testing.B, campaigns int, setLimits func(*Charge)) {
	env := testenv.Get(b)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr})
	defer rdb.Close()
	ctx := context.Background()
	mp := "bench-" + uuid.NewString()
	const n, epoch = 10_000, 1_000
	setMarkers(b, ctx, rdb, mp, epoch-1, int64(n*b.N))
	cs := make([]Charge, n)
	for i := range cs {
		cs[i] = Charge{MarketplaceID: mp, Epoch: epoch, Owner: "0:" + strconv.Itoa(i), CampaignID: "c" + strconv.Itoa(i%campaigns),
			Day: "2025-01-01", Micros: 2_500}
		if setLimits != nil {
			setLimits(&cs[i])
		}
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i := range cs {
			id := uuid.New()
			cs[i].Key = string(id[:]) + "\x01i"
			cs[i].KeepUntil = time.Now().Add(time.Hour)
		}
		b.StartTimer()
		if _, err := ApplyCharges(ctx, rdb, cs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "charges/s")
	b.StopTimer()
	b.ReportMetric(scriptMicros(b, ctx, rdb)/float64(b.N*n), "redis-µs/charge")
	_ = rdb.Del(ctx, TotalKey(mp), DayKey(mp, "2025-01-01")).Err()
}

// scriptMicros is the time Redis spent running scripts (EVALSHA) since its
// statistics were reset, in microseconds.
func scriptMicros(b *testing.B, ctx context.Context, rdb redis.UniversalClient) float64 {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					f, _ := strconv.ParseFloat(v, 64)
					return f
				}
			}
		}
	}
	b.Fatal("no evalsha in INFO commandstats")
	return 0
}
