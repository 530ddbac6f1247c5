package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/storage/kafka"
)

// TestReadSnapshot: the last record of each key, tombstones left out, in
// partition and offset order, up to the end offsets taken first.
func TestReadSnapshot(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	cl, err := kafka.NewClient(brokers, nil, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec := func(p int32, k, v string) *kgo.Record {
		r := &kgo.Record{Topic: "state", Partition: p, Key: []byte(k), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(k)}}}
		if v != "" {
			r.Value = []byte(v)
		}
		return r
	}
	if err := cl.ProduceSync(ctx, rec(0, "a", "a1"), rec(0, "b", "b1"), rec(0, "a", "a2"), rec(1, "c", "c1"), rec(1, "d", "d1"), rec(1, "d", "")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	snap, err := kafka.ReadSnapshot(ctx, brokers, nil, "state")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range snap.Records {
		got = append(got, fmt.Sprintf("%d:%s=%s(%s)", r.Partition, r.Key, r.Value, r.Headers[0].Value))
	}
	if fmt.Sprint(got) != "[0:b=b1(b) 0:a=a2(a) 1:c=c1(c)]" || snap.Read != 6 || snap.Partitions != 2 || snap.Ends[0] != 3 || snap.Ends[1] != 3 {
		t.Fatalf("snapshot %v, read %d, ends %v", got, snap.Read, snap.Ends)
	}
	// An empty topic, and a deadline that passes.
	empty, err := kafka.ReadSnapshot(ctx, brokers, nil, "nothing-here")
	if err == nil {
		t.Fatalf("a missing topic: %+v", empty)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Nanosecond)
	defer dcancel()
	if _, err := kafka.ReadSnapshot(dctx, brokers, nil, "state"); err == nil {
		t.Fatal("a read past its deadline succeeded")
	}
}
