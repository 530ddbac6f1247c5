package ingest

import (
	"testing"

	"github.com/endcap/endcap/internal/perfbudget"
	"github.com/endcap/endcap/internal/records"
)

// TestPerfBudgetEvents: the allocations of a /v2/events batch of 50 events
// (benchBody) in the domain's hands: parsed, then each event encoded as its
// Kafka record and key, as the Appender does before producing. Within 10 %
// of its budget (internal/perfbudget/budgets.txt); the Kafka client's own
// allocations are not counted.
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
	perfbudget.Check(t, "events.allocs-per-batch", testing.AllocsPerRun(20, batch))
}
