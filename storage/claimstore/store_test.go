package claimstore_test

import (
	"crypto/rand"
	"slices"
	"testing"

	"github.com/endcap/endcap/storage/claimstore"
)

func randomKeys(n int) []claimstore.Key {
	ks := make([]claimstore.Key, n)
	for i := range ks {
		_, _ = rand.Read(ks[i][:])
	}
	return ks
}

// TestStore: keys are found in their partition and generation only, the
// first generation listed that has a key decides, checkpoints are kept, and
// DropBefore forgets the older generations of every partition, across a
// reopen.
func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, err := claimstore.Open(claimstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ks := randomKeys(4)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Write(0, []claimstore.Entry{{Gen: 10, Key: ks[0], Offset: 5}, {Gen: 11, Key: ks[1], Offset: 7}}, 3))
	must(s.Write(1, []claimstore.Entry{{Gen: 10, Key: ks[2], Offset: 9}, {Gen: 11, Key: ks[2], Offset: 12}}, -1))
	look := func(p int32, gens []uint32, keys ...claimstore.Key) []claimstore.Owner {
		t.Helper()
		out := make([]claimstore.Owner, len(keys))
		must(s.Lookup(p, gens, keys, out))
		return out
	}
	got := look(0, []uint32{11, 10}, ks[0], ks[1], ks[2], ks[3])
	want := []claimstore.Owner{{Offset: 5, Found: true}, {Offset: 7, Found: true}, {}, {}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("partition 0, key %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := look(0, []uint32{11}, ks[0]); got[0].Found {
		t.Errorf("generation 11 holds a key of generation 10: %+v", got[0])
	}
	if got := look(1, []uint32{11, 10}, ks[2]); got[0] != (claimstore.Owner{Offset: 12, Found: true}) {
		t.Errorf("the first generation listed decides: %+v", got[0])
	}
	if c, ok, err := s.Checkpoint(0); err != nil || !ok || c != 3 {
		t.Errorf("checkpoint of 0: %d %v %v, want 3", c, ok, err)
	}
	if _, ok, err := s.Checkpoint(1); err != nil || ok {
		t.Errorf("partition 1 has no checkpoint: %v %v", ok, err)
	}
	must(s.DropBefore(11))
	must(s.Close())
	if s, err = claimstore.Open(claimstore.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got = look(0, []uint32{11, 10}, ks[0], ks[1])
	if got[0].Found || !got[1].Found {
		t.Errorf("after DropBefore(11) and a reopen: %+v, want generation 10 gone and 11 kept", got)
	}
	if got := look(1, []uint32{11, 10}, ks[2]); got[0] != (claimstore.Owner{Offset: 12, Found: true}) {
		t.Errorf("partition 1 after the drop: %+v", got[0])
	}
	if c, ok, err := s.Checkpoint(0); err != nil || !ok || c != 3 {
		t.Errorf("checkpoint of 0 after a reopen: %d %v %v", c, ok, err)
	}
}

// BenchmarkLookupWrite: a batch of 10,000 fresh keys of one of 12
// partitions looked up in gens generations, then written, into a store that
// already holds pre keys.
func BenchmarkLookupWrite(b *testing.B) {
	for _, gens := range []int{1, 2, 3} {
		b.Run(string(rune('0'+gens))+"gens", func(b *testing.B) {
			s, err := claimstore.Open(claimstore.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			const n = 10_000
			gl := make([]uint32, gens)
			for i := range gl {
				gl[i] = uint32(100 - i)
			}
			out := make([]claimstore.Owner, n)
			ents := make([]claimstore.Entry, n)
			// Preload 2 M keys spread over the generations.
			for i := range 200 {
				ks := randomKeys(n)
				for j := range ents {
					ents[j] = claimstore.Entry{Gen: gl[i%gens], Key: ks[j], Offset: int64(i*n + j)}
				}
				if err := s.Write(int32(i%12), ents, -1); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				ks := randomKeys(n)
				b.StartTimer()
				p := int32(i % 12)
				if err := s.Lookup(p, gl, ks, out); err != nil {
					b.Fatal(err)
				}
				for j := range ents {
					ents[j] = claimstore.Entry{Gen: gl[0], Key: ks[j], Offset: int64(i*n + j)}
				}
				if err := s.Write(p, ents, int64(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// BenchmarkLookup: 10,000 fresh keys of one of 12 partitions looked up in
// gens generations of a store of 2 M keys (ns/key), and BenchmarkWrite:
// their writing.
func BenchmarkLookup(b *testing.B) {
	for _, gens := range []int{1, 2, 3} {
		b.Run(string(rune('0'+gens))+"gens", func(b *testing.B) {
			s, gl := preloaded(b, gens)
			defer s.Close()
			const n = 10_000
			out := make([]claimstore.Owner, n)
			ks := randomKeys(n)
			b.ResetTimer()
			for i := range b.N {
				if err := s.Lookup(int32(i%12), gl, ks, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	s, gl := preloaded(b, 1)
	defer s.Close()
	const n = 10_000
	ents := make([]claimstore.Entry, n)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ks := randomKeys(n)
		for j := range ents {
			ents[j] = claimstore.Entry{Gen: gl[0], Key: ks[j], Offset: int64(i*n + j)}
		}
		b.StartTimer()
		if err := s.Write(int32(i%12), ents, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
}

func preloaded(b *testing.B, gens int) (*claimstore.Store, []uint32) {
	s, err := claimstore.Open(claimstore.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	gl := make([]uint32, gens)
	for i := range gl {
		gl[i] = uint32(100 - i)
	}
	ents := make([]claimstore.Entry, n)
	for i := range 200 {
		ks := randomKeys(n)
		for j := range ents {
			ents[j] = claimstore.Entry{Gen: gl[i%gens], Key: ks[j], Offset: int64(i*n + j)}
		}
		if err := s.Write(int32(i%12), ents, -1); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.CompactAll(); err != nil {
		b.Fatal(err)
	}
	return s, gl
}

// TestIngestFirstWins: a batch large enough to be ingested as a table keeps,
// of a key written twice in one generation, the first; and a key of two
// generations in each.
func TestIngestFirstWins(t *testing.T) {
	s, err := claimstore.Open(claimstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ks := randomKeys(3_000)
	ents := make([]claimstore.Entry, len(ks))
	for i := range ents {
		ents[i] = claimstore.Entry{Gen: 5, Key: ks[i], Offset: int64(i)}
	}
	ents[2_500].Key = ks[7]                                           // again in generation 5: offset 7 stays
	ents[2_600] = claimstore.Entry{Gen: 6, Key: ks[8], Offset: 2_600} // generation 6 has its own
	if err := s.Write(3, ents, -1); err != nil {
		t.Fatal(err)
	}
	out := make([]claimstore.Owner, 3)
	if err := s.Lookup(3, []uint32{5}, []claimstore.Key{ks[7], ks[8], ks[2_999]}, out); err != nil {
		t.Fatal(err)
	}
	if want := []claimstore.Owner{{Offset: 7, Found: true}, {Offset: 8, Found: true}, {Offset: 2_999, Found: true}}; !slices.Equal(out, want) {
		t.Errorf("generation 5: %+v, want %+v", out, want)
	}
	if err := s.Lookup(3, []uint32{6, 5}, []claimstore.Key{ks[8], ks[7]}, out[:2]); err != nil {
		t.Fatal(err)
	}
	if want := []claimstore.Owner{{Offset: 2_600, Found: true}, {Offset: 7, Found: true}}; !slices.Equal(out[:2], want) {
		t.Errorf("generations 6 then 5: %+v, want %+v", out[:2], want)
	}
}
