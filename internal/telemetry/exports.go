package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the exports (docs/reference/exports.md).
var (
	Exports = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_exports_total",
		Help: "Exports by outcome: accepted (202), completed, failed, retried (an attempt that will be run again), requeued (by the sweep).",
	}, []string{"outcome", "format"})
	ExportSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "endcap_export_seconds",
		Help:    "Duration of one completed export attempt: rollup refresh, query, file and upload.",
		Buckets: []float64{.1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"format"})
	ExportRows = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_export_rows_total",
		Help: "Rows written to completed export files.",
	}, []string{"format"})
	ExportQueueSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "endcap_export_queue_seconds",
		Help:    "Time from an export's request to the start of its first attempt.",
		Buckets: []float64{.05, .1, .5, 1, 5, 10, 30, 60, 300, 900},
	})
)
