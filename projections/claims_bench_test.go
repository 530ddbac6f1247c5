package projections_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/testkit/testenv"
)

// cpuTime is the process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClaim claims a fold batch's keys (50,000 fresh event ids of 6
// partitions, as the fold builds them) and keeps them (the changelog, here
// kfake in this process, then the local store), and reports the wall time
// (ns/key; claim-ns/key: the decision alone, the step the fold waits for:
// Keep runs beside the sinks) and the CPU time of the whole process a key
// (cpu-ns/key: the claims, the store's compactions, the Kafka client and the
// broker), in a store that holds the keys of the earlier rounds.
func BenchmarkClaim(b *testing.B) {
	testenv.Get(b)
	_, brokers := testenv.Kafka(b)
	cfg := testenv.Get(b).Config(b, brokers)
	_, topics := testenv.Topics(b, b.Context(), cfg, brokers, 6)
	c := openClaims(b, brokers, topics, time.Hour)
	defer c.Close()
	const n = 50_000
	mp := uuid.NewString()
	keys := make([]projections.ClaimKey, n)
	ctx := b.Context()
	var cpu, claim time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j := range keys {
			keys[j] = projections.ClaimKey{Key: mp + ":impression:" + uuid.NewString(), Partition: int32(j % 6), Offset: int64(i*n + j)}
		}
		before := cpuTime()
		b.StartTimer()
		start := time.Now()
		got, err := c.Claim(ctx, keys)
		claim += time.Since(start)
		if err == nil {
			err = c.Keep(ctx, keys, got)
		}
		b.StopTimer()
		cpu += cpuTime() - before
		if err != nil || got[n-1] != projections.ClaimFirst {
			b.Fatal(err, got[n-1])
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/key")
	b.ReportMetric(float64(claim.Nanoseconds())/float64(b.N*n), "claim-ns/key")
}

// BenchmarkClaimsRebuild: a projector with an empty store (a new host, a
// lost disk) is assigned 6 partitions whose changelog holds 2,000,000
// claims, and catches up with it before its first batch; it reports the
// records read a second and the process's CPU time a record (kfake in this
// process, the store on this machine's disk).
func BenchmarkClaimsRebuild(b *testing.B) {
	testenv.Get(b)
	_, brokers := testenv.Kafka(b)
	cfg := testenv.Get(b).Config(b, brokers)
	_, topics := testenv.Topics(b, b.Context(), cfg, brokers, 6)
	ctx := b.Context()
	const n, batch = 2_000_000, 100_000
	a := openClaims(b, brokers, topics, time.Hour)
	keys := make([]projections.ClaimKey, batch)
	for i := 0; i < n; i += batch {
		for j := range keys {
			keys[j] = projections.ClaimKey{Key: uuid.NewString(), Partition: int32(j % 6), Offset: int64(i + j)}
		}
		got, err := a.Claim(ctx, keys)
		if err == nil {
			err = a.Keep(ctx, keys, got)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	a.Close()
	probe := make([]projections.ClaimKey, 6)
	for p := range probe {
		probe[p] = projections.ClaimKey{Key: "probe", Partition: int32(p), Offset: n}
	}
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c := openClaims(b, brokers, topics, time.Hour)
		before := cpuTime()
		b.StartTimer()
		if _, err := c.Claim(ctx, probe); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - before
		c.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n*b.N), "cpu-ns/record")
}
