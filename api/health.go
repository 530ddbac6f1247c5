package api

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/endcap/endcap/internal/telemetry"
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
	// Detail: a failing check reads as its error text (addresses, a
	// dependency's own messages); otherwise as "failing", and the text is
	// only logged (ENDCAP_READYZ_DETAIL).
	Detail bool
	// Log takes each check's error when it starts failing or its text
	// changes, and the recovery (nil: not logged).
	Log *slog.Logger

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
	for _, c := range checks {
		telemetry.ReadyCheck.WithLabelValues(c.Name).Set(0)
	}
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
				prev, seen := h.results[c.Name]
				h.results[c.Name] = checkResult{err: err, at: time.Now()}
				h.mu.Unlock()
				ok := 0.0
				if err == nil {
					ok = 1
				}
				telemetry.ReadyCheck.WithLabelValues(c.Name).Set(ok)
				h.logChange(c.Name, prev.err, seen, err)
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

// logChange logs a check that starts failing, fails with another error,
// or recovers: the error text /readyz does not show goes to the log, once
// a change rather than every second.
func (h *Health) logChange(name string, prev error, seen bool, err error) {
	switch {
	case h.Log == nil:
	case err != nil && (prev == nil || prev.Error() != err.Error()):
		h.Log.Warn("readiness check failing", "check", name, "err", err)
	case err == nil && seen && prev != nil:
		h.Log.Info("readiness check passes again", "check", name)
	}
}

// Report returns whether every check passed recently, and each check's
// state: "ok", "failing" (its error text instead with Detail), "no answer
// for …" or "not checked yet".
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
		case r.err != nil && h.Detail:
			state = r.err.Error()
		case r.err != nil:
			state = "failing"
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
