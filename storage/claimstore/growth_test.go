package claimstore_test

import (
	"bufio"
	"crypto/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/claimstore"
)

// TestGrowth measures the store's memory while claims grow, the way the
// events fold uses it: batches of 100,000 fresh keys over 6 partitions,
// each key looked up in 3 generations, then written. It runs only when
// ENDCAP_CLAIMS_GROWTH gives the number of claims (for example 200000000),
// in ENDCAP_CLAIMS_GROWTH_DIR (a new temporary directory when empty, removed
// at the end; ENDCAP_CLAIMS_GROWTH_CACHE_MB and
// ENDCAP_CLAIMS_GROWTH_MAX_OPEN_FILES set the store's options), and logs at
// each step: claims, claims/s per core (CPU time of
// the process), the process's RSS, the Go heap in use, Pebble's block cache
// and memtables (allocated outside the Go heap), and disk bytes a claim.
//
//	ENDCAP_CLAIMS_GROWTH=200000000 go test ./storage/claimstore -run TestGrowth -v -timeout 3h
func TestGrowth(t *testing.T) {
	total, _ := strconv.ParseInt(os.Getenv("ENDCAP_CLAIMS_GROWTH"), 10, 64)
	if total <= 0 {
		t.Skip("ENDCAP_CLAIMS_GROWTH (the number of claims) is not set")
	}
	dir := os.Getenv("ENDCAP_CLAIMS_GROWTH_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	cacheMB, _ := strconv.Atoi(os.Getenv("ENDCAP_CLAIMS_GROWTH_CACHE_MB"))
	maxOpen, _ := strconv.Atoi(os.Getenv("ENDCAP_CLAIMS_GROWTH_MAX_OPEN_FILES"))
	var trim time.Duration
	if v := os.Getenv("ENDCAP_CLAIMS_GROWTH_TRIM"); v != "" {
		var err error
		if trim, err = time.ParseDuration(v); err != nil {
			t.Fatalf("ENDCAP_CLAIMS_GROWTH_TRIM: %v", err)
		}
	}
	s, err := claimstore.Open(claimstore.Options{Dir: dir, CacheBytes: int64(cacheMB) << 20, MaxOpenFiles: maxOpen, TrimInterval: trim})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const batch, parts = 100_000, 6
	gens := []uint32{101, 100, 99}
	keys := make([]claimstore.Key, batch/parts)
	out := make([]claimstore.Owner, len(keys))
	ents := make([]claimstore.Entry, len(keys))
	steps := []int64{10e6, 20e6, 50e6, 100e6, 150e6, 200e6, 500e6, 1e9}
	var done int64
	lastCPU, lastDone, start := cpuTime(), int64(0), time.Now()
	var found int
	for _, step := range steps {
		if step > total {
			step = total
		}
		var rsses []int64 // the RSS after each batch of the step
		for done < step {
			for p := range int32(parts) {
				for i := range keys {
					_, _ = rand.Read(keys[i][:])
				}
				if err := s.Lookup(p, gens, keys, out); err != nil {
					t.Fatal(err)
				}
				for i := range keys {
					if out[i].Found {
						found++
					}
					// Half the claims in each of the window's two older
					// generations, as when the window is full.
					ents[i] = claimstore.Entry{Gen: gens[1+int(done/batch)%2], Key: keys[i], Offset: done + int64(i)}
				}
				if err := s.Write(p, ents, done); err != nil {
					t.Fatal(err)
				}
				done += int64(len(keys))
			}
			rsses = append(rsses, rss())
		}
		cpu := cpuTime()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st := s.Stats()
		slices.Sort(rsses)
		t.Logf("claims %4dM  %7.0f claims/s per core (%6.0f/s wall)  RSS %5d MiB (through the step: median %d, max %d)  Go heap %4d MiB (Go's memory not handed back %4d MiB)  cache %4d/%d MiB  memtables %3d MiB  disk %6.1f B/claim (%5.2f GiB, %d tables)",
			done/1e6, float64(done-lastDone)/(cpu-lastCPU).Seconds(), float64(done)/time.Since(start).Seconds(),
			rss()>>20, rsses[len(rsses)/2]>>20, rsses[len(rsses)-1]>>20, ms.HeapInuse>>20, (ms.Sys-ms.HeapReleased)>>20, st.CacheBytes>>20, st.CacheMax>>20, st.MemTableBytes>>20,
			float64(st.DiskBytes)/float64(done), float64(st.DiskBytes)/(1<<30), st.Tables)
		lastCPU, lastDone = cpu, done
		if done >= total {
			break
		}
	}
	if found > 0 {
		t.Errorf("%d fresh random keys were found", found)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is the process's resident set (VmRSS).
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
