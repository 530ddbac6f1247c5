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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"github.com/twmb/franz-go/plugin/kslog"
)

// Topics are the names of every topic Endcap uses, derived from one prefix.
type Topics struct {
	Events   string // tracking events, keyed by marketplace|opaqueUserId
	Accounts string // compacted changelog of marketplaces and API keys
	Entities string // compacted changelog of catalog, campaigns, billing, segments, webhooks, ...
	Auctions string // auction records (records.Auction), keyed by marketplace
	Exports  string // export jobs (exports.Job), keyed by export id
	// WebhookEvents: events for webhooks that are not entity changes
	// (webhooks.Event), keyed by marketplace.
	WebhookEvents string
	// WebhookDeliveries: compacted changelog of webhook deliveries and
	// their attempts (webhooks.Delivery).
	WebhookDeliveries string
	// Claims: changelog of the events fold's claims, one partition per
	// partition of Events (created by the fold: projections.EnsureClaimsTopic).
	Claims string
}

// TopicNames returns the topic names for prefix (e.g. "endcap.").
func TopicNames(prefix string) Topics {
	return Topics{
		Events:   prefix + "events",
		Accounts: prefix + "state.accounts",
		Entities: prefix + "state.entities",
		Auctions: prefix + "auctions",
		Exports:  prefix + "export-jobs",

		WebhookEvents:     prefix + "webhook-events",
		WebhookDeliveries: prefix + "state.webhook-deliveries",
		Claims:            prefix + "claims.events",
	}
}

// TopicSpec describes a topic to create when it does not exist.
type TopicSpec struct {
	Name        string
	Partitions  int32
	Replication int16
	Configs     map[string]string
}

// Specs returns the specs of every topic with the given layout settings:
// the events and auctions topics keep their records for their retention
// (retention.ms), the state topics are compacted and kept for ever
// (docs/operations/operations.md, Data retention).
func Specs(t Topics, eventsPartitions, replication int, eventsRetention, auctionsRetention time.Duration) []TopicSpec {
	rf := int16(replication)
	return []TopicSpec{
		{Name: t.Events, Partitions: int32(eventsPartitions), Replication: rf, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt(eventsRetention.Milliseconds(), 10),
		}},
		{Name: t.Auctions, Partitions: int32(eventsPartitions), Replication: rf, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt(auctionsRetention.Milliseconds(), 10),
		}},
		{Name: t.Exports, Partitions: 8, Replication: rf, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt((7 * 24 * time.Hour).Milliseconds(), 10),
		}},
		{Name: t.WebhookEvents, Partitions: 8, Replication: rf, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt((7 * 24 * time.Hour).Milliseconds(), 10),
		}},
		{Name: t.WebhookDeliveries, Partitions: 8, Replication: rf, Configs: map[string]string{
			"cleanup.policy":    "compact",
			"max.message.bytes": "8388608",
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
		base = append(base, kgo.WithLogger(kslog.New(slog.New(atLeast{slog.LevelWarn, log.With("component", "kafka").Handler()}))))
	}
	base = append(base, kgo.WithHooks(kprom.NewMetrics("endcap_kafka_client", kprom.WithClientLabel(),
		kprom.FetchAndProduceDetail(kprom.ByTopic, kprom.Records, kprom.Batches, kprom.UncompressedBytes, kprom.ConsistentNaming),
		kprom.Registerer(lenient{prometheus.DefaultRegisterer}), kprom.Gatherer(prometheus.DefaultGatherer))))
	return kgo.NewClient(append(base, opts...)...)
}

// atLeast passes on the records of a level or above: the Kafka client logs
// every metadata refresh and group step at info and debug, which an
// operator needs only when diagnosing (ENDCAP_LOG_LEVEL does not lower it).
type atLeast struct {
	min slog.Level
	slog.Handler
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{h.min, h.Handler.WithAttrs(as)}
}
func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.min, h.Handler.WithGroup(name)}
}

// lenient registers the client metrics (kprom, one set per client, labelled
// by its client id: endcap_kafka_client_*) in the default registry, and
// leaves out those of a client whose id another client of the process has
// already (the default id, several systems in one test process).
type lenient struct{ prometheus.Registerer }

func (r lenient) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		if _, dup := errors.AsType[prometheus.AlreadyRegisteredError](err); !dup {
			return err
		}
	}
	return nil
}

func (r lenient) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
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

// MergeGroups makes group start every partition of topic where the
// slowest of group and the legacy groups would: for each partition, the
// lowest offset any of them committed (0 where a legacy group that has
// commits on topic has none for that partition). It then deletes the legacy
// groups, so it acts once. It is how consumer groups that each folded the
// same topic into some tables are replaced by one group folding into all of
// them: nothing any of them had not folded yet is skipped; what some had
// folded already is folded again, which the folds must tolerate.
//
// It returns the offsets it committed (nil when no legacy group had
// commits). Committing needs group to have no active member: when another
// process has joined it already (and so merged first), the commit fails
// and the error says so; the caller may go on.
func MergeGroups(ctx context.Context, cl *kgo.Client, group string, legacy []string, topic string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	fetched := adm.FetchManyOffsets(ctx, append([]string{group}, legacy...)...)
	for g, r := range fetched {
		switch {
		case errors.Is(r.Err, kerr.GroupIDNotFound):
			delete(fetched, g) // no such group: no commits
		case r.Err != nil:
			return nil, fmt.Errorf("fetch the offsets of %s: %w", g, r.Err)
		}
	}
	var found []string
	for _, g := range legacy {
		if _, ok := fetched[g].Fetched[topic]; ok {
			found = append(found, g)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	ends, err := EndOffsets(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	at := map[int32]int64{}
	for p := range ends {
		lowest := int64(-1)
		for _, g := range append([]string{group}, found...) {
			o, ok := fetched[g].Fetched.Lookup(topic, p)
			if !ok || o.Err != nil || o.At < 0 {
				if g == group {
					continue // the group has not folded p: the legacy groups say where to start
				}
				o.At = 0
			}
			if lowest < 0 || o.At < lowest {
				lowest = o.At
			}
		}
		at[p] = lowest
	}
	var commit kadm.Offsets
	for p, o := range at {
		commit.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, commit)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("commit the merged offsets of %s (has another process joined it already?): %w", group, err)
	}
	dresp, err := adm.DeleteGroups(ctx, found...)
	if err == nil {
		for _, r := range dresp {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		return at, fmt.Errorf("delete the merged groups %v (a process of the previous version still in them? they are merged again at the next start): %w", found, err)
	}
	return at, nil
}
