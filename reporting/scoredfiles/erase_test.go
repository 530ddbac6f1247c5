package scoredfiles

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestErase: a day's file rewritten with some users blanked keeps every
// other byte of its rows, their order and its metadata; a file without
// those users, or a day without a file, is not rewritten.
func TestErase(t *testing.T) {
	f := newFixture(t)
	mp := uuid.NewString()
	day := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	var items []item
	for i, u := range []string{"a", "b", "a", "c"} {
		items = append(items, item{mp: mp, event: fmt.Sprint("e", i), at: day.Add(time.Duration(i+1) * time.Hour), day: "2026-02-02", user: u,
			unitMicros: 7, qty: 2, attributed: 1, reason: "click_same_product", score: 1, version: 1})
	}
	f.insert(t, items)
	if _, err := f.svc.Produce(f.ctx, Marketplace{ID: mp}, day); err != nil {
		t.Fatal(err)
	}
	before, meta := f.read(t, mp, day)
	info, _, err := f.s3.Head(f.ctx, Key(mp, day))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.Erase(f.ctx, mp, day, map[string]bool{"x": true}); err != nil || n != 0 {
		t.Fatalf("erase of no user of the file: %d %v", n, err)
	}
	if n, err := f.svc.Erase(f.ctx, mp, day.AddDate(0, 0, 1), map[string]bool{"a": true}); err != nil || n != 0 {
		t.Fatalf("erase of a day without a file: %d %v", n, err)
	}
	if again, _, _ := f.s3.Head(f.ctx, Key(mp, day)); again.ETag != info.ETag {
		t.Fatal("a file without the users was rewritten")
	}
	n, err := f.svc.Erase(f.ctx, mp, day, map[string]bool{"a": true, "c": true})
	if err != nil || n != 3 {
		t.Fatalf("erase: %d %v", n, err)
	}
	after, metaAfter := f.read(t, mp, day)
	if len(after) != len(before) {
		t.Fatalf("%d rows, want %d", len(after), len(before))
	}
	for i := range before {
		want := before[i]
		if want.OpaqueUserID != "b" {
			want.OpaqueUserID = ""
		}
		if after[i] != want {
			t.Errorf("row %d: %+v, want %+v", i, after[i], want)
		}
	}
	if fmt.Sprint(metaAfter) != fmt.Sprint(meta) {
		t.Errorf("metadata %v, want %v", metaAfter, meta)
	}
	now, _, err := f.s3.Head(f.ctx, Key(mp, day))
	if err != nil || now.ETag == info.ETag || now.Metadata["produced-at"] != info.Metadata["produced-at"] || now.Metadata["final"] != info.Metadata["final"] {
		t.Errorf("object after the erasure: %+v (before %+v) %v", now, info, err)
	}
}
