// Package projections folds Kafka topics into ClickHouse tables and Redis
// state. Each projector is a consumer group that commits offsets only after
// its writes are durable; docs/projector.md describes the guarantees.
package projections

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Claim is the outcome of claiming an idempotency key for a Kafka record.
type Claim uint8

const (
	// ClaimFirst: no record had claimed the key; this one now owns it.
	ClaimFirst Claim = iota + 1
	// ClaimReplay: this same record (topic partition and offset) owns the
	// key already; it is being processed again after a crash or rebalance.
	ClaimReplay
	// ClaimDuplicate: another record owns the key; this one is a duplicate.
	ClaimDuplicate
)

// Claimer remembers which Kafka record first claimed each idempotency key,
// for a window, in Redis (SET NX GET, one pipelined round trip per batch).
type Claimer struct {
	rdb    redis.UniversalClient
	prefix string
	window time.Duration
}

// NewClaimer returns a Claimer whose keys start with prefix.
func NewClaimer(rdb redis.UniversalClient, prefix string, window time.Duration) *Claimer {
	return &Claimer{rdb: rdb, prefix: prefix, window: window}
}

// ClaimKey is one key to claim, with the record that claims it.
type ClaimKey struct {
	Key       string
	Partition int32
	Offset    int64
}

func owner(p int32, o int64) string {
	return strconv.FormatInt(int64(p), 10) + ":" + strconv.FormatInt(o, 10)
}

// Claim claims every key and returns one outcome per key, in order.
func (c *Claimer) Claim(ctx context.Context, keys []ClaimKey) ([]Claim, error) {
	out := make([]Claim, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.StatusCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.SetArgs(ctx, c.prefix+k.Key, owner(k.Partition, k.Offset), redis.SetArgs{Mode: "NX", Get: true, TTL: c.window})
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("claim idempotency keys: %w", err)
	}
	for i, cmd := range cmds {
		prev, err := cmd.Result()
		switch {
		case err == redis.Nil:
			out[i] = ClaimFirst
		case err != nil:
			return nil, fmt.Errorf("claim idempotency key: %w", err)
		case prev == owner(keys[i].Partition, keys[i].Offset):
			out[i] = ClaimReplay
		default:
			out[i] = ClaimDuplicate
		}
	}
	return out, nil
}
