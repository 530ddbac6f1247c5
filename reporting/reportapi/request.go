package reportapi

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
)

// Limits of a request.
const (
	// MaxDays is the longest window of the total and daily reports, in
	// local days: a year, a leap day included.
	MaxDays = 366
	// MaxInteractionDays is the longest window of the interactions
	// report: each page reads the window's days one by one.
	MaxInteractionDays = 31
	// DailyLimit is the default and largest page of a daily report, in
	// days (Topsort's limit of these routes).
	DailyLimit = 100
	// InteractionsLimit is the default and largest page of the
	// interactions report, in rows.
	InteractionsLimit = 1000
)

// Window is an inclusive range of a marketplace's local days, each a date
// at 00:00 UTC (the rollup's day_local).
type Window struct{ From, To time.Time }

// Days is the number of days of the window.
func (w Window) Days() int { return int(w.To.Sub(w.From)/(24*time.Hour)) + 1 }

func (w Window) scope() string {
	return w.From.Format(time.DateOnly) + "/" + w.To.Format(time.DateOnly)
}

// ParseWindow reads start_date and end_date (required): a date
// (YYYY-MM-DD), which is a day of the marketplace, or an RFC 3339 date-time
// with a zone, which names the marketplace's day it falls in (loc). The end
// day is included; the window is at most maxDays long. Problems are added
// to errs with loc ["query", name]; ok is false when there was one.
func ParseWindow(q url.Values, loc *time.Location, maxDays int, errs *validation.Errors) (Window, bool) {
	from, okFrom := parseDay(q, "start_date", loc, errs)
	to, okTo := parseDay(q, "end_date", loc, errs)
	if !okFrom || !okTo {
		return Window{}, false
	}
	w := Window{From: from, To: to}
	switch {
	case to.Before(from):
		errs.Add(validation.ValueError, "end_date must be on or after start_date", "query", "end_date")
		return Window{}, false
	case w.Days() > maxDays:
		errs.Add(validation.ValueError, "the window from start_date to end_date must be at most "+strconv.Itoa(maxDays)+" days", "query", "end_date")
		return Window{}, false
	}
	return w, true
}

// TypeDateParsing is the error type of a day that is neither a date nor a
// date-time (pydantic's name, as the rest of the API).
const TypeDateParsing = "date_parsing"

func parseDay(q url.Values, name string, loc *time.Location, errs *validation.Errors) (time.Time, bool) {
	s, present := first(q, name)
	if !present || s == "" {
		errs.Add(validation.Missing, "Field required", "query", name)
		return time.Time{}, false
	}
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		if d.Year() < 1970 {
			return time.Time{}, addDateErr(errs, name)
		}
		return d, true
	}
	t, err := timestamp.Parse(s)
	if err != nil || t.Year() < 1970 {
		return time.Time{}, addDateErr(errs, name)
	}
	if loc == nil {
		loc = time.UTC
	}
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC), true
}

func addDateErr(errs *validation.Errors, name string) bool {
	errs.Add(TypeDateParsing, "Input should be a valid date (YYYY-MM-DD, a day of the marketplace) or an RFC 3339 date-time with a time zone", "query", name)
	return false
}

func first(q url.Values, name string) (string, bool) {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// parseLimit reads limit (1..max, def when absent).
func parseLimit(q url.Values, def, max int, errs *validation.Errors) int {
	s, present := first(q, "limit")
	return validation.QueryLimit(errs, s, present, def, max)
}

const cursorMsg = "next_page is not a cursor issued by this service for this report and this start_date and end_date"

// DailyRequest is a validated request of a daily report.
type DailyRequest struct {
	Window Window
	Limit  int
	// From is the first day of the page (the window's first, or the
	// cursor's).
	From time.Time
	// scope ties cursors to the report (its route and id) and window.
	scope string
}

// ParseDaily reads the query of a daily report: start_date, end_date,
// limit (1..DailyLimit, DailyLimit by default) and next_page, a cursor of
// the same report (report names it: its path) and window. Every
// problem is reported as validation.Errors.
func ParseDaily(q url.Values, loc *time.Location, mp, report string, cursors *pagination.Signer) (DailyRequest, error) {
	var errs validation.Errors
	w, ok := ParseWindow(q, loc, MaxDays, &errs)
	r := DailyRequest{Window: w, From: w.From, Limit: parseLimit(q, DailyLimit, DailyLimit, &errs), scope: report + "|" + w.scope()}
	if tok, present := first(q, "next_page"); present && tok != "" && ok {
		c, err := cursors.Decode(tok, "reports-daily", mp, r.scope)
		d, perr := time.Parse(time.DateOnly, c.After)
		if err != nil || perr != nil || d.Before(w.From) || d.After(w.To) {
			errs.Add(validation.ValueError, cursorMsg, "query", "next_page")
		} else {
			r.From = d
		}
	}
	if err := errs.Err(); err != nil {
		return DailyRequest{}, err
	}
	return r, nil
}

// Page is the days of the request's page: From and at most Limit days,
// within the window.
func (r DailyRequest) Page() Window {
	to := r.From.AddDate(0, 0, r.Limit-1)
	if to.After(r.Window.To) {
		to = r.Window.To
	}
	return Window{From: r.From, To: to}
}

// NextPage is the cursor of the page after this one (nil after the last).
func (r DailyRequest) NextPage(cursors *pagination.Signer, mp string) *string {
	next := r.Page().To.AddDate(0, 0, 1)
	if next.After(r.Window.To) {
		return nil
	}
	s := cursors.Encode(pagination.Cursor{List: "reports-daily", Marketplace: mp, Scope: r.scope, After: next.Format(time.DateOnly)})
	return &s
}

// GroupBy is the dimension of the interactions report.
type GroupBy string

// The groupings of the interactions report.
const (
	ByVendor   GroupBy = "vendor"
	ByCampaign GroupBy = "campaign"
	ByProduct  GroupBy = "product"
)

// Granularities of the interactions report.
const (
	Daily  = "daily"
	Hourly = "hourly"
)

// InteractionsRequest is a validated request of the interactions report.
type InteractionsRequest struct {
	Window  Window
	GroupBy GroupBy
	Limit   int
	// After is the position after which the page starts (zero: the
	// window's start).
	After Position
	scope string
}

// Position is a place in the interactions report's order: day, then the
// group's id.
type Position struct {
	Day time.Time
	Key string
}

func (p Position) encode() string { return p.Day.Format(time.DateOnly) + "/" + p.Key }

// ParseInteractions reads the query of the interactions report:
// start_date, end_date (at most MaxInteractionDays days), group_by
// (vendor, campaign or product; campaign by default), granularity (daily,
// the default; hourly is refused: the rollups are daily), limit
// (1..InteractionsLimit, InteractionsLimit by default) and next_page. A
// vendor-scoped caller's cursors hold its vendor (vendor).
func ParseInteractions(q url.Values, loc *time.Location, mp, vendor string, cursors *pagination.Signer) (InteractionsRequest, error) {
	var errs validation.Errors
	w, ok := ParseWindow(q, loc, MaxInteractionDays, &errs)
	r := InteractionsRequest{Window: w, GroupBy: ByCampaign, Limit: parseLimit(q, InteractionsLimit, InteractionsLimit, &errs)}
	if s, present := first(q, "group_by"); present {
		switch g := GroupBy(s); g {
		case ByVendor, ByCampaign, ByProduct:
			r.GroupBy = g
		default:
			errs.Add("enum", "Input should be 'vendor', 'campaign' or 'product'", "query", "group_by")
			ok = false
		}
	}
	if s, present := first(q, "granularity"); present {
		switch s {
		case Daily:
		case Hourly:
			errs.Add(validation.ValueError, "granularity hourly is not available: reports are read from daily rollups; use daily", "query", "granularity")
		default:
			errs.Add("enum", "Input should be 'daily' or 'hourly'", "query", "granularity")
		}
	}
	r.scope = string(r.GroupBy) + "|" + vendor + "|" + w.scope()
	if tok, present := first(q, "next_page"); present && tok != "" && ok {
		c, err := cursors.Decode(tok, "reports-interactions", mp, r.scope)
		day, key, cut := strings.Cut(c.After, "/")
		d, perr := time.Parse(time.DateOnly, day)
		if err != nil || !cut || perr != nil || d.Before(w.From) || d.After(w.To) {
			errs.Add(validation.ValueError, cursorMsg, "query", "next_page")
		} else {
			r.After = Position{Day: d, Key: key}
		}
	}
	if err := errs.Err(); err != nil {
		return InteractionsRequest{}, err
	}
	return r, nil
}

// NextPage is the cursor that continues the report after last.
func (r InteractionsRequest) NextPage(cursors *pagination.Signer, mp string, last Position) *string {
	s := cursors.Encode(pagination.Cursor{List: "reports-interactions", Marketplace: mp, Scope: r.scope, After: last.encode()})
	return &s
}
