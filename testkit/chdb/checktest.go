package chdb

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse/chrecord"
)

// CheckEnv names the variable that makes every integration test check its
// statements on chDB too (CheckTest): ENDCAP_TEST_CHDB=1.
const CheckEnv = "ENDCAP_TEST_CHDB"

var (
	sharedMu  sync.Mutex
	shared    *Engine
	sharedDir string
	sharedErr error
)

// sharedEngine is one engine for the whole test binary, started on first
// use.
func sharedEngine() (*Engine, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil || sharedErr != nil {
		return shared, sharedErr
	}
	sharedDir, sharedErr = os.MkdirTemp("", "endcap-chdb-")
	if sharedErr != nil {
		return nil, sharedErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	shared, sharedErr = Start(ctx, sharedDir)
	return shared, sharedErr
}

// CloseShared stops the engine of CheckTest, if one was started (testenv.Main
// calls it after the tests).
func CloseShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Close()
		shared = nil
	}
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
		sharedDir = ""
	}
}

// CheckTest, when ENDCAP_TEST_CHDB=1, records every statement the test
// sends to database through storage/clickhouse.Open's connections and, when
// the test ends (after its other cleanups: its system stopped), replays
// them on chDB with Accept: a statement 18.16 ran and chDB refuses fails
// the test. Without the variable it does nothing. testenv.Env.Config calls
// it for the database it names, so every integration test is covered.
func CheckTest(t testing.TB, database string) {
	if os.Getenv(CheckEnv) != "1" {
		return
	}
	rec := chrecord.Record(database, chrecord.Options{SpillDir: t.TempDir()})
	checksMu.Lock()
	checks[database] = rec
	checksMu.Unlock()
	t.Cleanup(func() {
		defer rec.Close()
		rec.Stop()
		checksMu.Lock()
		skipped := checks[database] != rec
		delete(checks, database)
		checksMu.Unlock()
		stmts := rec.Statements()
		if len(stmts) == 0 || t.Failed() || skipped {
			return
		}
		e, err := sharedEngine()
		if err != nil {
			t.Errorf("%s=1: %v", CheckEnv, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		rep := Accept(ctx, e, database, rec.TimeZone(), stmts)
		for _, m := range rep.Mismatches {
			t.Errorf("%s=1: %s", CheckEnv, m)
		}
		_ = e.Exec(ctx, "DROP DATABASE IF EXISTS "+database)
		if testing.Verbose() {
			t.Logf("%s=1: %d statements accepted by ClickHouse %s (%s; %d reads of the same shape skipped), in %s", CheckEnv,
				rep.Statements-len(rep.Mismatches), e.Version(), kinds(rep.ByKind), rep.SameShape, rep.Took.Round(time.Millisecond))
		}
	})
}

var (
	checksMu sync.Mutex
	checks   = map[string]*chrecord.Recorder{}
)

// SkipCheck exempts a test's database from CheckTest: for a test whose
// statements cannot run on one embedded server (ON CLUSTER, Replicated
// engines, remote tables). Call it right after testenv's Config.
func SkipCheck(database string) {
	checksMu.Lock()
	defer checksMu.Unlock()
	if rec := checks[database]; rec != nil {
		rec.Stop()
		delete(checks, database)
	}
}

func kinds(m map[chrecord.Kind]int) string {
	var parts []string
	for _, k := range []chrecord.Kind{chrecord.Exec, chrecord.Query, chrecord.Batch} {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}
