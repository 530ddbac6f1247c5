// Package projections folds Kafka topics into ClickHouse tables and Redis
// state. Each projector is a consumer group that commits offsets only after
// its writes are durable; docs/projector.md describes the guarantees.
package projections

import (
	"context"
	"crypto/sha256"
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
//
// A key is stored as the Claimer's prefix and the first 16 bytes of the
// SHA-256 of the claim key (about 149 bytes of Redis a claim against 229 for
// the whole key, docs/operations.md, Memory). A cryptographic hash because
// the ids are the clients': with 128 bits nobody can make one event's id
// collide with another marketplace's, and by chance two ids collide after
// about 2^64 of them.
type Claimer struct {
	rdb    redis.UniversalClient
	prefix string
	window time.Duration
	// legacy is the prefix of the claims of an earlier version, stored
	// under their whole key; read until legacyUntil ("" when there is
	// nothing to read). See WithLegacy.
	legacy      string
	legacyUntil time.Time
}

// NewClaimer returns a Claimer whose keys start with prefix.
func NewClaimer(rdb redis.UniversalClient, prefix string, window time.Duration) *Claimer {
	return &Claimer{rdb: rdb, prefix: prefix, window: window}
}

// WithLegacy has c also read, until until, the claims an earlier version
// stored under prefix followed by the whole claim key. While it does, the
// owner of such a claim decides the outcome (the event was claimed before
// the upgrade: this record is its replay or a duplicate); a key without one
// is decided by the hashed claim alone. Past until every old claim has
// expired, and a claim costs one command again. It returns c.
func (c *Claimer) WithLegacy(prefix string, until time.Time) *Claimer {
	c.legacy, c.legacyUntil = prefix, until
	return c
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

// hashedKey is the Redis key of claim key k under prefix.
func hashedKey(prefix, k string) string {
	h := sha256.Sum256([]byte(k))
	return prefix + string(h[:16])
}

// Claim claims every key and returns one outcome per key, in order.
func (c *Claimer) Claim(ctx context.Context, keys []ClaimKey) ([]Claim, error) {
	out := make([]Claim, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	legacy := c.legacy != "" && time.Now().Before(c.legacyUntil)
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.StatusCmd, len(keys))
	var olds []*redis.StringCmd
	if legacy {
		olds = make([]*redis.StringCmd, len(keys))
	}
	owners := make([]string, len(keys))
	for i, k := range keys {
		owners[i] = owner(k.Partition, k.Offset)
		cmds[i] = pipe.SetArgs(ctx, hashedKey(c.prefix, k.Key), owners[i], redis.SetArgs{Mode: "NX", Get: true, TTL: c.window})
		if legacy {
			olds[i] = pipe.Get(ctx, c.legacy+k.Key)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("claim idempotency keys: %w", err)
	}
	for i, cmd := range cmds {
		own := owners[i]
		if legacy {
			switch prev, err := olds[i].Result(); {
			case err == nil && prev == own:
				out[i] = ClaimReplay
				continue
			case err == nil:
				out[i] = ClaimDuplicate
				continue
			case err != redis.Nil:
				return nil, fmt.Errorf("read an earlier version's claim: %w", err)
			}
		}
		prev, err := cmd.Result()
		switch {
		case err == redis.Nil:
			out[i] = ClaimFirst
		case err != nil:
			return nil, fmt.Errorf("claim idempotency key: %w", err)
		case prev == own:
			out[i] = ClaimReplay
		default:
			out[i] = ClaimDuplicate
		}
	}
	return out, nil
}

// LegacyClaimsUntil returns until when the Claimers of this version must
// read the claims an earlier version stored under legacyPrefix (the whole
// key; see Claimer.WithLegacy), or the zero time when there are none.
//
// The first process of this version to start records it in Redis under
// marker, once: the time it started when a key under legacyPrefix exists
// (the earlier version's claims live for one window from then at most), or
// 0 when none does (a new installation: nothing to read). Every later start
// reads the record. The search for an old key (SCAN, stopped at the first
// found) is bounded by 20 s; a search that does not finish counts as found.
// Processes of the earlier version must be stopped first: claims they make
// after the record are not read (docs/projector.md, Upgrades).
func LegacyClaimsUntil(ctx context.Context, rdb redis.UniversalClient, marker, legacyPrefix string, window time.Duration) (time.Time, error) {
	v, err := rdb.Get(ctx, marker).Result()
	if err == redis.Nil {
		since := time.Now().UnixMilli()
		sctx, cancel := context.WithTimeout(ctx, legacySearchTimeout)
		found, serr := anyKey(sctx, rdb, legacyPrefix)
		cancel()
		if serr == nil && !found {
			since = 0
		}
		if err := rdb.SetNX(ctx, marker, since, 0).Err(); err != nil {
			return time.Time{}, fmt.Errorf("record the claims' format: %w", err)
		}
		v, err = rdb.Get(ctx, marker).Result()
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read the claims' format: %w", err)
	}
	since, err := strconv.ParseInt(v, 10, 64)
	if err != nil || since < 0 {
		return time.Time{}, fmt.Errorf("the claims' format record %s holds %q, not a time in ms", marker, v)
	}
	if since == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(since).Add(window), nil
}

// legacySearchTimeout bounds LegacyClaimsUntil's search for an old claim.
var legacySearchTimeout = 20 * time.Second

// anyKey says whether a key starts with prefix. It scans until it finds one
// or the keyspace ends; an error (ctx ended) says nothing.
func anyKey(ctx context.Context, rdb redis.UniversalClient, prefix string) (bool, error) {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, prefix+"*", 10_000).Result()
		if err != nil {
			return false, err
		}
		if len(keys) > 0 {
			return true, nil
		}
		if next == 0 {
			return false, nil
		}
		cursor = next
	}
}
