package reportapi

import (
	"net/url"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/reporting/vendorcharges"
)

func TestMinor(t *testing.T) {
	for _, tc := range []struct {
		micros int64
		sub    uint16
		scale  int
		want   int64
		text   string
	}{
		{1_234_567, 0, 2, 123, "1.234567"},
		{1_235_000, 0, 2, 124, "1.235"}, // half: away from zero
		{1_234_999, 999, 2, 123, "1.234999999"},
		{4, 500, 2, 0, "0.0000045"},
		{5_000, 0, 2, 1, "0.005"},         // half a cent
		{4_999, 999, 2, 0, "0.004999999"}, // just under
		{1_499_999, 999, 0, 1, "1.499999999"},
		{1_500_000, 0, 0, 2, "1.5"},
		{1_234_500, 0, 3, 1235, "1.2345"},
		{1_234_567, 0, 6, 1_234_567, "1.234567"},
		{-1_235_000, 0, 2, -124, "-1.235"},
		{-1_235_001, 500, 2, -124, "-1.2350005"},
		{1, 2500, 6, 4, "0.0000035"}, // sub-micros beyond 1000 carried into micros
	} {
		a := vendorcharges.Amount{Micros: tc.micros, SubMicros: tc.sub}
		if got := Minor(a, tc.scale); got != tc.want {
			t.Errorf("Minor(%d+%d/1000, %d) = %d, want %d", tc.micros, tc.sub, tc.scale, got, tc.want)
		}
		if got := exact(tc.micros, uint64(tc.sub)).String(); got != tc.text {
			t.Errorf("%d+%d/1000: text %q, want %q", tc.micros, tc.sub, got, tc.text)
		}
	}
	for code, want := range map[string]int{"EUR": 2, "USD": 2, "JPY": 0, "KWD": 3, "CLP": 0, "XXX?": 2} {
		if got := Scale(code); got != want {
			t.Errorf("Scale(%s) = %d, want %d", code, got, want)
		}
	}
}

func day(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }

func TestParseWindow(t *testing.T) {
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	for _, tc := range []struct {
		name       string
		q          string
		loc        *time.Location
		from, to   string
		errLoc     string // the field of the error ("" none)
		errTypeWas string
	}{
		{"dates", "start_date=2026-03-01&end_date=2026-03-31", nil, "2026-03-01", "2026-03-31", "", ""},
		{"one day", "start_date=2026-03-01&end_date=2026-03-01", nil, "2026-03-01", "2026-03-01", "", ""},
		{"date-times in the marketplace's zone", "start_date=2026-02-28T16:00:00Z&end_date=2026-03-01T14:59:59Z", tokyo, "2026-03-01", "2026-03-01", "", ""},
		{"a year and two days", "start_date=2025-03-01&end_date=2026-03-02", nil, "", "", "end_date", validation.ValueError},
		{"a leap year", "start_date=2024-01-01&end_date=2024-12-31", nil, "2024-01-01", "2024-12-31", "", ""},
		{"end before start", "start_date=2026-03-02&end_date=2026-03-01", nil, "", "", "end_date", validation.ValueError},
		{"missing", "end_date=2026-03-01", nil, "", "", "start_date", validation.Missing},
		{"not a date", "start_date=yesterday&end_date=2026-03-01", nil, "", "", "start_date", TypeDateParsing},
		{"no zone", "start_date=2026-03-01T00:00:00&end_date=2026-03-01", nil, "", "", "start_date", TypeDateParsing},
		{"before 1970", "start_date=1969-12-31&end_date=2026-03-01", nil, "", "", "start_date", TypeDateParsing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.q)
			var errs validation.Errors
			w, ok := ParseWindow(q, tc.loc, MaxDays, &errs)
			if tc.errLoc != "" {
				if ok || len(errs) != 1 || errs[0].Loc[1] != tc.errLoc || errs[0].Type != tc.errTypeWas {
					t.Fatalf("want an error at %s (%s), got %v %+v", tc.errLoc, tc.errTypeWas, ok, errs)
				}
				return
			}
			if !ok || !w.From.Equal(day(tc.from)) || !w.To.Equal(day(tc.to)) {
				t.Fatalf("got %v %v..%v %+v", ok, w.From, w.To, errs)
			}
		})
	}
}

func TestDailyPages(t *testing.T) {
	cursors := pagination.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	q, _ := url.ParseQuery("start_date=2026-01-01&end_date=2026-12-31&limit=100")
	r, err := ParseDaily(q, nil, "mp", "/a", cursors)
	if err != nil {
		t.Fatal(err)
	}
	var days int
	for page := 0; ; page++ {
		p := r.Page()
		if !p.From.Equal(day("2026-01-01").AddDate(0, 0, days)) {
			t.Fatalf("page %d starts %v", page, p.From)
		}
		days += p.Days()
		next := r.NextPage(cursors, "mp")
		if next == nil {
			break
		}
		q.Set("next_page", *next)
		if r, err = ParseDaily(q, nil, "mp", "/a", cursors); err != nil {
			t.Fatal(err)
		}
		// The cursor continues this report only.
		if _, err := ParseDaily(q, nil, "mp", "/b", cursors); err == nil {
			t.Fatal("a cursor of another report")
		}
		if _, err := ParseDaily(q, nil, "other", "/a", cursors); err == nil {
			t.Fatal("a cursor of another marketplace")
		}
	}
	if days != 365 {
		t.Fatalf("%d days in the pages", days)
	}
	for _, bad := range []string{"limit=0", "limit=101", "limit=x", "next_page=abc"} {
		q, _ := url.ParseQuery("start_date=2026-01-01&end_date=2026-12-31&" + bad)
		if _, err := ParseDaily(q, nil, "mp", "/a", cursors); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestParseInteractions(t *testing.T) {
	cursors := pagination.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	base := "start_date=2026-03-01&end_date=2026-03-31"
	for _, tc := range []struct {
		q     string
		ok    bool
		group GroupBy
		limit int
	}{
		{base, true, ByCampaign, InteractionsLimit},
		{base + "&group_by=vendor&granularity=daily&limit=5", true, ByVendor, 5},
		{base + "&group_by=product", true, ByProduct, InteractionsLimit},
		{base + "&group_by=shop", false, "", 0},
		{base + "&granularity=hourly", false, "", 0},
		{base + "&granularity=weekly", false, "", 0},
		{base + "&limit=1001", false, "", 0},
		{"start_date=2026-03-01&end_date=2026-04-01", false, "", 0}, // 32 days
	} {
		q, _ := url.ParseQuery(tc.q)
		r, err := ParseInteractions(q, nil, "mp", "", cursors)
		if (err == nil) != tc.ok || (tc.ok && (r.GroupBy != tc.group || r.Limit != tc.limit)) {
			t.Errorf("%s: %+v %v", tc.q, r, err)
		}
	}
	q, _ := url.ParseQuery(base + "&group_by=vendor")
	r, _ := ParseInteractions(q, nil, "mp", "V1", cursors)
	next := r.NextPage(cursors, "mp", Position{Day: day("2026-03-04"), Key: "V9"})
	q.Set("next_page", *next)
	got, err := ParseInteractions(q, nil, "mp", "V1", cursors)
	if err != nil || !got.After.Day.Equal(day("2026-03-04")) || got.After.Key != "V9" {
		t.Fatalf("cursor: %+v %v", got.After, err)
	}
	for _, other := range []string{"", "V2"} { // another vendor scope
		if _, err := ParseInteractions(q, nil, "mp", other, cursors); err == nil {
			t.Errorf("a cursor of vendor V1 accepted for vendor %q", other)
		}
	}
	q.Set("group_by", "campaign")
	if _, err := ParseInteractions(q, nil, "mp", "V1", cursors); err == nil {
		t.Error("a cursor of another grouping accepted")
	}
}
