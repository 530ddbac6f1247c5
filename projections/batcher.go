package projections

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

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
	)
	for {
		wait := b.flushInterval
		if len(batch) > 0 {
			wait = time.Until(first.Add(b.flushInterval))
		}
		if wait > 0 && len(batch) < b.maxRows {
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
					lag := ft.HighWatermark - (ft.Records[n-1].Offset + 1)
					telemetry.ConsumerLag.WithLabelValues(ft.Topic, b.group, strconv.Itoa(int(ft.Partition))).Set(float64(lag))
					telemetry.ConsumedRecords.WithLabelValues(ft.Topic, b.group).Add(float64(n))
				}
			})
			recs := fetches.Records()
			if len(recs) > 0 && len(batch) == 0 {
				first = time.Now()
			}
			batch = append(batch, recs...)
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
		batch = batch[:0]
		b.client.AllowRebalance()
	}
}

func (b *batcher) flushWithRetry(ctx context.Context, batch []*kgo.Record) error {
	backoff := 200 * time.Millisecond
	for {
		err := b.flush(ctx, batch)
		if err == nil {
			// A batch written is committed even when the process is being
			// stopped meanwhile: else the next owner writes it again.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err = b.client.CommitRecords(cctx, batch...)
			cancel()
			if err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.log.Error("projector: flush failed, retrying", "group", b.group, "records", len(batch), "backoff", backoff, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}
