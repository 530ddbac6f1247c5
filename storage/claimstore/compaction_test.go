package claimstore_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/claimstore"
)

// catchUpRun is what a catch-up-like sequence cost the store.
type catchUpRun struct {
	keys int
	// lookupCPU: the process's CPU in Lookup; writeCPU: in Write (and the
	// compactions running meanwhile); compactCPU: after the batch's writes,
	// until the store was idle again.
	lookupCPU, writeCPU, compactCPU time.Duration
	st                              claimstore.Stats
	// maxReadAmp: the largest read amplification seen after a batch.
	maxReadAmp int
}

// catchUp runs the events fold's sequence of a catch-up on a new store:
// batches of 100,000 new keys (a fixed pseudo-random sequence) over 6
// partitions, each partition's keys looked up in the 3 generations the fold
// looks in, then written into one generation. The store is let finish its
// compactions after each batch (as the fold's seconds a batch let it), so
// the same sequence compacts the same bytes.
func catchUp(t testing.TB, o claimstore.Options, batches int) catchUpRun {
	t.Helper()
	return catchUpOf(t, o, batches, 100_000)
}

// catchUpOf: catchUp with batches of batch keys.
func catchUpOf(t testing.TB, o claimstore.Options, batches, batch int) catchUpRun {
	t.Helper()
	o.Dir = t.TempDir()
	s, err := claimstore.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const parts = 6
	gens := []uint32{101, 100, 99}
	rng := rand.New(rand.NewChaCha8([32]byte{'c', 'l', 'a', 'i', 'm', 's'}))
	keys := make([]claimstore.Key, batch/parts)
	out := make([]claimstore.Owner, len(keys))
	ents := make([]claimstore.Entry, len(keys))
	var r catchUpRun
	for b := range batches {
		for p := range int32(parts) {
			for i := range keys {
				for j := 0; j < len(keys[i]); j += 8 {
					v := rng.Uint64()
					for k := range 8 {
						keys[i][j+k] = byte(v >> (8 * k))
					}
				}
			}
			c0 := cpuTime()
			if err := s.Lookup(p, gens, keys, out); err != nil {
				t.Fatal(err)
			}
			r.lookupCPU += cpuTime() - c0
			for i := range keys {
				if out[i].Found {
					t.Fatalf("batch %d: a new key was found", b)
				}
				ents[i] = claimstore.Entry{Gen: gens[1], Key: keys[i], Offset: int64(r.keys + i)}
			}
			c0 = cpuTime()
			if err := s.Write(p, ents, int64(r.keys+len(keys))); err != nil {
				t.Fatal(err)
			}
			r.writeCPU += cpuTime() - c0
			r.keys += len(keys)
		}
		c0 := cpuTime()
		s.WaitCompactions(t)
		r.compactCPU += cpuTime() - c0
		r.maxReadAmp = max(r.maxReadAmp, s.Stats().ReadAmp)
	}
	r.st = s.Stats()
	return r
}

func (r catchUpRun) cpu() time.Duration { return r.lookupCPU + r.writeCPU + r.compactCPU }

func (r catchUpRun) log(t testing.TB, name string) {
	t.Helper()
	n := float64(r.keys)
	t.Logf("%s: %d keys: CPU a key %.0f ns (lookups %.0f, writes %.0f, compactions after the writes %.0f); compacted %.1f B a key (%d compactions), ingested %.1f, flushed %.1f; read amplification at the end %d (L0: %d tables, %d sublevels), largest %d",
		name, r.keys, float64(r.cpu().Nanoseconds())/n, float64(r.lookupCPU.Nanoseconds())/n, float64(r.writeCPU.Nanoseconds())/n, float64(r.compactCPU.Nanoseconds())/n,
		float64(r.st.CompactedBytes)/n, r.st.Compactions, float64(r.st.IngestedBytes)/n, float64(r.st.FlushedBytes)/n,
		r.st.ReadAmp, r.st.L0Tables, r.st.L0Sublevels, r.maxReadAmp)
}

// BenchmarkCatchUp: the CPU a key of the store over a catch-up-like
// sequence (catchUp) of ENDCAP_CLAIMS_CATCHUP_BATCHES batches (default 24):
// lookups, writes and the compactions they cause (the process's CPU,
// getrusage, which counts Pebble's goroutines), and the bytes compacted a
// key.
//
//	go test ./storage/claimstore -run '^$' -bench '^BenchmarkCatchUp$' -benchtime 1x
func BenchmarkCatchUp(b *testing.B) {
	batches := 24
	if v, err := strconv.Atoi(os.Getenv("ENDCAP_CLAIMS_CATCHUP_BATCHES")); err == nil && v > 0 {
		batches = v
	}
	for range b.N {
		r := catchUp(b, claimstore.Options{}, batches)
		r.log(b, "catch-up")
		n := float64(r.keys)
		b.ReportMetric(float64(r.cpu().Nanoseconds())/n, "cpu-ns/key")
		b.ReportMetric(float64(r.lookupCPU.Nanoseconds())/n, "lookup-cpu-ns/key")
		b.ReportMetric(float64(r.writeCPU.Nanoseconds())/n, "write-cpu-ns/key")
		b.ReportMetric(float64(r.compactCPU.Nanoseconds())/n, "compact-cpu-ns/key")
		b.ReportMetric(float64(r.st.CompactedBytes)/n, "compacted-B/key")
	}
}

// TestCatchUpCompactions: over a fixed catch-up-like sequence (16 batches
// of 30,000 new keys over 6 partitions, each partition's 5,000 ingested as
// one table), with the store idle after each batch, the compactions write
// the same bytes every run: at most 1.5 bytes a byte ingested (1.21 with
// L0CompactionThreshold 12; Pebble's default threshold, 4, wrote 3.80), and the read amplification stays within
// L0's threshold.
func TestCatchUpCompactions(t *testing.T) {
	r := catchUpOf(t, claimstore.Options{}, 16, 30_000)
	r.log(t, "catch-up")
	if got := float64(r.st.CompactedBytes) / float64(r.st.IngestedBytes); got > 1.5 {
		t.Errorf("compactions wrote %.2f bytes a byte ingested (%d compactions), want at most 1.5", got, r.st.Compactions)
	}
	if r.maxReadAmp > claimstore.DefaultL0Compaction/2+1 {
		t.Errorf("read amplification reached %d, want at most %d", r.maxReadAmp, claimstore.DefaultL0Compaction/2+1)
	}
}

// TestReadAmpBounded: a long run of writes that does not wait for the
// compactions (150 tables of 2,000 keys ingested into one partition and
// generation, and batches of 500 keys through a small memtable) leaves L0
// compacted: a few sublevels and tables, not hundreds, and a read
// amplification within the threshold at which writes wait (ingestions
// too, which Pebble lets through).
func TestReadAmpBounded(t *testing.T) {
	s, err := claimstore.Open(claimstore.Options{Dir: t.TempDir(), MemTableBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewChaCha8([32]byte{'r', 'e', 'a', 'd'}))
	most := 0
	for i := range 300 {
		n := 2_000
		if i%2 == 1 {
			n = 500 // below the ingestion's threshold: into the memtable
		}
		ents := make([]claimstore.Entry, n)
		for j := range ents {
			for k := range ents[j].Key {
				ents[j].Key[k] = byte(rng.Uint32())
			}
			ents[j].Gen, ents[j].Offset = 7, int64(i*n+j)
		}
		if err := s.Write(0, ents, int64(i)); err != nil {
			t.Fatal(err)
		}
		most = max(most, s.Stats().ReadAmp)
	}
	// The sublevels at which writes wait, the one ingested meanwhile, and
	// the levels below L0.
	if limit := 3*claimstore.DefaultL0Compaction + 1 + 6; most > limit {
		t.Errorf("read amplification reached %d, want at most %d", most, limit)
	}
	s.WaitCompactions(t)
	st := s.Stats()
	t.Logf("largest read amplification %d; at the end %d (L0: %d tables, %d sublevels), %d tables, %d compactions", most, st.ReadAmp, st.L0Tables, st.L0Sublevels, st.Tables, st.Compactions)
	if st.L0Sublevels > claimstore.DefaultL0Compaction/2 || st.L0Tables > 50 {
		t.Errorf("L0 left with %d tables in %d sublevels, want at most 50 in %d", st.L0Tables, st.L0Sublevels, claimstore.DefaultL0Compaction/2)
	}
}
