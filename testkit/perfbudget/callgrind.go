package perfbudget

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childEnv marks the test process that runs under callgrind.
const childEnv = "ENDCAP_PERF_CALLGRIND_CHILD"

// childTimeout bounds one run under callgrind (about 50 times slower than
// without), the test binary's build included: 1.5 minutes on an idle
// two-core machine, more than 3 while other packages' tests share it.
const childTimeout = 6 * time.Minute

// The callgrind client requests (valgrind/callgrind.h).
const (
	callgrindBase       = uintptr('C')<<24 | uintptr('T')<<16
	callgrindDumpStats  = callgrindBase + 0
	callgrindZeroStats  = callgrindBase + 1
	callgrindStartInstr = callgrindBase + 4
)

// CacheSim is the cache hierarchy Misses simulates, the same on every
// machine (a count must not depend on the host's caches): 32 KiB L1s,
// 8-way, and a 4 MiB last level, 16-way, 64-byte lines.
var CacheSim = []string{"--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=4194304,16,64"}

// Instrument starts the simulation in a test process Misses started (with
// the simulation off, so that building a large world runs at a fraction of
// its cost); call it after the setup, before the warm-up that Measure
// follows. Elsewhere (and under Instructions, which simulates from the
// start) it does nothing.
func Instrument() { clientRequest(&[6]uintptr{callgrindStartInstr}) }

// InCallgrind reports whether this test process is the one Instructions
// started under callgrind: the test that called Instructions runs there
// again and must call Measure once, around the workload.
func InCallgrind() bool { return os.Getenv(childEnv) == "1" }

// Measure runs fn between a reset and a dump of callgrind's counters, so
// that the count Instructions reads is fn's alone (and not the setup's).
// Outside callgrind it only runs fn.
func Measure(fn func()) {
	clientRequest(&[6]uintptr{callgrindZeroStats})
	fn()
	clientRequest(&[6]uintptr{callgrindDumpStats})
}

// Counts are the instructions of one Measure call under callgrind.
type Counts struct {
	// Total is every instruction executed within the call (every
	// goroutine's: the child runs with GOMAXPROCS=1 and the collector off,
	// so that little else runs meanwhile).
	Total uint64
	// Inclusive holds, for each function asked for, the instructions of its
	// calls and of what they called (callgrind_annotate --inclusive=yes).
	Inclusive map[string]uint64
	// Events are the call's counts by callgrind's event name (Ir; under
	// Misses also Dr, Dw, I1mr, D1mr, D1mw, ILmr, DLmr, DLmw: reads and
	// writes, first-level and last-level misses).
	Events map[string]uint64
}

// D1 is the first-level data cache's misses, reads and writes.
func (c Counts) D1() uint64 { return c.Events["D1mr"] + c.Events["D1mw"] }

// LL is the last-level cache's data misses, reads and writes: the loads
// that wait for memory.
func (c Counts) LL() uint64 { return c.Events["DLmr"] + c.Events["DLmw"] }

// Instructions runs the test named test of the running test binary again
// under valgrind --tool=callgrind, and returns the instructions executed
// within its Measure call, in all and inclusive of each of the functions
// funcs (full symbols, as "github.com/endcap/endcap/auction.(*Engine).Run";
// a function never called fails t). env is added to the child's
// environment. It skips t when valgrind is not installed, unless
// ENDCAP_TEST_REQUIRE_STACK=1 (make test), where that fails t:
// deploy/local/install.sh --test installs it.
func Instructions(t testing.TB, test string, env []string, funcs ...string) Counts {
	t.Helper()
	return callgrind(t, test, env, nil, funcs)
}

// Misses is Instructions with callgrind's cache simulation (CacheSim):
// the child starts with the simulation off and must call Instrument after
// its setup, then Measure once; Counts.Events holds the misses of the
// Measure call. It keeps the collector on in the child (a large world's
// garbage would not fit in memory): the child turns it off itself before
// it measures.
func Misses(t testing.TB, test string, env []string) Counts {
	t.Helper()
	args := append([]string{"--instr-atstart=no"}, CacheSim...)
	return callgrind(t, test, append([]string{"GOGC=100"}, env...), args, nil)
}

// callgrind runs test under callgrind with the extra arguments args (see
// Instructions).
func callgrind(t testing.TB, test string, env, args []string, funcs []string) Counts {
	t.Helper()
	vg, err := exec.LookPath("valgrind")
	if err != nil || !callgrindSupported {
		if os.Getenv("ENDCAP_TEST_REQUIRE_STACK") == "1" {
			t.Fatalf("perfbudget: valgrind is needed on amd64 to count instructions (deploy/local/install.sh --test): %v", err)
		}
		t.Skipf("perfbudget: no valgrind (deploy/local/install.sh --test installs it): %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "callgrind.out")
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	// The test binary go test runs has no symbol table (callgrind would name
	// no function): build one that has, of the package under test (the
	// test's working directory).
	bin := filepath.Join(dir, "pkg.test")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("perfbudget: the go command is needed to build the measured binary: %v", err)
	}
	if b, err := exec.CommandContext(ctx, goCmd, "test", "-c", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("perfbudget: go test -c: %v\n%s", err, b)
	}
	vargs := append([]string{"--tool=callgrind", "--callgrind-out-file=" + out}, args...)
	vargs = append(vargs, bin, "-test.run=^"+test+"$", "-test.count=1", "-test.v", "-test.timeout=0")
	cmd := exec.CommandContext(ctx, vg, vargs...)
	// asyncpreemptoff: callgrind fails on the runtime's preemption signals.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GOMAXPROCS=1", "GOGC=off", "GODEBUG=asyncpreemptoff=1")
	cmd.Env = append(cmd.Env, env...)
	began := time.Now()
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("perfbudget: %s under callgrind: %v\n%s", test, err, tail(log, 60))
	}
	ev, err := totals(out + ".1")
	if err != nil {
		t.Fatalf("perfbudget: %s under callgrind: %v (did it call perfbudget.Measure?)\n%s", test, err, tail(log, 60))
	}
	n := ev["Ir"]
	t.Logf("perfbudget: %s under callgrind: %d instructions measured, in %v", test, n, time.Since(began).Round(time.Second))
	c := Counts{Total: n, Inclusive: map[string]uint64{}, Events: ev}
	if len(funcs) == 0 {
		return c
	}
	ann, err := exec.CommandContext(ctx, "callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", out+".1").Output()
	if err != nil {
		t.Fatalf("perfbudget: callgrind_annotate: %v", err)
	}
	for _, fn := range funcs {
		v, ok := inclusive(ann, fn)
		if !ok {
			t.Fatalf("perfbudget: %s: no calls of %s under callgrind; callgrind_annotate said:\n%s", test, fn, head(ann, 40))
		}
		c.Inclusive[fn] = v
	}
	return c
}

// inclusive finds fn's inclusive count in callgrind_annotate's output, whose
// lines read "  38,945,281 ( 4.48%)  file.go:symbol [binary]". A function
// some of whose calls were inlined has several lines (one per file it was
// inlined from): the largest is its own.
func inclusive(ann []byte, fn string) (uint64, bool) {
	var best uint64
	found := false
	for _, line := range strings.Split(string(ann), "\n") {
		m := annLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		i := strings.Index(m[2], ":")
		if i < 0 || m[2][i+1:] != fn {
			continue
		}
		v, err := strconv.ParseUint(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		if err != nil {
			continue
		}
		best, found = max(best, v), true
	}
	return best, found
}

// annLine is a line of callgrind_annotate's function list: count, share,
// file:symbol.
var annLine = regexp.MustCompile(`^\s*([0-9,]+)\s+\(\s*[0-9.]+%\)\s+(\S+)`)

// totals reads the "totals:" line of a callgrind dump, the costs since the
// last reset (its "summary:" line counts from the process's start), by the
// names of its "events:" line.
func totals(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTotals(f, path)
}

func parseTotals(r io.Reader, path string) (map[string]uint64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	events := []string{"Ir"}
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "events:"); ok {
			events = strings.Fields(rest)
		}
		if rest, ok := strings.CutPrefix(line, "totals:"); ok {
			out := map[string]uint64{}
			for i, f := range strings.Fields(rest) {
				if i >= len(events) {
					break
				}
				v, err := strconv.ParseUint(f, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s: totals: %w", path, err)
				}
				out[events[i]] = v
			}
			if _, ok := out["Ir"]; !ok {
				return nil, fmt.Errorf("%s: no Ir in the totals line", path)
			}
			return out, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no totals line", path)
}

func head(b []byte, lines int) string {
	s := strings.Split(string(b), "\n")
	return strings.Join(s[:min(len(s), lines)], "\n")
}

func tail(b []byte, lines int) string {
	s := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(s[max(0, len(s)-lines):], "\n")
}
