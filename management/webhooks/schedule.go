package webhooks

import (
	"math/rand/v2"
	"time"
)

// Schedule is when a failed delivery is tried again: after attempt n
// (1-based) the next comes Base×4^(n−1) later, at most Base×5760, each
// delay with ±20 % of jitter, for Attempts attempts in all. With the
// default Base of 5 s: 5 s, 20 s, 80 s, 5⅓ min, 21⅓ min, 85⅓ min, 5.7 h,
// 8 h, 8 h: ten attempts over about 23.6 hours (docs/reference/webhooks.md).
type Schedule struct {
	Base     time.Duration
	Attempts int
}

// Defaults of Schedule.
const (
	DefaultRetryBase = 5 * time.Second
	DefaultAttempts  = 10
	maxDelayFactor   = 5760 // 8 h at the default base
)

func (s Schedule) withDefaults() Schedule {
	if s.Base <= 0 {
		s.Base = DefaultRetryBase
	}
	if s.Attempts <= 0 {
		s.Attempts = DefaultAttempts
	}
	return s
}

// Nominal is the delay after attempt n without jitter.
func (s Schedule) Nominal(n int) time.Duration {
	s = s.withDefaults()
	f := int64(1)
	for i := 1; i < n && f < maxDelayFactor; i++ {
		f *= 4
	}
	return s.Base * time.Duration(min(f, maxDelayFactor))
}

// Delay is the delay after attempt n, with jitter; ok is false when n was
// the last attempt.
func (s Schedule) Delay(n int) (time.Duration, bool) {
	s = s.withDefaults()
	if n >= s.Attempts {
		return 0, false
	}
	d := s.Nominal(n)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64())), true
}
