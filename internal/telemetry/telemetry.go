// Package telemetry holds Endcap's Prometheus metrics and its logger setup.
// Metric names are documented in docs/operations/operations.md.
package telemetry

import (
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	HTTPRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_http_requests_total", Help: "HTTP requests by route, method and status code.",
	}, []string{"route", "method", "code"})
	HTTPDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "endcap_http_request_duration_seconds", Help: "HTTP request latency by route.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"route", "method"})
	EventsAccepted = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_events_accepted_total", Help: "Tracking events acknowledged by Kafka and answered 200, by kind.",
	}, []string{"kind"})
	EventsRejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_events_rejected_requests_total", Help: "Rejected /v2/events requests by errCode.",
	}, []string{"code"})
	ProducedRecords = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_kafka_produced_records_total", Help: "Records produced, by topic and result (ok, error).",
	}, []string{"topic", "result"})
	ConsumedRecords = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_kafka_consumed_records_total", Help: "Records consumed by a consumer group, by topic.",
	}, []string{"topic", "group"})
	ConsumerLag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "endcap_kafka_consumer_lag_records", Help: "End offset minus the group's next offset to commit, per partition: set after each batch is folded and committed, and from the broker every 5 s for every partition of the group's topics, owned or not.",
	}, []string{"topic", "group", "partition"})
	ProjectorBatchRetries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_projector_batch_retries_total", Help: "Batches a consumer group failed to fold or commit and reads again from the last commit.",
	}, []string{"group"})
	ProjectorStalledSeconds = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "endcap_projector_stalled_seconds", Help: "Seconds since a consumer group of this process last committed a batch or found nothing to fold (a few flush intervals when healthy).",
	}, []string{"group"})
	InsertBatches = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_clickhouse_insert_batches_total", Help: "ClickHouse insert batches by table and result (ok, error).",
	}, []string{"table", "result"})
	InsertRows = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_clickhouse_insert_rows_total", Help: "Rows inserted into ClickHouse by table.",
	}, []string{"table"})
	InsertDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "endcap_clickhouse_insert_duration_seconds", Help: "Duration of ClickHouse insert batches.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"table"})
	Duplicates = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_projector_duplicates_total", Help: "Records dropped because another record already claimed their idempotency key.",
	}, []string{"table"})
	UndecodableRecords = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_projector_undecodable_records_total", Help: "Records a consumer group could not decode and skipped (logged at ERROR), by group.",
	}, []string{"group"})
	SinkBatchSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "endcap_projector_sink_batch_seconds", Help: "Time one sink of the events fold took over a batch (events_raw, interactions, attribution).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"sink"})
	ProjectorYieldedSeconds = promauto.NewCounter(prometheus.CounterOpts{
		Name: "endcap_projector_yielded_seconds_total", Help: "Time the events fold waited for the API's requests in flight to end, in a process that serves the API and folds (ENDCAP_PROJECTOR_YIELD).",
	})
	ProjectorStepSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "endcap_projector_step_seconds", Help: "Time one step of a consumer group's batch took: poll (waiting for and fetching its records), decode, claim (the idempotency keys in Redis), sinks (all of them, at once), commit.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"group", "step"})
)

// NewLogger returns a structured logger writing to w; a record logged with
// a request's context names its request id (request_id).
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return WithRequestIDs(slog.New(slog.NewJSONHandler(w, opts)))
	}
	return WithRequestIDs(slog.New(slog.NewTextHandler(w, opts)))
}

// The events fold's claims (docs/design/projector.md, Claims).
var (
	ClaimsCaughtUp = promauto.NewCounter(prometheus.CounterOpts{
		Name: "endcap_projector_claims_caught_up_records_total", Help: "Records of the claims changelog read to catch a partition's claims up after it was assigned to this process.",
	})
	ClaimStoreBytes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "endcap_projector_claim_store_bytes", Help: "The local claim store: disk (its files), cache (its block cache in use), memtable.",
	}, []string{"kind"})
	ClaimStoreVolumeBytes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "endcap_projector_claim_store_volume_bytes", Help: "The file system of the claim store's directory: size, available (to the process's user).",
	}, []string{"kind"})
)

// ReadyCheck is 1 when the last run of a readiness check of /readyz
// passed, 0 when it failed or has not run yet (api.Health), by check (kafka,
// clickhouse, redis, s3, state, projectors: those the process's target
// runs).
var ReadyCheck = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "endcap_readiness_check_ok", Help: "1 when the last run of the readiness check passed, 0 when it failed or has not run yet, by check (kafka, clickhouse, redis, s3, state, projectors).",
}, []string{"check"})

// Metrics of the rollup job (docs/design/rollups.md).
var (
	RollupRuns = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_rollup_runs_total", Help: "Runs of the rollup job by result: ok, error, skipped (another process held the lock).",
	}, []string{"result"})
	RollupLastSuccess = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "endcap_rollup_last_success_timestamp_seconds", Help: "Unix time of the end of the last run of the rollup job in this process that refreshed its days (0: none since the process started).",
	})
)

// Series of fixed label values are exported from the start, at 0, so that
// a rate or an alert over them has a series before the first occurrence
// (deploy/monitoring).
func init() {
	for vec, values := range map[*prometheus.CounterVec][]string{
		AdmissionShed:     {"events", "auctions"},
		AuctionRecords:    {"ok", "dropped", "error"},
		RateLimitSkipped:  {"redis_error", "breaker_open"},
		BudgetSpendReads:  {"ok", "error", "skipped"},
		BudgetRefreshes:   {"ok", "error"},
		WebhookAttempts:   {"delivered", "retry", "failed", "gone", "refused"},
		WebhookDeliveries: {"created", "delivered", "failed"},
		NotCharged:        {"kind", "before_auction", "after_window", "bad_token", "duplicate", "daily_budget", "weekly_budget", "monthly_budget", "total_budget", "insufficient_balance"},
		RollupRuns:        {"ok", "error", "skipped"},
	} {
		for _, v := range values {
			vec.WithLabelValues(v)
		}
	}
}
