package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/testkit/testenv"
)

// Append answers nil once Kafka acknowledged every event, and
// ErrUnavailable when the broker does not answer within the timeout; the
// records it leaves buffered are failed with the request, not kept.
func TestAppender(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	evs, verr := ParseRequest(benchBody(), testMarketplace, testNow)
	if verr != nil {
		t.Fatal(verr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := NewAppender(cl, "events", 15*time.Second).Append(ctx, evs); err != nil {
		t.Fatalf("broker up: %v", err)
	}
	offsets, err := kadm.NewClient(cl).ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := offsets.Lookup("events", 0); n.Offset != int64(len(evs)) {
		t.Fatalf("%d records on the topic, want %d", n.Offset, len(evs))
	}

	testenv.HangProduce(t, c)
	start := time.Now()
	err = NewAppender(cl, "events", 300*time.Millisecond).Append(ctx, evs[:3])
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("broker hung: got %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("answered after %s, timeout 300ms", d)
	}
}
