package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Traces (docs/operations/operations.md, Traces). Off unless StartTracing is called
// with an endpoint: then StartSpan makes no span and allocates nothing, so
// the hot paths pay one atomic load.

var tracing atomic.Bool

// Tracing reports whether traces are on in this process.
func Tracing() bool { return tracing.Load() }

// TraceContext is the propagator of the traces: W3C trace context
// (traceparent, tracestate), in HTTP headers and Kafka record headers.
var TraceContext propagation.TextMapPropagator = propagation.TraceContext{}

// noSpan is the span StartSpan returns with traces off: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// StartSpan starts a span named name of the tracer named tracer (the
// package that makes it) as a child of ctx's span, when traces are on;
// when they are off it returns ctx and a span that records nothing.
func StartSpan(ctx context.Context, tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !tracing.Load() {
		return ctx, noSpan
	}
	return otel.Tracer(tracer).Start(ctx, name, opts...)
}

// TracingOptions configure StartTracing.
type TracingOptions struct {
	// Endpoint is the OTLP/HTTP endpoint's URL (ENDCAP_OTEL_ENDPOINT);
	// the path /v1/traces is added unless it has one.
	Endpoint string
	// Service is the resource's service.name (endcap-<target>); Version
	// its service.version.
	Service, Version string
	// SampleRatio is the share of new traces kept; a child of a sampled
	// parent (a request's traceparent, a record's headers) is kept.
	SampleRatio float64
	// BatchTimeout is the longest a finished span waits before it is sent
	// (0: the SDK's 5 s).
	BatchTimeout time.Duration
}

// StartTracing turns traces on: spans are batched and sent to the OTLP/HTTP
// endpoint, the global tracer provider and propagator are set. shutdown
// sends what is left and turns traces off, within ctx's deadline.
func StartTracing(o TracingOptions) (shutdown func(context.Context) error, err error) {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpointURL(o.Endpoint)))
	if err != nil {
		return nil, fmt.Errorf("ENDCAP_OTEL_ENDPOINT: %w", err)
	}
	res := sdkresource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(o.Service), semconv.ServiceVersion(o.Version))
	var bopts []sdktrace.BatchSpanProcessorOption
	if o.BatchTimeout > 0 {
		bopts = append(bopts, sdktrace.WithBatchTimeout(o.BatchTimeout))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, bopts...), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(TraceContext)
	tracing.Store(true)
	return func(ctx context.Context) error {
		tracing.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// endpointURL is the traces' URL of an endpoint: one given without a path
// is the collector's base URL.
func endpointURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// Attr helpers of the spans' attributes.
var (
	AttrTable = attribute.Key("endcap.clickhouse.table")
	AttrRows  = attribute.Key("endcap.rows")
	AttrGroup = attribute.Key("messaging.consumer.group.name")
)
