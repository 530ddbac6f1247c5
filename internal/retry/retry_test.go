package retry

import (
	"context"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := New(100*time.Millisecond, time.Second)
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		w *= time.Millisecond
		if d := b.Next(); d < w*3/4 || d > w*5/4 {
			t.Errorf("wait %d: %s, want %s ± 25 %%", i, d, w)
		}
	}
	b.Reset()
	if d := b.Next(); d > 125*time.Millisecond {
		t.Errorf("after Reset: %s", d)
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Minute); err == nil || time.Since(start) > time.Second {
		t.Errorf("Sleep: %v after %s", err, time.Since(start))
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Error(err)
	}
}
