package segments

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/validation"
)

// TestUploadCaps: an upload whose segment would pass a cap (its members,
// its bytes in Redis) or whose marketplace would (all its segments
// together) is refused whole with 422 segment_too_large at body.file: an
// add to an existing segment (applied chunk by chunk without caps), a
// replace and a creation leave the members as they were and no staged set
// behind; at the cap exactly, the upload is applied.
func TestUploadCaps(t *testing.T) {
	h := newHarness(t, WithChunkSize(10), WithOldGenerationGrace(0), WithCaps(Caps{SegmentMembers: 100, MarketplaceMembers: 150}))
	refused := func(what string, err error) {
		t.Helper()
		v, ok := validation.As(err)
		if !ok || len(v) != 1 || v[0].Type != TypeSegmentTooLarge || strings.Join([]string{v[0].Loc[0].(string), v[0].Loc[1].(string)}, ".") != "body.file" ||
			!strings.Contains(v[0].Msg, "nothing of this upload was applied") {
			t.Fatalf("%s: %v, want segment_too_large", what, err)
		}
	}
	noStaged := func(id string, live int) {
		t.Helper()
		if ks := h.keys(t, id); len(ks) != live {
			t.Fatalf("segment %s: member sets %v, want %d", id, ks, live)
		}
	}
	if err := h.upload(t, "a", ActionAdd, ids(t, "u", 80, 0, 0)); err != nil {
		t.Fatal(err)
	}
	// An add that would make 110 members (80 of its ids are members).
	refused("add past the segment cap", h.upload(t, "a", ActionAdd, ids(t, "u", 110, 0, 0)))
	if got := h.total(t, "a"); got != 80 || h.member(t, "a", "u-80") || h.member(t, "a", "u-109") {
		t.Fatalf("after the refused add: %d members", got)
	}
	noStaged("a", 1)
	// Up to the cap exactly.
	if err := h.upload(t, "a", ActionAdd, ids(t, "u", 100, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := h.total(t, "a"); got != 100 || !h.member(t, "a", "u-99") {
		t.Fatalf("at the cap: %d members", got)
	}
	noStaged("a", 1)
	refused("replace past the segment cap", h.upload(t, "a", ActionReplace, ids(t, "r", 101, 0, 0)))
	if got := h.total(t, "a"); got != 100 || h.member(t, "a", "r-0") {
		t.Fatalf("after the refused replace: %d members", got)
	}
	noStaged("a", 1)
	// The marketplace: 100 + 60 > 150, a new segment is not created.
	refused("a segment past the marketplace cap", h.upload(t, "b", ActionAdd, ids(t, "v", 60, 0, 0)))
	if h.svc.SegmentExists(h.mp, "b") {
		t.Fatal("the refused upload created its segment")
	}
	noStaged("b", 0)
	if err := h.upload(t, "b", ActionAdd, ids(t, "v", 50, 0, 0)); err != nil {
		t.Fatal(err)
	}
	refused("an add past the marketplace cap", h.upload(t, "b", ActionAdd, strings.NewReader("w-1\n")))
	// Removing makes room again.
	if err := h.upload(t, "a", ActionRemove, strings.NewReader("u-0\nu-1\n")); err != nil {
		t.Fatal(err)
	}
	if err := h.upload(t, "b", ActionAdd, strings.NewReader("w-1\nw-2\n")); err != nil {
		t.Fatal(err)
	}
	if got := h.total(t, "b"); got != 52 {
		t.Fatalf("b: %d members", got)
	}

	// Bytes: Redis's estimate of the set.
	hb := newHarness(t, WithChunkSize(50), WithCaps(Caps{SegmentBytes: 4096}))
	if err := hb.upload(t, "s", ActionAdd, ids(t, "small", 5, 0, 0)); err != nil {
		t.Fatal(err)
	}
	refused("past the byte cap", hb.upload(t, "s", ActionAdd, ids(t, strings.Repeat("x", 60), 500, 0, 0)))
	if got := hb.total(t, "s"); got != 5 {
		t.Fatalf("after the refused add: %d members", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, _, _ := hb.svc.coll.Get(hb.mp, "s"); hb.rdb.MemoryUsage(ctx, memberKey(hb.mp, "s", st.Generation)).Val() > 4096 {
		t.Fatal("the set passed its byte cap")
	}
}
