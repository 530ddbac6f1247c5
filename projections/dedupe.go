// Package projections folds Kafka topics into ClickHouse tables and Redis
// state. Each projector is a consumer group that commits offsets only after
// its writes are durable; docs/design/projector.md describes the guarantees.
package projections

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/claimstore"
	"github.com/endcap/endcap/storage/redisstore"
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

// RedisClaims reads the claims that earlier versions made in Redis (SET NX,
// one key a claim, expiring after the dedupe window), for as long as they
// live, so that an event claimed there before the upgrade to Claims is not
// folded again: for one window after the upgrade, a key that Claims does not
// know is looked up there, and its owner there decides. Two layouts: the
// first 16 bytes of the key's SHA-256 under hashedPrefix (about 149 bytes of
// Redis a claim), and, before that, the whole key under wholePrefix.
type RedisClaims struct {
	rdb          redis.UniversalClient
	hashedPrefix string
	hashedUntil  time.Time
	wholePrefix  string
	wholeUntil   time.Time
}

// NewRedisClaims reads the claims under hashedPrefix until hashedUntil and
// those under wholePrefix until wholeUntil (either "" or a zero time: none).
// It returns nil when there is nothing to read.
func NewRedisClaims(rdb redis.UniversalClient, hashedPrefix string, hashedUntil time.Time, wholePrefix string, wholeUntil time.Time) *RedisClaims {
	if (hashedPrefix == "" || hashedUntil.IsZero()) && (wholePrefix == "" || wholeUntil.IsZero()) {
		return nil
	}
	return &RedisClaims{rdb: rdb, hashedPrefix: hashedPrefix, hashedUntil: hashedUntil, wholePrefix: wholePrefix, wholeUntil: wholeUntil}
}

// Until is when the last claim it reads has expired.
func (r *RedisClaims) Until() time.Time {
	if r.hashedUntil.After(r.wholeUntil) {
		return r.hashedUntil
	}
	return r.wholeUntil
}

func (r *RedisClaims) active(now time.Time) bool { return now.Before(r.Until()) }

// ClaimKey is one key to claim, with the record that claims it.
type ClaimKey struct {
	Key       string
	Partition int32
	Offset    int64
	// hash is Key's stored form, set by Claims.Claim for Keep.
	hash   claimstore.Key
	hashed bool
}

func owner(p int32, o int64) string {
	var buf [32]byte // one allocation: the string's
	b := strconv.AppendInt(buf[:0], int64(p), 10)
	b = append(b, ':')
	return string(strconv.AppendInt(b, o, 10))
}

// owners returns, for the keys at indexes ask (hashes: their stored form),
// the owner Redis holds ("partition:offset"), "" when none; the result is
// indexed like keys. One pipelined round trip; the whole key's claim wins
// over the hashed one (it is older).
func (r *RedisClaims) owners(ctx context.Context, keys []ClaimKey, hashes []claimstore.Key, ask []int) ([]string, error) {
	out := make([]string, len(keys))
	if len(ask) == 0 {
		return out, nil
	}
	now := time.Now()
	hashed := r.hashedPrefix != "" && now.Before(r.hashedUntil)
	whole := r.wholePrefix != "" && now.Before(r.wholeUntil)
	pipe := r.rdb.Pipeline()
	hs := make([]*redis.StringCmd, len(ask))
	ws := make([]*redis.StringCmd, len(ask))
	for n, i := range ask {
		if whole {
			ws[n] = pipe.Get(ctx, r.wholePrefix+keys[i].Key)
		}
		if hashed {
			hs[n] = pipe.Get(ctx, r.hashedPrefix+string(hashes[i][:]))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("read the claims of an earlier version: %w", err)
	}
	for n, i := range ask {
		for _, cmd := range []*redis.StringCmd{ws[n], hs[n]} {
			if cmd == nil {
				continue
			}
			v, err := cmd.Result()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read the claims of an earlier version: %w", err)
			}
			out[i] = v
			break
		}
	}
	return out, nil
}

// LegacyClaimsUntil returns until when this version must read the claims an
// earlier version stored in Redis under legacyPrefix (RedisClaims), or the
// zero time when there are none.
//
// The first process of this version to start records it in Redis under
// marker, once: the time it started when a key under legacyPrefix exists
// (the earlier version's claims live for one window from then at most), or
// 0 when none does (a new installation: nothing to read). Every later start
// reads the record. The search for an old key (SCAN, stopped at the first
// found) is bounded by 20 s; a search that does not finish counts as found.
// Processes of the earlier version must be stopped first: claims they make
// after the record are not read (docs/design/projector.md, Upgrading).
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

// anyKey says whether a key starts with prefix, on any master of a Redis
// Cluster. It scans until it finds one or the keyspaces end; an error (ctx
// ended) says nothing.
func anyKey(ctx context.Context, rdb redis.UniversalClient, prefix string) (bool, error) {
	errFound := errors.New("found")
	err := redisstore.ForEachMaster(ctx, rdb, func(ctx context.Context, m *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := m.Scan(ctx, cursor, prefix+"*", 10_000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				return errFound
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	})
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}
