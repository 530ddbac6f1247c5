package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/statelog"
)

// ErrLocked means another writer holds the lock (it is a statelog conflict).
var ErrLocked = statelog.ErrLocked

var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)

// Locker takes short exclusive locks (SET NX PX with a random token; the
// release deletes the key only if the token is still ours).
type Locker struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewLocker returns a Locker whose locks expire after ttl at the latest.
func NewLocker(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Locker {
	return &Locker{rdb: rdb, prefix: prefix, ttl: ttl}
}

// Lock takes the lock of key or fails at once with ErrLocked: a concurrent
// writer of the same entity is a conflict, not something to wait for.
func (l *Locker) Lock(ctx context.Context, key string) (func(), error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b[:])
	k := l.prefix + key
	ok, err := l.rdb.SetNX(ctx, k, token, l.ttl).Result()
	if err != nil {
		return nil, fmt.Errorf("redis lock %s: %w", key, err)
	}
	if !ok {
		return nil, ErrLocked
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = unlockScript.Run(ctx, l.rdb, []string{k}, token).Err()
	}, nil
}
