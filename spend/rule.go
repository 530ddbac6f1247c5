package spend

import (
	"math/bits"
	"strconv"
	"time"
)

// Limits are a campaign's budgets in micro-units. 0 means no limit. A negative
// limit is invalid (the campaign API never stores one); Check treats it as
// exhausted, so that bad data stops spend rather than lifting the cap.
// WeeklyMicros caps the spend of each local week (Monday to Sunday in the
// marketplace's time zone), MonthlyMicros that of each local calendar month.
// Hours, when not nil, are the local hours the campaign serves (its
// timetable): pacing spreads the budgets over them instead of the whole
// day.
type Limits struct {
	DailyMicros   int64
	WeeklyMicros  int64
	MonthlyMicros int64
	TotalMicros   int64
	Hours         *Hours
}

// Period is the span a weekly or monthly budget covers.
type Period uint8

const (
	// PeriodWeek: the local week, Monday 00:00 to the next Monday 00:00.
	PeriodWeek Period = iota + 1
	// PeriodMonth: the local calendar month.
	PeriodMonth
)

// Hours are the local hours of the week a campaign serves (dayparting):
// bit h of Hours[d] is the hour [h:00, h+1:00) of local wall-clock time on
// day d, 0 Monday … 6 Sunday.
type Hours [7]uint32

// Serves reports whether the local wall-clock instant t (in the zone it
// carries) falls in a served hour.
func (h *Hours) Serves(t time.Time) bool {
	return h[(int(t.Weekday())+6)%7]&(1<<uint(t.Hour())) != 0
}

// served returns, for the local day of t (in its zone), the seconds of
// served hours before t (s) and in the whole day (d), by the wall clock:
// served hours before t's hour count 3600 each, t's own hour the seconds
// since it began. A day without served hours gives d = 0.
func (h *Hours) served(t time.Time) (s, d int64) {
	mask := h[(int(t.Weekday())+6)%7]
	hour, m, sec := t.Clock()
	d = int64(bits.OnesCount32(mask)) * 3600
	s = int64(bits.OnesCount32(mask&(1<<uint(hour)-1))) * 3600
	if mask&(1<<uint(hour)) != 0 {
		s += int64(m*60 + sec)
	}
	return s, d
}

// Verdict is the outcome of Check.
type Verdict uint8

const (
	// OK: the campaign may take part in the auction.
	OK Verdict = iota
	// TotalExhausted: all-time spend has reached the total budget.
	TotalExhausted
	// DailyExhausted: today's spend has reached the daily budget.
	DailyExhausted
	// Paced: today's spend is ahead of the pacing curve; the campaign sits
	// this auction out and comes back as the day goes on.
	Paced
	// WeeklyExhausted: this local week's spend has reached the weekly budget.
	WeeklyExhausted
	// MonthlyExhausted: this local month's spend has reached the monthly
	// budget.
	MonthlyExhausted
)

func (v Verdict) String() string {
	switch v {
	case OK:
		return "ok"
	case TotalExhausted:
		return "total_exhausted"
	case DailyExhausted:
		return "daily_exhausted"
	case Paced:
		return "paced"
	case WeeklyExhausted:
		return "weekly_exhausted"
	case MonthlyExhausted:
		return "monthly_exhausted"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// pacingLeadSeconds is how far ahead of a linear spread the pacing curve runs:
// one hour of budget is available from local midnight on.
const pacingLeadSeconds = 3600

// Check applies the budget rule to a campaign's spend s (its effective
// values: counters or refusal hints, whichever is higher) at now, in the
// marketplace's time zone loc (nil means UTC), in this order:
//
//  1. TotalExhausted when TotalMicros is set and the total spend >= TotalMicros;
//  2. MonthlyExhausted when MonthlyMicros is set and this month's spend >= it;
//  3. WeeklyExhausted when WeeklyMicros is set and this week's spend >= it;
//  4. DailyExhausted when DailyMicros is set and today's spend >= it;
//  5. Paced when DailyMicros is set and today's spend >= AllowedIn(DailyMicros,
//     Hours, now, loc), or WeeklyMicros (MonthlyMicros) is set and today's
//     spend >= PeriodAllowedIn of it, with the period's spend before today;
//  6. OK otherwise.
func Check(l Limits, s Spent, now time.Time, loc *time.Location) Verdict {
	p := s.periods()
	if v, decided := checkBeforePacing(&l, &p); decided {
		return v
	}
	loc = orUTC(loc)
	if l.DailyMicros > 0 && p.day >= AllowedIn(l.DailyMicros, l.Hours, now, loc) {
		return Paced
	}
	if periodPaced(l, p, now, loc, nil) {
		return Paced
	}
	return OK
}

// periods is a campaign's effective spend of each budget's period.
type periods struct{ day, week, month, total int64 }

func (s Spent) periods() periods {
	return periods{day: s.EffectiveDay(), week: s.EffectiveWeek(), month: s.EffectiveMonth(), total: s.EffectiveTotal()}
}

// spans are the ends of the local week and month that hold a local day
// [start, end): the spend cache's snapshot knows them.
type spans struct {
	start, end, weekEnd, monthEnd time.Time
}

// periodPaced is the pacing step of the weekly and monthly budgets: the
// day's spend at or above PeriodAllowedIn. sp, when not nil, holds the
// bounds of the local day of now (not for served hours).
func periodPaced(l Limits, p periods, now time.Time, loc *time.Location, sp *spans) bool {
	for _, b := range [2]struct {
		budget, spent int64
		period        Period
	}{{l.WeeklyMicros, p.week, PeriodWeek}, {l.MonthlyMicros, p.month, PeriodMonth}} {
		if b.budget <= 0 {
			continue
		}
		before := max(b.spent-p.day, 0)
		var allowed int64
		if sp != nil && l.Hours == nil {
			end := sp.weekEnd
			if b.period == PeriodMonth {
				end = sp.monthEnd
			}
			allowed = spreadAt(b.budget-before, int64(now.Sub(sp.start)/time.Second), int64(end.Sub(sp.start)/time.Second), pacingLeadSeconds)
		} else {
			allowed = PeriodAllowedIn(b.budget, before, b.period, l.Hours, now, loc)
		}
		if p.day >= allowed {
			return true
		}
	}
	return false
}

// checkInDay is Check with the local day holding now already known, [start,
// end), and the ends of its week and month: the spend cache's snapshot
// knows them, and the auction asks for every campaign at one instant. Not
// for served hours (l.Hours nil): Check paces over them.
func checkInDay(l *Limits, p *periods, now time.Time, sp *spans) Verdict {
	if v, decided := checkBeforePacing(l, p); decided {
		return v
	}
	if l.DailyMicros > 0 && p.day >= allowedAt(l.DailyMicros, int64(now.Sub(sp.start)/time.Second), int64(sp.end.Sub(sp.start)/time.Second)) {
		return Paced
	}
	if periodPaced(*l, *p, now, nil, sp) {
		return Paced
	}
	return OK
}

// periodUnpaced: with nothing spent today, a weekly or monthly budget with
// at least this much left is not paced (its allowance of the day's first
// served hour, floor(left × 3600 / D), is at least 1 for the longest month,
// D <= 31 days and an hour).
const periodUnpaced = 800

// checkBeforePacing is the budget rule's steps that need no clock; decided is
// false when only the pacing step (the day's spend against Allowed, with a
// daily, weekly or monthly budget above 0) can tell.
func checkBeforePacing(l *Limits, p *periods) (v Verdict, decided bool) {
	if l.TotalMicros != 0 && p.total >= l.TotalMicros {
		return TotalExhausted, true
	}
	if l.WeeklyMicros|l.MonthlyMicros == 0 { // no weekly or monthly budget (most campaigns): the daily one alone
		switch {
		case l.DailyMicros == 0:
			return OK, true
		case p.day >= l.DailyMicros:
			return DailyExhausted, true
		case p.day <= 0 && l.DailyMicros >= 25: // see below
			return OK, true
		}
		return 0, false
	}
	if l.MonthlyMicros != 0 && p.month >= l.MonthlyMicros {
		return MonthlyExhausted, true
	}
	if l.WeeklyMicros != 0 && p.week >= l.WeeklyMicros {
		return WeeklyExhausted, true
	}
	if l.DailyMicros != 0 && p.day >= l.DailyMicros {
		return DailyExhausted, true
	}
	if l.DailyMicros == 0 && l.WeeklyMicros == 0 && l.MonthlyMicros == 0 {
		return OK, true
	}
	// Nothing spent today: Allowed is at least floor(daily / 25) (the first
	// hour of the longest day; AllowedIn of served hours at least
	// floor(daily / 24)), so a daily budget of 25 µ or more is not paced,
	// nor a weekly or monthly one with periodUnpaced left, and the
	// time-zone arithmetic is not needed (most campaigns of most auctions).
	if p.day <= 0 && (l.DailyMicros == 0 || l.DailyMicros >= 25) &&
		(l.WeeklyMicros == 0 || l.WeeklyMicros-p.week >= periodUnpaced) &&
		(l.MonthlyMicros == 0 || l.MonthlyMicros-p.month >= periodUnpaced) {
		return OK, true
	}
	return 0, false
}

// PeriodAllowedIn is how much a campaign may have spent by now on the
// local day holding now (in loc, nil means UTC) under a weekly or monthly
// budget of which it spent before on the earlier days of the period: what
// is left of the budget, spread over the served hours left in the period,
// one served hour ahead,
//
//	floor((budget − before) × min(1, (s + 3600) / R))
//
// where s is the seconds of the local day before now and R the seconds from
// the start of the local day to the end of the period; with served hours h
// (not nil), both count served seconds only, by the local wall clock (as
// AllowedIn). A period without served hours left gives what is left. What
// a day leaves unspent is spread over the days after it; what it spends
// ahead, taken from them. budget <= before gives 0.
func PeriodAllowedIn(budget, before int64, p Period, h *Hours, now time.Time, loc *time.Location) int64 {
	return periodSpread(budget, before, p, h, now, orUTC(loc), pacingLeadSeconds)
}

// PeriodEvenIn is the even spread PeriodAllowedIn runs one served hour
// ahead of: floor((budget − before) × min(1, s / R)).
func PeriodEvenIn(budget, before int64, p Period, h *Hours, now time.Time, loc *time.Location) int64 {
	return periodSpread(budget, before, p, h, now, orUTC(loc), 0)
}

func periodSpread(budget, before int64, p Period, h *Hours, now time.Time, loc *time.Location, lead int64) int64 {
	left := budget - before
	if left <= 0 {
		return 0
	}
	local := now.In(loc)
	if h == nil {
		start, _ := dayBounds(now, loc)
		end := PeriodEnd(local, p, loc)
		return spreadAt(left, int64(now.Sub(start)/time.Second), int64(end.Sub(start)/time.Second), lead)
	}
	s, _ := h.served(local)
	days := 7 - (int(local.Weekday())+6)%7
	if p == PeriodMonth {
		y, m, d := local.Date()
		days = time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() - d + 1
	}
	var r int64
	wd := (int(local.Weekday()) + 6) % 7
	for i := range days {
		r += int64(bits.OnesCount32(h[(wd+i)%7])) * 3600
	}
	if r == 0 {
		return left
	}
	return spreadAt(left, s, r, lead)
}

// PeriodStart is the first instant of the local week (Monday 00:00) or
// month (the 1st, 00:00) that holds t, in loc (nil means UTC).
func PeriodStart(t time.Time, p Period, loc *time.Location) time.Time {
	loc = orUTC(loc)
	y, m, d := t.In(loc).Date()
	if p == PeriodMonth {
		return startOfDay(y, m, 1, loc)
	}
	return startOfDay(y, m, d-(int(t.In(loc).Weekday())+6)%7, loc)
}

// PeriodEnd is the first instant after the local week or month that holds
// t, in loc (nil means UTC): the next Monday 00:00, the next month's 1st.
func PeriodEnd(t time.Time, p Period, loc *time.Location) time.Time {
	loc = orUTC(loc)
	y, m, d := t.In(loc).Date()
	if p == PeriodMonth {
		return startOfDay(y, m+1, 1, loc)
	}
	return startOfDay(y, m, d+7-(int(t.In(loc).Weekday())+6)%7, loc)
}

// Allowed is how much of the daily budget may have been spent by now:
//
//	floor(daily × min(1, (s + 3600) / D))
//
// where s is the whole seconds elapsed since local midnight in loc (nil means
// UTC) and D the length of this local day in seconds (86400, or 82800 and
// 90000 on the days daylight saving time starts and ends). The product is
// computed in 128 bits, so any int64 budget is exact. daily <= 0 gives 0.
func Allowed(daily int64, now time.Time, loc *time.Location) int64 {
	if daily <= 0 {
		return 0
	}
	start, end := dayBounds(now, orUTC(loc))
	return allowedAt(daily, int64(now.Sub(start)/time.Second), int64(end.Sub(start)/time.Second))
}

// AllowedIn is Allowed for a campaign that serves only the local hours h
// (nil: every hour, Allowed): the daily budget is spread over the served
// hours of the local day, one served hour ahead,
//
//	floor(daily × min(1, (s + 3600) / D))
//
// where s is the served seconds of the local day before now (whole served
// hours before the current one, and the seconds into the current hour when
// it is served) and D the served seconds of the whole day, both by the
// local wall clock (a daylight-saving change does not lengthen or shorten
// them). A day without served hours gives the whole budget (the campaign
// does not serve that day). daily <= 0 gives 0.
func AllowedIn(daily int64, h *Hours, now time.Time, loc *time.Location) int64 {
	if h == nil {
		return Allowed(daily, now, loc)
	}
	if daily <= 0 {
		return 0
	}
	s, d := h.served(now.In(orUTC(loc)))
	if d == 0 {
		return daily
	}
	return spreadAt(daily, s, d, pacingLeadSeconds)
}

// EvenIn is Even over the served hours h (nil: every hour, Even), the line
// AllowedIn runs one served hour ahead of: floor(daily × min(1, s / D)).
func EvenIn(daily int64, h *Hours, now time.Time, loc *time.Location) int64 {
	if h == nil {
		return Even(daily, now, loc)
	}
	if daily <= 0 {
		return 0
	}
	s, d := h.served(now.In(orUTC(loc)))
	if d == 0 {
		return daily
	}
	return spreadAt(daily, s, d, 0)
}

// Even is the even spread of the daily budget by now, the line the pacing
// curve runs an hour ahead of (Allowed):
//
//	floor(daily × min(1, s / D))
//
// with s and D as in Allowed. daily <= 0 gives 0.
func Even(daily int64, now time.Time, loc *time.Location) int64 {
	if daily <= 0 {
		return 0
	}
	start, end := dayBounds(now, orUTC(loc))
	return spreadAt(daily, int64(now.Sub(start)/time.Second), int64(end.Sub(start)/time.Second), 0)
}

// DayBounds returns the first instant of the local day (in loc, nil means
// UTC) holding t and the first instant of the next one: the day Allowed and
// the day hashes count.
func DayBounds(t time.Time, loc *time.Location) (start, end time.Time) {
	return dayBounds(t, orUTC(loc))
}

// allowedAt is Allowed for s seconds into a day of d seconds (d > 0).
func allowedAt(daily, s, d int64) int64 { return spreadAt(daily, s, d, pacingLeadSeconds) }

// spreadAt is floor(daily × min(1, (s + lead) / d)) for d > 0.
func spreadAt(daily, s, d, lead int64) int64 {
	if s < 0 {
		s = 0
	}
	num := s + lead
	if num >= d {
		return daily
	}
	// daily×num < daily×d, so hi < d and the quotient (< daily) fits in 64 bits.
	hi, lo := bits.Mul64(uint64(daily), uint64(num))
	q, _ := bits.Div64(hi, lo, uint64(d))
	return int64(q)
}

// dayBounds returns the first instant of the local day (in loc) holding t and
// the first instant of the next one.
func dayBounds(t time.Time, loc *time.Location) (start, end time.Time) {
	local := t.Round(0).In(loc) // wall clock only
	// Fast path: when one zone period (one UTC offset) spans this local
	// midnight to the next with room on both sides, the day is the 24 hours
	// the local clock shows around t. A transition exactly at midnight may
	// skip or repeat it, so it takes the slow path.
	h, m, s := local.Clock()
	start = local.Add(-time.Duration(h*3600+m*60+s)*time.Second - time.Duration(local.Nanosecond()))
	end = start.Add(24 * time.Hour)
	if zoneStart, zoneEnd := local.ZoneBounds(); start.After(zoneStart) && (zoneEnd.IsZero() || end.Before(zoneEnd)) {
		return start, end
	}
	// A zone transition falls in this day or at its end.
	y, mo, d := local.Date()
	return startOfDay(y, mo, d, loc), startOfDay(y, mo, d+1, loc)
}

// startOfDay is the first instant whose local date in loc is y-m-d (d may
// overflow the month, as in time.Date). Where a daylight-saving jump skips
// midnight (e.g. America/Havana, 00:00 → 01:00), time.Date may answer an
// instant of the previous day; the day then starts at the jump, which is the
// end of the zone period that instant is in.
func startOfDay(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Date() // normalise d
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		if _, zoneEnd := t.ZoneBounds(); !zoneEnd.IsZero() {
			if zy, zm, zd := zoneEnd.Date(); zy == y && zm == m && zd == d {
				return zoneEnd
			}
		}
	}
	return t
}
