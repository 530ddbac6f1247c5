package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/endcap/endcap/storage/kafka"
)

// TestTopicRetention: the topics are created with their retention, as a
// broker describes them (DescribeTopicConfigs): events and auctions each
// with its own retention.ms, the jobs and webhook events 7 days, the state
// topics compacted with no retention of time.
func TestTopicRetention(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kafka.NewClient(c.ListenAddrs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topics := kafka.TopicNames("r.")
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 2, 1, 72*time.Hour, 30*time.Hour)); err != nil {
		t.Fatal(err)
	}
	names := []string{topics.Events, topics.Auctions, topics.Exports, topics.WebhookEvents, topics.Accounts, topics.Entities, topics.WebhookDeliveries}
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("%s: %v", rc.Name, rc.Err)
		}
		got[rc.Name] = map[string]string{}
		for _, cfg := range rc.Configs {
			if cfg.Source == kmsg.ConfigSourceDynamicTopicConfig && cfg.Value != nil { // set at creation
				got[rc.Name][cfg.Key] = *cfg.Value
			}
		}
	}
	want := map[string]map[string]string{
		topics.Events:            {"cleanup.policy": "delete", "retention.ms": "259200000"},
		topics.Auctions:          {"cleanup.policy": "delete", "retention.ms": "108000000"},
		topics.Exports:           {"cleanup.policy": "delete", "retention.ms": "604800000"},
		topics.WebhookEvents:     {"cleanup.policy": "delete", "retention.ms": "604800000"},
		topics.Accounts:          {"cleanup.policy": "compact"},
		topics.Entities:          {"cleanup.policy": "compact", "max.message.bytes": "8388608"},
		topics.WebhookDeliveries: {"cleanup.policy": "compact", "max.message.bytes": "8388608"},
	}
	for _, n := range names {
		if len(got[n]) != len(want[n]) {
			t.Errorf("%s: configs set %v, want %v", n, got[n], want[n])
			continue
		}
		for k, v := range want[n] {
			if got[n][k] != v {
				t.Errorf("%s: %s = %q, want %q", n, k, got[n][k], v)
			}
		}
	}
}
