package catalog

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/testkit/testenv"
)

func searchNames(t *testing.T, x *nameIndex, mp, q string) []string {
	t.Helper()
	var ids []string
	if err := x.search(mp, strings.ToLower(q), func() bool { return false }, nil, func(id []byte) { ids = append(ids, string(id)) }); err != nil {
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
	const n = 30_000 // about 2.4 MB of records: segments in three read runs
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
	stopped := x.search("mp-a", "number", func() bool { return true }, nil, func([]byte) {})
	if stopped != errStopped && x.size > 0 {
		t.Errorf("a stopped search: %v", stopped)
	}
}

// A search reads only the segments of the file whose signature has every
// three bytes of the text: a rare text a few segments, and finds the same
// products as a read of them all (a text shorter than three bytes, read
// whole). The segments' signatures are rewritten with the file.
func TestNameIndexReadsSegmentsThatMayMatch(t *testing.T) {
	x := newNameIndex(t.TempDir())
	defer x.close()
	const n = 30_000
	for i := range n {
		name := "Organic cotton shirt " + strconv.Itoa(i)
		if i%10_000 == 7 {
			name = "Steel needle " + strconv.Itoa(i)
		}
		x.set("mp-a", uint32(i), "P-"+strconv.Itoa(i), name)
	}
	if len(x.segs) < 20 {
		t.Fatalf("%d segments", len(x.segs))
	}
	for _, tc := range []struct {
		q       string
		want    []string
		maxRead int64 // bytes of records read at most
	}{
		{"needle", []string{"P-10007", "P-20007", "P-7"}, 3 * (nameBlock + 1<<10)},
		{"steel needle 2", []string{"P-20007"}, 3 * (nameBlock + 1<<10)},
		{"p-2999", []string{"P-2999", "P-29990", "P-29991", "P-29992", "P-29993", "P-29994", "P-29995", "P-29996", "P-29997", "P-29998", "P-29999"}, x.size / 4},
		{"nothing of the kind", nil, 0},
		{"p-", nil, x.size},                              // short: the whole file
		{"shirt 29999", []string{"P-29999"}, x.size / 4}, // common grams, read where they meet
	} {
		before := x.read.Load()
		got := searchNames(t, x, "mp-a", tc.q)
		read := x.read.Load() - before
		if tc.q == "p-" {
			if len(got) != n || read != x.size {
				t.Errorf("%q: %d found, %d of %d bytes read", tc.q, len(got), read, x.size)
			}
			continue
		}
		if !slices.Equal(got, tc.want) || read > tc.maxRead {
			t.Errorf("%q: %q, %d bytes read; want %q, at most %d bytes of %d", tc.q, got, read, tc.want, tc.maxRead, x.size)
		}
	}
	// The smallest ids first: for a caller that keeps the 5 smallest, a
	// text most products hold reads the segment of the smallest ids only
	// (here ids grow along the file), and finds what a read of every
	// segment finds.
	for _, q := range []string{"shirt", "needle", "p-2", "1", "nothing of the kind"} {
		all := searchNames(t, x, "mp-a", q)
		first := smallest{max: 5}
		before := x.read.Load()
		if err := x.search("mp-a", q, func() bool { return false }, first.beyond, first.addBytes); err != nil {
			t.Fatal(err)
		}
		if want := all[:min(5, len(all))]; !slices.Equal(first.ids, want) {
			t.Errorf("%q, the 5 smallest: %q, want %q", q, first.ids, want)
		}
		if read := x.read.Load() - before; q == "shirt" && read > nameBlock+1<<10 {
			t.Errorf("%q: %d bytes read for the 5 smallest ids", q, read)
		}
	}
	// Rewritten without the dead records, with signatures of its own.
	x.minCompact = 1 << 10
	for i := range n - 10_000 {
		if i != 7 {
			x.remove(uint32(i))
		}
	}
	before := x.read.Load()
	if got := searchNames(t, x, "mp-a", "needle"); !slices.Equal(got, []string{"P-20007", "P-7"}) || x.read.Load()-before > 2*(nameBlock+1<<10) {
		t.Errorf("after the rewrite: %q, %d bytes read", got, x.read.Load()-before)
	}
}

// A rewrite of the file due while a search is under way waits for the
// search, which ends (its hits checked) instead of waiting for the
// rewrite in turn.
func TestNameIndexRewriteDuringSearch(t *testing.T) {
	x := newNameIndex(t.TempDir())
	defer x.close()
	x.minCompact = 1 << 10
	const n = 3000 // about 150 kB: two segments on disk
	for i := range n {
		x.set("mp-a", uint32(i), "P-"+strconv.Itoa(i), "Organic cotton shirt number "+strconv.Itoa(i))
	}
	// Remove products up to the one whose removal makes the rewrite due
	// (about half of them).
	next := 0
	for ; ; next++ {
		l := int64(x.at(uint32(next)) & (1<<24 - 1))
		if x.dead+l > max(x.live-l, x.minCompact) {
			break
		}
		x.remove(uint32(next))
	}
	size := x.size
	inSearch, goOn := make(chan struct{}), make(chan struct{})
	searched := make(chan []string, 1)
	go func() {
		var ids []string
		once := false
		err := x.search("mp-a", "number 299", func() bool {
			if !once {
				once = true
				close(inSearch)
				<-goOn
			}
			return false
		}, nil, func(id []byte) { ids = append(ids, string(id)) })
		if err != nil {
			t.Error(err)
		}
		searched <- ids
	}()
	<-inSearch
	removed := make(chan struct{})
	go func() { x.remove(uint32(next)); close(removed) }()
	// Once the rewrite waits for the search (a writer waiting on scanMu
	// keeps readers out), the search goes on.
	testenv.Eventually(t, 10*time.Second, func() error {
		if x.scanMu.TryRLock() {
			x.scanMu.RUnlock()
			return errors.New("the rewrite does not wait for the search yet")
		}
		return nil
	})
	close(goOn)
	select {
	case ids := <-searched:
		slices.Sort(ids)
		if len(ids) != 10 || ids[0] != "P-2990" { // P-299 was removed
			t.Errorf("the search found %q", ids)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the search and the rewrite wait for each other")
	}
	select {
	case <-removed:
	case <-time.After(10 * time.Second):
		t.Fatal("the rewrite did not end")
	}
	if x.size >= size {
		t.Errorf("not rewritten: %d bytes, %d before", x.size, size)
	}
}

// benchProduct is the id and name of the i-th product of the search
// benchmarks: names of 60 characters from a few words, "Needle …" for 10
// products of 1,000,000 (i%100,000 == 7).
func benchProduct(i int) (id, name string) {
	const soup = "organic cotton shirt blue large steel bottle coffee beans roasted wireless headphones noise cancelling "
	id = "p-" + strconv.Itoa(10_000_000 + i)[1:]
	h := uint64(i)*0x9e3779b97f4a7c15 + 12345
	for k := uint64(0); len(name) < 60; k++ {
		w := (h + k*7) % uint64(len(soup)-12)
		name += soup[w : w+12]
	}
	name = name[:60]
	if i%100_000 == 7 {
		name = "Needle " + name[7:]
	}
	return id, name
}

// BenchmarkNameIndexSearch: the names index alone (no log, no view) of
// ENDCAP_BENCH_PRODUCTS (default 1,000,000) products of BenchmarkSearchAll,
// written in id order (in-order) or in a random order (shuffled), searched
// as the console does (the 51 smallest ids) for a rare text, a common one
// and one too short for the signatures; the process's CPU time a search
// and the share of the file read, beside the wall clock.
//
//	go test ./management/catalog -run '^$' -bench NameIndexSearch -benchtime 10x -cpu 1
func BenchmarkNameIndexSearch(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("ENDCAP_BENCH_PRODUCTS")); err == nil && v > 0 {
		n = v
	}
	for _, order := range []string{"in-order", "shuffled"} {
		x := newNameIndex(b.TempDir())
		perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
		for i := range n {
			if order == "in-order" {
				perm[i] = i
			}
			id, name := benchProduct(perm[i])
			x.set("mp", uint32(i), id, name)
		}
		for _, bc := range []struct{ name, q string }{{"rare", "needle"}, {"common", "coffee beans"}, {"short", "zq"}} {
			b.Run(order+"/"+bc.name, func(b *testing.B) {
				read0, cpu0 := x.read.Load(), cpuTime()
				for range b.N {
					first := smallest{max: 51} // as the console's search keeps them
					if err := x.search("mp", bc.q, func() bool { return false }, first.beyond, first.addBytes); err != nil || len(first.ids) == 0 && bc.name != "short" {
						b.Fatalf("%d found, %v", len(first.ids), err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(x.read.Load()-read0)/float64(b.N)/float64(x.size), "read/file")
				b.ReportMetric(float64(x.size)/float64(n), "file-B/product")
			})
		}
		x.close()
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
