package ingest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
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
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	wg.Add(len(events))
	for i := range events {
		val, err := records.EncodeEvent(&events[i])
		if err != nil {
			for j := i; j < len(events); j++ {
				wg.Done()
			}
			wg.Wait()
			return fmt.Errorf("encode event: %w", err)
		}
		rec := &kgo.Record{Topic: a.topic, Key: records.EventKey(&events[i]), Value: val}
		a.client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// The callbacks still run (records fail with the context error or
		// land late); the caller gets 503 and retries with the same ids.
		telemetry.ProducedRecords.WithLabelValues(a.topic, "error").Add(float64(len(events)))
		return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
	if firstErr != nil {
		telemetry.ProducedRecords.WithLabelValues(a.topic, "error").Add(float64(len(events)))
		return fmt.Errorf("%w: %v", ErrUnavailable, firstErr)
	}
	telemetry.ProducedRecords.WithLabelValues(a.topic, "ok").Add(float64(len(events)))
	for i := range events {
		telemetry.EventsAccepted.WithLabelValues(events[i].Kind.String()).Inc()
	}
	return nil
}
