package api

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Check is one readiness dependency. Fn should honour its context's
// deadline; one that does not is still never waited for by /readyz.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Health runs the readiness checks in the background and keeps their last
// results, so that /readyz answers at once from memory however long a
// dependency takes to answer (a frozen broker, a hung Redis).
type Health struct {
	checks   []Check
	interval time.Duration // between the end of one run of a check and the next
	timeout  time.Duration // of one run
	// stale: a check whose last result is older than this (it has been
	// running longer than its timeout) reads as failing.
	stale time.Duration

	mu      sync.Mutex
	results map[string]checkResult
	started time.Time
}

type checkResult struct {
	err error
	at  time.Time // when it finished
}

// Default timings of the health checks.
const (
	healthInterval = time.Second
	healthTimeout  = time.Second
)

// NewHealth returns the health of checks, each run every second with a
// one-second deadline once Run is called.
func NewHealth(checks []Check) *Health {
	return &Health{checks: checks, interval: healthInterval, timeout: healthTimeout,
		stale: healthInterval + 2*healthTimeout, results: map[string]checkResult{}, started: time.Now()}
}

// Run runs every check, each on its own goroutine, until ctx ends.
func (h *Health) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range h.checks {
		wg.Go(func() {
			for {
				cctx, cancel := context.WithTimeout(ctx, h.timeout)
				err := c.Fn(cctx)
				cancel()
				if ctx.Err() != nil {
					return
				}
				h.mu.Lock()
				h.results[c.Name] = checkResult{err: err, at: time.Now()}
				h.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-time.After(h.interval):
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// Report returns whether every check passed recently, and each check's
// state ("ok" or why not).
func (h *Health) Report(now time.Time) (bool, map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]string, len(h.checks))
	ready := true
	for _, c := range h.checks {
		r, ok := h.results[c.Name]
		var state string
		switch {
		case !ok:
			state = "not checked yet"
			if age := now.Sub(h.started); age > h.stale {
				state = fmt.Sprintf("no answer for %s", age.Round(time.Second))
			}
		case now.Sub(r.at) > h.stale:
			state = fmt.Sprintf("no answer for %s", now.Sub(r.at).Round(time.Second))
		case r.err != nil:
			state = r.err.Error()
		default:
			state = "ok"
		}
		if state != "ok" {
			ready = false
		}
		out[c.Name] = state
	}
	return ready, out
}
