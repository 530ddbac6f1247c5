package kafka_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/testkit/testenv"
)

// newTopic starts a Kafka cluster with topic, of partitions partitions
// holding records records each.
func newTopic(t *testing.T, ctx context.Context, topic string, partitions, records int) (*kgo.Client, *kadm.Client, []string) {
	t.Helper()
	_, brokers := testenv.Kafka(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		for range records {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return cl, adm, brokers
}

// commit commits offsets of topic for group, as a member of it would.
func commit(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, offsets map[int32]int64) {
	t.Helper()
	var o kadm.Offsets
	for p, at := range offsets {
		o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(ctx, group, o); err != nil {
		t.Fatal(err)
	}
}

func TestMergeGroups(t *testing.T) {
	const topic, group = "events", "fold"
	legacy := []string{"old-a", "old-b"}
	type offsets map[int32]int64
	tests := []struct {
		name     string
		commits  map[string]offsets // by group
		want     offsets            // nil: nothing merged
		wantKeep offsets            // the group's offsets afterwards
	}{
		{"no legacy group: nothing to merge",
			map[string]offsets{group: {0: 10, 1: 5, 2: 7}}, nil, offsets{0: 10, 1: 5, 2: 7}},
		{"the lowest of every group, 0 where a legacy group has no commit",
			map[string]offsets{group: {0: 10, 1: 5, 2: 7}, "old-a": {0: 8, 1: 6}, "old-b": {0: 9, 1: 4, 2: 7}},
			offsets{0: 8, 1: 4, 2: 0}, offsets{0: 8, 1: 4, 2: 0}},
		{"a group that never committed starts where the legacy groups were",
			map[string]offsets{"old-a": {0: 3, 1: 6, 2: 9}, "old-b": {0: 4, 1: 2, 2: 9}},
			offsets{0: 3, 1: 2, 2: 9}, offsets{0: 3, 1: 2, 2: 9}},
		{"a partition the group never folded takes the legacy groups' lowest",
			map[string]offsets{group: {0: 10}, "old-a": {0: 8, 1: 6, 2: 5}},
			offsets{0: 8, 1: 6, 2: 5}, offsets{0: 8, 1: 6, 2: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, adm, _ := newTopic(t, ctx, topic, 3, 12)
			for g, offs := range tc.commits {
				commit(t, ctx, adm, g, topic, offs)
			}
			got, err := kafka.MergeGroups(ctx, cl, group, legacy, topic)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("merged %v, want %v", got, tc.want)
			}
			fetched := adm.FetchManyOffsets(ctx, append([]string{group}, legacy...)...)
			keep := offsets{}
			fetched[group].Fetched.Each(func(o kadm.OffsetResponse) { keep[o.Partition] = o.At })
			if !maps.Equal(keep, tc.wantKeep) {
				t.Errorf("the group's offsets are %v, want %v", keep, tc.wantKeep)
			}
			for _, g := range legacy {
				if n := len(fetched[g].Fetched); n != 0 {
					t.Errorf("legacy group %s still has %d committed topics", g, n)
				}
			}
			// merged once: a second call finds nothing
			if again, err := kafka.MergeGroups(ctx, cl, group, legacy, topic); err != nil || again != nil {
				t.Errorf("second merge: %v %v", again, err)
			}
		})
	}
}

// TestMergeGroupsActive: when a consumer is in the group already (another
// process merged and joined), the merge fails and changes nothing.
func TestMergeGroupsActive(t *testing.T) {
	const topic, group = "events", "fold"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admCl, adm, brokers := newTopic(t, ctx, topic, 1, 1)
	commit(t, ctx, adm, "old", topic, map[int32]int64{0: 1})
	member, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	testenv.Eventually(t, 10*time.Second, func() error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return member.PollFetches(pctx).Err0() // joined once it fetched the record
	})
	_, err = kafka.MergeGroups(ctx, admCl, group, []string{"old"}, topic)
	if err == nil {
		t.Fatal("merged into a group with an active member")
	}
	t.Logf("refused: %v", err)
	if n := len(adm.FetchManyOffsets(ctx, "old")["old"].Fetched); n == 0 {
		t.Error("the legacy group was deleted although the merge failed")
	}
}
