package users

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/errkind"
)

// Throttle slows password guessing (sign-in, and the current password of a
// password change) with delays that grow with each failure, never with a
// hard lock, in Redis shared by every API process. Only failed attempts
// count; a client is an IPv4 address or an IPv6 /64.
//
//   - Per account and client (the pair): after Pair.Free failures, each
//     failure makes the pair wait Pair.Base, doubling per failure up to
//     Pair.Cap; a success resets the pair. Someone who mistypes their
//     password is not held back; one client guesses a few passwords an hour.
//     The defaults (5 free, 1 s doubling to 15 min) are AWS Cognito's, which
//     OWASP's testing guide (Testing for Weak Lock Out Mechanism) gives as a
//     lockout that stops brute force without a lasting denial of service.
//   - Per account, from unfamiliar clients: past Account.Free failures from
//     clients that never signed in to the account, those clients wait, with
//     the same doubling. A client that signed in to the account in the last
//     Familiar is not subject to it: an attacker who sprays the account from
//     many addresses is slowed, and its owner, from where they usually sign
//     in, is not locked out (the familiar and unfamiliar locations of
//     Azure AD's smart lockout).
//   - Per client, on accounts unfamiliar to it: past Client.Free failures
//     (on any accounts), the client waits; against one address trying
//     passwords on many accounts.
//
// An attempt let through when the next failure would bring a delay holds
// that delay at once (released by a success), so that concurrent attempts
// do not slip through together.
type Throttle struct {
	rdb                   redis.UniversalClient
	ns                    string
	Pair, Account, Client Delay
	// Familiar is how long a successful sign-in makes its client familiar
	// to the account.
	Familiar time.Duration
	now      func() time.Time
}

// Delay is the rule of one counter of failures.
type Delay struct {
	Free      int64         // failures without a delay
	Base, Cap time.Duration // the first delay; the longest
	// Forget: a counter with no failure for this long starts again.
	Forget time.Duration
}

// Default rules.
var (
	DefaultPair     = Delay{Free: 5, Base: time.Second, Cap: 15 * time.Minute, Forget: 24 * time.Hour}
	DefaultAccount  = Delay{Free: 100, Base: time.Second, Cap: 15 * time.Minute, Forget: 24 * time.Hour}
	DefaultClient   = Delay{Free: 100, Base: time.Second, Cap: 15 * time.Minute, Forget: 24 * time.Hour}
	DefaultFamiliar = 30 * 24 * time.Hour
)

// NewThrottle returns a throttle on rdb with the default rules; ns names
// the installation in its Redis keys (the processes that share a Redis
// and a namespace share the counts).
func NewThrottle(rdb redis.UniversalClient, ns string) *Throttle {
	return &Throttle{rdb: rdb, ns: ns, Pair: DefaultPair, Account: DefaultAccount, Client: DefaultClient, Familiar: DefaultFamiliar, now: time.Now}
}

// ThrottledError says how long to wait before the next attempt.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return "too many sign-in attempts; try again in " + e.RetryAfter.Round(time.Second).String()
}

// Is makes a ThrottledError a TooMany of the error vocabulary.
func (e *ThrottledError) Is(target error) bool { return target == errkind.TooMany }

// Client is the throttle's name of a client address: the IPv4 address, or
// the /64 of an IPv6 address (one host usually holds a whole /64).
func Client(addr string) string {
	ip := net.ParseIP(strings.TrimSpace(addr))
	if ip == nil {
		return addr
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// keys of an attempt: the account's (one hash tag: a script uses them
// together) and the client's.
type attemptKeys struct{ pair, account, familiar, client string }

func (t *Throttle) keys(email, client string) attemptKeys {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(email))))
	acct := "ec:console:login:{" + t.ns + "a:" + hex.EncodeToString(sum[:12]) + "}"
	cl := Client(client)
	return attemptKeys{pair: acct + ":pair:" + cl, account: acct + ":unfamiliar", familiar: acct + ":familiar:" + cl,
		client: "ec:console:login:{" + t.ns + "c:" + cl + "}"}
}

// checkScript returns the longest wait of the counters KEYS (each a hash:
// n failures, u the time in ms before which no attempt is let through);
// when none, it holds, in each counter whose next failure brings a delay,
// that delay. ARGV: now (ms), then Free, Base, Cap and Forget (ms) of each
// key.
var checkScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local wait = 0
for i, k in ipairs(KEYS) do
  local u = tonumber(redis.call("HGET", k, "u") or "0")
  if u - now > wait then wait = u - now end
end
if wait > 0 then return wait end
for i, k in ipairs(KEYS) do
  local n = tonumber(redis.call("HGET", k, "n") or "0")
  local free, base, cap, forget = tonumber(ARGV[4*i-2]), tonumber(ARGV[4*i-1]), tonumber(ARGV[4*i]), tonumber(ARGV[4*i+1])
  if n + 1 >= free then
    redis.call("HSET", k, "u", now + math.min(base * 2 ^ (n + 1 - free), cap))
    if redis.call("PTTL", k) < 0 then redis.call("PEXPIRE", k, forget) end
  end
end
return 0`)

// failScript counts one failure in each counter KEYS and sets its wait.
// ARGV: now (ms), then Free, Base, Cap and Forget (ms) of each key.
var failScript = redis.NewScript(`
local now = tonumber(ARGV[1])
for i, k in ipairs(KEYS) do
  local free, base, cap, forget = tonumber(ARGV[4*i-2]), tonumber(ARGV[4*i-1]), tonumber(ARGV[4*i]), tonumber(ARGV[4*i+1])
  local n = redis.call("HINCRBY", k, "n", 1)
  local u = tonumber(redis.call("HGET", k, "u") or "0")
  if n >= free then
    u = math.max(u, now + math.min(base * 2 ^ (n - free), cap))
  else
    u = 0
  end
  redis.call("HSET", k, "u", u)
  redis.call("PEXPIRE", k, forget)
end
return 1`)

// Allow says whether email may be tried from client now: a
// *ThrottledError when it must wait, an Unavailable error when Redis does
// not answer. Report the attempt's outcome with Record.
func (t *Throttle) Allow(ctx context.Context, email, client string) error {
	k := t.keys(email, client)
	familiar, err := t.familiar(ctx, k)
	if err != nil {
		return err
	}
	now := t.now().UnixMilli()
	for _, c := range t.counters(k, familiar) {
		wait, err := bounded.Call(ctx, func(ctx context.Context) (int64, error) {
			return checkScript.Run(ctx, t.rdb, c.keys, c.args(now)...).Int64()
		}, nil)
		if err != nil {
			return errors.Join(ErrUnavailable, err)
		}
		if wait > 0 {
			return &ThrottledError{RetryAfter: max(time.Duration(wait)*time.Millisecond, time.Second)}
		}
	}
	return nil
}

func (t *Throttle) familiar(ctx context.Context, k attemptKeys) (bool, error) {
	n, err := bounded.Call(ctx, func(ctx context.Context) (int64, error) { return t.rdb.Exists(ctx, k.familiar).Result() }, nil)
	if err != nil {
		return false, errors.Join(ErrUnavailable, err)
	}
	return n == 1, nil
}

// Record reports the outcome of an attempt that Allow let through: err
// nil (signed in: the pair starts again, the client becomes familiar to
// the account), ErrBadPassword (a failure), anything else (not a guess:
// nothing is counted).
func (t *Throttle) Record(ctx context.Context, email, client string, err error) error {
	k := t.keys(email, client)
	switch {
	case err == nil:
		_, err := bounded.Call(ctx, func(ctx context.Context) (bool, error) {
			if err := t.rdb.Del(ctx, k.pair).Err(); err != nil {
				return false, err
			}
			return true, t.rdb.Set(ctx, k.familiar, "1", t.Familiar).Err()
		}, nil)
		if err != nil {
			return errors.Join(ErrUnavailable, err)
		}
		return nil
	case !errors.Is(err, ErrBadPassword):
		return nil
	}
	familiar, err := t.familiar(ctx, k)
	if err != nil {
		return err
	}
	now := t.now().UnixMilli()
	for _, c := range t.counters(k, familiar) {
		if _, err := bounded.Call(ctx, func(ctx context.Context) (int64, error) {
			return failScript.Run(ctx, t.rdb, c.keys, c.args(now)...).Int64()
		}, nil); err != nil {
			return errors.Join(ErrUnavailable, err)
		}
	}
	return nil
}

// counters are the counters of an attempt, by hash tag: the pair (and the
// account's, from an unfamiliar client), then the client's (unfamiliar).
type counters struct {
	keys  []string
	rules []Delay
}

func (c counters) args(now int64) []any {
	args := []any{now}
	for _, d := range c.rules {
		args = append(args, d.Free, d.Base.Milliseconds(), d.Cap.Milliseconds(), d.Forget.Milliseconds())
	}
	return args
}

func (t *Throttle) counters(k attemptKeys, familiar bool) []counters {
	if familiar {
		return []counters{{[]string{k.pair}, []Delay{t.Pair}}}
	}
	return []counters{{[]string{k.pair, k.account}, []Delay{t.Pair, t.Account}}, {[]string{k.client}, []Delay{t.Client}}}
}
