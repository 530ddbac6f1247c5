package spend

import (
	"context"
	"time"
)

// refresher runs a cache's refresh pass every period, and at once when
// kicked (something new to read); both caches of the package (spend and
// funds) refresh this way.
type refresher struct {
	kick chan struct{}
}

func newRefresher() refresher { return refresher{kick: make(chan struct{}, 1)} }

// Kick asks for a pass now; kicks while one is pending make one pass.
func (r refresher) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run calls pass at once, then every period and after each kick, until ctx
// ends; it then returns ctx's error. A pass's error is its own to report
// (it keeps the last snapshot): the loop goes on.
func (r refresher) run(ctx context.Context, period time.Duration, pass func(context.Context) error) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		_ = pass(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-r.kick:
		}
	}
}
