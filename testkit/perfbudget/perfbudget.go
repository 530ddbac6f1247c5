// Package perfbudget holds the performance budgets of the hot paths: counts
// that a busy machine does not change (allocations, and instructions counted
// by callgrind), which tests compare with the figures committed in
// budgets.txt. A count more than Tolerance above its budget fails the test,
// or more than the budget's own tolerance where its line gives one; wall-clock
// benchmarks stay for the docs (docs/design/performance.md).
//
// Regenerate the figures after a change meant to cost more (or less):
//
//	ENDCAP_PERF_UPDATE=1 go test -count=1 -run 'TestPerfBudget|TestMemoryPerProduct|TestInsertCPU' ./auction ./ingest ./projections
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

// Tolerance is how far above its budget a count may go before the test
// fails, unless the budget's line gives its own.
const Tolerance = 0.10

// budget is a line of budgets.txt: the figure, and the tolerance of its
// third field (0: Tolerance).
type budget struct {
	value, tolerance float64
}

// limit is the highest count b lets pass.
func (b budget) limit() float64 {
	tol := b.tolerance
	if tol == 0 {
		tol = Tolerance
	}
	return b.value * (1 + tol)
}

// UpdateEnv, set to 1, makes Check record the counts as the new budgets
// instead of comparing them.
const UpdateEnv = "ENDCAP_PERF_UPDATE"

// header opens budgets.txt.
const header = `# Performance budgets of the hot paths: counts a busy machine does not change (allocations;
# instructions under valgrind --tool=callgrind; the live heap of the entity state per product). A
# test fails when its count is more than 10 % above the figure here, or more than the line's own
# tolerance where a third field gives one ("4%": for a count that repeats closely and whose slip
# back would be less than 10 %) (testkit/perfbudget).
# Regenerate after a change meant to cost more or less, and say why in its commit:
#   ENDCAP_PERF_UPDATE=1 go test -count=1 -run 'TestPerfBudget|TestMemoryPerProduct|TestInsertCPU' ./auction ./ingest ./projections
`

// File is the path of budgets.txt.
func File() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "budgets.txt")
}

// Check compares got, the count named name, with its budget: it fails t when
// got is more than its tolerance above it, or when there is no budget of
// that name. With ENDCAP_PERF_UPDATE=1 it records got as the budget instead.
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
	b, ok := budgets[name]
	if !ok {
		t.Fatalf("perfbudget: no budget %q in %s (%s=1 records it)", name, File(), UpdateEnv)
	}
	want, limit := b.value, b.limit()
	if got > limit {
		t.Errorf("perfbudget: %s is %.0f, %+.1f %% over its budget of %.0f (limit %.0f, %s): "+
			"find what costs more (docs/design/performance.md), or regenerate the budget if the cost is meant",
			name, got, 100*(got-want)/want, want, limit, File())
		return
	}
	t.Logf("perfbudget: %s is %.0f, budget %.0f (%+.1f %%)", name, got, want, 100*(got-want)/max(want, 1))
}

// read parses budgets.txt: lines "name value" or "name value tolerance%",
// # comments.
func read() (map[string]budget, error) {
	b, err := os.ReadFile(File())
	if err != nil {
		return nil, err
	}
	return parse(b)
}

func parse(b []byte) (map[string]budget, error) {
	out := map[string]budget{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 && len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"name value\" or \"name value tolerance%%\", got %q", File(), n, line)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a count", File(), n, f[1])
		}
		b := budget{value: v}
		if len(f) == 3 {
			pct, ok := strings.CutSuffix(f[2], "%")
			tol, err := strconv.ParseFloat(pct, 64)
			if !ok || err != nil || tol <= 0 || tol > 100 {
				return nil, fmt.Errorf("%s:%d: %q is not a tolerance (a percentage above 0, such as 4%%)", File(), n, f[2])
			}
			b.tolerance = tol / 100
		}
		out[f[0]] = b
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
	nb := budgets[name]
	nb.value = v
	budgets[name] = nb
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(format(budgets), 0)
	return err
}

// format is budgets.txt of budgets: the header, then a line a budget in the
// order of their names.
func format(budgets map[string]budget) []byte {
	names := make([]string, 0, len(budgets))
	for n := range budgets {
		names = append(names, n)
	}
	sort.Strings(names)
	var out bytes.Buffer
	out.WriteString(header)
	for _, n := range names {
		b := budgets[n]
		fmt.Fprintf(&out, "%s %.0f", n, b.value)
		if b.tolerance != 0 {
			fmt.Fprintf(&out, " %s%%", strconv.FormatFloat(100*b.tolerance, 'f', -1, 64))
		}
		out.WriteByte('\n')
	}
	return out.Bytes()
}
