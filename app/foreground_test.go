package app

import (
	"testing"
	"time"
)

// TestForegroundGate: the fold gives way to the API only in a process that
// runs both, unless ENDCAP_PROJECTOR_YIELD is 0.
func TestForegroundGate(t *testing.T) {
	for _, c := range []struct {
		target  Target
		maxWait time.Duration
		want    bool
	}{
		{TargetAll, 20 * time.Millisecond, true},
		{TargetAll, 0, false},
		{TargetAPI, 20 * time.Millisecond, false},
		{TargetProjector, 20 * time.Millisecond, false},
		{TargetExporter, 20 * time.Millisecond, false},
	} {
		if got := foregroundGate(c.target, c.maxWait) != nil; got != c.want {
			t.Errorf("target %s, yield %v: a gate %v, want %v", c.target, c.maxWait, got, c.want)
		}
	}
}
