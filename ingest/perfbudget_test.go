package ingest

import (
	"testing"

	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/testkit/perfbudget"
)

// perfBatches is how many batches the instruction count runs (under
// callgrind, about 50 times slower than without).
const perfBatches = 200

// TestPerfBudgetEvents: the allocations and the instructions of a /v2/events
// batch of 50 events (benchBody) in the domain's hands: parsed, then each
// event encoded as its Kafka record and key, as the Appender does before
// producing. Within 10 % of their budgets (testkit/perfbudget/budgets.txt);
// the Kafka client's own work is not counted. The instructions are counted
// by the test binary run again under valgrind --tool=callgrind
// (perfbudget.Instructions), over perfBatches batches after one that warms
// the pools.
func TestPerfBudgetEvents(t *testing.T) {
	body := benchBody()
	batch := func() {
		evs, verr := ParseRequest(body, testMarketplace, testNow)
		if verr != nil || len(evs) != 50 {
			t.Fatalf("%d events, %v", len(evs), verr)
		}
		for i := range evs {
			if _, err := records.EncodeEvent(&evs[i]); err != nil {
				t.Fatal(err)
			}
			_ = records.EventKey(&evs[i])
		}
	}
	if perfbudget.InCallgrind() {
		batch() // pools filled
		perfbudget.Measure(func() {
			for range perfBatches {
				batch()
			}
		})
		return
	}
	perfbudget.Check(t, "events.allocs-per-batch", testing.AllocsPerRun(20, batch))
	n := perfbudget.Instructions(t, "TestPerfBudgetEvents", nil)
	perfbudget.Check(t, "events.instructions-per-batch", float64(n.Total)/perfBatches)
}
