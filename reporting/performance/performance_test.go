package performance

import (
	"testing"
	"time"
)

func day(n int) time.Time { return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n) }

func TestByDayAndCampaign(t *testing.T) {
	rows := []Row{
		{Day: day(0), CampaignID: "c1", Impressions: 10, Clicks: 2, SpendMicros: 500_000, SalesMicros: 2_000_000},
		{Day: day(0), CampaignID: "c2", Impressions: 5, Clicks: 1, SpendMicros: 900_000},
		{Day: day(2), CampaignID: "c1", Impressions: 1, SpendMicros: 100_000, SalesMicros: 100_000},
		{Day: day(9), CampaignID: "c1", Impressions: 99}, // outside the window
	}
	days := ByDay(rows, day(0), day(3))
	if len(days) != 4 || !days[1].Day.Equal(day(1)) || days[1].Impressions != 0 {
		t.Fatalf("every day of the window, zeros where none: %+v", days)
	}
	if d := days[0]; d.Impressions != 15 || d.Clicks != 3 || d.SpendMicros != 1_400_000 || d.SalesMicros != 2_000_000 {
		t.Fatalf("day 0: %+v", d)
	}
	if r, ok := days[0].ROAS(); !ok || r != 2_000_000.0/1_400_000 {
		t.Fatalf("ROAS %v %v", r, ok)
	}
	if _, ok := days[1].ROAS(); ok {
		t.Fatal("ROAS without spend")
	}
	if _, ok := days[1].ACOS(); ok {
		t.Fatal("ACOS without sales")
	}
	cs := ByCampaign(rows)
	if len(cs) != 2 || cs[0].ID != "c2" || cs[1].ID != "c1" || cs[1].Impressions != 110 {
		t.Fatalf("by campaign, largest spend first: %+v", cs)
	}
}

func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		from, to int
		ok       bool
	}{{0, 0, true}, {0, MaxDays - 1, true}, {0, MaxDays, false}, {1, 0, false}} {
		if err := Window(day(tc.from), day(tc.to)); (err == nil) != tc.ok {
			t.Errorf("window %d..%d: %v", tc.from, tc.to, err)
		}
	}
}
