package statelog

import (
	"encoding/json"
	"hash/maphash"
	"log/slog"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// bareLog is a log without Kafka: records are given to apply directly.
func bareLog() *Log {
	return &Log{
		log: slog.New(slog.DiscardHandler), versions: map[versionKey]int64{},
		seeds:    [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		appliers: map[string]ApplyFunc{}, versioners: map[string]func(string) int64{},
		waiters: map[string]chan bool{},
	}
}

func feed(t *testing.T, l *Log, r Record) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	l.apply(&kgo.Record{Value: b})
}

// A collection's versions are its entries' (and its deleted entities'):
// the log keeps no map of them beside, and accepts and refuses records as
// it did with one.
func TestCollectionKeepsVersions(t *testing.T) {
	l := bareLog()
	c := NewCollection[idThing](l, "thing")
	steps := []struct {
		name    string
		rec     Record
		version int64 // Log.Version after the record
		n       int   // the entity's value after it (-1: absent)
	}{
		{"create", Record{Version: 1, State: []byte(`{"n":1}`)}, 1, 1},
		{"update", Record{Version: 2, State: []byte(`{"n":2}`)}, 2, 2},
		{"an older record is refused", Record{Version: 2, State: []byte(`{"n":9}`)}, 2, 2},
		{"delete", Record{Version: 3, Deleted: true}, 3, -1},
		{"a record older than the delete is refused", Record{Version: 3, State: []byte(`{"n":9}`)}, 3, -1},
		{"created again, its versions continue", Record{Version: 4, State: []byte(`{"n":4}`)}, 4, 4},
		{"an undecodable state counts its version, the value stays", Record{Version: 5, State: []byte(`{"n":"x"}`)}, 5, 4},
		{"and a record below it is refused", Record{Version: 5, State: []byte(`{"n":9}`)}, 5, 4},
		{"the next one applies", Record{Version: 6, State: []byte(`{"n":6}`)}, 6, 6},
		// An entry keeps a version in four bytes; one that does not fit
		// is kept apart, exactly.
		{"a version beyond four bytes", Record{Version: 1<<40 + 3, State: []byte(`{"n":7}`)}, 1<<40 + 3, 7},
		{"a record below it is refused", Record{Version: 1 << 32, State: []byte(`{"n":9}`)}, 1<<40 + 3, 7},
		{"deleted at a wide version", Record{Version: 1<<40 + 4, Deleted: true}, 1<<40 + 4, -1},
		{"created again above it", Record{Version: 1<<40 + 5, State: []byte(`{"n":8}`)}, 1<<40 + 5, 8},
	}
	for _, s := range steps {
		s.rec.Type, s.rec.ID = "thing", "mp-a/p-1"
		feed(t, l, s.rec)
		if got := l.Version("thing", "mp-a/p-1"); got != s.version {
			t.Fatalf("%s: version %d, want %d", s.name, got, s.version)
		}
		v, _, ok := c.Get("mp-a", "p-1")
		if (s.n < 0) == ok || ok && v.N != s.n {
			t.Fatalf("%s: value %v %v, want %d", s.name, v, ok, s.n)
		}
	}
	if l.Version("thing", "mp-a/p-2") != 0 || l.Version("thing", "mp-b/p-1") != 0 {
		t.Fatal("an entity never written has a version")
	}
	if len(l.versions) != 0 {
		t.Fatalf("the log keeps %d versions of a collection's entities", len(l.versions))
	}
	if len(c.gone) != 0 {
		t.Fatalf("%d versions of entities that exist are kept apart", len(c.gone))
	}
	if len(c.wide) != 1 {
		t.Fatalf("%d wide versions kept, want 1", len(c.wide))
	}
	if s := unsafe.Sizeof(entry[idThing]{}); s != unsafe.Sizeof(idThing{})+24 {
		t.Fatalf("an entry is %d bytes beside its value's %d, want 24 more", s, unsafe.Sizeof(idThing{}))
	}
	// A type without a collection keeps its versions in the log.
	l.Register("other", func(Record) {})
	feed(t, l, Record{Type: "other", ID: "x", Version: 7})
	if got := l.Version("other", "x"); got != 7 {
		t.Fatalf("other: version %d", got)
	}
}
