// Package idempotency makes a retried create request safe: the first
// result of a request with an Idempotency-Key is kept (in Redis, 24 h) and
// replayed to the retries, and the ids of the resources the request creates
// are derived from the key, so that a retry after an answer that was lost
// or after a 5xx writes the same ids again instead of new resources
// (docs/reference/management-api.md).
package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/storage/statelog"
)

// Limits of keys and of what is kept.
const (
	// MaxKeyLen is the longest key (printable ASCII characters).
	MaxKeyLen = 255
	// Retention is how long a key is remembered after its first request.
	Retention = 24 * time.Hour
	// MaxResultBytes is the largest response body that is kept; a larger
	// one is not replayed (the key is released as after a 5xx).
	MaxResultBytes = 256 << 10
)

// CheckKey returns why k is not a valid key ("" when it is): 1 to
// MaxKeyLen printable ASCII characters (space to tilde).
func CheckKey(k string) string {
	switch {
	case k == "":
		return "must not be empty"
	case len(k) > MaxKeyLen:
		return "must be at most " + strconv.Itoa(MaxKeyLen) + " characters, not " + strconv.Itoa(len(k))
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "must hold printable ASCII characters only (a byte " + strconv.Itoa(int(k[i])) + " at offset " + strconv.Itoa(i) + ")"
		}
	}
	return ""
}

// Fingerprint identifies a request: its method, path, query and body. A
// JSON body counts by its value, not its spelling (white space, the order
// of object members and the escaping of strings do not change it); any
// other body counts byte for byte.
func Fingerprint(method, path, rawQuery string, body []byte) string {
	h := sha256.New()
	for _, s := range []string{method, path, rawQuery} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	h.Write(canonicalJSON(body))
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON re-encodes a JSON body with sorted members (numbers keep
// their text), or returns the body itself when it is not one JSON value.
func canonicalJSON(body []byte) []byte {
	var v any
	if err := decodeJSON(body, &v); err != nil {
		return append([]byte("raw:"), body...)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return append([]byte("raw:"), body...)
	}
	return append([]byte("json:"), out...)
}

// Result is a response as it is kept and replayed.
type Result struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"-"` // kept as is, in a field of its own
	// Refill, when the answer showed a secret: the body is kept without it
	// and a replay puts it back (Unseal).
	Refill *Refill `json:"refill,omitempty"`
}

// Refill says how a replay gets back the secret a kept answer showed: the
// secret is never kept (in Redis), only where it stood in the body and
// which secret it was, and the replay reads it again from where it lives
// (for a webhook's signing secret: the entities log's view).
type Refill struct {
	// Kind names who gives the secret back (e.g. "webhook-secret"); Args
	// are its arguments (e.g. the webhook's id).
	Kind string   `json:"kind"`
	Args []string `json:"args,omitempty"`
	// Sum identifies the secret without revealing it (SecretSum).
	Sum string `json:"sum"`
	// At are the offsets in the kept body where the secret stood.
	At []int `json:"at"`
}

// SecretSum identifies a secret: the first 16 bytes of its SHA-256, in
// hex. It tells which of a few secrets a kept answer showed; it is no way
// back to a secret of 32 random bytes.
func SecretSum(secret string) string {
	sum := sha256.Sum256([]byte("endcap idempotency refill\x00" + secret))
	return hex.EncodeToString(sum[:16])
}

// Seal takes every occurrence of secret out of body: what is kept, and
// the offsets where it stood. ok is false when body does not hold it.
func Seal(body []byte, secret string) (kept []byte, at []int, ok bool) {
	if secret == "" {
		return nil, nil, false
	}
	sec := []byte(secret)
	rest := body
	for {
		i := bytes.Index(rest, sec)
		if i < 0 {
			break
		}
		kept = append(kept, rest[:i]...)
		at = append(at, len(kept))
		rest = rest[i+len(sec):]
	}
	if len(at) == 0 {
		return nil, nil, false
	}
	return append(kept, rest...), at, true
}

// Unseal puts secret back at the offsets at of a kept body.
func Unseal(kept []byte, at []int, secret string) ([]byte, error) {
	out := make([]byte, 0, len(kept)+len(at)*len(secret))
	prev := 0
	for _, i := range at {
		if i < prev || i > len(kept) {
			return nil, fmt.Errorf("idempotency: refill offset %d out of order or past the body (%d bytes)", i, len(kept))
		}
		out = append(out, kept[prev:i]...)
		out = append(out, secret...)
		prev = i
	}
	return append(out, kept[prev:]...), nil
}

// Outcome says what Begin found.
type Outcome int

// Outcomes of Begin.
const (
	// Claimed: the request runs; Complete or Release the claim after.
	Claimed Outcome = iota
	// Replay: the request already ran; its Result is to be answered again.
	Replay
	// InProgress: a request with the key holds its claim: it is running,
	// or its process died and the claim has not run out yet
	// (Begun.RetryAfter: when it does).
	InProgress
	// Mismatch: the key was used with another request.
	Mismatch
	// Full: the marketplace's kept results use all of MaxBytes; the
	// request did not run (Begun.RetryAfter: when the oldest is dropped).
	Full
)

// DefaultMaxBytes is how many bytes of kept results (and the records of
// their keys) one marketplace may hold in Redis at once by default.
const DefaultMaxBytes = 64 << 20

// keyOverhead is what a key's record costs besides its result (fingerprint,
// seed, state, token, the key itself).
const keyOverhead = 256

// Begun is Begin's answer.
type Begun struct {
	Outcome    Outcome
	Claim      *Claim        // when Claimed
	Result     *Result       // when Replay
	RetryAfter time.Duration // when Full or InProgress
}

// Claim is the right to run a request with a key until Lease ends.
type Claim struct {
	key   string
	scope string
	token string
	// Seed is when the key was first seen: the time of the ids derived
	// from it, the same for every attempt.
	Seed time.Time
}

// Store keeps keys in Redis: one hash per marketplace and key
// (ec:idem:<scope>:<sha-256 of the key>) with the request's fingerprint, the
// first time the key was seen, its state (running until a time, released,
// or done with the result), kept for Retention after the first request.
//
// Each marketplace's kept results are counted in a sorted set
// (ec:idem-usage:{<scope>}: one member per kept result, "<key hash>|<bytes>",
// scored by when it expires) and their total in ec:idem-usage:{<scope>}:total;
// a new claim is refused (Full) while that total is MaxBytes or more.
type Store struct {
	rdb   redis.UniversalClient
	lease time.Duration
	now   func() time.Time
	// MaxBytes bounds the bytes of results one scope keeps at once (0:
	// DefaultMaxBytes).
	MaxBytes int64
}

// NewStore returns a store whose claims run for at most lease (past it, a
// claim whose process died is taken over by the next request).
func NewStore(rdb redis.UniversalClient, lease time.Duration) *Store {
	return &Store{rdb: rdb, lease: lease, now: time.Now}
}

// ErrUnavailable means Redis did not answer in time.
var ErrUnavailable = errkind.New(errkind.Unavailable, "the Idempotency-Key cannot be checked right now, so the request was not run; retry later")

// beginScript claims a key (new, released, or whose claim ran out) or
// reports what holds it. KEYS[1] the hash; ARGV fingerprint, now (ms),
// claim end (ms), retention (ms), token. It returns {outcome, seed, result,
// body}; for a running claim, {"running", seed, its end (ms), ""}.
var beginScript = redis.NewScript(`
local h = redis.call("HMGET", KEYS[1], "fp", "state", "until", "seed", "result", "body")
if not h[1] then
  redis.call("HSET", KEYS[1], "fp", ARGV[1], "seed", ARGV[2], "state", "running", "until", ARGV[3], "token", ARGV[5])
  redis.call("PEXPIRE", KEYS[1], ARGV[4])
  return {"claimed", ARGV[2], "", ""}
end
if h[1] ~= ARGV[1] then return {"mismatch", h[4], "", ""} end
if h[2] == "done" then return {"done", h[4], h[5], h[6] or ""} end
if h[2] == "running" and tonumber(h[3]) > tonumber(ARGV[2]) then return {"running", h[4], h[3], ""} end
redis.call("HSET", KEYS[1], "state", "running", "until", ARGV[3], "token", ARGV[5])
return {"claimed", h[4], "", ""}`)

// endScript ends a claim still held by ARGV[1]: state ARGV[2] (done or
// released), with result ARGV[3] (status and headers) and body ARGV[4].
var endScript = redis.NewScript(`
if redis.call("HGET", KEYS[1], "token") ~= ARGV[1] then return 0 end
redis.call("HSET", KEYS[1], "state", ARGV[2], "result", ARGV[3], "body", ARGV[4], "token", "")
return 1`)

// usageScript drops the expired results of a scope's count and says
// whether it is below ARGV[2] bytes. KEYS: the set, the total; ARGV: now
// (ms), the bound. It returns {1, 0} (below) or {0, expiry of the oldest}.
var usageScript = redis.NewScript(`
local old = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, 500)
if #old > 0 then
  local freed = 0
  for _, m in ipairs(old) do freed = freed + (tonumber(string.match(m, "|(%d+)$")) or 0) end
  redis.call("ZREM", KEYS[1], unpack(old))
  redis.call("DECRBY", KEYS[2], freed)
end
local total = tonumber(redis.call("GET", KEYS[2]) or "0")
if total < tonumber(ARGV[2]) then return {1, 0} end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
return {0, first[2] or ARGV[1]}`)

// countScript counts a kept result. KEYS: the set, the total; ARGV: the
// member, its expiry (ms), its bytes, how long the keys live (ms).
var countScript = redis.NewScript(`
if redis.call("ZADD", KEYS[1], "NX", ARGV[2], ARGV[1]) == 1 then
  redis.call("INCRBY", KEYS[2], ARGV[3])
end
redis.call("PEXPIRE", KEYS[1], ARGV[4])
redis.call("PEXPIRE", KEYS[2], ARGV[4])
return 1`)

func usageKeys(scope string) []string {
	k := "ec:idem-usage:{" + scope + "}"
	return []string{k, k + ":total"}
}

func (s *Store) maxBytes() int64 {
	if s.MaxBytes > 0 {
		return s.MaxBytes
	}
	return DefaultMaxBytes
}

func redisKey(scope, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "ec:idem:" + scope + ":" + hex.EncodeToString(sum[:])
}

// Begin claims key for a request of fingerprint fp in scope (a
// marketplace), or says why not.
func (s *Store) Begin(ctx context.Context, scope, key, fp string) (Begun, error) {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return Begun{}, err
	}
	token := hex.EncodeToString(tok[:])
	now := s.now()
	rk := redisKey(scope, key)
	res, err := bounded.Call(ctx, func(ctx context.Context) ([]any, error) {
		return beginScript.Run(ctx, s.rdb, []string{rk}, fp, now.UnixMilli(), now.Add(s.lease).UnixMilli(), Retention.Milliseconds(), token).Slice()
	}, func(res []any) {
		// Claimed after the caller gave up: let the next request have it.
		if len(res) == 4 && res[0] == "claimed" {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = endScript.Run(ctx, s.rdb, []string{rk}, token, "released", "", "").Err()
		}
	})
	if err != nil {
		return Begun{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if len(res) != 4 {
		return Begun{}, fmt.Errorf("%w: unexpected answer %v", ErrUnavailable, res)
	}
	outcome, _ := res[0].(string)
	seedText, _ := res[1].(string)
	seedMs, err := strconv.ParseInt(seedText, 10, 64)
	if err != nil {
		return Begun{}, fmt.Errorf("%w: bad seed %q", ErrUnavailable, seedText)
	}
	switch outcome {
	case "claimed":
		c := &Claim{key: rk, scope: scope, token: token, Seed: time.UnixMilli(seedMs)}
		if wait, full, err := s.full(ctx, scope, now); err != nil || full {
			// The claim is given up: the request does not run.
			ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = s.Release(ectx, c)
			if err != nil {
				return Begun{}, err
			}
			return Begun{Outcome: Full, RetryAfter: wait}, nil
		}
		return Begun{Outcome: Claimed, Claim: c}, nil
	case "running":
		// The claim's holder may be running still, or have died with its
		// process: either way the key is free, or its result kept, once
		// the claim ends.
		b := Begun{Outcome: InProgress, RetryAfter: time.Second}
		if end, _ := res[2].(string); end != "" {
			if ms, err := strconv.ParseInt(end, 10, 64); err == nil {
				// At most the lease: now was read before the script ran, and
				// a claim made by a request that read its clock after this
				// one's ends up to that gap more than a lease from now.
				b.RetryAfter = min(max(time.UnixMilli(ms).Sub(now), time.Second), max(s.lease, time.Second))
			}
		}
		return b, nil
	case "mismatch":
		return Begun{Outcome: Mismatch}, nil
	case "done":
		raw, _ := res[2].(string)
		body, _ := res[3].(string)
		var r Result
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return Begun{}, fmt.Errorf("%w: undecodable result: %v", ErrUnavailable, err)
		}
		r.Body = []byte(body)
		return Begun{Outcome: Replay, Result: &r}, nil
	}
	return Begun{}, fmt.Errorf("%w: unexpected answer %q", ErrUnavailable, outcome)
}

// full says whether scope keeps MaxBytes of results or more, and then how
// long until the oldest of them is dropped.
func (s *Store) full(ctx context.Context, scope string, now time.Time) (time.Duration, bool, error) {
	res, err := bounded.Call(ctx, func(ctx context.Context) ([]any, error) {
		return usageScript.Run(ctx, s.rdb, usageKeys(scope), now.UnixMilli(), s.maxBytes()).Slice()
	}, nil)
	if err != nil || len(res) != 2 {
		return 0, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return 0, false, nil
	}
	var exp int64
	switch v := res[1].(type) {
	case string:
		exp, _ = strconv.ParseInt(v, 10, 64)
	case int64:
		exp = v
	}
	return max(time.UnixMilli(exp).Sub(now), time.Second), true, nil
}

// Complete keeps r as the key's result, and counts it against its scope's
// MaxBytes until it expires.
func (s *Store) Complete(ctx context.Context, c *Claim, r Result) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.end(ctx, c, "done", string(raw), r.Body); err != nil {
		return err
	}
	size := int64(len(raw) + len(r.Body) + keyOverhead)
	exp := c.Seed.Add(Retention)
	_, err = bounded.Call(ctx, func(ctx context.Context) (int64, error) {
		return countScript.Run(ctx, s.rdb, usageKeys(c.scope), c.key[strings.LastIndexByte(c.key, ':')+1:]+"|"+strconv.FormatInt(size, 10),
			exp.UnixMilli(), size, (Retention + time.Hour).Milliseconds()).Int64()
	}, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Release gives the key up without a result: the next request with it runs
// again (deriving the same ids).
func (s *Store) Release(ctx context.Context, c *Claim) error {
	return s.end(ctx, c, "released", "", nil)
}

func (s *Store) end(ctx context.Context, c *Claim, state, result string, body []byte) error {
	_, err := bounded.Call(ctx, func(ctx context.Context) (int64, error) {
		return endScript.Run(ctx, s.rdb, []string{c.key}, c.token, state, result, body).Int64()
	}, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

type requestKey struct{}

type request struct {
	scope, key, fp string
	seed           time.Time
}

// WithRequest marks ctx as the context of a request with an idempotency
// key: NewID then derives ids from it.
func WithRequest(ctx context.Context, scope, key, fp string, seed time.Time) context.Context {
	return context.WithValue(ctx, requestKey{}, request{scope: scope, key: key, fp: fp, seed: seed})
}

// Keyed reports whether ctx is that of a request with an idempotency key.
func Keyed(ctx context.Context) bool {
	_, ok := ctx.Value(requestKey{}).(request)
	return ok
}

// NewID returns the id of the i-th resource (from 0) a request creates.
// Without an idempotency key it is a new UUIDv7. With one it is derived
// from the key: a UUIDv7 whose time is when the key was first seen (so
// that id order stays creation order) and whose other bits come from the
// scope, the key, the request's fingerprint and i, the same for every
// attempt of the request. keyed says which.
func NewID(ctx context.Context, i int) (id string, keyed bool, err error) {
	r, ok := ctx.Value(requestKey{}).(request)
	if !ok {
		u, err := uuid.NewV7()
		if err != nil {
			return "", false, err
		}
		return u.String(), false, nil
	}
	return DeriveID(r.scope, r.key, r.fp, r.seed, i), true, nil
}

// DeriveID is the id NewID derives.
func DeriveID(scope, key, fp string, seed time.Time, i int) string {
	h := sha256.New()
	for _, s := range []string{scope, key, fp, strconv.Itoa(i)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	sum := h.Sum(nil)
	var u uuid.UUID
	ms := uint64(seed.UnixMilli())
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	copy(u[6:], sum[:10])
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// decodeJSON decodes exactly one JSON value, numbers as json.Number.
func decodeJSON(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// Existing answers a create with an idempotency key whose write failed with
// err, a conflict (its derived id exists already, or an earlier attempt
// holds the entity's lock): the entity that an earlier attempt of the same
// request created, when get finds it; otherwise an error wrapping
// statelog.ErrInFlight, as that attempt's write may still land.
func Existing[T any](err error, get func() (T, int64, bool)) (T, int64, error) {
	if v, ver, ok := get(); ok {
		return v, ver, nil
	}
	var zero T
	return zero, 0, fmt.Errorf("%w: an earlier attempt of this request is still being written (%v)", statelog.ErrInFlight, err)
}
