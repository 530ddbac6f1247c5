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

	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/testkit/testenv"
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

// TestStallTracker: a partition with records waiting whose committed offset
// does not move is reported once, when it has not moved for the bound, and
// again when it moves or has nothing left; one that moves, or has nothing
// waiting, never is.
func TestStallTracker(t *testing.T) {
	p0, p1 := partitionKey{"ev", 0}, partitionKey{"ev", 1}
	type look struct {
		at             time.Duration // since the first look
		lags           map[partitionKey]partitionLag
		stalled, moved []int32 // partitions reported
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"caught up", []look{
			{0, map[partitionKey]partitionLag{p0: {0, 10}}, nil, nil},
			{60 * time.Second, map[partitionKey]partitionLag{p0: {0, 10}}, nil, nil},
		}},
		{"moving with records waiting", []look{
			{0, map[partitionKey]partitionLag{p0: {5, 10}}, nil, nil},
			{30 * time.Second, map[partitionKey]partitionLag{p0: {5, 11}}, nil, nil},
			{60 * time.Second, map[partitionKey]partitionLag{p0: {5, 12}}, nil, nil},
		}},
		{"stalled, reported once, then moves", []look{
			{0, map[partitionKey]partitionLag{p0: {5, 10}, p1: {3, 7}}, nil, nil},
			{44 * time.Second, map[partitionKey]partitionLag{p0: {6, 10}, p1: {0, 10}}, nil, nil},
			{45 * time.Second, map[partitionKey]partitionLag{p0: {7, 10}, p1: {0, 10}}, []int32{0}, nil},
			{50 * time.Second, map[partitionKey]partitionLag{p0: {8, 10}}, nil, nil},
			{55 * time.Second, map[partitionKey]partitionLag{p0: {1, 17}}, nil, []int32{0}},
			{60 * time.Second, map[partitionKey]partitionLag{p0: {1, 17}}, nil, nil},
		}},
		{"stalled until nothing is left", []look{
			{0, map[partitionKey]partitionLag{p1: {3, 7}}, nil, nil},
			{50 * time.Second, map[partitionKey]partitionLag{p1: {3, 7}}, []int32{1}, nil},
			{55 * time.Second, map[partitionKey]partitionLag{p1: {0, 7}}, nil, []int32{1}},
		}},
		{"a look that misses the partition keeps its stall", []look{
			{0, map[partitionKey]partitionLag{p0: {5, 10}}, nil, nil},
			{20 * time.Second, map[partitionKey]partitionLag{}, nil, nil},
			{45 * time.Second, map[partitionKey]partitionLag{p0: {5, 10}}, []int32{0}, nil},
		}},
		{"two at once, in partition order", []look{
			{0, map[partitionKey]partitionLag{p1: {3, 7}, p0: {5, 10}}, nil, nil},
			{45 * time.Second, map[partitionKey]partitionLag{p1: {3, 7}, p0: {5, 10}}, []int32{0, 1}, nil},
			{50 * time.Second, map[partitionKey]partitionLag{p1: {0, 10}, p0: {0, 15}}, nil, []int32{0, 1}},
		}},
	}
	partitions := func(ss []stall) []int32 {
		var out []int32
		for _, s := range ss {
			out = append(out, s.partition)
		}
		return out
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := stallTracker{after: 45 * time.Second}
			for i, l := range tc.looks {
				stalled, moved := tr.observe(start.Add(l.at), l.lags)
				if fmt.Sprint(partitions(stalled)) != fmt.Sprint(l.stalled) || fmt.Sprint(partitions(moved)) != fmt.Sprint(l.moved) {
					t.Errorf("look %d (%s): stalled %v moved %v, want %v and %v", i, l.at, partitions(stalled), partitions(moved), l.stalled, l.moved)
				}
				for _, s := range stalled {
					if s.stalled < 45*time.Second || s.records != l.lags[s.partitionKey].records {
						t.Errorf("look %d: reported %+v", i, s)
					}
				}
			}
		})
	}
}
