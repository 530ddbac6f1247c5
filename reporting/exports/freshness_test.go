package exports

import (
	"slices"
	"testing"
	"time"

	"github.com/endcap/endcap/reporting/rollups"
)

func TestWindowDataAsOf(t *testing.T) {
	d := func(n int) time.Time { return time.Date(2026, 11, 1+n, 0, 0, 0, 0, time.UTC) }
	at := func(n int, h int) time.Time { return d(n).Add(time.Duration(h) * time.Hour) }
	final := func(n int) time.Time { return rollups.FinalAfter(d(n)).Add(time.Hour) }
	for _, tc := range []struct {
		name       string
		known      map[time.Time]rollups.Day
		start, end int
		want       time.Time
	}{
		{"one day", map[time.Time]rollups.Day{d(0): {DataAsOf: at(0, 5)}}, 0, 0, at(0, 5)},
		{"the earliest", map[time.Time]rollups.Day{d(0): {DataAsOf: at(2, 5)}, d(1): {DataAsOf: at(2, 3)}, d(2): {DataAsOf: at(2, 9)}}, 0, 2, at(2, 3)},
		{"a day never computed", map[time.Time]rollups.Day{d(0): {DataAsOf: at(2, 5)}, d(2): {DataAsOf: at(2, 9)}}, 0, 2, time.Time{}},
		{"a watermark unknown", map[time.Time]rollups.Day{d(0): {DataAsOf: at(2, 5)}, d(1): {ComputedAt: at(3, 0)}}, 0, 1, time.Time{}},
		{"final days do not hold it back", map[time.Time]rollups.Day{d(0): {DataAsOf: final(0)}, d(1): {DataAsOf: at(40, 0)}}, 0, 1, at(40, 0)},
		{"every day final: the latest", map[time.Time]rollups.Day{d(0): {DataAsOf: final(0)}, d(1): {DataAsOf: final(5)}}, 0, 1, final(5)},
	} {
		if got := rollups.DataAsOf(tc.known, d(tc.start), d(tc.end)); !got.Equal(tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestStaleDays(t *testing.T) {
	d := func(n int) time.Time { return time.Date(2026, 10, 1+n, 0, 0, 0, 0, time.UTC) }
	need := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	known := map[time.Time]rollups.Day{
		d(0): {DataAsOf: rollups.FinalAfter(d(0))},    // final (before need)
		d(1): {DataAsOf: need},                        // fresh
		d(2): {DataAsOf: need.Add(-time.Millisecond)}, // stale
		d(3): {ComputedAt: need.Add(time.Hour)},       // unknown watermark: stale
		// d(4) never computed: stale
		d(5): {DataAsOf: need.Add(-time.Hour)}, // stale
	}
	got := staleDays(known, d(0), d(5), need)
	if want := []time.Time{d(2), d(3), d(4), d(5)}; !slices.Equal(got, want) {
		t.Errorf("stale %v, want %v", got, want)
	}
}

func TestWindowEnd(t *testing.T) {
	end := time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC)
	load := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	for _, tc := range []struct {
		loc  *time.Location
		want string
	}{
		{nil, "2026-03-29T12:00:00Z"}, // the westernmost zone, UTC−12
		{time.UTC, "2026-03-29T00:00:00Z"},
		{load("Pacific/Kiritimati"), "2026-03-28T10:00:00Z"},
		{load("America/Sao_Paulo"), "2026-03-29T03:00:00Z"},
		{load("Europe/Berlin"), "2026-03-28T23:00:00Z"}, // the day before summer time
	} {
		if got := WindowEnd(end, tc.loc).Format(time.RFC3339); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.loc, got, tc.want)
		}
	}
}
