package catalog

import "slices"

// numSet is a set of products' numbers in their collection
// (statelog.Collection.ByNum), sorted: four bytes a member and no pointer,
// where a set of ids holds a copy of each id. Numbers are handed out in
// increasing order, so a catalog loading adds at the end. A full set grows
// by a quarter (grow), not by append's doubling: the sets hold every
// product several times, and doubling left them a third empty on average.
type numSet struct{ nums []uint32 }

func (s *numSet) Len() int { return len(s.nums) }

// grow makes room for one more member.
func (s *numSet) grow() {
	if len(s.nums) < cap(s.nums) {
		return
	}
	nums := make([]uint32, len(s.nums), len(s.nums)+len(s.nums)/4+4)
	copy(nums, s.nums)
	s.nums = nums
}

// Add adds n, and reports whether it was not there.
func (s *numSet) Add(n uint32) bool {
	if k := len(s.nums); k == 0 || s.nums[k-1] < n {
		s.grow()
		s.nums = append(s.nums, n)
		return true
	}
	i, found := slices.BinarySearch(s.nums, n)
	if !found {
		s.grow()
		s.nums = slices.Insert(s.nums, i, n)
	}
	return !found
}

// Remove removes n, and reports whether it was there.
func (s *numSet) Remove(n uint32) bool {
	i, found := slices.BinarySearch(s.nums, n)
	if !found {
		return false
	}
	s.nums = slices.Delete(s.nums, i, i+1)
	if c := cap(s.nums); c > 64 && len(s.nums) < c/4 {
		s.nums = slices.Clip(slices.Clone(s.nums))
	}
	return true
}

// AppendTo appends the members to dst, in order.
func (s *numSet) AppendTo(dst []uint32) []uint32 { return append(dst, s.nums...) }
