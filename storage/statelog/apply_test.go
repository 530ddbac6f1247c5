package statelog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A record in the writer's form costs the view one allocation to decode
// (its key, type, id and write id together): encoding/json took twelve, and
// two passes over the state, which is most of the record.
func TestApplyDecodesInOneAllocation(t *testing.T) {
	l := bareLog()
	applied := 0
	l.Register("product", func(r Record) {
		if !strings.HasPrefix(string(r.State), `{"name":`) || r.ID != "mp/p-0000001" {
			t.Errorf("applied %+v", r)
		}
		applied++
	})
	state := `{"name":"` + strings.Repeat("n", 60) + `","active":true,"vendors":["v-1"],"categories":["c-1","c-2","c-3"],"priceMicros":990000,` +
		`"details":{"description":"` + strings.Repeat("d", 500) + `","gtin":"4006381333931"}}`
	b, err := json.Marshal(Record{Type: "product", ID: "mp/p-0000001", Version: 1, WriteID: "0193a5b0-0000-7000-8000-0000000000aa", AtMs: 1, State: json.RawMessage(state)})
	if err != nil {
		t.Fatal(err)
	}
	kr := &kgo.Record{Value: b}
	l.apply(kr) // the first one stores the version
	if applied != 1 {
		t.Fatalf("applied %d records, want 1", applied)
	}
	// The same record again is refused (an old version): what is left is
	// the decoding.
	if n := testing.AllocsPerRun(100, func() { l.apply(kr) }); n > 1 {
		t.Fatalf("%.0f allocations a record, want at most 1", n)
	}
	if applied != 1 {
		t.Fatalf("applied %d records, want 1", applied)
	}
}

// BenchmarkApplyRecord: a typical product's record decoded and refused (as
// TestApplyDecodesInOneAllocation).
func BenchmarkApplyRecord(b *testing.B) {
	l := bareLog()
	l.Register("product", func(Record) {})
	state := `{"name":"` + strings.Repeat("n", 60) + `","active":true,"vendors":["v-1"],"categories":["c-1","c-2","c-3"],"priceMicros":990000,` +
		`"details":{"description":"` + strings.Repeat("d", 500) + `","gtin":"4006381333931"}}`
	v, err := json.Marshal(Record{Type: "product", ID: "mp/p-0000001", Version: 1, WriteID: "0193a5b0-0000-7000-8000-0000000000aa", AtMs: 1, State: json.RawMessage(state)})
	if err != nil {
		b.Fatal(err)
	}
	kr := &kgo.Record{Value: v}
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		l.apply(kr)
	}
}
