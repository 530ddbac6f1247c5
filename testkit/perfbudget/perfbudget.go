// Package perfbudget holds the performance budgets of the hot paths: counts
// that a busy machine does not change (allocations, and instructions counted
// by callgrind), which tests compare with the figures committed in
// budgets.txt. A count more than Tolerance above its budget fails the test;
// wall-clock benchmarks stay for the docs (docs/design/performance.md).
//
// Regenerate the figures after a change meant to cost more (or less):
//
//	ENDCAP_PERF_UPDATE=1 go test -count=1 -run TestPerfBudget ./auction ./ingest ./projections
package perfbudget

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Tolerance is how far above its budget a count may go before the test fails.
const Tolerance = 0.10

// UpdateEnv, set to 1, makes Check record the counts as the new budgets
// instead of comparing them.
const UpdateEnv = "ENDCAP_PERF_UPDATE"

// header opens budgets.txt.
const header = `# Performance budgets of the hot paths: counts a busy machine does not change (allocations;
# instructions under valgrind --tool=callgrind; the live heap of the entity state per product). A
# test fails when its count is more than 10 % above the figure here (testkit/perfbudget).
# Regenerate after a change meant to cost more or less, and say why in its commit:
#   ENDCAP_PERF_UPDATE=1 go test -count=1 -run 'TestPerfBudget|TestMemoryPerProduct' ./auction ./ingest ./projections
`

// File is the path of budgets.txt.
func File() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "budgets.txt")
}

// Check compares got, the count named name, with its budget: it fails t when
// got is more than Tolerance above it, or when there is no budget of that
// name. With ENDCAP_PERF_UPDATE=1 it records got as the budget instead.
func Check(t testing.TB, name string, got float64) {
	t.Helper()
	got = math.Ceil(got)
	if os.Getenv(UpdateEnv) == "1" {
		if err := record(name, got); err != nil {
			t.Fatalf("perfbudget: record %s: %v", name, err)
		}
		t.Logf("perfbudget: %s = %.0f recorded in %s", name, got, File())
		return
	}
	budgets, err := read()
	if err != nil {
		t.Fatalf("perfbudget: %v", err)
	}
	want, ok := budgets[name]
	if !ok {
		t.Fatalf("perfbudget: no budget %q in %s (%s=1 records it)", name, File(), UpdateEnv)
	}
	limit := want * (1 + Tolerance)
	if got > limit {
		t.Errorf("perfbudget: %s is %.0f, %+.1f %% over its budget of %.0f (limit %.0f, %s): "+
			"find what costs more (docs/design/performance.md), or regenerate the budget if the cost is meant",
			name, got, 100*(got-want)/want, want, limit, File())
		return
	}
	t.Logf("perfbudget: %s is %.0f, budget %.0f (%+.1f %%)", name, got, want, 100*(got-want)/max(want, 1))
}

// read parses budgets.txt: lines "name value", # comments.
func read() (map[string]float64, error) {
	b, err := os.ReadFile(File())
	if err != nil {
		return nil, err
	}
	return parse(b)
}

func parse(b []byte) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"name value\", got %q", File(), n, line)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a count", File(), n, f[1])
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

// record writes name's budget into budgets.txt, under an exclusive lock (the
// test binaries of several packages may record at once).
func record(name string, v float64) error {
	f, err := os.OpenFile(File(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	b, err := os.ReadFile(File())
	if err != nil {
		return err
	}
	budgets, err := parse(b)
	if err != nil {
		return err
	}
	budgets[name] = v
	names := make([]string, 0, len(budgets))
	for n := range budgets {
		names = append(names, n)
	}
	sort.Strings(names)
	var out bytes.Buffer
	out.WriteString(header)
	for _, n := range names {
		fmt.Fprintf(&out, "%s %.0f\n", n, budgets[n])
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(out.Bytes(), 0)
	return err
}
