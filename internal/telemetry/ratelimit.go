package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the /public/v1 rate limiter (docs/operations/operations.md, Rate limits).
var (
	RateLimitSkipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_rate_limit_skipped_total", Help: "/public/v1 requests let through without a rate-limit check, by reason: redis_error (Redis failed or did not answer in time), breaker_open (Redis failed repeatedly; not asked).",
	}, []string{"reason"})
	RateLimitBreakerOpen = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "endcap_rate_limit_breaker_open", Help: "1 while the rate limiter's circuit breaker is open (Redis failing: /public/v1 is not rate-limited), else 0.",
	})
)

// AdmissionShed counts the /v2 requests answered 503 at once because their
// kind's in-flight bound was reached (docs/operations/operations.md, Admission).
var AdmissionShed = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "endcap_admission_shed_total", Help: "/v2 requests answered 503 unread because the in-flight bound of their kind (events, auctions) was reached.",
}, []string{"kind"})
