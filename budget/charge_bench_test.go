package budget

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/redisstore"
)

// BenchmarkApplyChargesCampaigns: one call of 10,000 first-time charges of
// one marketplace (20 chunks) spread over 1,000 campaigns, as a batch of a
// busy marketplace has them, against the real Redis. ns/op is per call; see
// the charges/s metric. setLimits (if not nil) gives each charge its
// campaign's budgets.
func BenchmarkApplyChargesCampaigns(b *testing.B) { benchCampaigns(b, nil) }

func benchCampaigns(b *testing.B, setLimits func(*Charge)) {
	env := testenv.Get(b)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr})
	defer rdb.Close()
	ctx := context.Background()
	mp := "bench-" + uuid.NewString()
	const n, epoch, campaigns = 10_000, 1_000, 1_000
	setMarkers(b, ctx, rdb, mp, epoch-1, int64(n*b.N))
	cs := make([]Charge, n)
	for i := range cs {
		cs[i] = Charge{MarketplaceID: mp, Epoch: epoch, Owner: "0:" + strconv.Itoa(i), CampaignID: "c" + strconv.Itoa(i%campaigns),
			Day: "2025-01-01", Micros: 2_500}
		if setLimits != nil {
			setLimits(&cs[i])
		}
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
	_ = rdb.Del(ctx, TotalKey(mp), DayKey(mp, "2025-01-01")).Err()
}
