package strset

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func members(s *Set) []string {
	out := s.AppendTo(nil)
	slices.Sort(out)
	return out
}

func TestSet(t *testing.T) {
	type op struct {
		add  bool
		v    string
		want bool // Add: new; Remove: was a member
	}
	long := strings.Repeat("x", 300) // a length of two uvarint bytes
	for _, tc := range []struct {
		name string
		ops  []op
		want []string
	}{
		{"empty", nil, []string{}},
		{"one", []op{{true, "a", true}}, []string{"a"}},
		{"duplicate", []op{{true, "a", true}, {true, "a", false}}, []string{"a"}},
		{"empty string is a member", []op{{true, "", true}, {true, "", false}, {true, "b", true}}, []string{"", "b"}},
		{"remove absent", []op{{true, "a", true}, {false, "b", false}}, []string{"a"}},
		{"remove from empty", []op{{false, "a", false}}, []string{}},
		{"remove then add again", []op{{true, "a", true}, {false, "a", true}, {false, "a", false}, {true, "a", true}}, []string{"a"}},
		{"remove the last empties", []op{{true, "a", true}, {true, "b", true}, {false, "a", true}, {false, "b", true}}, []string{}},
		{"long and unicode", []op{{true, long, true}, {true, "é✓", true}, {true, long, false}}, []string{long, "é✓"}},
		{"prefixes are distinct", []op{{true, "ab", true}, {true, "a", true}, {true, "abc", true}, {false, "ab", true}}, []string{"a", "abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Set
			for i, o := range tc.ops {
				var got bool
				if o.add {
					got = s.Add(o.v)
				} else {
					got = s.Remove(o.v)
				}
				if got != o.want {
					t.Fatalf("op %d (add=%v %q) = %v, want %v", i, o.add, o.v, got, o.want)
				}
			}
			if got := members(&s); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("members %q, want %q", got, tc.want)
			}
			if s.Len() != len(tc.want) {
				t.Fatalf("Len %d, want %d", s.Len(), len(tc.want))
			}
			for _, v := range tc.want {
				if !s.Has(v) {
					t.Errorf("Has(%q) = false", v)
				}
			}
		})
	}
}

// TestSetModel runs random adds and removes against a map, through growth,
// backward shifts and compactions.
func TestSetModel(t *testing.T) {
	for _, keys := range []int{3, 50, 2000} {
		t.Run(fmt.Sprint(keys), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(keys)))
			var s Set
			model := map[string]bool{}
			for i := 0; i < 40*keys; i++ {
				v := fmt.Sprintf("p-%d", rng.IntN(keys))
				// Phases: fill, drain, fill again, so that compaction and
				// shrinking both happen.
				add := rng.IntN(3) > 0
				if (i/(10*keys))%2 == 1 {
					add = rng.IntN(3) == 0
				}
				if add {
					if got, want := s.Add(v), !model[v]; got != want {
						t.Fatalf("step %d Add(%q) = %v, want %v", i, v, got, want)
					}
					model[v] = true
				} else {
					if got, want := s.Remove(v), model[v]; got != want {
						t.Fatalf("step %d Remove(%q) = %v, want %v", i, v, got, want)
					}
					delete(model, v)
				}
				if s.Len() != len(model) {
					t.Fatalf("step %d: Len %d, model %d", i, s.Len(), len(model))
				}
				if 2*s.n > len(s.slots) {
					t.Fatalf("step %d: %d members in %d slots", i, s.n, len(s.slots))
				}
				if s.dead > len(s.arena)/2 {
					t.Fatalf("step %d: %d dead bytes of %d not compacted", i, s.dead, len(s.arena))
				}
			}
			want := make([]string, 0, len(model))
			for v := range model {
				want = append(want, v)
				if !s.Has(v) {
					t.Fatalf("Has(%q) = false", v)
				}
			}
			slices.Sort(want)
			if got := members(&s); !slices.Equal(got, want) {
				t.Fatalf("members differ from the model: %d vs %d", len(got), len(want))
			}
		})
	}
}

// TestSetViewsStay: the strings a set hands out keep their value through
// later adds (arena growth), removes and compactions.
func TestSetViewsStay(t *testing.T) {
	var s Set
	for i := range 100 {
		s.Add(fmt.Sprintf("id-%03d", i))
	}
	views := members(&s)
	want := slices.Clone(views)
	for i := range want {
		want[i] = strings.Clone(want[i])
	}
	for i := range 95 { // compacts, shrinks the table
		s.Remove(fmt.Sprintf("id-%03d", i))
	}
	for i := range 1000 { // reuses nothing of the old arena
		s.Add(fmt.Sprintf("xx-%03d", i))
	}
	s.Remove("id-099")
	if !slices.Equal(views, want) {
		t.Fatal("a string handed out changed")
	}
}

func TestSetAllStops(t *testing.T) {
	var s Set
	for i := range 10 {
		s.Add(fmt.Sprint(i))
	}
	n := 0
	for range s.All() {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("%d yields after break", n)
	}
	all := 0
	for range s.All() {
		all++
	}
	if all != 10 {
		t.Fatalf("All yields %d, want 10", all)
	}
}

func TestSetNoAllocOnRead(t *testing.T) {
	var s Set
	for i := range 100 {
		s.Add(fmt.Sprintf("id-%03d", i))
	}
	buf := make([]string, 0, 100)
	if a := testing.AllocsPerRun(100, func() {
		buf = s.AppendTo(buf[:0])
		_ = s.Has("id-050")
	}); a != 0 {
		t.Fatalf("%v allocations per read", a)
	}
}

func BenchmarkSetAdd(b *testing.B) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("p-%09d", i)
	}
	b.Run("strset", func(b *testing.B) {
		for b.Loop() {
			var s Set
			for _, id := range ids {
				s.Add(id)
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			m := map[string]struct{}{}
			for _, id := range ids {
				m[id] = struct{}{}
			}
		}
	})
}
