package projections

import (
	"testing"

	"github.com/endcap/endcap/testkit/perfbudget"
)

// perfFoldRecords is the batch of TestPerfBudgetFold, and perfFoldBatches
// how many times the instruction count folds it (under callgrind, about 50
// times slower than without).
const (
	perfFoldRecords = 2_000
	perfFoldBatches = 5
)

// TestPerfBudgetFold: the allocations and the instructions of the fold's
// own work on a fixed batch of 2,000 records (foldWorkload: decoding, the
// interactions' rows and charges, the charge rows, the frequency caps in a
// marketplace without restrictions; no I/O), within 10 % of their budgets
// (testkit/perfbudget/budgets.txt). The instructions are counted by the test
// binary run again under valgrind --tool=callgrind (perfbudget.Instructions),
// over perfFoldBatches batches after one that warms the pools.
func TestPerfBudgetFold(t *testing.T) {
	w := newFoldWorkload(t, perfFoldRecords)
	if perfbudget.InCallgrind() {
		w.run(t) // pools filled
		perfbudget.Measure(func() {
			for range perfFoldBatches {
				w.run(t)
			}
		})
		return
	}
	w.run(t)
	if w.charges == 0 {
		t.Fatal("the workload made no charge rows")
	}
	perfbudget.Check(t, "fold.allocs-per-batch", testing.AllocsPerRun(5, func() { w.run(t) }))
	n := perfbudget.Instructions(t, "TestPerfBudgetFold", nil)
	perfbudget.Check(t, "fold.instructions-per-record", float64(n.Total)/(perfFoldBatches*perfFoldRecords))
}
