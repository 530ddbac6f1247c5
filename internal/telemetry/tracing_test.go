package telemetry

import (
	"context"
	"testing"
)

// With traces off (the default), StartSpan makes no span and allocates
// nothing: the hot paths that call it pay one atomic load.
func TestStartSpanOff(t *testing.T) {
	if Tracing() {
		t.Fatal("traces on by default")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := StartSpan(ctx, "test", "op")
		span.End()
		if c != ctx || span.IsRecording() || span.SpanContext().IsValid() {
			t.Fatal("a span with traces off")
		}
	})
	if allocs != 0 {
		t.Errorf("StartSpan with traces off: %v allocations, want 0", allocs)
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://collector:4318":              "http://collector:4318/v1/traces",
		"http://collector:4318/":             "http://collector:4318/v1/traces",
		"https://otlp.example.com/v1/traces": "https://otlp.example.com/v1/traces",
		"https://otlp.example.com/custom":    "https://otlp.example.com/custom",
	} {
		if got := endpointURL(in); got != want {
			t.Errorf("endpointURL(%q) = %q, want %q", in, got, want)
		}
	}
}
