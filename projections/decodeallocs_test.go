package projections

import "testing"

// TestDecodeAllocsPerRecord: the decode step's allocations a record over
// the fold workload's batch (foldWorkload: sponsored impressions and
// clicks, organic ones, purchases): a record's copy (its strings), its
// objects (placement, page, entity), a purchase's items, a token's ids;
// the batch's slices. goccy/go-json took 5.9 a record here.
func TestDecodeAllocsPerRecord(t *testing.T) {
	w := newFoldWorkload(t, perfFoldRecords)
	got := testing.AllocsPerRun(5, func() { w.fold.decode(t.Context(), w.batch) }) / perfFoldRecords
	if got > 3 {
		t.Errorf("%.3f allocations a record, want at most 3", got)
	}
}
