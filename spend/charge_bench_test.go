package spend

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/testkit/testenv"
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
	rdb := testenv.Get(b).Redis(b)
	ctx := context.Background()
	mp := "bench-" + uuid.NewString()
	const n, epoch = 10_000, 1_000
	// Each campaign's epoch has buckets for its share of the markers the
	// benchmark sets, as for a steady charge rate.
	for c := range campaigns {
		setMarkers(b, ctx, rdb, mp, "c"+strconv.Itoa(c), epoch-1, int64(n*b.N/campaigns))
	}
	cs := make([]Charge, n)
	for i := range cs {
		cs[i] = Charge{MarketplaceID: mp, Epoch: epoch, Owner: "0:" + strconv.Itoa(i), CampaignID: "c" + strconv.Itoa(i%campaigns),
			Day: "2025-01-01", Micros: 2_500}
		if setLimits != nil {
			setLimits(&cs[i])
		}
	}
	resetStats(b, ctx, rdb)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i := range cs {
			id := uuid.New()
			cs[i].Key = string(id[:]) + "\x01i"
			cs[i].KeepUntil = time.Now().Add(time.Hour)
		}
		b.StartTimer()
		if _, err := ApplyCharges(ctx, rdb, cs, replicas()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "charges/s")
	b.StopTimer()
	b.ReportMetric(scriptMicros(b, ctx, rdb)/float64(b.N*n), "redis-µs/charge")
	for c := range campaigns {
		_ = rdb.Del(ctx, SpendKey(mp, "c"+strconv.Itoa(c))).Err()
	}
}

// scriptMicros is the time Redis (every master of a cluster) spent running
// scripts (EVALSHA) since its statistics were reset, in microseconds.
func scriptMicros(b *testing.B, ctx context.Context, rdb redis.UniversalClient) float64 {
	return commandMicros(b, ctx, rdb, "evalsha")
}
