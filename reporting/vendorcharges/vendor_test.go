package vendorcharges

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestVendorRefused: a vendor's refused charges of a window, counted per
// reason and kind, the newest listed first up to the limit; its charges,
// other vendors' and other marketplaces' refusals and the rows outside the
// window are not counted; a replayed row counts once.
func TestVendorRefused(t *testing.T) {
	conn := testDB(t)
	ctx := t.Context()
	mp, other := uuid.NewString(), uuid.NewString()
	b, err := conn.PrepareBatch(ctx, chargeInsert[:len(chargeInsert)-1]+", refused_reason)")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		mp, vendor, kind, reason string
		ms                       int64
	}
	w := Window{StartMs: base, EndMs: base + 3_600_000}
	rows := []row{
		{mp, "v", "click", "invalid_too_fast", base},
		{mp, "v", "click", "invalid_too_fast", base + 1000},
		{mp, "v", "click", "invalid_no_impression", base + 2000},
		{mp, "v", "impression", "daily_budget", base + 3000},
		{mp, "v", "click", "insufficient_balance", base + 4000},
		{mp, "v", "click", "", base + 5000},                            // charged
		{mp, "w", "click", "invalid_too_fast", base + 6000},            // another vendor
		{other, "v", "click", "invalid_too_fast", base + 7000},         // another marketplace
		{mp, "v", "click", "invalid_repeat_click", base - 1},           // before the window
		{mp, "v", "click", "invalid_repeat_click", base + 3_600_000},   // at its end
		{mp, "v", "click", "invalid_click_rate", base + 3_600_000 - 1}, // its last millisecond
		{mp, "v", "impression", "total_budget", base + 3_600_000 - 1},  // the same millisecond
	}
	var ids []string
	for i, r := range rows {
		id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "vendor-refused-%d", i)).String()
		ids = append(ids, id)
		at := time.UnixMilli(r.ms).UTC()
		amount := int64(0)
		if r.reason == "" {
			amount = 30_000
		}
		for range 2 { // and a replay
			if err := b.Append(uuid.MustParse(r.mp), uuid.MustParse(id), at, r.ms, at, r.kind, "e", "USD",
				"camp", "p-1", r.vendor, "ext", "", "CPC", int64(30_000), amount, uint16(0),
				uuid.New(), uint8(1), at, r.reason); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	s := New(conn)
	got, err := s.VendorRefused(ctx, mp, "v", w, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []ReasonCount{{"daily_budget", 0, 1}, {"insufficient_balance", 1, 0}, {"invalid_click_rate", 1, 0},
		{"invalid_no_impression", 1, 0}, {"invalid_too_fast", 2, 0}, {"total_budget", 0, 1}}
	if !slices.Equal(got.Counts, want) || got.Total() != 7 {
		t.Errorf("counts %v (%d), want %v", got.Counts, got.Total(), want)
	}
	// Newest first (the last millisecond's two by id, descending), three of them.
	last := []string{ids[10], ids[11]}
	slices.Sort(last)
	wantIDs := []string{last[1], last[0], ids[4]}
	var gotIDs []string
	for _, c := range got.Latest {
		gotIDs = append(gotIDs, c.InteractionID)
		if c.VendorID != "v" || c.ProductID != "p-1" || c.Amount != (Amount{}) || c.RefusedReason == "" {
			t.Errorf("refused charge %+v", c)
		}
	}
	if !slices.Equal(gotIDs, wantIDs) {
		t.Errorf("latest %v, want %v", gotIDs, wantIDs)
	}
	if got.Latest[2].Kind != "click" || got.Latest[2].RefusedReason != "insufficient_balance" {
		t.Errorf("latest[2] %+v", got.Latest[2])
	}
	// A vendor without refusals, an empty window.
	if r, err := s.VendorRefused(ctx, mp, "nobody", w, 3); err != nil || len(r.Counts) != 0 || len(r.Latest) != 0 {
		t.Errorf("nobody: %+v %v", r, err)
	}
	if r, err := s.VendorRefused(ctx, mp, "v", Window{StartMs: base, EndMs: base}, 3); err != nil || r.Total() != 0 {
		t.Errorf("empty window: %+v %v", r, err)
	}
}
