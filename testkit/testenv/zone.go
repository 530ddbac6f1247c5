package testenv

import (
	"fmt"
	"time"
)

// NoonZone returns a time zone (UTC or Etc/GMT±N) in which it is between
// 12:00 and 12:59 at now, on now's UTC date. A test of minutes whose
// marketplace is in it stays inside one local day, far from its midnight,
// whatever the hour it runs at, and its local day is the UTC day of now.
func NoonZone(now time.Time) string {
	switch off := 12 - now.UTC().Hour(); { // local = UTC + off hours, -11 to +12
	case off == 0:
		return "UTC"
	case off > 0:
		return fmt.Sprintf("Etc/GMT-%d", off) // POSIX sign: Etc/GMT-3 is UTC+3
	default:
		return fmt.Sprintf("Etc/GMT+%d", -off)
	}
}
