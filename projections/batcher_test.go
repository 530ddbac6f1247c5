package projections

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/kafka"
)

// TestBatcherStop: a batch in flight when the process is stopped is still
// folded and committed within the stop grace; one that takes longer is
// abandoned, uncommitted, and the loop returns soon after the grace.
func TestBatcherStop(t *testing.T) {
	const grace = 400 * time.Millisecond
	tests := []struct {
		name       string
		releaseIn  time.Duration // after the stop; 0: never
		wantCommit int64
		wantFlush  error
	}{
		{name: "finished within the grace", releaseIn: 100 * time.Millisecond, wantCommit: 10},
		{name: "longer than the grace", wantCommit: -1, wantFlush: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			_, brokers := testenv.Kafka(t)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			cl, err := kafka.NewClient(brokers, log)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := kafka.EnsureTopics(ctx, cl, []kafka.TopicSpec{{Name: "stop", Partitions: 1, Replication: 1}}); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			for i := range 10 {
				recs = append(recs, &kgo.Record{Topic: "stop", Value: fmt.Appendf(nil, "r%d", i)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}

			inFlight, release, flushed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			flush := func(ctx context.Context, batch []*kgo.Record) error {
				close(inFlight)
				select {
				case <-release:
					flushed <- nil
					return nil
				case <-ctx.Done():
					flushed <- ctx.Err()
					return ctx.Err()
				}
			}
			b, err := newBatcher(brokers, "stop-group", []string{"stop"}, 10, 20*time.Millisecond,
				GroupOptions{SessionTimeout: 6 * time.Second, StopGrace: grace}, log, flush)
			if err != nil {
				t.Fatal(err)
			}
			defer b.client.Close()
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- b.run(rctx) }()
			select {
			case <-inFlight:
			case <-time.After(20 * time.Second):
				t.Fatal("no batch was flushed")
			}
			stopped := time.Now()
			stop()
			if tc.releaseIn > 0 {
				time.AfterFunc(tc.releaseIn, func() { close(release) })
			}
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("run returned %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("run did not return after the stop")
			}
			if took := time.Since(stopped); took > grace+5*time.Second {
				t.Errorf("run returned %s after the stop, want about the grace (%s) at most", took, grace)
			}
			if err := <-flushed; !errors.Is(err, tc.wantFlush) {
				t.Errorf("the flush ended with %v, want %v", err, tc.wantFlush)
			}
			offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "stop-group")
			if err != nil {
				t.Fatal(err)
			}
			got := int64(-1)
			if o, ok := offs.Lookup("stop", 0); ok && o.Err == nil {
				got = o.At
			}
			if got != tc.wantCommit {
				t.Errorf("committed offset %d, want %d", got, tc.wantCommit)
			}
		})
	}
}
