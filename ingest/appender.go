package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/kafka"
)

// ErrUnavailable means the log did not acknowledge every record in time. The
// caller must not report success: some records may be missing.
var ErrUnavailable = errkind.New(errkind.Unavailable, "the events could not be stored right now; retry the same request later")

// Appender appends accepted events to the events topic.
type Appender struct {
	client  *kgo.Client
	topic   string
	timeout time.Duration
}

// NewAppender returns an Appender that waits at most timeout for Kafka to
// acknowledge (acks=all) a request's records.
func NewAppender(cl *kgo.Client, topic string, timeout time.Duration) *Appender {
	return &Appender{client: cl, topic: topic, timeout: timeout}
}

// Append produces every event and returns nil only when Kafka acknowledged
// all of them. On timeout or broker error it returns ErrUnavailable.
func (a *Appender) Append(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(events))
	backing := make([]kgo.Record, len(events))
	for i := range events {
		val, err := records.EncodeEvent(&events[i])
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		backing[i] = kgo.Record{Topic: a.topic, Key: records.EventKey(&events[i]), Value: val}
		recs[i] = &backing[i]
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	// Bound to the request: once it ends, the records still buffered fail
	// (those in flight may land late); the caller gets 503 and retries with
	// the same ids.
	if err := kafka.ProduceBound(ctx, a.client, recs...).Wait(ctx); err != nil {
		telemetry.ProducedRecords.WithLabelValues(a.topic, "error").Add(float64(len(events)))
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	telemetry.ProducedRecords.WithLabelValues(a.topic, "ok").Add(float64(len(events)))
	for i := range events {
		telemetry.EventsAccepted.WithLabelValues(events[i].Kind.String()).Inc()
	}
	return nil
}
