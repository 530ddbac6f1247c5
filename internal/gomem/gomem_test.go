package gomem

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestGCPercent(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name      string
		env       map[string]string
		role      Role
		limitFrom string
		limit     int64
		pct       int
		from      string
		set       bool
	}{
		{"projector, GOGC unset", nil, Projectors, "system", 20 * gib, ProjectorGCPercent, "projector", true},
		{"projector, no limit", nil, Projectors, "none", math.MaxInt64, ProjectorGCPercent, "projector", true},
		{"projector, GOGC set", map[string]string{"GOGC": "150"}, Projectors, "cgroup", gib, 150, "GOGC", false},
		{"projector, GOGC=off", map[string]string{"GOGC": "off"}, Projectors, "cgroup", gib, -1, "GOGC", false},
		{"api in a container", nil, API, "cgroup", 4 * gib, -1, "api", true},
		{"api with GOMEMLIMIT", nil, API, "GOMEMLIMIT", 4 * gib, -1, "api", true},
		{"api with GOMEMLIMIT=off", nil, API, "GOMEMLIMIT", math.MaxInt64, 100, "default", false},
		{"api on a shared machine", nil, API, "system", 20 * gib, 100, "default", false},
		{"api without a limit", nil, API, "AUTOMEMLIMIT=off", math.MaxInt64, 100, "default", false},
		{"api, GOGC set", map[string]string{"GOGC": "400"}, API, "cgroup", 4 * gib, 400, "GOGC", false},
		{"exporter in a container", nil, Other, "cgroup", 4 * gib, 100, "default", false},
		{"GOGC unreadable", map[string]string{"GOGC": "lots"}, Projectors, "cgroup", gib, 100, "GOGC", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pct, from, set := gcPercent(env(tc.env), tc.role, tc.limitFrom, tc.limit)
			if pct != tc.pct || from != tc.from || set != tc.set {
				t.Fatalf("gcPercent = %d, %q, %v; want %d, %q, %v", pct, from, set, tc.pct, tc.from, tc.set)
			}
		})
	}
}

// unsetEnv removes k from the process's environment for the test (memlimit
// reads GOMEMLIMIT and AUTOMEMLIMIT itself).
func unsetEnv(t *testing.T, k string) {
	if v, ok := os.LookupEnv(k); ok {
		os.Unsetenv(k)
		t.Cleanup(func() { os.Setenv(k, v) })
	}
}

func TestTune(t *testing.T) {
	unsetEnv(t, "GOMEMLIMIT")
	unsetEnv(t, "AUTOMEMLIMIT")
	prevLimit := debug.SetMemoryLimit(-1)
	prevPct := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevPct) })

	const gib = 1 << 30
	limit := func(n uint64) memlimit.Provider { return func() (uint64, error) { return n, nil } }
	fail := func(err error) memlimit.Provider { return func() (uint64, error) { return 0, err } }
	broken := errors.New("cannot read /sys/fs/cgroup")
	for _, tc := range []struct {
		name           string
		env            map[string]string
		preset         int64 // the runtime's limit before (what a GOMEMLIMIT in env has set)
		role           Role
		cgroup, system memlimit.Provider
		wantPct        int
		wantLimit      int64
		wantFrom       string
	}{
		{"projector in a container", nil, 0, Projectors, limit(10 * gib), limit(64 * gib), ProjectorGCPercent, 9 * gib, "cgroup"},
		{"api in a container", nil, 0, API, limit(10 * gib), limit(64 * gib), -1, 9 * gib, "cgroup"},
		{"api, no container limit: the machine's", nil, 0, API, fail(memlimit.ErrNoLimit), limit(20 * gib), 100, 18 * gib, "system"},
		{"projector, cgroup unreadable: the machine's", nil, 0, Projectors, fail(broken), limit(20 * gib), ProjectorGCPercent, 18 * gib, "system"},
		{"nothing known", nil, 0, API, fail(broken), fail(memlimit.ErrNoLimit), 100, math.MaxInt64, "none"},
		{"api, GOMEMLIMIT set: left alone", map[string]string{"GOMEMLIMIT": "3GiB"}, 3 * gib, API, limit(10 * gib), limit(64 * gib), -1, 3 * gib, "GOMEMLIMIT"},
		{"AUTOMEMLIMIT=off", map[string]string{"AUTOMEMLIMIT": "off"}, 0, API, limit(10 * gib), limit(64 * gib), 100, math.MaxInt64, "AUTOMEMLIMIT=off"},
		{"exporter in a container", nil, 0, Other, limit(10 * gib), limit(64 * gib), 100, 9 * gib, "cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			if tc.preset != 0 {
				debug.SetMemoryLimit(tc.preset)
			}
			debug.SetGCPercent(100)
			st := tune(env(tc.env), tc.role, tc.cgroup, tc.system, slog.New(slog.NewTextHandler(io.Discard, nil)))
			// What the runtime now runs with, read back from it.
			pct := debug.SetGCPercent(100)
			got := debug.SetMemoryLimit(-1)
			if pct != tc.wantPct || st.GCPercent != tc.wantPct {
				t.Errorf("GC percent: runtime %d, reported %d; want %d", pct, st.GCPercent, tc.wantPct)
			}
			if got != tc.wantLimit || st.MemoryLimit != tc.wantLimit || st.LimitFrom != tc.wantFrom {
				t.Errorf("memory limit: runtime %d, reported %d from %q; want %d from %q", got, st.MemoryLimit, st.LimitFrom, tc.wantLimit, tc.wantFrom)
			}
		})
	}
}
