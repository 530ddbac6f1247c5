package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/spend"
)

// TestReconcileSpend: after the fold charged clicks of two campaigns, Redis
// agrees with the charges. Then Redis loses a charge of one (a failover
// without the replica's acknowledgement, say) and counts one of the other
// twice, and holds spend of a third campaign without any charge: the check
// names each counter that differs, by campaign and day, and fix sets them
// to the charges, after which the check finds nothing.
func TestReconcileSpend(t *testing.T) {
	s := newChargeStack(t)
	now := time.Now().UTC()
	today := spend.DayOf(now, time.UTC)
	a, b := uuid.New(), uuid.New()
	var evs []records.Event
	for i, camp := range []uuid.UUID{a, a, b} {
		evs = append(evs, records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: fmt.Sprintf("c-%d", i), OccurredAtMs: now.UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u", ResolvedBidID: s.winner(t, uuid.New(), now, 1, camp, bidtoken.CPC, 30_000)})
	}
	s.produce(t, evs...)
	s.run(t, s.projector(t, s.conn, s.views(time.UTC), 100*time.Millisecond), 30*time.Second, s.committedIs(projections.EventsGroup, 3))
	check := func(fix bool) []projections.SpendDiff {
		t.Helper()
		d, err := projections.ReconcileSpend(s.ctx, s.conn, s.rdb, s.mp, now, fix)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := check(false); len(d) != 0 {
		t.Fatalf("after the fold: %+v, want no difference", d)
	}
	// Campaign a's second charge lost, b's charged twice, c never charged.
	if err := s.rdb.HIncrBy(s.ctx, spend.SpendKey(s.mp, a.String()), spend.TotalField, -30_000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.HIncrBy(s.ctx, spend.SpendKey(s.mp, a.String()), spend.DayField(today), -30_000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := spend.AddSpend(s.ctx, s.rdb, s.mp, b.String(), today, 30_000); err != nil {
		t.Fatal(err)
	}
	c := uuid.NewString()
	if err := spend.AddSpend(s.ctx, s.rdb, s.mp, c, today, 5); err != nil {
		t.Fatal(err)
	}
	// a's week and month counters still hold both charges; b's and c's
	// moved with their day (AddSpend moves the day, week, month and total).
	week, month := spend.WeekOf(today), spend.MonthOf(today)
	want := map[string]projections.SpendDiff{
		a.String() + "/":          {CampaignID: a.String(), Redis: 30_000, Charges: 60_000},
		a.String() + "/" + today:  {CampaignID: a.String(), Day: today, Redis: 30_000, Charges: 60_000},
		b.String() + "/":          {CampaignID: b.String(), Redis: 60_000, Charges: 30_000},
		b.String() + "/" + today:  {CampaignID: b.String(), Day: today, Redis: 60_000, Charges: 30_000},
		b.String() + "/w" + week:  {CampaignID: b.String(), Week: week, Redis: 60_000, Charges: 30_000},
		b.String() + "/m" + month: {CampaignID: b.String(), Month: month, Redis: 60_000, Charges: 30_000},
		c + "/":                   {CampaignID: c, Redis: 5},
		c + "/" + today:           {CampaignID: c, Day: today, Redis: 5},
		c + "/w" + week:           {CampaignID: c, Week: week, Redis: 5},
		c + "/m" + month:          {CampaignID: c, Month: month, Redis: 5},
	}
	// a loses one charge in its week and month too: set back by fix.
	if err := s.rdb.HIncrBy(s.ctx, spend.SpendKey(s.mp, a.String()), spend.WeekField(week), -30_000).Err(); err != nil {
		t.Fatal(err)
	}
	want[a.String()+"/w"+week] = projections.SpendDiff{CampaignID: a.String(), Week: week, Redis: 30_000, Charges: 60_000}
	got := check(true)
	if len(got) != len(want) {
		t.Errorf("differences %+v, want %d", got, len(want))
	}
	for _, d := range got {
		k := d.CampaignID + "/" + d.Day
		if d.Week != "" {
			k = d.CampaignID + "/w" + d.Week
		} else if d.Month != "" {
			k = d.CampaignID + "/m" + d.Month
		}
		if w := want[k]; d != w {
			t.Errorf("difference %+v, want %+v", d, w)
		}
	}
	if d := check(false); len(d) != 0 {
		t.Errorf("after fix: %+v, want no difference", d)
	}
	if day, total := s.spend(t, a.String(), today); day != 60_000 || total != 60_000 {
		t.Errorf("campaign a after fix: %d / %d, want 60000", day, total)
	}
}
