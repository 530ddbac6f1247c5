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
	for _, tc := range []struct {
		name       string
		env        map[string]string
		projectors bool
		pct        int
		from       string
		set        bool
	}{
		{"projector, GOGC unset", nil, true, ProjectorGCPercent, "projector", true},
		{"projector, GOGC set", map[string]string{"GOGC": "150"}, true, 150, "GOGC", false},
		{"projector, GOGC=off", map[string]string{"GOGC": "off"}, true, -1, "GOGC", false},
		{"api, GOGC unset", nil, false, 100, "default", false},
		{"api, GOGC set", map[string]string{"GOGC": "400"}, false, 400, "GOGC", false},
		{"GOGC unreadable", map[string]string{"GOGC": "lots"}, true, 100, "GOGC", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pct, from, set := gcPercent(env(tc.env), tc.projectors)
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
		projectors     bool
		cgroup, system memlimit.Provider
		wantPct        int
		wantLimit      int64
		wantFrom       string
	}{
		{"container limit", nil, true, limit(10 * gib), limit(64 * gib), ProjectorGCPercent, 9 * gib, "cgroup"},
		{"no container limit: the machine's", nil, false, fail(memlimit.ErrNoLimit), limit(20 * gib), 100, 18 * gib, "system"},
		{"cgroup unreadable: the machine's", nil, true, fail(broken), limit(20 * gib), ProjectorGCPercent, 18 * gib, "system"},
		{"nothing known", nil, true, fail(broken), fail(memlimit.ErrNoLimit), ProjectorGCPercent, math.MaxInt64, "none"},
		{"GOMEMLIMIT set: left alone", map[string]string{"GOMEMLIMIT": "3GiB"}, true, limit(10 * gib), limit(64 * gib), ProjectorGCPercent, math.MaxInt64, "GOMEMLIMIT"},
		{"AUTOMEMLIMIT=off", map[string]string{"AUTOMEMLIMIT": "off"}, false, limit(10 * gib), limit(64 * gib), 100, math.MaxInt64, "AUTOMEMLIMIT=off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			debug.SetGCPercent(100)
			st := tune(env(tc.env), tc.projectors, tc.cgroup, tc.system, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
