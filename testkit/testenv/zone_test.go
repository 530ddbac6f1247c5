package testenv

import (
	"testing"
	"time"
)

// TestNoonZone: at every hour of a day (a DST change day in New York and
// the last day of a year among them), NoonZone's zone reads 12:mm of the
// same UTC date.
func TestNoonZone(t *testing.T) {
	for _, day := range []time.Time{time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)} {
		for m := 0; m < 24*60; m += 17 {
			at := day.Add(time.Duration(m) * time.Minute)
			loc, err := time.LoadLocation(NoonZone(at))
			if err != nil {
				t.Fatal(err)
			}
			if l := at.In(loc); l.Hour() != 12 || l.Minute() != at.Minute() || l.Format(time.DateOnly) != at.Format(time.DateOnly) {
				t.Errorf("%s in %s is %s", at, loc, l)
			}
		}
	}
}
