package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrBusy means another process holds the lease.
var ErrBusy = errors.New("redis lease: held by another process")

var (
	renewScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
)

// Lease takes the Redis lock key for ttl and keeps renewing it every ttl/3
// until release is called. The returned context ends when the lease is
// lost (a renewal found another owner or failed until the lock may have
// expired), so that work done under it stops before another process can
// take over. release ends the context and deletes the lock if still ours.
func Lease(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) (context.Context, func(), error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, err
	}
	token := hex.EncodeToString(b[:])
	ok, err := rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("redis lease %s: %w", key, err)
	}
	if !ok {
		return nil, nil, ErrBusy
	}
	lctx, cancel := context.WithCancelCause(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		lastOK := time.Now()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(lctx, ttl/3)
			n, err := renewScript.Run(rctx, rdb, []string{key}, token, ttl.Milliseconds()).Int()
			rcancel()
			switch {
			case err == nil && n == 1:
				lastOK = time.Now()
			case err == nil:
				cancel(errors.New("redis lease: lost to another process"))
				return
			case time.Since(lastOK) > ttl*2/3:
				cancel(fmt.Errorf("redis lease: could not be renewed: %w", err))
				return
			}
		}
	}()
	release := func() {
		cancel(context.Canceled)
		<-stopped
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer rcancel()
		_ = unlockScript.Run(rctx, rdb, []string{key}, token).Err()
	}
	return lctx, release, nil
}
