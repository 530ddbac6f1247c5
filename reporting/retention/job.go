package retention

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/redisstore"
)

// leaseTTL is the lease of a job's Redis lock, renewed while it runs.
const leaseTTL = 30 * time.Second

// Job runs Step every Interval (and once at start) under the Redis lease
// LockKey, so that one process of several exporters runs it at a time; a run
// is bounded by Timeout.
type Job struct {
	Name     string
	Redis    redis.UniversalClient
	LockKey  string
	Interval time.Duration
	Timeout  time.Duration
	Log      *slog.Logger
	Step     func(ctx context.Context) error
}

// Run runs the job until ctx ends. A failed run is logged and tried again
// at the next.
func (j *Job) Run(ctx context.Context) error {
	for {
		if err := j.Once(ctx); err != nil && !errors.Is(err, redisstore.ErrBusy) && ctx.Err() == nil {
			j.Log.Error("retention: run failed; tried again at the next", "job", j.Name, "err", err, "next_in", j.Interval)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(j.Interval):
		}
	}
}

// Once runs Step now under the lease (redisstore.ErrBusy when another
// process holds it).
func (j *Job) Once(ctx context.Context) error {
	lctx, release, err := redisstore.Lease(ctx, j.Redis, j.LockKey, leaseTTL)
	if err != nil {
		return err
	}
	defer release()
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(lctx, j.Timeout)
		defer cancel()
	}
	return j.Step(lctx)
}
