package performance

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/testkit/testenv"
)

// TestSpendSteps: the charged spend of one campaign per step, from
// charges_raw: replays counted once, refused charges, other campaigns,
// other marketplaces and instants outside the window left out.
func TestSpendSteps(t *testing.T) {
	env := testenv.Get(t)
	cfg := env.Config(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, cfg)
	mp, other := uuid.NewString(), uuid.NewString()
	from := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC) // a local day of Europe/Paris
	to := from.Add(24 * time.Hour)
	type charge struct {
		mp, campaign string
		at           time.Time
		amount       int64
		refused      string
		copies       int
	}
	id := func() uuid.UUID { return uuid.New() }
	charges := []charge{
		{mp, "c-1", from, 100, "", 1},                      // step 0
		{mp, "c-1", from.Add(14 * time.Minute), 50, "", 3}, // step 0, replayed twice
		{mp, "c-1", from.Add(15 * time.Minute), 7, "", 1},  // step 1
		{mp, "c-1", from.Add(15 * time.Minute), 0, "daily_budget", 1},
		{mp, "c-1", to.Add(-time.Second), 9, "", 1},      // the last step
		{mp, "c-1", to, 1000, "", 1},                     // the next day
		{mp, "c-1", from.Add(-time.Second), 1000, "", 1}, // the day before
		{mp, "c-2", from.Add(time.Hour), 1000, "", 1},    // another campaign
		{other, "c-1", from.Add(time.Hour), 1000, "", 1}, // another marketplace
	}
	ictx, icancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(icancel) // clickhouse-go's Send closes its connection when the context ends
	b, err := conn.PrepareBatch(ictx, `INSERT INTO charges_raw (marketplace_id, interaction_id, timestamp, timestamp_ms, day_local, kind,
	event_id, currency_code, campaign_id, product_id, vendor_id, charge_type, price_micros, amount_micros, amount_sub_micros, auction_id, rank, auction_at, refused_reason)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charges {
		iid := id()
		for range c.copies {
			if err := b.Append(uuid.MustParse(c.mp), iid, c.at, c.at.UnixMilli(), c.at, "click", "e-"+iid.String(), "EUR", c.campaign, "p-1", "v-1",
				"CPC", int64(30_000), c.amount, uint16(0), id(), uint8(1), c.at, c.refused); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	r := New(conn)
	got, err := r.SpendSteps(ctx, mp, "c-1", from, to, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 96 || got[0] != 150 || got[1] != 7 || got[95] != 9 {
		t.Fatalf("steps: %d, %v…%v", len(got), got[:3], got[len(got)-1:])
	}
	var sum int64
	for _, v := range got {
		sum += v
	}
	if sum != 166 {
		t.Fatalf("sum %d, want 166", sum)
	}
	if got, err := r.SpendSteps(ctx, mp, "c-404", from, to, 15*time.Minute); err != nil || len(got) != 96 || got[0] != 0 {
		t.Fatalf("a campaign without charges: %v %v", got, err)
	}
	for _, bad := range []struct {
		from, to time.Time
		step     time.Duration
	}{{from, from, time.Minute}, {to, from, time.Minute}, {from, to, time.Millisecond}, {from, to, 40 * time.Second}} {
		if _, err := r.SpendSteps(ctx, mp, "c-1", bad.from, bad.to, bad.step); err == nil {
			t.Errorf("SpendSteps(%s, %s, %s): no error", bad.from, bad.to, bad.step)
		}
	}
}
