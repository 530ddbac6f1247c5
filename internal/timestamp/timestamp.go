// Package timestamp is the one way an instant is written where a client reads
// it: every response body of /v2 and /public/v1, webhook payloads and export
// metadata. The form is RFC 3339 in UTC with exactly three fractional digits,
// 2026-11-26T08:21:03.510Z: one length, one zone, sortable as text, and the
// precision the system keeps (events and charges carry milliseconds). A finer
// instant is truncated to its millisecond, never rounded up, so that a
// timestamp is never later than what it stands for.
//
// Inputs stay liberal: Parse (and Time's UnmarshalJSON) take any RFC 3339
// date-time with a zone, whatever its fraction or offset. The areas that
// read dates of their own (events, vendor-charge windows, campaign dates)
// keep their documented rules.
package timestamp

import (
	"errors"
	"regexp"
	"strings"
	"time"
)

// Layout is the form of every timestamp written (time.Format layout of a UTC
// instant).
const Layout = "2006-01-02T15:04:05.000Z"

// Len is the length of every timestamp written.
const Len = len(Layout)

// Format writes t in Layout: UTC, milliseconds (truncated).
func Format(t time.Time) string { return string(Append(nil, t)) }

// Append appends Format(t) to b.
func Append(b []byte, t time.Time) []byte { return t.UTC().AppendFormat(b, Layout) }

// Valid reports whether s is exactly a timestamp as Format writes it: the
// Layout's form, a real date and time, UTC.
func Valid(s string) bool {
	if len(s) != Len || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z' {
		return false
	}
	for i := range Len {
		switch i {
		case 4, 7, 10, 13, 16, 19, 23:
			continue
		}
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	t, err := time.Parse(Layout, s)
	return err == nil && Format(t) == s
}

// Errors of Parse.
var (
	// ErrNoZone: a date, or a date-time without a zone.
	ErrNoZone = errors.New("no time zone: add Z or an offset such as +01:00")
	// ErrInvalid: anything else that is not an RFC 3339 date-time.
	ErrInvalid = errors.New("not an RFC 3339 date-time with a time zone (e.g. 2026-11-26T08:21:03.510Z)")
)

// Parse reads an RFC 3339 date-time with a zone ("Z" or an offset), with or
// without a fraction of any length. It also takes a lower-case "t" or "z",
// a space between date and time, and a "+" offset that arrived as a space
// (a "+" left unencoded in a query string). The result is in UTC. A date, or
// a date-time without a zone, is ErrNoZone; anything else ErrInvalid.
func Parse(s string) (time.Time, error) {
	n := normalize(strings.TrimSpace(s))
	if t, err := time.Parse(time.RFC3339Nano, n); err == nil {
		return t.UTC(), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if _, err := time.Parse(layout, n); err == nil {
			return time.Time{}, ErrNoZone
		}
	}
	return time.Time{}, ErrInvalid
}

// normalize writes the forms Parse takes besides RFC 3339 as RFC 3339.
func normalize(s string) string {
	b := []byte(s)
	if len(b) > 10 && (b[10] == 't' || b[10] == ' ') {
		b[10] = 'T'
	}
	if l := len(b); l > 0 && b[l-1] == 'z' {
		b[l-1] = 'Z'
	}
	// "…T00:00:00 01:00": the "+" of the offset decoded as a space.
	if l := len(b); l > 16 && b[l-6] == ' ' && b[l-3] == ':' && digits(b[l-5:l-3]) && digits(b[l-2:]) {
		b[l-6] = '+'
	}
	return string(b)
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// Time is an instant on the wire: it marshals as Format writes it, and has
// time.Time's methods otherwise. Use it in the types of response bodies and
// payloads; stored state keeps its time.Time (and its precision).
type Time struct{ time.Time }

// Of is t as a Time.
func Of(t time.Time) Time { return Time{t} }

// OptOf is t as a *Time, nil when t is nil (a JSON null, or left out with
// omitempty).
func OptOf(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	return &Time{*t}
}

// String is Format(t).
func (t Time) String() string { return Format(t.Time) }

// MarshalJSON writes the timestamp as a JSON string. Like time.Time, it
// refuses a year outside 0–9999, which RFC 3339 cannot write.
func (t Time) MarshalJSON() ([]byte, error) {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return nil, errors.New("timestamp: year outside [0,9999]")
	}
	b := make([]byte, 0, Len+2)
	b = append(b, '"')
	b = Append(b, t.Time)
	return append(b, '"'), nil
}

// MarshalText writes Format(t) (for text encoders and map keys).
func (t Time) MarshalText() ([]byte, error) {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return nil, errors.New("timestamp: year outside [0,9999]")
	}
	return Append(nil, t.Time), nil
}

// AppendText appends Format(t) to b (time.Time's would write nanoseconds).
func (t Time) AppendText(b []byte) ([]byte, error) {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return nil, errors.New("timestamp: year outside [0,9999]")
	}
	return Append(b, t.Time), nil
}

// UnmarshalJSON reads a JSON string as Parse does; null leaves t unchanged.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return ErrInvalid
	}
	v, err := Parse(string(b[1 : len(b)-1]))
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// UnmarshalText reads text as Parse does.
func (t *Time) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// looksLike matches what reads as a date-time in any common form: a date,
// "T", "t" or a space, hours and minutes, then seconds, a fraction and a zone
// when present ("2026-11-26T08:21:03.51Z", "2026-11-26 08:21:03 +0000 UTC",
// "2026-11-26T08:21:03.510123456+01:00").
var looksLike = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?( ?([Zz]|[+-]\d{2}(:?\d{2})?)( [A-Z]{3,5})?)?`)

// Malformed returns the substrings of text that look like a date-time but
// are not exactly a timestamp as Format writes it (nil when there is none):
// the check that a response body, a payload or a golden file holds one form
// of timestamp only. A date alone (2026-11-26) is not a date-time.
func Malformed(text []byte) []string {
	var out []string
	for _, m := range looksLike.FindAll(text, -1) {
		if !Valid(string(m)) {
			out = append(out, string(m))
		}
	}
	return out
}

// Count returns how many substrings of text look like a date-time (well
// formed or not).
func Count(text []byte) int { return len(looksLike.FindAllIndex(text, -1)) }
