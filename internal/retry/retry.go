// Package retry is the one way Endcap waits between attempts at something
// that failed: exponential backoff with jitter (cenkalti/backoff), and a
// sleep that ends with the context. The jitter keeps the processes of a
// deployment that lost a dependency together from retrying in lockstep
// when it comes back.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff is a sequence of waits: first about initial, doubling up to max,
// each randomised by ±25 %. Reset starts it over (after a success).
type Backoff struct{ b *backoff.ExponentialBackOff }

// New returns a Backoff from initial up to max.
func New(initial, max time.Duration) *Backoff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     initial,
		RandomizationFactor: 0.25,
		Multiplier:          2,
		MaxInterval:         max,
	}
	b.Reset()
	return &Backoff{b}
}

// Next is the next wait.
func (b *Backoff) Next() time.Duration { return b.b.NextBackOff() }

// Reset starts the sequence over.
func (b *Backoff) Reset() { b.b.Reset() }

// Sleep waits d, or until ctx ends (then it returns ctx's error). A d of
// 0 or less returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Wait sleeps the next wait of b, or until ctx ends; it returns the wait
// (for logs) and ctx's error if it ended first.
func (b *Backoff) Wait(ctx context.Context) (time.Duration, error) {
	d := b.Next()
	return d, Sleep(ctx, d)
}
