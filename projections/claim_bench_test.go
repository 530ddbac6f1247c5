package projections_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/projections"
)

// redisCPU is the Redis server's CPU time so far (INFO cpu: user + system).
func redisCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// BenchmarkClaim claims a fold batch's keys (50,000 fresh event ids, as the
// fold builds them) in one call, and reports the Redis server's CPU a key
// (redis-ns/key, from INFO cpu) beside the client's wall time (ns/key): the
// claim step of a batch is mostly the server's single thread. "upgrade"
// also reads the previous version's keys, as during the dedupe window after
// the upgrade to hashed keys (Claimer.WithLegacy).
func BenchmarkClaim(b *testing.B) {
	for _, upgrade := range []bool{false, true} {
		name := "hashed"
		if upgrade {
			name = "upgrade"
		}
		b.Run(name, func(b *testing.B) { benchmarkClaim(b, upgrade) })
	}
}

func benchmarkClaim(b *testing.B, upgrade bool) {
	rdb := testRedis(b)
	const n = 50_000
	mp := uuid.NewString()
	prefix := fmt.Sprintf("bench:claim:%d:", time.Now().UnixNano())
	c := projections.NewClaimer(rdb, prefix, time.Minute)
	if upgrade {
		c.WithLegacy(prefix+"old:", time.Now().Add(time.Hour))
	}
	keys := make([]projections.ClaimKey, n)
	ctx := context.Background()
	var server time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j := range keys {
			keys[j] = projections.ClaimKey{Key: mp + ":impression:" + uuid.NewString(), Partition: int32(j % 12), Offset: int64(i*n + j)}
		}
		before := redisCPU(b, rdb)
		b.StartTimer()
		got, err := c.Claim(ctx, keys)
		b.StopTimer()
		server += redisCPU(b, rdb) - before
		if err != nil || got[n-1] != projections.ClaimFirst {
			b.Fatal(err, got[n-1])
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
	b.ReportMetric(float64(server.Nanoseconds())/float64(b.N*n), "redis-ns/key")
}
