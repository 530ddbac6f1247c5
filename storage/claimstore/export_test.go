package claimstore

import (
	"testing"
	"time"
)

// WaitCompactions waits until no compaction runs (tests that count the
// compactions' bytes: with the store idle between writes, the same writes
// compact the same bytes).
func (s *Store) WaitCompactions(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	idle := 0
	for idle < 3 { // a finished compaction schedules the next one just after it counts itself done
		if s.db.Metrics().Compact.NumInProgress == 0 {
			idle++
		} else {
			idle = 0
		}
		if time.Now().After(deadline) {
			tb.Fatalf("claim store: compactions still running after a minute")
		}
		time.Sleep(time.Millisecond)
	}
}
