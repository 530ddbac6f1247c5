package idlist

import (
	"slices"
	"strings"
	"testing"
)

func TestList(t *testing.T) {
	long := strings.Repeat("x", 255)
	for name, items := range map[string][]string{
		"empty":                  nil,
		"one":                    {"v-1"},
		"several":                {"v-1", "vendör \"2\"", "c/3"},
		"empty ids among others": {"", "a", "", "b", ""},
		"only an empty id":       {""},
		"long ids":               {long, long + "y", "z"},
		"255 bytes of ids":       {long},
		"256 bytes of ids":       {long, "y"},
		"254 ids":                slices.Repeat([]string{""}, 254),
		"255 ids":                slices.Repeat([]string{"a"}, 255),
	} {
		t.Run(name, func(t *testing.T) {
			l := Of(items...)
			if len(l) != Size(items) {
				t.Fatalf("size %d, Size says %d", len(l), Size(items))
			}
			if l.Len() != len(items) {
				t.Fatalf("Len %d, want %d", l.Len(), len(items))
			}
			for i, s := range items {
				if got := l.At(i); got != s {
					t.Fatalf("At(%d) = %q, want %q", i, got, s)
				}
				if !l.Contains(s) {
					t.Fatalf("Contains(%q) is false", s)
				}
			}
			if got := slices.Collect(l.All()); !slices.Equal(got, items) {
				t.Fatalf("All = %q, want %q", got, items)
			}
			if got := l.Strings(); !slices.Equal(got, items) || (len(items) == 0) != (got == nil) {
				t.Fatalf("Strings = %#v, want %#v", got, items)
			}
			if l.Contains("absent") {
				t.Fatal(`Contains("absent") is true`)
			}
			// The same ids give the same string; others do not.
			if Of(slices.Clone(items)...) != l {
				t.Fatal("two packings of the same ids differ")
			}
			if Of(append(slices.Clone(items), "more")...) == l {
				t.Fatal("a longer list packs the same")
			}
		})
	}
}

// The boundaries are kept: ids whose bytes run together still differ.
func TestListBoundaries(t *testing.T) {
	if Of("ab", "c") == Of("a", "bc") || Of("abc") == Of("ab", "c") {
		t.Fatal("lists of different ids with the same bytes pack the same")
	}
	if Of("") == Of() {
		t.Fatal("a list of one empty id packs as the empty list")
	}
}

func TestAtOutOfRange(t *testing.T) {
	for _, i := range []int{-1, 2} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("At(%d) of a list of 2 did not panic", i)
				}
			}()
			Of("a", "b").At(i)
		}()
	}
}

func TestReadingAllocatesNothing(t *testing.T) {
	l := Of("v-1", "v-2", "c-1")
	n := testing.AllocsPerRun(100, func() {
		_ = l.Len()
		_ = l.At(2)
		_ = l.Contains("c-1")
		for range l.All() {
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// A typical product's lists take a byte a count and a byte an id's end:
// one vendor and three categories are 29 bytes, not 47.
func TestShortForm(t *testing.T) {
	for _, c := range []struct {
		items []string
		size  int
	}{
		{[]string{"v-123"}, 1 + 1 + 5},
		{[]string{"c-1234", "c-1235", "c-1236"}, 1 + 3 + 18},
		{[]string{strings.Repeat("x", 255)}, 1 + 1 + 255},
		{[]string{strings.Repeat("x", 255), "y"}, 1 + 4 + 8 + 256},
		{slices.Repeat([]string{"a"}, 255), 1 + 4 + 4*255 + 255},
	} {
		if got := Size(c.items); got != c.size || len(Of(c.items...)) != c.size {
			t.Errorf("%d ids of %d bytes: Size %d, packed %d, want %d", len(c.items), len(strings.Join(c.items, "")), got, len(Of(c.items...)), c.size)
		}
	}
}
