package priority

import (
	"context"
	"errors"
	"testing"
	"time"
)

// yielder calls Yield in a loop, counting the units of work between them,
// until stop is closed.
func yielder(ctx context.Context, units *int64, stop <-chan struct{}, done chan<- error) {
	for {
		select {
		case <-stop:
			done <- nil
			return
		default:
		}
		if err := Yield(ctx); err != nil {
			done <- err
			return
		}
		*units++ // read by the test only while the yielder waits or after done
	}
}

// poll waits, for at most 10 s, until cond holds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
	}
}

// TestYieldWaitsWhileBusy: background work stops at its next Yield while a
// request is in flight, and goes on as soon as the last one leaves.
func TestYieldWaitsWhileBusy(t *testing.T) {
	g := NewGate(time.Hour)
	ctx := With(t.Context(), g, time.Hour)
	g.Enter()
	g.Enter()
	var units int64
	stop, done := make(chan struct{}), make(chan error, 1)
	go yielder(ctx, &units, stop, done)
	poll(t, "the background work waits", func() bool { return g.Waiting() == 1 })
	if units != 0 {
		t.Fatalf("%d units of work done while a request was in flight", units)
	}
	g.Leave()
	if g.Waiting() != 1 || units != 0 {
		t.Fatalf("the background work went on while a request was still in flight (waiting %d, units %d)", g.Waiting(), units)
	}
	g.Leave()
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if units == 0 {
		t.Fatal("no work done once the requests left")
	}
	if calls, _ := g.Waited(); calls != 1 {
		t.Fatalf("Waited says %d calls waited, want 1", calls)
	}
}

// TestYieldBounded: a foreground that never rests slows the background work
// (one unit per MaxWait) without stopping it; once the context's budget is
// spent, Yield no longer waits.
func TestYieldBounded(t *testing.T) {
	g := NewGate(2 * time.Millisecond)
	g.Enter()
	defer g.Leave()
	ctx := With(t.Context(), g, 20*time.Millisecond)
	var calls int
	for start := time.Now(); ; calls++ {
		if err := Yield(ctx); err != nil {
			t.Fatal(err)
		}
		n, _ := g.Waited()
		if n < int64(calls+1) {
			break // the budget is spent: this call did not wait
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("Yield still waits after 10 s of a budget of 20 ms")
		}
	}
	if calls < 2 {
		t.Fatalf("%d calls waited, want several of MaxWait (2 ms) within the budget (20 ms)", calls)
	}
	_, waited := g.Waited()
	if waited < 20*time.Millisecond {
		t.Fatalf("waited %v in all, want the budget (20 ms)", waited)
	}
	// Every further call returns at once.
	for range 100 {
		if err := Yield(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := g.Waited(); n != int64(calls) {
		t.Fatalf("%d calls waited after the budget was spent, want %d", n, calls)
	}
}

// TestYieldNoWait: no wait without a gate, without a budget, when idle; a
// context that ends ends the wait with its error.
func TestYieldNoWait(t *testing.T) {
	busy := NewGate(time.Hour)
	busy.Enter()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		{"no gate", With(t.Context(), nil, time.Hour)},
		{"gate off", With(t.Context(), NewGate(0), time.Hour)},
		{"no budget", With(t.Context(), busy, 0)},
		{"plain context", t.Context()},
		{"idle gate", With(t.Context(), NewGate(time.Hour), time.Hour)},
	} {
		if err := Yield(c.ctx); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if n, _ := busy.Waited(); n != 0 {
		t.Errorf("%d calls waited", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ctx = With(ctx, busy, time.Hour)
	done := make(chan error, 1)
	go func() { done <- Yield(ctx) }()
	poll(t, "Yield waits", func() bool { return busy.Waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Yield returned %v after its context ended, want context.Canceled", err)
	}
}
