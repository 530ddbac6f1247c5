package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/trace"

	"github.com/endcap/endcap/internal/telemetry"
)

// TraceProduce is the client option of a producer whose records carry
// their trace: each record produced gets a "<topic> publish" span, a child
// of the span of the context it was produced with (the request's), and
// that span's context in its headers (W3C traceparent), from which the
// consumers link their work to it (RecordSpanContext). Fetched records
// make no span. Only for processes with traces on (telemetry.Tracing).
func TraceProduce() kgo.Opt {
	return kgo.WithHooks(produceHooks{kotel.NewTracer(kotel.TracerPropagator(telemetry.TraceContext))})
}

// produceHooks are kotel's producer hooks alone.
type produceHooks struct{ t *kotel.Tracer }

func (h produceHooks) OnProduceRecordBuffered(r *kgo.Record) { h.t.OnProduceRecordBuffered(r) }
func (h produceHooks) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	h.t.OnProduceRecordUnbuffered(r, err)
}

// RecordSpanContext returns the span context a record's headers carry
// (invalid when none).
func RecordSpanContext(r *kgo.Record) trace.SpanContext {
	return trace.SpanContextFromContext(telemetry.TraceContext.Extract(context.Background(), kotel.NewRecordCarrier(r)))
}
