package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Age is how long data is kept: whole calendar months and days, read from
// "0" (kept for ever), "90d" or "6mo" (docs/operations/operations.md, Data retention).
type Age struct {
	Months int
	Days   int
}

// Forever says the data is never removed.
func (a Age) Forever() bool { return a.Months == 0 && a.Days == 0 }

// Cutoff is the instant before which data is older than a, at now; the zero
// time when a is Forever.
func (a Age) Cutoff(now time.Time) time.Time {
	if a.Forever() {
		return time.Time{}
	}
	return now.UTC().AddDate(0, -a.Months, -a.Days)
}

// ShortestDays is the fewest days a can be (a month counts 28).
func (a Age) ShortestDays() int { return a.Months*28 + a.Days }

func (a Age) String() string {
	switch {
	case a.Forever():
		return "0"
	case a.Months > 0:
		return strconv.Itoa(a.Months) + "mo"
	}
	return strconv.Itoa(a.Days) + "d"
}

// ParseAge reads "0", "<n>d" or "<n>mo".
func ParseAge(v string) (Age, error) {
	v = strings.TrimSpace(v)
	if v == "0" {
		return Age{}, nil
	}
	unit, num := "", v
	switch {
	case strings.HasSuffix(v, "mo"):
		unit, num = "mo", strings.TrimSuffix(v, "mo")
	case strings.HasSuffix(v, "d"):
		unit, num = "d", strings.TrimSuffix(v, "d")
	}
	n, err := strconv.Atoi(num)
	if unit == "" || err != nil || n < 1 || n > 100*366 {
		return Age{}, fmt.Errorf("must be 0 (kept for ever), a number of days (90d) or of months (6mo), got %q", v)
	}
	if unit == "mo" {
		return Age{Months: n}, nil
	}
	return Age{Days: n}, nil
}

// MinRawRetentionDays is the shortest retention of ClickHouse's raw tables:
// the rollups recompute the last 33 days (reporting/rollups.DefaultFullDays),
// and each day reads the auctions of the 31 days before it, plus a day of
// margin. A shorter bound would drop rows a recomputation still reads, and
// the day's rollup rows with them.
const MinRawRetentionDays = 33 + 31 + 1

// MinReportFilesDays is the shortest retention of the scored-attribution
// files: the exporter produces a day's file again while the day is among its
// last closed days, and would write again each file the sweeper removed.
const MinReportFilesDays = 7

// age reads an Age setting of at least minDays (0 always allowed).
func age(p func(*Config) *Age, minDays int, why string) func(*Config, string) error {
	return func(c *Config, v string) error {
		a, err := ParseAge(v)
		if err != nil {
			return err
		}
		if !a.Forever() && a.ShortestDays() < minDays {
			if why != "" {
				why = ": " + why
			}
			return fmt.Errorf("must be 0 (kept for ever) or at least %dd (a month counting 28 days), got %s%s", minDays, v, why)
		}
		*p(c) = a
		return nil
	}
}
