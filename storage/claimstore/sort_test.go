package claimstore

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortKeys: sortKeys puts keys in the order of their stored bytes
// (generation, then key), equal keys in their batch's order, for batches of
// one generation (bucketed) and of several, small and large.
func TestSortKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		n    int
		gens uint32
	}{{"small", 100, 1}, {"one generation", 20_000, 1}, {"three generations", 20_000, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			keys := make([]Key, tc.n)
			gens := make([]uint32, tc.n)
			for i := range keys {
				for j := range keys[i] {
					keys[i][j] = byte(rng.Uint32())
				}
				keys[i][0] &= 0x0f // some buckets empty, others full
				gens[i] = 7 + rng.Uint32N(tc.gens)
				if i%10 == 9 {
					keys[i], gens[i] = keys[i/2], gens[i/2] // repeats
				}
			}
			ks := make([]sortKey, tc.n)
			want := make([]int, tc.n)
			for i := range ks {
				ks[i], want[i] = newSortKey(gens[i], &keys[i], i), i
			}
			sortKeys(ks)
			slices.SortStableFunc(want, func(a, b int) int {
				return bytes.Compare(claimKey(nil, gens[a], 0, &keys[a]), claimKey(nil, gens[b], 0, &keys[b]))
			})
			for n := range ks {
				if ks[n].i != want[n] {
					t.Fatalf("position %d holds key %d, want %d", n, ks[n].i, want[n])
				}
			}
		})
	}
}
