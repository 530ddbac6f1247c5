package spend

import (
	"math"
	"testing"
)

// BenchmarkApplyChargesCapped: BenchmarkApplyChargesCampaigns with a daily
// and a total budget on every campaign, high enough that every charge is
// applied (the checks all run, nothing is refused).
func BenchmarkApplyChargesCapped(b *testing.B) {
	benchCharges(b, 1_000, func(c *Charge) { c.Limits = Limits{DailyMicros: math.MaxInt64 / 2, TotalMicros: math.MaxInt64 / 2} })
}
