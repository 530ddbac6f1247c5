package kafka_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/kafka"
)

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
			_, brokers := testenv.Kafka(t)
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			for p := int32(0); p < 3; p++ {
				for range 12 {
					if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for g, offs := range tc.commits {
				var o kadm.Offsets
				for p, at := range offs {
					o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
				}
				if _, err := adm.CommitOffsets(ctx, g, o); err != nil {
					t.Fatal(err)
				}
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
	_, brokers := testenv.Kafka(t)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if err := admCl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "old", o); err != nil {
		t.Fatal(err)
	}
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
