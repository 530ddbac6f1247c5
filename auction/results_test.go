package auction

import (
	"strconv"
	"testing"
)

// TestResultArraysTake: the winner slices one Run takes never overlap, also
// when the arrays grow between two takes.
func TestResultArraysTake(t *testing.T) {
	var ra resultArrays
	type taken struct {
		ws []Winner
		rs []RecordWinner
	}
	var all []taken
	for i, n := range []int{5, 0, 3, 20, 1, 40} {
		ws, rs := ra.take(n)
		if len(ws) != 0 || cap(ws) != n || len(rs) != 0 || cap(rs) != n {
			t.Fatalf("take(%d): len %d cap %d, len %d cap %d", n, len(ws), cap(ws), len(rs), cap(rs))
		}
		for k := range n {
			ws = append(ws, Winner{ID: strconv.Itoa(i) + "/" + strconv.Itoa(k)})
			rs = append(rs, RecordWinner{EntityID: strconv.Itoa(i) + "/" + strconv.Itoa(k)})
		}
		all = append(all, taken{ws, rs})
	}
	for i, tk := range all {
		for k := range tk.ws {
			if want := strconv.Itoa(i) + "/" + strconv.Itoa(k); tk.ws[k].ID != want || tk.rs[k].EntityID != want {
				t.Fatalf("take %d, winner %d: %q / %q, want %q", i, k, tk.ws[k].ID, tk.rs[k].EntityID, want)
			}
		}
	}
}

// TestReleaseResultsClears: released arrays are cleared (no winner's strings
// kept alive in the pool) and a second release is a no-op.
func TestReleaseResultsClears(t *testing.T) {
	ra := &resultArrays{results: make([]Result, 2)}
	ws, rs := ra.take(2)
	ws = append(ws, Winner{ID: "a"}, Winner{ID: "b"})
	rs = append(rs, RecordWinner{EntityID: "a"})
	ra.results[0] = Result{Winners: ws, Record: Record{Winners: rs}, arrays: ra}
	results := ra.results
	winners := ra.winners
	ReleaseResults(results)
	if results[0].arrays != nil || results[0].Winners != nil || winners[0].ID != "" || winners[1].ID != "" {
		t.Fatalf("not cleared: %+v %+v", results[0], winners)
	}
	ReleaseResults(results) // no-op
	ReleaseResults(nil)
}
