// Package redisstore is the adapter to Redis: the client with Endcap's
// timeouts. Key layouts belong to the packages that own the keys.
package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options say where Redis is.
type Options struct {
	Addr     string
	Password string
	DB       int
}

// Open returns a pooled client. Every command is bounded by the caller's
// context deadline and by these socket timeouts, whichever comes first:
// without ContextTimeoutEnabled go-redis would apply only the socket
// timeouts to a reply being read, so a frozen Redis would hold a caller
// that gave itself 150 ms for the full ReadTimeout. A context that is
// cancelled without a deadline still waits for the socket timeout.
func Open(o Options) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  o.Addr,
		Password:              o.Password,
		DB:                    o.DB,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           3 * time.Second,
		WriteTimeout:          3 * time.Second,
		ContextTimeoutEnabled: true,
		PoolSize:              32,
		MaxRetries:            1,
	})
}

// SharedSecret returns the 32-byte secret stored at key, creating it with
// random bytes when absent (SET NX), so that every process shares it.
func SharedSecret(ctx context.Context, rdb redis.UniversalClient, key string) ([]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	if err := rdb.SetNX(ctx, key, hex.EncodeToString(b[:]), 0).Err(); err != nil {
		return nil, err
	}
	v, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(v)
}
