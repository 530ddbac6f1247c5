package catalog

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func searchNames(t *testing.T, x *nameIndex, mp, q string) []string {
	t.Helper()
	var ids []string
	if err := x.search(mp, strings.ToLower(q), func() bool { return false }, func(id []byte) { ids = append(ids, string(id)) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// The names index finds the live products of a marketplace whose id or
// name contains the text (lower case), whether their records are in the
// file (across its read blocks) or still in memory; a renamed product by its
// new name only, a deleted one not at all, and still after the file was
// rewritten without the dead records.
func TestNameIndex(t *testing.T) {
	x := newNameIndex(t.TempDir())
	defer x.close()
	x.minCompact = 1 << 10
	const n = 30_000 // about 2.4 MB of records: three read blocks
	for i := range n {
		name := "Organic cotton SHIRT number " + strconv.Itoa(i)
		if i%10_000 == 7 {
			name = "Crème BRÛLÉE torch " + strconv.Itoa(i)
		}
		x.set("mp-a", uint32(i), "P-"+strconv.Itoa(i), name)
	}
	x.set("mp-b", n, "other", "Crème brûlée of another marketplace")
	for _, tc := range []struct {
		mp, q string
		want  []string
	}{
		{"mp-a", "brûlée", []string{"P-10007", "P-20007", "P-7"}},
		{"mp-a", "BRÛLÉE TORCH 2", []string{"P-20007"}},
		{"mp-a", "p-2999", []string{"P-2999", "P-29990", "P-29991", "P-29992", "P-29993", "P-29994", "P-29995", "P-29996", "P-29997", "P-29998", "P-29999"}},
		{"mp-a", "number 29999", []string{"P-29999"}},
		{"mp-a", "29999organic", nil}, // no match spans the id and the name
		{"mp-b", "brûlée", []string{"other"}},
		{"mp-c", "brûlée", nil},
	} {
		if got := searchNames(t, x, tc.mp, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: %q, want %q", tc.mp, tc.q, got, tc.want)
		}
	}
	x.set("mp-a", 7, "P-7", "Steel bottle")
	x.remove(10_007)
	if got := searchNames(t, x, "mp-a", "brûlée"); !slices.Equal(got, []string{"P-20007"}) {
		t.Errorf("after a rename and a delete: %q", got)
	}
	if got := searchNames(t, x, "mp-a", "steel bottle"); !slices.Equal(got, []string{"P-7"}) {
		t.Errorf("the new name: %q", got)
	}
	// Delete most products: the file is rewritten with the others.
	size := x.size
	for i := range n - 100 {
		x.remove(uint32(i))
	}
	if x.size >= size/10 || x.dead > x.live+x.minCompact {
		t.Fatalf("not rewritten: %d bytes of %d, %d dead, %d live", x.size, size, x.dead, x.live)
	}
	if got := searchNames(t, x, "mp-a", "number 2999"); len(got) != 10 || got[0] != "P-29990" {
		t.Errorf("after the rewrite: %q", got)
	}
	if got := searchNames(t, x, "mp-b", "brûlée"); !slices.Equal(got, []string{"other"}) {
		t.Errorf("the other marketplace after the rewrite: %q", got)
	}
	stopped := x.search("mp-a", "number", func() bool { return true }, func([]byte) {})
	if stopped != errStopped && x.size > 0 {
		t.Errorf("a stopped search: %v", stopped)
	}
}
