package spend

import (
	"fmt"
	"testing"
	"time"
)

// recentMonday is the local date of the Monday of the week before the one
// that holds now in loc: a week whose days the charge script keeps.
func recentMonday(loc *time.Location) time.Time {
	y, m, d := time.Now().In(loc).Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, loc)
	return today.AddDate(0, 0, -((int(today.Weekday())+6)%7)-7)
}

// periodSpend is a campaign's spend of the week and the month that hold day.
func periodSpend(t *testing.T, s Spent) [4]int64 {
	t.Helper()
	return [4]int64{s.Day, s.Week, s.Month, s.Total}
}

// TestApplyChargesPeriodCap: the weekly and monthly budgets cap the spend of
// the local week (Monday to Sunday) and the local calendar month that hold
// each charge's day, in the marketplace's time zone, as the daily budget
// caps the day's: never one micro-unit over, a charge that would cross is
// refused whole for the first budget it crosses (total, monthly, weekly,
// daily), and the next period starts from zero.
func TestApplyChargesPeriodCap(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	berlin, tokyo := mustLoc(t, "Europe/Berlin"), mustLoc(t, "Asia/Tokyo")

	// Sunday 23:30 and Monday 00:30 in Berlin are one UTC day (Sunday): in
	// the marketplace's zone, two weeks.
	mon := recentMonday(berlin)
	sunLate := mon.Add(-30 * time.Minute)
	monEarly := mon.Add(30 * time.Minute)
	if DayOf(sunLate, time.UTC) != DayOf(monEarly, time.UTC) {
		t.Fatalf("%s and %s should be one UTC day", sunLate, monEarly)
	}
	sun, monday := DayOf(sunLate, berlin), DayOf(monEarly, berlin)
	// The 1st of this month at 00:30 in Tokyo is the previous month in UTC.
	y, m, _ := time.Now().In(tokyo).Date()
	first := time.Date(y, m, 1, 0, 30, 0, 0, tokyo)
	firstDay, lastDay := DayOf(first, tokyo), DayOf(first.Add(-time.Hour), tokyo)
	if MonthOf(DayOf(first, time.UTC)) == MonthOf(firstDay) {
		t.Fatalf("%s should be in the previous month in UTC", first)
	}

	type step struct {
		key    string
		day    string
		micros int64
		want   ChargeOutcome
	}
	tests := []struct {
		name   string
		limits Limits
		steps  []step
		// the spend of these days' weeks (weekly) or months (monthly) at the end
		days  []string
		spent []int64
		month bool
	}{
		{"weekly, across a Berlin Monday", Limits{WeeklyMicros: 1_000}, []step{
			{"a", sun, 800, ChargeApplied},
			{"b", sun, 300, ChargeRefusedWeekly}, // 1,100 > 1,000
			{"c", sun, 200, ChargeApplied},       // exactly at the budget
			{"d", monday, 800, ChargeApplied},    // a new week
			{"e", monday, 201, ChargeRefusedWeekly},
			{"f", monday, 200, ChargeApplied},
		}, []string{sun, monday}, []int64{1_000, 1_000}, false},
		{"monthly, across the 1st in Tokyo", Limits{MonthlyMicros: 5_000}, []step{
			{"a", lastDay, 4_999, ChargeApplied},
			{"b", lastDay, 2, ChargeRefusedMonthly},
			{"c", lastDay, 1, ChargeApplied},
			{"d", firstDay, 5_000, ChargeApplied}, // a new month
			{"e", firstDay, 1, ChargeRefusedMonthly},
		}, []string{lastDay, firstDay}, []int64{5_000, 5_000}, true},
		{"the order: total, monthly, weekly, daily", Limits{DailyMicros: 100, WeeklyMicros: 300, MonthlyMicros: 400, TotalMicros: 450}, []step{
			{"a", monday, 101, ChargeRefusedDaily},
			{"b", monday, 301, ChargeRefusedWeekly},
			{"c", monday, 401, ChargeRefusedMonthly},
			{"d", monday, 451, ChargeRefusedTotal},
			{"e", monday, 100, ChargeApplied},
		}, []string{monday}, []int64{100}, false},
	}
	for ti, tc := range tests {
		camp := fmt.Sprintf("p%d", ti)
		// All in one call: the cap is reached mid-batch.
		var batch []Charge
		var want []ChargeOutcome
		for _, s := range tc.steps {
			batch = append(batch, capCharge(mp, s.key, "0:"+s.key, camp, s.day, s.micros, tc.limits))
			want = append(want, s.want)
		}
		for pass := range 2 { // the second is a replay of the same records
			got, err := ApplyCharges(ctx, rdb, batch, replicas())
			if err != nil {
				t.Fatal(err)
			}
			w := want
			if pass == 1 {
				w = nil
				for _, o := range want {
					if o == ChargeApplied {
						o = ChargeReplayed
					}
					w = append(w, o)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s, pass %d: %v, want %v", tc.name, pass, got, w)
			}
			var total int64
			for i, d := range tc.days {
				sp, err := ReadSpends(ctx, rdb, mp, d, []string{camp})
				if err != nil {
					t.Fatal(err)
				}
				got := sp[0].Week
				if tc.month {
					got = sp[0].Month
				}
				if got != tc.spent[i] {
					t.Errorf("%s, pass %d: spend of the period of %s %d, want %d (%v)", tc.name, pass, d, got, tc.spent[i], periodSpend(t, sp[0]))
				}
				total += tc.spent[i]
			}
			if tot := totalSpend(t, ctx, rdb, mp, camp); tot != total {
				t.Errorf("%s, pass %d: total %d, want %d", tc.name, pass, tot, total)
			}
		}
	}

	// The refusal hint of the weekly budget stops the campaign: the spend
	// cache reads the week at the hint, and the budget rule finds it
	// exhausted.
	sp, err := ReadSpends(ctx, rdb, mp, monday, []string{"p0"})
	if err != nil {
		t.Fatal(err)
	}
	if sp[0].WeekHint != 1_001 {
		t.Errorf("week hint %d, want 1001 (the spend charge e would have made)", sp[0].WeekHint)
	}
	if v := Check(Limits{WeeklyMicros: 1_000}, sp[0], monEarly, berlin); v != WeeklyExhausted {
		t.Errorf("Check %v, want weekly_exhausted", v)
	}
	if v := markerOwner(t, ctx, rdb, mp, "p0", 0, "e"); v != "!w0:e" {
		t.Errorf("refused marker %q, want !w0:e", v)
	}
}

// TestPeriodAllowedIn: the weekly and monthly budgets' pacing spreads what
// the period has left at the start of the local day over the seconds (or
// served seconds) from that day's start to the period's end, an hour ahead.
func TestPeriodAllowedIn(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	var office Hours // 09:00–17:00, Monday to Friday
	for d := range 5 {
		office[d] = 0xff << 9
	}
	for _, tc := range []struct {
		name           string
		budget, before int64
		p              Period
		h              *Hours
		at             string
		loc            *time.Location
		want, even     int64
	}{
		{"week, Monday 00:00", 7_000_000, 0, PeriodWeek, nil, "2026-11-23T00:00:00Z", time.UTC, 41_666, 0},
		{"week, Wednesday noon, 2.00 spent before", 7_000_000, 2_000_000, PeriodWeek, nil, "2026-11-25T12:00:00Z", time.UTC, 541_666, 500_000},
		{"week, Sunday 23:00: the rest", 7_000_000, 6_000_000, PeriodWeek, nil, "2026-11-29T23:00:00Z", time.UTC, 1_000_000, 958_333},
		{"week, served hours, Wednesday noon", 7_000_000, 2_000_000, PeriodWeek, &office, "2026-11-25T12:00:00Z", time.UTC, 833_333, 625_000},
		{"week, served hours, Saturday: no served hour left", 7_000_000, 2_000_000, PeriodWeek, &office, "2026-11-28T12:00:00Z", time.UTC, 5_000_000, 5_000_000},
		{"month of 28 days, the 15th", 2_800_000, 0, PeriodMonth, nil, "2026-02-15T00:00:00+01:00", berlin, 8_333, 0},
		{"month, the day summer time starts", 2_556_000, 0, PeriodMonth, nil, "2026-03-29T00:00:00+01:00", berlin, 36_000, 0},
		{"budget spent before", 1_000, 1_000, PeriodMonth, nil, "2026-02-15T00:00:00Z", time.UTC, 0, 0},
	} {
		at := utc(tc.at)
		if got := PeriodAllowedIn(tc.budget, tc.before, tc.p, tc.h, at, tc.loc); got != tc.want {
			t.Errorf("%s: PeriodAllowedIn %d, want %d", tc.name, got, tc.want)
		}
		if got := PeriodEvenIn(tc.budget, tc.before, tc.p, tc.h, at, tc.loc); got != tc.even {
			t.Errorf("%s: PeriodEvenIn %d, want %d", tc.name, got, tc.even)
		}
	}
}

// TestCheckPeriods: the weekly and monthly budgets in the budget rule: used
// up (the counter or its refusal hint), in order after the total and before
// the daily budget, and paced on the day's spend.
func TestCheckPeriods(t *testing.T) {
	wed := utc("2026-11-25T12:00:00Z") // allowed today: 541,666 of a 7.00 week with 2.00 spent before
	for _, tc := range []struct {
		name string
		l    Limits
		s    Spent
		want Verdict
	}{
		{"week used up", Limits{WeeklyMicros: 1_000}, Spent{Week: 1_000}, WeeklyExhausted},
		{"week hint", Limits{WeeklyMicros: 1_000}, Spent{Week: 900, WeekHint: 1_100}, WeeklyExhausted},
		{"month used up", Limits{MonthlyMicros: 1_000}, Spent{Month: 1_000}, MonthlyExhausted},
		{"month hint", Limits{MonthlyMicros: 1_000}, Spent{MonthHint: 1_001}, MonthlyExhausted},
		{"total before month", Limits{MonthlyMicros: 1_000, TotalMicros: 1_000}, Spent{Month: 1_000, Total: 1_000}, TotalExhausted},
		{"month before week", Limits{WeeklyMicros: 1_000, MonthlyMicros: 1_000}, Spent{Week: 1_000, Month: 1_000}, MonthlyExhausted},
		{"week before day", Limits{DailyMicros: 1_000, WeeklyMicros: 1_000}, Spent{Day: 1_000, Week: 1_000}, WeeklyExhausted},
		{"negative weekly budget", Limits{WeeklyMicros: -1}, Spent{}, WeeklyExhausted},
		{"week, under the pace", Limits{WeeklyMicros: 7_000_000}, Spent{Day: 541_665, Week: 2_541_665}, OK},
		{"week, at the pace", Limits{WeeklyMicros: 7_000_000}, Spent{Day: 541_666, Week: 2_541_666}, Paced},
		{"week, nothing spent today", Limits{WeeklyMicros: 7_000_000}, Spent{Week: 6_999_000}, OK},
		{"week, 1 µ left: paced until its last hour", Limits{WeeklyMicros: 1_000}, Spent{Week: 999}, Paced},
	} {
		if got := Check(tc.l, tc.s, wed, time.UTC); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
