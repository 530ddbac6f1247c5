// Package priority lets background work give way to foreground work in a
// process that runs both: the events fold yields to the API's requests when
// one process serves the API and folds (`endcap dev`, a small single-node
// install; docs/design/projector.md, Sharing the cores with the API).
//
// Foreground work brackets each request with Enter and Leave. Background
// work calls Yield between small units of its work (a few thousand records,
// a column of an insert): while any request is in flight, Yield waits until
// none is, at most the gate's MaxWait a call and at most the budget its
// context was given (With) in all, so the background work slows down while
// the foreground is busy, never stops, and speeds up again when it is idle.
// Every Yield also lets the goroutines waiting for a core run first
// (runtime.Gosched), so a request that has just arrived does not wait for a
// unit of background work to end.
package priority

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/endcap/endcap/internal/telemetry"
)

// A Gate counts the foreground requests in flight. The zero Gate is not
// usable; a nil *Gate admits every Yield at once.
type Gate struct {
	maxWait time.Duration
	busy    atomic.Int64
	waiting atomic.Int64
	mu      sync.Mutex
	idle    chan struct{} // closed when busy falls to 0; nil while no one waits
	yields  atomic.Int64  // Yield calls that waited
	waited  atomic.Int64  // nanoseconds waited, in all
}

// NewGate returns a gate at which background work waits at most maxWait a
// Yield for the requests in flight to end. A maxWait of 0 or less returns
// nil: background work never waits (it still lets waiting goroutines run).
func NewGate(maxWait time.Duration) *Gate {
	if maxWait <= 0 {
		return nil
	}
	return &Gate{maxWait: maxWait}
}

// Enter counts a foreground request in flight; Leave when it ends.
func (g *Gate) Enter() {
	if g != nil {
		g.busy.Add(1)
	}
}

// Leave ends a request counted by Enter and wakes the background work
// waiting when it was the last one.
func (g *Gate) Leave() {
	if g == nil || g.busy.Add(-1) != 0 {
		return
	}
	g.mu.Lock()
	if g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
	g.mu.Unlock()
}

// Busy is how many foreground requests are in flight.
func (g *Gate) Busy() int64 {
	if g == nil {
		return 0
	}
	return g.busy.Load()
}

// Waiting is how many Yield calls are waiting now.
func (g *Gate) Waiting() int64 {
	if g == nil {
		return 0
	}
	return g.waiting.Load()
}

// Waited is how many Yield calls waited and for how long in all, since the
// gate was made.
func (g *Gate) Waited() (calls int64, total time.Duration) {
	if g == nil {
		return 0, 0
	}
	return g.yields.Load(), time.Duration(g.waited.Load())
}

// idleChan returns a channel closed when no request is in flight, or nil
// when none is in flight now.
func (g *Gate) idleChan() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy.Load() == 0 {
		return nil
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	return g.idle
}

// budget is what a context given to With may still wait, in nanoseconds.
type budget struct {
	g    *Gate
	left atomic.Int64
}

type key struct{}

// With returns a context whose Yield calls wait at g, for at most total in
// all (the calls of every goroutine that shares the context together):
// a unit of background work with a deadline, such as a batch of the fold,
// so gives way for at most total and cannot miss its deadline for it.
// A nil g or a total of 0 or less returns ctx: its Yields never wait.
func With(ctx context.Context, g *Gate, total time.Duration) context.Context {
	if g == nil || total <= 0 {
		return ctx
	}
	b := &budget{g: g}
	b.left.Store(int64(total))
	return context.WithValue(ctx, key{}, b)
}

// Yield lets the goroutines waiting for a core run, then, when ctx came from
// With and a foreground request is in flight, waits until none is, at most
// the gate's MaxWait and what is left of ctx's budget. It returns ctx's
// error when ctx ends while it waits, else nil.
func Yield(ctx context.Context) error {
	runtime.Gosched()
	b, _ := ctx.Value(key{}).(*budget)
	if b == nil || b.g.busy.Load() == 0 {
		return nil
	}
	left := b.left.Load()
	if left <= 0 {
		return nil
	}
	g := b.g
	idle := g.idleChan()
	if idle == nil {
		return nil
	}
	wait := min(g.maxWait, time.Duration(left))
	start := time.Now()
	g.waiting.Add(1)
	t := time.NewTimer(wait)
	var err error
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	t.Stop()
	g.waiting.Add(-1)
	d := time.Since(start)
	b.left.Add(-int64(d))
	g.yields.Add(1)
	g.waited.Add(int64(d))
	telemetry.ProjectorYieldedSeconds.Add(d.Seconds())
	return err
}
