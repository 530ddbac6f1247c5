package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"

	"github.com/endcap/endcap/internal/telemetry"
)

// Defaults of the rate limiter's behaviour when Redis is slow or down
// (docs/operations/operations.md, Rate limits).
const (
	// DefaultLimitTimeout bounds the Redis call of one request: past it the
	// request is let through. A healthy Redis answers in well under 1 ms.
	DefaultLimitTimeout = 150 * time.Millisecond
	// DefaultBreakerFailures is how many failed calls in a row open the
	// breaker.
	DefaultBreakerFailures = 3
	// DefaultBreakerCooldown is how long an open breaker lets every request
	// through without asking Redis; then one request probes it.
	DefaultBreakerCooldown = 5 * time.Second
)

// RateLimiter applies GCRA limits per API key (redis_rate).
//
// It fails open: when Redis does not answer within Timeout the request is let
// through. After Failures failed calls in a row a circuit breaker opens: for
// Cooldown every request is let through at once, without waiting on Redis,
// so that a hung Redis costs the first few requests Timeout each and no
// request after them anything. Then one request probes Redis (the others are
// still let through); its success closes the breaker, its failure opens it
// for another Cooldown.
type RateLimiter struct {
	limiter *redis_rate.Limiter
	classes map[string]redis_rate.Limit
	log     *slog.Logger

	Timeout  time.Duration // bound of one Redis call (DefaultLimitTimeout)
	Failures int           // failures in a row that open the breaker (DefaultBreakerFailures)
	Cooldown time.Duration // how long the breaker stays open (DefaultBreakerCooldown)
	now      func() time.Time

	mu        sync.Mutex
	failures  int       // failed calls in a row
	openUntil time.Time // zero: closed
	probing   bool      // a request is probing Redis for the open breaker
}

// NewRateLimiter returns a limiter with a limit per class of routes.
func NewRateLimiter(l *redis_rate.Limiter, classes map[string]redis_rate.Limit, log *slog.Logger) *RateLimiter {
	return &RateLimiter{limiter: l, classes: classes, log: log,
		Timeout: DefaultLimitTimeout, Failures: DefaultBreakerFailures, Cooldown: DefaultBreakerCooldown, now: time.Now}
}

// admit says whether this request asks Redis (the breaker is closed, or the
// request is the probe of an open one past its cooldown).
func (r *RateLimiter) admit() (ask, probe bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.openUntil.IsZero() {
		return true, false
	}
	if r.probing || r.now().Before(r.openUntil) {
		return false, false
	}
	r.probing = true
	return true, true
}

// done records the outcome of a call to Redis.
func (r *RateLimiter) done(probe bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if probe {
		r.probing = false
	}
	if err == nil {
		if !r.openUntil.IsZero() {
			r.log.Info("rate limit: Redis answers again; limits apply again")
			telemetry.RateLimitBreakerOpen.Set(0)
		}
		r.failures, r.openUntil = 0, time.Time{}
		return
	}
	r.failures++
	switch {
	case probe:
		r.openUntil = r.now().Add(r.Cooldown)
	case r.openUntil.IsZero() && r.failures >= r.Failures:
		r.openUntil = r.now().Add(r.Cooldown)
		telemetry.RateLimitBreakerOpen.Set(1)
		r.log.Warn("rate limit: Redis failed; /public/v1 requests are let through unlimited until it answers again",
			"failures", r.failures, "retry_in", r.Cooldown, "err", err)
	case r.openUntil.IsZero():
		r.log.Warn("rate limit unavailable; request let through", "err", err)
	}
}

// allow asks Redis within Timeout and records the outcome for the breaker.
// A probe that ends without an outcome (the client went away, a panic)
// lets the next request probe.
func (r *RateLimiter) allow(ctx context.Context, key string, lim redis_rate.Limit, probe bool) (res *redis_rate.Result, err error) {
	recorded := false
	defer func() {
		if probe && !recorded {
			r.mu.Lock()
			r.probing = false
			r.mu.Unlock()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, r.Timeout)
	res, err = r.limiter.Allow(cctx, key, lim)
	cancel()
	if err != nil && ctx.Err() != nil {
		return nil, err // the client went away: says nothing about Redis
	}
	r.done(probe, err)
	recorded = true
	return res, err
}

// Limit returns the middleware of a class ("catalog", "default"). Every
// limited response carries X-RateLimit-Limit (requests per period),
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds until the full limit is
// available again); a 429 also carries Retry-After. When Redis cannot be
// asked (slow, down, or the breaker is open) the request is let through
// without these headers (fail open).
func (r *RateLimiter) Limit(class string) gin.HandlerFunc { return r.LimitWith(class, abortV2) }

// LimitWith is Limit answering its 429 with abort (a route's error shape).
func (r *RateLimiter) LimitWith(class string, abort func(c *gin.Context, status int, code, msg string)) gin.HandlerFunc {
	return func(c *gin.Context) {
		lim, ok := r.classes[class]
		if !ok || r.limiter == nil {
			c.Next()
			return
		}
		ask, probe := r.admit()
		if !ask {
			telemetry.RateLimitSkipped.WithLabelValues("breaker_open").Inc()
			c.Next()
			return
		}
		res, err := r.allow(c.Request.Context(), "ec:rl:"+class+":"+principal(c).Key.ID, lim, probe)
		if err != nil {
			telemetry.RateLimitSkipped.WithLabelValues("redis_error").Inc()
			c.Next()
			return
		}
		h := c.Writer.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(lim.Rate))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(res.Remaining, 0)))
		h.Set("X-RateLimit-Reset", strconv.Itoa(ceilSeconds(res.ResetAfter)))
		if res.Allowed == 0 {
			h.Set("Retry-After", strconv.Itoa(max(ceilSeconds(res.RetryAfter), 1)))
			abort(c, http.StatusTooManyRequests, "too_many_requests", "rate limit of "+strconv.Itoa(lim.Rate)+" requests per "+lim.Period.String()+" exceeded for this API key; retry after the Retry-After delay")
			return
		}
		c.Next()
	}
}
