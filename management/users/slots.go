package users

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/errkind"
)

// Slots bound the long requests (downloads) a user runs at once, across
// every API process: a sorted set per user in Redis of the slots taken,
// each with the time it is forgotten (Hold after it was taken: a process
// that dies never gives its slots back).
type Slots struct {
	rdb   redis.UniversalClient
	ns    string
	Limit int
	Hold  time.Duration
	// RetryAfter is what a refused request is told to wait.
	RetryAfter time.Duration
}

// NewSlots returns limit slots per user (hold: the longest a request may
// keep one); ns names the installation in the Redis keys.
func NewSlots(rdb redis.UniversalClient, ns string, limit int, hold time.Duration) *Slots {
	return &Slots{rdb: rdb, ns: ns, Limit: limit, Hold: hold, RetryAfter: 10 * time.Second}
}

// BusyError says that a user runs as many downloads as it may.
type BusyError struct {
	Limit      int
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("you have %d downloads running already; wait for one to finish", e.Limit)
}

// Is makes a BusyError a TooMany of the error vocabulary.
func (e *BusyError) Is(target error) bool { return target == errkind.TooMany }

// Wait is how long to wait before trying again.
func (e *BusyError) Wait() time.Duration { return e.RetryAfter }

// Wait is how long to wait before trying again.
func (e *ThrottledError) Wait() time.Duration { return e.RetryAfter }

// takeScript forgets the slots past their time and takes slot ARGV[4]
// unless ARGV[3] are taken; it returns 1 when taken.
var takeSlotScript = redis.NewScript(`
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
if redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[4])
redis.call("PEXPIREAT", KEYS[1], ARGV[2])
return 1`)

func (s *Slots) key(user string) string { return "ec:console:downloads:" + s.ns + user }

// Take takes one of user's slots, or returns a *BusyError; release gives
// it back (call it once the request is over).
func (s *Slots) Take(ctx context.Context, user string) (release func(), err error) {
	id := RandomToken()
	now := time.Now()
	ok, err := bounded.Call(ctx, func(ctx context.Context) (int, error) {
		return takeSlotScript.Run(ctx, s.rdb, []string{s.key(user)}, now.UnixMilli(), now.Add(s.Hold).UnixMilli(), s.Limit, id).Int()
	}, nil)
	if err != nil {
		return nil, errors.Join(ErrUnavailable, err)
	}
	if ok != 1 {
		return nil, &BusyError{Limit: s.Limit, RetryAfter: s.RetryAfter}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.rdb.ZRem(ctx, s.key(user), id).Err()
	}, nil
}
