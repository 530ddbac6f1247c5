package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the webhook deliveries (docs/reference/webhooks.md).
var (
	WebhookAttempts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_webhook_attempts_total",
		Help: "Delivery attempts by outcome: delivered (2xx), retry (failed, another attempt is scheduled), failed (failed, no attempt left), gone (410: the webhook is disabled), refused (the address is not allowed: no request was sent).",
	}, []string{"outcome"})
	WebhookDeliveries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_webhook_deliveries_total",
		Help: "Deliveries by outcome: created (an event for a subscribed webhook), delivered, failed (given up, or the webhook was disabled or deleted).",
	}, []string{"outcome"})
	WebhookAttemptSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "endcap_webhook_attempt_seconds",
		Help:    "Duration of one delivery attempt: connection, request and response (up to the timeout).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	WebhookEventToAttemptSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "endcap_webhook_first_attempt_delay_seconds",
		Help:    "Time from an event to the end of its delivery's first attempt.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300},
	})
	WebhookOldestPending = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "endcap_webhook_oldest_pending_seconds",
		Help: "Age of the oldest delivery not yet delivered nor given up (retries of a failing endpoint keep one pending for up to a day).",
	})
	WebhookOverdue = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "endcap_webhook_overdue_seconds",
		Help: "Longest time a due attempt has waited past its time in this process (the dispatcher's lag; an endpoint at its in-flight limit holds its own deliveries only).",
	})
	WebhookEvents = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_webhook_events_total",
		Help: "Events the router read, by type.",
	}, []string{"type"})
)
