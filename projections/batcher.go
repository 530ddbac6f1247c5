package projections

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/telemetry"
)

// batcher is the consume loop every projector shares: poll records, flush a
// batch when it holds maxRows records or its oldest waited flushInterval,
// commit offsets only after the flush succeeded, retry a failed flush with
// backoff and never skip it.
type batcher struct {
	client        *kgo.Client
	group         string
	maxRows       int
	flushInterval time.Duration
	log           *slog.Logger
	flush         func(ctx context.Context, batch []*kgo.Record) error
}

func newGroupClient(brokers []string, group string, topics []string, log *slog.Logger) (*kgo.Client, error) {
	return kafka.NewClient(brokers, log,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxBytes(64<<20),
	)
}

func (b *batcher) run(ctx context.Context) error {
	var (
		batch []*kgo.Record
		first time.Time
		seen  = map[partitionKey]fetched{} // per partition, what the batch's fetches saw
	)
	for {
		wait := b.flushInterval
		if len(batch) > 0 {
			wait = time.Until(first.Add(b.flushInterval))
		}
		if wait > 0 && len(batch) < b.maxRows {
			polled := time.Now()
			pctx, cancel := context.WithTimeout(ctx, wait)
			fetches := b.client.PollRecords(pctx, b.maxRows-len(batch))
			cancel()
			if ctx.Err() != nil {
				b.client.AllowRebalance()
				return ctx.Err()
			}
			fetches.EachError(func(t string, part int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					b.log.Warn("projector: fetch error", "group", b.group, "topic", t, "partition", part, "err", err)
				}
			})
			fetches.EachPartition(func(ft kgo.FetchTopicPartition) {
				if n := len(ft.Records); n > 0 {
					seen[partitionKey{ft.Topic, ft.Partition}] = fetched{ft.HighWatermark, ft.Records[n-1].Offset + 1}
					telemetry.ConsumedRecords.WithLabelValues(ft.Topic, b.group).Add(float64(n))
				}
			})
			recs := fetches.Records()
			if len(recs) > 0 && len(batch) == 0 {
				first = time.Now()
			}
			batch = append(batch, recs...)
			if len(batch) > 0 {
				observeStep(b.group, "poll", polled)
			}
			if len(batch) == 0 {
				b.client.AllowRebalance()
				continue
			}
			if len(batch) < b.maxRows && time.Since(first) < b.flushInterval {
				continue
			}
		}
		if err := b.flushWithRetry(ctx, batch); err != nil {
			b.client.AllowRebalance()
			return err
		}
		b.reportLag(seen)
		clear(seen)
		batch = batch[:0]
		b.client.AllowRebalance()
	}
}

// observeStep records the time since start as one step of a group's batch
// (endcap_projector_step_seconds) and returns the time it did.
func observeStep(group, step string, start time.Time) time.Time {
	now := time.Now()
	telemetry.ProjectorStepSeconds.WithLabelValues(group, step).Observe(now.Sub(start).Seconds())
	return now
}

type partitionKey struct {
	topic     string
	partition int32
}

// fetched is what the last fetch of a partition in a batch saw: the high
// watermark, and the offset after the batch's last record.
type fetched struct{ hwm, next int64 }

// reportLag sets each partition's lag once its batch is committed: the high
// watermark its fetch saw minus the next offset to commit. A lag of 0 then
// means that everything the partition held is folded and committed, not only
// fetched: what docs/attribution.md and docs/scored-attribution.md take it
// to mean.
func (b *batcher) reportLag(seen map[partitionKey]fetched) {
	for k, f := range seen {
		telemetry.ConsumerLag.WithLabelValues(k.topic, b.group, strconv.Itoa(int(k.partition))).Set(float64(max(0, f.hwm-f.next)))
	}
}

// refreshLag sets the lag of the partitions of a batch that cannot be
// written from the topics' end offsets (asked of the broker), so that the
// gauge keeps growing while the batch is retried instead of freezing at the
// last committed batch's value. It is best effort: a broker that does not
// answer in 2 s leaves the gauge as it was.
func (b *batcher) refreshLag(ctx context.Context, batch []*kgo.Record) {
	first := map[partitionKey]int64{} // the next offset to commit: the batch's first
	var topics []string
	for _, r := range batch {
		k := partitionKey{r.Topic, r.Partition}
		if o, ok := first[k]; !ok || r.Offset < o {
			if !ok && !slices.Contains(topics, r.Topic) {
				topics = append(topics, r.Topic)
			}
			first[k] = r.Offset
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(b.client).ListEndOffsets(lctx, topics...)
	if err != nil {
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		if n, ok := first[partitionKey{o.Topic, o.Partition}]; ok && o.Err == nil && o.Offset >= 0 {
			telemetry.ConsumerLag.WithLabelValues(o.Topic, b.group, strconv.Itoa(int(o.Partition))).Set(float64(max(0, o.Offset-n)))
		}
	})
}

func (b *batcher) flushWithRetry(ctx context.Context, batch []*kgo.Record) error {
	backoff := 200 * time.Millisecond
	for {
		err := b.flush(ctx, batch)
		if err == nil {
			// A batch written is committed even when the process is being
			// stopped meanwhile: else the next owner writes it again.
			committing := time.Now()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err = b.client.CommitRecords(cctx, batch...)
			cancel()
			if err == nil {
				observeStep(b.group, "commit", committing)
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.log.Error("projector: flush failed, retrying", "group", b.group, "records", len(batch), "backoff", backoff, "err", err)
		b.refreshLag(ctx, batch)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}
