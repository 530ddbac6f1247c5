package rollups

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/kafka"
)

// fakeFold is a topic of two partitions and a group folding it: produce
// appends, fold commits.
type fakeFold struct {
	mu              sync.Mutex
	ends, committed [2]int64
	err             error
	onCommitted     func() // called on each read of the commits
}

func (f *fakeFold) offsets(o [2]int64) kafka.Offsets {
	return kafka.Offsets{{Group: "g", Topic: "t", Partition: 0}: o[0], {Group: "g", Topic: "t", Partition: 1}: o[1]}
}

func (f *fakeFold) Ends(context.Context) (kafka.Offsets, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offsets(f.ends), f.err
}

func (f *fakeFold) Committed(context.Context) (kafka.Offsets, error) {
	f.mu.Lock()
	fn := f.onCommitted
	f.mu.Unlock()
	if fn != nil {
		fn()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offsets(f.committed), f.err
}

func (f *fakeFold) set(ends, committed [2]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends, f.committed = ends, committed
}

func TestWatermark(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	f := &fakeFold{}
	w := NewWatermark(f, time.Millisecond)
	w.now = func() time.Time { clock = clock.Add(time.Second); return clock }

	// Caught up at once: the call's instant.
	f.set([2]int64{5, 7}, [2]int64{5, 7})
	at, ok, err := w.Wait(ctx, time.Second)
	if err != nil || !ok || !at.Equal(clock) {
		t.Fatalf("caught up: %s %v %v, want %s", at, ok, err, clock)
	}
	first := clock

	// Behind, and not catching up: the last instant known.
	f.set([2]int64{9, 7}, [2]int64{8, 7})
	if at, ok, err = w.Wait(ctx, 20*time.Millisecond); err != nil || ok || !at.Equal(first) {
		t.Fatalf("behind: %s %v %v, want %s", at, ok, err, first)
	}

	// Catching up while it waits.
	f.set([2]int64{12, 9}, [2]int64{9, 8})
	var reads int
	f.mu.Lock()
	f.onCommitted = func() {
		reads++
		if reads == 3 {
			f.set([2]int64{12, 9}, [2]int64{12, 9})
		}
	}
	f.mu.Unlock()
	if at, ok, err = w.Wait(ctx, time.Minute); err != nil || !ok || !at.Equal(clock) {
		t.Fatalf("catching up: %s %v %v, want %s", at, ok, err, clock)
	}
	caught := clock
	f.mu.Lock()
	f.onCommitted = nil
	f.mu.Unlock()

	// An earlier sample is confirmed by a later commit, even if the call
	// that took it gave up: here (9, 7) is folded, (20, 9) is not.
	w2 := NewWatermark(f, time.Millisecond)
	w2.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	f.set([2]int64{9, 7}, [2]int64{0, 0})
	if at, ok, _ := w2.Wait(ctx, 0); ok || !at.IsZero() {
		t.Fatalf("nothing known: %s %v", at, ok)
	}
	early := clock
	f.set([2]int64{20, 9}, [2]int64{10, 9})
	if at, ok, _ := w2.Wait(ctx, 0); ok || !at.Equal(early) {
		t.Fatalf("the earlier sample: %s %v, want %s", at, ok, early)
	}
	if !w2.Known().Equal(early) {
		t.Errorf("Known %s, want %s", w2.Known(), early)
	}

	// An error reading the offsets: what was known, and the error.
	f.mu.Lock()
	f.err = errors.New("broker down")
	f.mu.Unlock()
	if at, ok, err := w.Wait(ctx, time.Second); err == nil || ok || !at.Equal(caught) {
		t.Fatalf("error: %s %v %v, want %s and an error", at, ok, err, caught)
	}

	// ctx ends while it waits.
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
	f.set([2]int64{30, 30}, [2]int64{0, 0})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if at, ok, err := w.Wait(cctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) || ok || !at.Equal(caught) {
		t.Fatalf("ctx ended: %s %v %v", at, ok, err)
	}
}

// The pending samples are bounded; dropping the oldest keeps the answers
// true (a later sample's confirmation covers them).
func TestWatermarkBounded(t *testing.T) {
	f := &fakeFold{}
	w := NewWatermark(f, time.Millisecond)
	clock := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	w.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	for i := range 3 * maxPending {
		f.set([2]int64{int64(i + 1), 0}, [2]int64{0, 0})
		if _, ok, _ := w.Wait(context.Background(), 0); ok {
			t.Fatal("caught up with nothing committed")
		}
	}
	if n := len(w.pending); n != maxPending {
		t.Fatalf("%d pending samples, want %d", n, maxPending)
	}
	f.set([2]int64{3 * maxPending, 0}, [2]int64{3*maxPending - 1, 0})
	// The last two samples (ends 3m) are not folded; the one before them is.
	if _, ok, _ := w.Wait(context.Background(), 0); ok {
		t.Fatal("caught up")
	}
	if want := clock.Add(-2 * time.Second); !w.Known().Equal(want) {
		t.Errorf("Known %s, want %s", w.Known(), want)
	}
}
