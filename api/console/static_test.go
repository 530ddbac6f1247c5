package console

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		m    int64
		want string
	}{{0, "0.00"}, {500_000, "0.50"}, {1_234_567_891, "1,234.567891"}, {-12_345_000_000, "-12,345.00"}, {999_000_000, "999.00"}, {1_000_000_000, "1,000.00"}} {
		if got := formatMicros(tc.m); got != tc.want {
			t.Errorf("formatMicros(%d) = %q, want %q", tc.m, got, tc.want)
		}
	}
	for _, tc := range []struct {
		n    any
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {int64(-1234567), "-1,234,567"}, {uint64(12345678901), "12,345,678,901"}, {"x", "?"}} {
		if got := formatInt(tc.n); got != tc.want {
			t.Errorf("formatInt(%v) = %q, want %q", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{{"/console/keys", "/console/keys"}, {"//evil.example/", ""}, {"https://evil.example/console/", ""},
		{"/console/x\r\nSet-Cookie: a", ""}, {"/consolex", ""}, {"/console/a\\b", ""}} {
		if got := safeNext(tc.in); got != tc.want {
			t.Errorf("safeNext(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLocalTime: an instant is written in the marketplace's zone, named.
func TestLocalTime(t *testing.T) {
	at := time.Date(2026, 7, 1, 12, 30, 0, 0, time.UTC)
	zone := func(name string) *time.Location {
		l, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, tc := range []struct {
		t    time.Time
		loc  *time.Location
		want string
	}{
		{at, time.UTC, "2026-07-01 12:30 UTC"},
		{at, zone("America/New_York"), "2026-07-01 08:30 EDT"},
		{at.AddDate(0, 6, 0), zone("America/New_York"), "2027-01-01 07:30 EST"},
		{at, zone("Asia/Dubai"), "2026-07-01 16:30 +04"}, // no abbreviation: the offset
		{at, nil, "2026-07-01 12:30 UTC"},
		{time.Time{}, time.UTC, "—"},
	} {
		if got := localTime(tc.t, tc.loc); got != tc.want {
			t.Errorf("localTime(%s, %v) = %q, want %q", tc.t, tc.loc, got, tc.want)
		}
	}
	if got := string(timeHTML(at, zone("Europe/Paris"))); got != `<time datetime="2026-07-01T12:30:00Z" title="Europe/Paris">2026-07-01 14:30 CEST</time>` {
		t.Errorf("timeHTML = %s", got)
	}
}
