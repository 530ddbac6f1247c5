package catalog

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// numSet against a map, through random adds and removes: always sorted,
// each member once, Add and Remove reporting what changed.
func TestNumSet(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var s numSet
	ref := map[uint32]bool{}
	for i := range 20_000 {
		n := uint32(r.IntN(500))
		if i < 1000 {
			n = uint32(i) // increasing, as a load adds them
		}
		if r.IntN(3) == 0 {
			if got := s.Remove(n); got != ref[n] {
				t.Fatalf("Remove(%d) = %v, member %v", n, got, ref[n])
			}
			delete(ref, n)
		} else {
			if got := s.Add(n); got == ref[n] {
				t.Fatalf("Add(%d) = %v, member %v", n, got, ref[n])
			}
			ref[n] = true
		}
		if s.Len() != len(ref) {
			t.Fatalf("%d members, want %d", s.Len(), len(ref))
		}
	}
	got := s.AppendTo(nil)
	if !slices.IsSorted(got) || len(got) != len(ref) {
		t.Fatalf("members %v", got)
	}
	for _, n := range got {
		if !ref[n] {
			t.Fatalf("%d is no member", n)
		}
	}
	for n := range ref {
		s.Remove(n)
	}
	if s.Len() != 0 || cap(s.nums) > 64 {
		t.Fatalf("emptied: %d members, capacity %d", s.Len(), cap(s.nums))
	}
}

// A set grows by a quarter, not by doubling: a category of 150 products
// holds room for at most 40 more, where append's doubling left 106.
func TestNumSetGrowsByAQuarter(t *testing.T) {
	for _, n := range []int{1, 100, 150, 1000, 100_000} {
		var s numSet
		for i := range n {
			s.Add(uint32(i))
		}
		if c := cap(s.nums); c > n+n/4+4 {
			t.Errorf("%d members: capacity %d, want at most %d", n, c, n+n/4+4)
		}
	}
}
