package spend

import (
	"math"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestAllowed(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	havana := mustLoc(t, "America/Havana")
	tokyo := mustLoc(t, "Asia/Tokyo")
	tests := []struct {
		name  string
		daily int64
		now   string // RFC 3339
		loc   *time.Location
		want  int64
	}{
		// UTC day, D = 86400: allowed = daily × (s+3600) / 86400.
		{"midnight: one hour of budget", 24_000_000, "2024-05-10T00:00:00Z", time.UTC, 1_000_000},
		{"nil loc is UTC", 24_000_000, "2024-05-10T00:00:00Z", nil, 1_000_000},
		{"00:00:01 rounds down", 1_000_000, "2024-05-10T00:00:01Z", time.UTC, 41_678},                  // 3601e6/86400 = 41678.24
		{"00:30", 24_000_000, "2024-05-10T00:30:00Z", time.UTC, 1_500_000},                             // 24e6 × 5400/86400
		{"noon", 24_000_000, "2024-05-10T12:00:00Z", time.UTC, 13_000_000},                             // 24e6 × 46800/86400
		{"noon, sub-second ignored", 24_000_000, "2024-05-10T12:00:00.999Z", time.UTC, 13_000_000},     // s is whole seconds
		{"22:59:59", 24_000_000, "2024-05-10T22:59:59Z", time.UTC, 23_999_722},                         // 24e6 × 86399/86400 = 23999722.2
		{"23:00 reaches the whole budget", 24_000_000, "2024-05-10T23:00:00Z", time.UTC, 24_000_000},   // (82800+3600)/86400 = 1
		{"23:30 capped at the whole budget", 24_000_000, "2024-05-10T23:30:00Z", time.UTC, 24_000_000}, // min(1, 88200/86400)
		{"local midnight in Tokyo", 24_000_000, "2024-05-09T15:00:00Z", tokyo, 1_000_000},              // 00:00 JST
		{"local noon in Tokyo", 24_000_000, "2024-05-10T03:00:00Z", tokyo, 13_000_000},                 // 12:00 JST
		{"Berlin summer noon", 24_000_000, "2024-05-10T10:00:00Z", berlin, 13_000_000},                 // 12:00 CEST
		{"Berlin 00:30 CEST", 24_000_000, "2024-05-09T22:30:00Z", berlin, 1_500_000},                   // 00:30 CEST
		{"Berlin 23:30 CEST", 24_000_000, "2024-05-10T21:30:00Z", berlin, 24_000_000},                  // 23:30 CEST
		// Berlin 2024-03-31: clocks 02:00 → 03:00, D = 82800; local midnight = 2024-03-30T23:00Z.
		{"DST start: midnight", 23_000_000, "2024-03-30T23:00:00Z", berlin, 1_000_000}, // 23e6 × 3600/82800
		{"DST start: 03:00 CEST is 2h in", 23_000_000, "2024-03-31T01:00:00Z", berlin, 3_000_000},
		{"DST start: noon CEST is 11h in", 23_000_000, "2024-03-31T10:00:00Z", berlin, 12_000_000},
		{"DST start: 22:00 CEST", 23_000_000, "2024-03-31T20:00:00Z", berlin, 22_000_000}, // 79200/82800
		{"DST start: 23:30 CEST", 23_000_000, "2024-03-31T21:30:00Z", berlin, 23_000_000},
		// Berlin 2024-10-27: clocks 03:00 → 02:00, D = 90000; local midnight = 2024-10-26T22:00Z.
		{"DST end: midnight", 25_000_000, "2024-10-26T22:00:00Z", berlin, 1_000_000}, // 25e6 × 3600/90000
		{"DST end: first 02:30 (CEST)", 25_000_000, "2024-10-27T00:30:00Z", berlin, 3_500_000},
		{"DST end: second 02:30 (CET)", 25_000_000, "2024-10-27T01:30:00Z", berlin, 4_500_000},
		{"DST end: noon CET is 13h in", 25_000_000, "2024-10-27T11:00:00Z", berlin, 14_000_000},
		{"DST end: 22:59:59 CET", 25_000_000, "2024-10-27T21:59:59Z", berlin, 24_999_722}, // 89999/90000
		{"DST end: 23:30 CET", 25_000_000, "2024-10-27T22:30:00Z", berlin, 25_000_000},
		// Havana 2024-03-10: midnight is skipped (00:00 → 01:00 CDT); the day is
		// 2024-03-10T05:00Z..2024-03-11T04:00Z, D = 82800.
		{"skipped midnight: day starts at 01:00 CDT", 23_000_000, "2024-03-10T05:00:00Z", havana, 1_000_000},
		{"skipped midnight: noon CDT is 11h in", 23_000_000, "2024-03-10T16:00:00Z", havana, 12_000_000},
		// Huge budgets: 128-bit intermediate product.
		{"1e15 at noon", 1_000_000_000_000_000, "2024-05-10T12:00:00Z", time.UTC, 541_666_666_666_666},
		{"1e15 at 00:00:01", 1_000_000_000_000_000, "2024-05-10T00:00:01Z", time.UTC, 41_678_240_740_740},
		{"MaxInt64 at midnight", math.MaxInt64, "2024-05-10T00:00:00Z", time.UTC, 384_307_168_202_282_325},
		{"MaxInt64 at noon", math.MaxInt64, "2024-05-10T12:00:00Z", time.UTC, 4_995_993_186_629_670_228},
		{"MaxInt64 at 22:59:59", math.MaxInt64, "2024-05-10T22:59:59Z", time.UTC, 9_223_265_284_863_608_506},
		{"MaxInt64 at 23:30", math.MaxInt64, "2024-05-10T23:30:00Z", time.UTC, math.MaxInt64},
		{"tiny budget: nothing before 01:24", 10, "2024-05-10T01:23:59Z", time.UTC, 0}, // 10 × 8639/86400
		{"tiny budget: one micro at 01:24", 10, "2024-05-10T01:24:00Z", time.UTC, 1},   // 10 × 8640/86400
		// Nothing to pace.
		{"zero daily", 0, "2024-05-10T12:00:00Z", time.UTC, 0},
		{"negative daily", -5, "2024-05-10T12:00:00Z", time.UTC, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Allowed(tt.daily, utc(tt.now), tt.loc); got != tt.want {
				t.Errorf("Allowed(%d, %s) = %d, want %d", tt.daily, tt.now, got, tt.want)
			}
		})
	}
}

func TestEven(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	tests := []struct {
		name  string
		daily int64
		now   string
		loc   *time.Location
		want  int64
	}{
		{"midnight: nothing", 24_000_000, "2024-05-10T00:00:00Z", time.UTC, 0},
		{"nil loc is UTC", 24_000_000, "2024-05-10T12:00:00Z", nil, 12_000_000},
		{"noon: half", 24_000_000, "2024-05-10T12:00:00Z", time.UTC, 12_000_000},
		{"an hour behind Allowed", 24_000_000, "2024-05-10T11:00:00Z", time.UTC, Allowed(24_000_000, utc("2024-05-10T10:00:00Z"), time.UTC)},
		{"00:00:01 rounds down", 1_000_000, "2024-05-10T00:00:01Z", time.UTC, 11},
		{"23:59:59", 86_400, "2024-05-10T23:59:59Z", time.UTC, 86_399},
		{"Berlin DST start: 22:00 CEST is 21h of 23", 23_000_000, "2024-03-31T20:00:00Z", berlin, 21_000_000},
		{"Berlin DST end: noon CET is 13h of 25", 25_000_000, "2024-10-27T11:00:00Z", berlin, 13_000_000},
		{"MaxInt64 at noon", math.MaxInt64, "2024-05-10T12:00:00Z", time.UTC, math.MaxInt64 / 2},
		{"zero daily", 0, "2024-05-10T12:00:00Z", time.UTC, 0},
		{"negative daily", -5, "2024-05-10T12:00:00Z", time.UTC, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Even(tt.daily, utc(tt.now), tt.loc); got != tt.want {
				t.Errorf("Even(%d, %s) = %d, want %d", tt.daily, tt.now, got, tt.want)
			}
		})
	}
	start, end := DayBounds(utc("2024-03-31T10:00:00Z"), berlin)
	if !start.Equal(utc("2024-03-30T23:00:00Z")) || !end.Equal(utc("2024-03-31T22:00:00Z")) {
		t.Fatalf("DayBounds: %s %s", start, end)
	}
}

func TestDayBounds(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	havana := mustLoc(t, "America/Havana")
	tests := []struct {
		name       string
		now        string
		loc        *time.Location
		start, end string
	}{
		{"UTC", "2024-05-10T12:00:00Z", time.UTC, "2024-05-10T00:00:00Z", "2024-05-11T00:00:00Z"},
		{"end of month", "2024-01-31T12:00:00Z", time.UTC, "2024-01-31T00:00:00Z", "2024-02-01T00:00:00Z"},
		{"end of year", "2024-12-31T23:59:59Z", time.UTC, "2024-12-31T00:00:00Z", "2025-01-01T00:00:00Z"},
		{"Berlin 23h day", "2024-03-31T12:00:00Z", berlin, "2024-03-30T23:00:00Z", "2024-03-31T22:00:00Z"},
		{"Berlin 25h day", "2024-10-27T12:00:00Z", berlin, "2024-10-26T22:00:00Z", "2024-10-27T23:00:00Z"},
		{"Berlin day before DST start", "2024-03-30T12:00:00Z", berlin, "2024-03-29T23:00:00Z", "2024-03-30T23:00:00Z"},
		{"Berlin day after DST start", "2024-04-01T12:00:00Z", berlin, "2024-03-31T22:00:00Z", "2024-04-01T22:00:00Z"},
		{"Berlin day after DST end", "2024-10-28T12:00:00Z", berlin, "2024-10-27T23:00:00Z", "2024-10-28T23:00:00Z"},
		{"Havana skipped midnight", "2024-03-10T12:00:00Z", havana, "2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z"},
		{"Havana day before the skip", "2024-03-09T12:00:00Z", havana, "2024-03-09T05:00:00Z", "2024-03-10T05:00:00Z"},
		// Havana 2024-11-03: 01:00 CDT → 00:00 CST, midnight happens once, 00:xx twice.
		{"Havana repeated hour", "2024-11-03T12:00:00Z", havana, "2024-11-03T04:00:00Z", "2024-11-04T05:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, e := dayBounds(utc(tt.now), tt.loc)
			if !s.Equal(utc(tt.start)) || !e.Equal(utc(tt.end)) {
				t.Errorf("dayBounds(%s) = [%s, %s), want [%s, %s)", tt.now, s.UTC().Format(time.RFC3339),
					e.UTC().Format(time.RFC3339), tt.start, tt.end)
			}
		})
	}
}

// TestDayBoundsAllYear checks, every 20 minutes of 2024 in zones with odd
// transitions, that dayBounds is the local day holding t: it starts and ends
// at a date change of the local clock, and agrees with the slow path.
func TestDayBoundsAllYear(t *testing.T) {
	zones := []string{"UTC", "Europe/Berlin", "America/Havana", "America/Santiago", "Asia/Beirut",
		"Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Chatham", "America/St_Johns"}
	for _, name := range zones {
		loc := mustLoc(t, name)
		for at := utc("2024-01-01T00:00:00Z"); at.Year() == 2024; at = at.Add(20*time.Minute + 7*time.Second) {
			start, end := dayBounds(at, loc)
			y, m, d := at.In(loc).Date()
			slowStart, slowEnd := startOfDay(y, m, d, loc), startOfDay(y, m, d+1, loc)
			ok := start.Equal(slowStart) && end.Equal(slowEnd) &&
				!at.Before(start) && at.Before(end) &&
				DayOf(start, loc) == DayOf(at, loc) && DayOf(start.Add(-time.Nanosecond), loc) != DayOf(at, loc) &&
				DayOf(end.Add(-time.Nanosecond), loc) == DayOf(at, loc) && DayOf(end, loc) != DayOf(at, loc)
			if !ok {
				t.Fatalf("%s at %s: dayBounds = [%s, %s), slow path [%s, %s)", name, at.Format(time.RFC3339),
					start.In(loc), end.In(loc), slowStart.In(loc), slowEnd.In(loc))
			}
		}
	}
}

func TestCheck(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	noon := utc("2024-05-10T12:00:00Z")     // allowed(24e6) = 13e6
	midnight := utc("2024-05-10T00:00:00Z") // allowed(24e6) = 1e6
	late := utc("2024-05-10T23:30:00Z")     // allowed(24e6) = 24e6
	tests := []struct {
		name       string
		l          Limits
		day, total int64
		now        time.Time
		loc        *time.Location
		want       Verdict
	}{
		{"no limits, no spend", Limits{}, 0, 0, noon, time.UTC, OK},
		{"no limits, huge spend", Limits{}, math.MaxInt64, math.MaxInt64, noon, time.UTC, OK},
		{"total only, under", Limits{TotalMicros: 100}, 0, 99, noon, time.UTC, OK},
		{"total only, reached", Limits{TotalMicros: 100}, 0, 100, noon, time.UTC, TotalExhausted},
		{"total only, over", Limits{TotalMicros: 100}, 0, 150, noon, time.UTC, TotalExhausted},
		{"total only: no pacing", Limits{TotalMicros: 100e6}, 99e6, 99e6, midnight, time.UTC, OK},
		{"total before daily", Limits{DailyMicros: 24e6, TotalMicros: 50e6}, 24e6, 50e6, noon, time.UTC, TotalExhausted},
		{"total before pacing", Limits{DailyMicros: 24e6, TotalMicros: 50e6}, 20e6, 50e6, noon, time.UTC, TotalExhausted},
		{"daily reached", Limits{DailyMicros: 24e6, TotalMicros: 50e6}, 24e6, 49e6, late, time.UTC, DailyExhausted},
		{"daily reached, no total", Limits{DailyMicros: 24e6}, 24e6, 24e6, late, time.UTC, DailyExhausted},
		{"daily over before pacing", Limits{DailyMicros: 24e6}, 30e6, 30e6, midnight, time.UTC, DailyExhausted},
		{"midnight: under the first hour", Limits{DailyMicros: 24e6}, 999_999, 999_999, midnight, time.UTC, OK},
		{"midnight: first hour spent", Limits{DailyMicros: 24e6}, 1e6, 1e6, midnight, time.UTC, Paced},
		{"00:30: under", Limits{DailyMicros: 24e6}, 1_499_999, 5e6, utc("2024-05-10T00:30:00Z"), time.UTC, OK},
		{"00:30: paced", Limits{DailyMicros: 24e6}, 1_500_000, 5e6, utc("2024-05-10T00:30:00Z"), time.UTC, Paced},
		{"noon: under", Limits{DailyMicros: 24e6}, 12_999_999, 0, noon, time.UTC, OK},
		{"noon: paced", Limits{DailyMicros: 24e6}, 13e6, 0, noon, time.UTC, Paced},
		{"23:30: all but the last micro", Limits{DailyMicros: 24e6}, 23_999_999, 0, late, time.UTC, OK},
		{"Berlin DST start noon: under", Limits{DailyMicros: 23e6}, 11_999_999, 0, utc("2024-03-31T10:00:00Z"), berlin, OK},
		{"Berlin DST start noon: paced", Limits{DailyMicros: 23e6}, 12e6, 0, utc("2024-03-31T10:00:00Z"), berlin, Paced},
		{"Berlin DST end noon: paced", Limits{DailyMicros: 25e6}, 14e6, 0, utc("2024-10-27T11:00:00Z"), berlin, Paced},
		{"huge budget, noon: under", Limits{DailyMicros: 1e15, TotalMicros: 1e15}, 541_666_666_666_665, 0, noon, time.UTC, OK},
		{"huge budget, noon: paced", Limits{DailyMicros: 1e15, TotalMicros: 1e15}, 541_666_666_666_666, 0, noon, time.UTC, Paced},
		{"tiny daily budget is paced until it amounts to a micro", Limits{DailyMicros: 10}, 0, 0, midnight, time.UTC, Paced},
		{"negative total fails closed", Limits{TotalMicros: -1}, 0, 0, noon, time.UTC, TotalExhausted},
		{"negative daily fails closed", Limits{DailyMicros: -1}, 0, 0, noon, time.UTC, DailyExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.l, Spent{Day: tt.day, Total: tt.total}, tt.now, tt.loc); got != tt.want {
				t.Errorf("Check(%+v, day %d, total %d) = %s, want %s", tt.l, tt.day, tt.total, got, tt.want)
			}
		})
	}
}

func TestVerdictString(t *testing.T) {
	tests := []struct {
		v    Verdict
		want string
	}{
		{OK, "ok"}, {TotalExhausted, "total_exhausted"}, {DailyExhausted, "daily_exhausted"},
		{Paced, "paced"}, {Verdict(9), "Verdict(9)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("Verdict(%d).String() = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestDayOf(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	la := mustLoc(t, "America/Los_Angeles")
	tests := []struct {
		now  string
		loc  *time.Location
		want string
	}{
		{"2024-03-30T23:30:00Z", time.UTC, "2024-03-30"},
		{"2024-03-30T23:30:00Z", nil, "2024-03-30"},
		{"2024-03-30T23:30:00Z", berlin, "2024-03-31"},
		{"2024-03-30T22:59:59Z", berlin, "2024-03-30"},
		{"2024-01-01T07:59:59Z", la, "2023-12-31"},
		{"2024-01-01T08:00:00Z", la, "2024-01-01"},
	}
	for _, tt := range tests {
		if got := DayOf(utc(tt.now), tt.loc); got != tt.want {
			t.Errorf("DayOf(%s, %v) = %s, want %s", tt.now, tt.loc, got, tt.want)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	berlin := mustLoc(b, "Europe/Berlin")
	l := Limits{DailyMicros: 50e6, TotalMicros: 1e9}
	now := utc("2024-05-10T10:00:00Z")
	b.ReportAllocs()
	for b.Loop() {
		if Check(l, Spent{Day: 1e6, Total: 2e6}, now, berlin) != OK {
			b.Fatal("not OK")
		}
	}
}

// TestAllowedIn: pacing over served hours (a timetable): the daily budget
// spreads over the day's served hours, one served hour ahead; the rule and
// the spend cache's form of it (checkInDay) agree.
func TestAllowedIn(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	var h Hours
	for hr := 9; hr < 17; hr++ {
		h[0] |= 1 << hr // Monday 09:00–17:00: 8 served hours, D = 28,800 s
	}
	h[6] = 1 << 23 // Sunday 23:00–24:00
	const daily = 48_000_000
	tests := []struct {
		local         string // Berlin wall clock
		allowed, even int64
	}{
		{"2024-05-13T00:30:00", 6_000_000, 0},           // Monday, before the hours: one served hour ahead
		{"2024-05-13T09:00:00", 6_000_000, 0},           // the first served second
		{"2024-05-13T12:30:00", 27_000_000, 21_000_000}, // s = 12,600: (12,600 + 3,600) / 28,800
		{"2024-05-13T16:00:00", daily, 42_000_000},      // the last served hour: all of it
		{"2024-05-13T20:00:00", daily, daily},           // after the hours
		{"2024-05-14T12:00:00", daily, daily},           // Tuesday: no served hour, no pacing
		{"2024-05-19T23:30:00", daily, 24_000_000},      // one served hour: all of it at once
	}
	for _, tc := range tests {
		now, err := time.ParseInLocation("2006-01-02T15:04:05", tc.local, berlin)
		if err != nil {
			t.Fatal(err)
		}
		if got := AllowedIn(daily, &h, now, berlin); got != tc.allowed {
			t.Errorf("%s: AllowedIn %d, want %d", tc.local, got, tc.allowed)
		}
		if got := EvenIn(daily, &h, now, berlin); got != tc.even {
			t.Errorf("%s: EvenIn %d, want %d", tc.local, got, tc.even)
		}
		l := Limits{DailyMicros: daily, Hours: &h}
		start, end := DayBounds(now, berlin)
		for _, spent := range []int64{tc.allowed - 1, tc.allowed} {
			want := OK
			if spent >= tc.allowed {
				want = Paced
				if spent >= daily {
					want = DailyExhausted
				}
			}
			if got := Check(l, Spent{Day: spent}, now, berlin); got != want {
				t.Errorf("%s: Check(spent %d) %s, want %s", tc.local, spent, got, want)
			}
			if got := checkInDay(&Limits{DailyMicros: daily}, &periods{day: spent}, now, &spans{start: start, end: end}); got != Check(Limits{DailyMicros: daily}, Spent{Day: spent}, now, berlin) {
				t.Errorf("%s: checkInDay(spent %d) %s, Check without hours differs", tc.local, spent, got)
			}
		}
	}
	// nil hours: the whole day, as Allowed and Even.
	now := utc("2024-05-13T10:30:00Z")
	if AllowedIn(daily, nil, now, berlin) != Allowed(daily, now, berlin) || EvenIn(daily, nil, now, berlin) != Even(daily, now, berlin) {
		t.Error("nil hours differ from Allowed / Even")
	}
	if !h.Serves(time.Date(2024, 5, 13, 9, 0, 0, 0, berlin)) || h.Serves(time.Date(2024, 5, 13, 17, 0, 0, 0, berlin)) {
		t.Error("Serves: 09:00 in, 17:00 out")
	}
}
