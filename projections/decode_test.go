package projections

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/records"
)

// TestDecodeInPlace: the batch is decoded in chunks into one slice; records
// that cannot be read are skipped wherever they fall (first, last, at a
// chunk's edges, a whole chunk), the others come out in batch order with
// their partition and offset, and nothing is left behind the events returned.
func TestDecodeInPlace(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3)) // three chunks of a batch of 15,000
	const n = 3 * parallelChunk
	tests := []struct {
		name string
		bad  func(i int) bool
	}{
		{"all readable", func(int) bool { return false }},
		{"first and last", func(i int) bool { return i == 0 || i == n-1 }},
		{"chunk edges", func(i int) bool { return i%parallelChunk == 0 || i%parallelChunk == parallelChunk-1 }},
		{"a whole chunk", func(i int) bool { return i >= parallelChunk && i < 2*parallelChunk }},
		{"every other", func(i int) bool { return i%2 == 1 }},
		{"none readable", func(int) bool { return true }},
	}
	mp := "0193c5a0-0000-7000-8000-000000000001"
	f := &EventFold{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batch := make([]*kgo.Record, n)
			var want []string
			for i := range batch {
				id := fmt.Sprintf("e-%d", i)
				var v []byte
				switch {
				case !tt.bad(i):
					v, _ = json.Marshal(&records.Event{Kind: records.KindPageView, MarketplaceID: mp, ID: id, OpaqueUserID: "u"})
					want = append(want, id)
				case i%3 == 0:
					v = []byte("{not json")
				default: // readable, but without an id
					v, _ = json.Marshal(&records.Event{Kind: records.KindPageView, MarketplaceID: mp})
				}
				batch[i] = &kgo.Record{Value: v, Partition: int32(i % 4), Offset: int64(i)}
			}
			out := f.decode(t.Context(), batch)
			got := make([]string, len(out))
			for i, d := range out {
				got[i] = d.E.ID
				var idx int
				if _, err := fmt.Sscanf(d.E.ID, "e-%d", &idx); err != nil || d.Offset != int64(idx) || d.Partition != int32(idx%4) || d.MP.String() != mp {
					t.Fatalf("event %d: %s at %d/%d of %s", i, d.E.ID, d.Partition, d.Offset, d.MP)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("decoded %d events, want %d (first %v, want %v)", len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
			}
			for i, d := range out[len(out):cap(out)] {
				if d.E.ID != "" || d.E.MarketplaceID != "" || d.Offset != 0 {
					t.Fatalf("place %d after the events is not cleared: %+v", len(out)+i, d.E)
				}
			}
		})
	}
}

// TestKeepOwners: duplicates leave the batch wherever they are, the owners
// (first claims and replays) keep their order, and the places behind them
// are cleared.
func TestKeepOwners(t *testing.T) {
	F, R, D := ClaimFirst, ClaimReplay, ClaimDuplicate
	tests := []struct {
		name   string
		claims []Claim
		want   []string
	}{
		{"empty", nil, nil},
		{"no duplicate", []Claim{F, R, F}, []string{"0", "1", "2"}},
		{"first", []Claim{D, F, R}, []string{"1", "2"}},
		{"middle", []Claim{F, D, D, F}, []string{"0", "3"}},
		{"last", []Claim{F, F, D}, []string{"0", "1"}},
		{"all", []Claim{D, D}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := make([]Event, len(tt.claims))
			for i := range events {
				events[i].E.ID = fmt.Sprint(i)
			}
			kept := keepOwners(events, tt.claims)
			var got []string
			for _, e := range kept {
				got = append(got, e.E.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("kept %v, want %v", got, tt.want)
			}
			for _, e := range events[len(kept):] {
				if e.E.ID != "" {
					t.Fatalf("a place behind the owners still holds %q", e.E.ID)
				}
			}
		})
	}
}
