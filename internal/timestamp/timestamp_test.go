package timestamp

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 26, 8, 21, 3, 510_000_000, time.UTC), "2026-11-26T08:21:03.510Z"},         // not .51Z
		{time.Date(2026, 11, 26, 8, 21, 3, 0, time.UTC), "2026-11-26T08:21:03.000Z"},                   // not 03Z
		{time.Date(2026, 11, 26, 8, 21, 3, 999_999_999, time.UTC), "2026-11-26T08:21:03.999Z"},         // truncated, not rounded up
		{time.Date(2026, 11, 26, 8, 21, 3, 123_456_789, time.UTC), "2026-11-26T08:21:03.123Z"},         // not nanoseconds
		{time.Date(2026, 3, 8, 0, 0, 0, 1_000_000, ny), "2026-03-08T05:00:00.001Z"},                    // UTC, whatever the zone
		{time.Date(2026, 11, 1, 1, 30, 0, 0, time.FixedZone("", -4*3600)), "2026-11-01T05:30:00.000Z"}, // an offset
		{time.Time{}, "0001-01-01T00:00:00.000Z"},
		{time.UnixMilli(0), "1970-01-01T00:00:00.000Z"},
	} {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%v) = %s, want %s", tc.in, got, tc.want)
		}
		if !Valid(tc.want) {
			t.Errorf("Valid(%s) = false", tc.want)
		}
		b, err := json.Marshal(map[string]any{"at": Of(tc.in), "opt": OptOf(&tc.in), "none": OptOf(nil)})
		if err != nil || string(b) != `{"at":"`+tc.want+`","none":null,"opt":"`+tc.want+`"}` {
			t.Errorf("JSON %s %v", b, err)
		}
		// Every text form, not only JSON: none of time.Time's own (nanoseconds)
		// shows through.
		txt, _ := Of(tc.in).MarshalText()
		app, _ := Of(tc.in).AppendText([]byte("at "))
		if Of(tc.in).String() != tc.want || fmt.Sprint(Of(tc.in)) != tc.want || string(txt) != tc.want || string(app) != "at "+tc.want {
			t.Errorf("text forms %s %v %s %s", Of(tc.in), Of(tc.in), txt, app)
		}
		var back Time
		if err := back.UnmarshalText([]byte(tc.want)); err != nil || back.String() != tc.want {
			t.Errorf("UnmarshalText(%s) = %v %v", tc.want, back, err)
		}
	}
	if _, err := json.Marshal(Of(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))); err == nil {
		t.Error("year 10000 marshalled")
	}
	if _, err := Of(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)).MarshalText(); err == nil {
		t.Error("year -1 marshalled")
	}
}

func TestValid(t *testing.T) {
	for _, s := range []string{
		"2026-11-26T08:21:03.51Z",          // two digits
		"2026-11-26T08:21:03Z",             // none
		"2026-11-26T08:21:03.510123456Z",   // nanoseconds
		"2026-11-26T08:21:03.510+00:00",    // an offset, even zero
		"2026-11-26T08:21:03.510z",         // lower case
		"2026-11-26t08:21:03.510Z",         //
		"2026-11-26 08:21:03.510Z",         // a space
		"2026-02-30T08:21:03.510Z",         // no such day
		"2026-11-26T24:00:00.000Z",         // no such hour
		"2026-11-26T08:21:60.000Z",         // leap second
		"+026-11-26T08:21:03.510Z",         //
		"2026-11-26T08:21:03.510Z ",        //
		"2026-11-26",                       // a date
		"",                                 //
		"2026-11-26 08:21:03.51 +0000 UTC", // time.Time's String
	} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}

// Inputs are liberal: any RFC 3339 date-time with a zone.
func TestParse(t *testing.T) {
	want := time.Date(2026, 11, 26, 8, 21, 3, 510_000_000, time.UTC)
	for _, s := range []string{
		"2026-11-26T08:21:03.51Z", "2026-11-26T08:21:03.510Z", "2026-11-26T08:21:03.510000000Z",
		"2026-11-26T09:21:03.51+01:00", "2026-11-26t08:21:03.51z", " 2026-11-26T03:21:03.51-05:00 ",
	} {
		got, err := Parse(s)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("Parse(%q) = %v, %v", s, got, err)
		}
		var tt Time
		if err := json.Unmarshal([]byte(`"`+s+`"`), &tt); err != nil || !tt.Equal(want) {
			t.Errorf("UnmarshalJSON(%q) = %v, %v", s, tt, err)
		}
	}
	for _, s := range []string{"2026-11-26", "2026-11-26T08:21:03", "2026-11-26T08:21:03.51+0100", "1764145263", "", "yesterday"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
	var tt Time
	for _, b := range []string{`1764145263`, `"2026-11-26"`, `"x`, `{}`} {
		if err := json.Unmarshal([]byte(b), &tt); err == nil {
			t.Errorf("UnmarshalJSON(%s) accepted", b)
		}
	}
	orig := Of(want)
	tt = orig
	if err := json.Unmarshal([]byte(`null`), &tt); err != nil || tt != orig {
		t.Errorf("null changed %v: %v", tt, err)
	}
}

func TestMalformed(t *testing.T) {
	body := []byte(`{"createdAt":"2026-11-26T08:21:03.510Z","a":"2026-11-26T08:21:03.51Z","b":"2026-11-26T08:21:03.123456789Z",` +
		`"c":"2026-11-26T08:21:03Z","d":"2026-11-26T09:21:03.510+01:00","e":"2026-11-26 08:21:03.51 +0000 UTC","f":"2026-11-26",` +
		`"msg":"the quota resets at 2026-11-27T00:00:00Z.","ok":"failing since 2026-11-27T00:00:00.000Z."}`)
	got := Malformed(body)
	want := []string{"2026-11-26T08:21:03.51Z", "2026-11-26T08:21:03.123456789Z", "2026-11-26T08:21:03Z",
		"2026-11-26T09:21:03.510+01:00", "2026-11-26 08:21:03.51 +0000 UTC", "2026-11-27T00:00:00Z"}
	if !slices.Equal(got, want) {
		t.Errorf("Malformed = %q\nwant %q", got, want)
	}
	if n := Count(body); n != 8 {
		t.Errorf("Count = %d, want 8", n)
	}
	if got := Malformed([]byte(`{"at":"2026-11-26T08:21:03.510Z","day":"2026-11-26"}`)); got != nil {
		t.Errorf("Malformed of well-formed = %q", got)
	}
}

// TestParseForms: the forms Parse takes, and which error the others are.
func TestParseForms(t *testing.T) {
	utc := func(s string) time.Time { x, _ := time.Parse(time.RFC3339Nano, s); return x }
	for _, tc := range []struct {
		in   string
		want time.Time // zero: error
		err  error
	}{
		{"2026-03-01T00:00:00Z", utc("2026-03-01T00:00:00Z"), nil},
		{"2026-03-01T00:00:00+01:00", utc("2026-02-28T23:00:00Z"), nil},
		{"2026-03-01T00:00:00-08:00", utc("2026-03-01T08:00:00Z"), nil},
		{"2026-03-01T00:00:00+05:30", utc("2026-02-28T18:30:00Z"), nil},
		{"2026-03-01T00:00:00.123456Z", utc("2026-03-01T00:00:00.123456Z"), nil},
		{"2026-03-01t00:00:00z", utc("2026-03-01T00:00:00Z"), nil},
		{"2026-03-01 00:00:00Z", utc("2026-03-01T00:00:00Z"), nil},
		{"2026-03-01T00:00:00 01:00", utc("2026-02-28T23:00:00Z"), nil}, // "+" unencoded in the query
		{"2026-03-01T00:00:00", time.Time{}, ErrNoZone},
		{"2026-03-01T00:00:00.5", time.Time{}, ErrNoZone},
		{"2026-03-01T00:00", time.Time{}, ErrNoZone},
		{"2026-03-01", time.Time{}, ErrNoZone},
		{"", time.Time{}, ErrInvalid},
		{"yesterday", time.Time{}, ErrInvalid},
		{"1709251200", time.Time{}, ErrInvalid},
		{"2026-02-30T00:00:00Z", time.Time{}, ErrInvalid},
		{"2026-03-01T24:00:00Z", time.Time{}, ErrInvalid},
		{"2026-03-01T00:00:00+0100", time.Time{}, ErrInvalid},
		{"2026-03-01T00:00:00+25:00", time.Time{}, ErrInvalid},
		{"2026-03-01T00:00:00 EST", time.Time{}, ErrInvalid},
	} {
		got, err := Parse(tc.in)
		if err != tc.err || !got.Equal(tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
