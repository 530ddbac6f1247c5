package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce's records outlive the caller's context; ProduceBound's are failed
// with it. Both answer through the same Pending.
func TestProduceBound(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	wait, cancelWait := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelWait()

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name    string
		produce func(context.Context, *kgo.Client, ...*kgo.Record) *Pending
		ctx     context.Context
		want    error
	}{
		{"detached, context ended", Produce, ended, nil},
		{"bound, context live", ProduceBound, context.Background(), nil},
		{"bound, context ended", ProduceBound, ended, context.Canceled},
	} {
		p := tc.produce(tc.ctx, cl, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")})
		select {
		case <-p.Done():
		case <-wait.Done():
			t.Fatalf("%s: not acknowledged nor failed in 20 s", tc.name)
		}
		if err := p.Err(); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if err := p.Wait(wait); !errors.Is(err, tc.want) {
			t.Errorf("%s: Wait: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
