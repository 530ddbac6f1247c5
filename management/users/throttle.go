package users

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
)

// Throttle limits sign-in attempts (GCRA in Redis, shared by every API
// process): per e-mail address, against guessing one account's password,
// and per client address, against trying many accounts.
type Throttle struct {
	lim                 *redis_rate.Limiter
	ns                  string
	PerEmail, PerClient redis_rate.Limit
}

// Default limits: 10 attempts per address and 100 per client in 15 minutes.
var (
	DefaultPerEmail  = redis_rate.Limit{Rate: 10, Burst: 10, Period: 15 * time.Minute}
	DefaultPerClient = redis_rate.Limit{Rate: 100, Burst: 100, Period: 15 * time.Minute}
)

// NewThrottle returns a throttle on rdb with the default limits; ns names
// the installation in its Redis keys (the processes that share a Redis
// and a namespace share the counts).
func NewThrottle(rdb redis.UniversalClient, ns string) *Throttle {
	return &Throttle{lim: redis_rate.NewLimiter(rdb), ns: ns, PerEmail: DefaultPerEmail, PerClient: DefaultPerClient}
}

// ThrottledError says how long to wait before the next attempt.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return "too many sign-in attempts; try again in " + e.RetryAfter.Round(time.Second).String()
}

// Is makes a ThrottledError a TooMany of the error vocabulary.
func (e *ThrottledError) Is(target error) bool { return target == errkind.TooMany }

// Allow counts one attempt for email from client, and returns a
// *ThrottledError when either is over its limit.
func (t *Throttle) Allow(ctx context.Context, email, client string) error {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(email))))
	for _, k := range []struct {
		key string
		lim redis_rate.Limit
	}{{"ec:console:login:" + t.ns + "email:" + hex.EncodeToString(sum[:12]), t.PerEmail}, {"ec:console:login:" + t.ns + "client:" + client, t.PerClient}} {
		res, err := t.lim.Allow(ctx, k.key, k.lim)
		if err != nil {
			return errors.Join(ErrUnavailable, err)
		}
		if res.Allowed == 0 {
			return &ThrottledError{RetryAfter: max(res.RetryAfter, time.Second)}
		}
	}
	return nil
}
