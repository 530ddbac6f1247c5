// Package kafka is the adapter to the Kafka-protocol log: client
// construction, topic names and topic creation. It holds no business rule.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Topics are the names of every topic Endcap uses, derived from one prefix.
type Topics struct {
	Events   string // tracking events, keyed by marketplace|opaqueUserId
	Accounts string // compacted changelog of marketplaces and API keys
	Entities string // compacted changelog of catalog, campaigns, billing, segments, webhooks, ...
	Auctions string // auction records (auction.Record), keyed by marketplace
	Exports  string // export jobs (exports.Job), keyed by export id
}

// TopicNames returns the topic names for prefix (e.g. "endcap.").
func TopicNames(prefix string) Topics {
	return Topics{
		Events:   prefix + "events",
		Accounts: prefix + "state.accounts",
		Entities: prefix + "state.entities",
		Auctions: prefix + "auctions",
		Exports:  prefix + "export-jobs",
	}
}

// TopicSpec describes a topic to create when it does not exist.
type TopicSpec struct {
	Name        string
	Partitions  int32
	Replication int16
	Configs     map[string]string
}

// Specs returns the specs of every topic with the given layout settings.
func Specs(t Topics, eventsPartitions, replication int, eventsRetention time.Duration) []TopicSpec {
	rf := int16(replication)
	return []TopicSpec{
		{Name: t.Events, Partitions: int32(eventsPartitions), Replication: rf, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt(eventsRetention.Milliseconds(), 10),
		}},
		{Name: t.Auctions, Partitions: int32(eventsPartitions), Replication: rf, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt(eventsRetention.Milliseconds(), 10),
		}},
		{Name: t.Exports, Partitions: 8, Replication: rf, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt((7 * 24 * time.Hour).Milliseconds(), 10),
		}},
		{Name: t.Accounts, Partitions: 1, Replication: rf, Configs: map[string]string{
			"cleanup.policy": "compact",
		}},
		{Name: t.Entities, Partitions: 8, Replication: rf, Configs: map[string]string{
			"cleanup.policy":    "compact",
			"max.message.bytes": "8388608",
		}},
	}
}

// NewClient returns a franz-go client for brokers with Endcap's defaults:
// idempotent producer with acks=all and bounded buffering. Producers add
// kgo.ProducerLinger from the configuration.
func NewClient(brokers []string, log *slog.Logger, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(200_000),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DialTimeout(2 * time.Second),
		kgo.RetryTimeout(5 * time.Second),
		kgo.MetadataMinAge(time.Second),
	}
	if log != nil {
		base = append(base, kgo.WithLogger(slogAdapter{log}))
	}
	return kgo.NewClient(append(base, opts...)...)
}

// EnsureTopics creates the topics of specs that do not exist yet. Existing
// topics are left as they are (their partitions and configs are not changed).
func EnsureTopics(ctx context.Context, cl *kgo.Client, specs []TopicSpec) error {
	adm := kadm.NewClient(cl)
	for _, s := range specs {
		cfg := make(map[string]*string, len(s.Configs))
		for k, v := range s.Configs {
			cfg[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, s.Partitions, s.Replication, cfg, s.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", s.Name, err)
		}
	}
	return nil
}

// EndOffsets returns the current end offset of every partition of topic.
func EndOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var ferr error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = o.Err
			return
		}
		out[o.Partition] = o.Offset
	})
	if ferr != nil {
		return nil, ferr
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("topic %s has no partitions (does it exist?)", topic)
	}
	return out, nil
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (a slogAdapter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelInfo
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	case kgo.LogLevelDebug:
		lvl = slog.LevelDebug
	}
	a.l.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}
