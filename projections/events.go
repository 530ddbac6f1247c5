package projections

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/telemetry"
)

// EventsGroup is the consumer group of the events projector.
const EventsGroup = "endcap-projector-events"

// EventsProjector folds the events topic into ClickHouse table events_raw
// (read through the deduplicating view `events`).
type EventsProjector struct {
	client  *kgo.Client
	ch      clickhouse.Conn
	claimer *Claimer
	topic   string
	log     *slog.Logger

	maxRows       int
	flushInterval time.Duration
}

// EventsOptions configure an EventsProjector.
type EventsOptions struct {
	Brokers       []string
	Topic         string
	ClickHouse    clickhouse.Conn
	Claimer       *Claimer
	MaxRows       int
	FlushInterval time.Duration
	Log           *slog.Logger
}

// NewEventsProjector joins the consumer group (it starts consuming on Run).
func NewEventsProjector(o EventsOptions) (*EventsProjector, error) {
	cl, err := kafka.NewClient(o.Brokers, o.Log,
		kgo.ConsumerGroup(EventsGroup),
		kgo.ConsumeTopics(o.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxBytes(64<<20),
	)
	if err != nil {
		return nil, err
	}
	return &EventsProjector{client: cl, ch: o.ClickHouse, claimer: o.Claimer, topic: o.Topic, log: o.Log,
		maxRows: o.MaxRows, flushInterval: o.FlushInterval}, nil
}

// Close leaves the group. Uncommitted records are consumed again by the
// next owner of their partitions.
func (p *EventsProjector) Close() { p.client.Close() }

// Ping checks the broker connection.
func (p *EventsProjector) Ping(ctx context.Context) error { return p.client.Ping(ctx) }

// Run consumes until ctx ends. A batch is flushed when it holds maxRows
// records or its oldest record waited flushInterval; offsets are committed
// only after the batch is in ClickHouse. A failing flush is retried with
// backoff and never skipped.
func (p *EventsProjector) Run(ctx context.Context) error {
	var (
		batch []*kgo.Record
		first time.Time
	)
	for {
		wait := p.flushInterval
		if len(batch) > 0 {
			wait = time.Until(first.Add(p.flushInterval))
		}
		if wait > 0 && len(batch) < p.maxRows {
			pctx, cancel := context.WithTimeout(ctx, wait)
			fetches := p.client.PollRecords(pctx, p.maxRows-len(batch))
			cancel()
			if ctx.Err() != nil {
				p.client.AllowRebalance()
				return ctx.Err()
			}
			fetches.EachError(func(t string, part int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					p.log.Warn("events projector: fetch error", "topic", t, "partition", part, "err", err)
				}
			})
			fetches.EachPartition(func(ft kgo.FetchTopicPartition) {
				if n := len(ft.Records); n > 0 {
					lag := ft.HighWatermark - (ft.Records[n-1].Offset + 1)
					telemetry.ConsumerLag.WithLabelValues(p.topic, EventsGroup, strconv.Itoa(int(ft.Partition))).Set(float64(lag))
					telemetry.ConsumedRecords.WithLabelValues(p.topic, EventsGroup).Add(float64(n))
				}
			})
			recs := fetches.Records()
			if len(recs) > 0 && len(batch) == 0 {
				first = time.Now()
			}
			batch = append(batch, recs...)
			if len(batch) == 0 {
				p.client.AllowRebalance()
				continue
			}
			if len(batch) < p.maxRows && time.Since(first) < p.flushInterval {
				continue
			}
		}
		if err := p.flushWithRetry(ctx, batch); err != nil {
			p.client.AllowRebalance()
			return err
		}
		batch = batch[:0]
		p.client.AllowRebalance()
	}
}

func (p *EventsProjector) flushWithRetry(ctx context.Context, batch []*kgo.Record) error {
	backoff := 200 * time.Millisecond
	for {
		err := p.flush(ctx, batch)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Error("events projector: flush failed, retrying", "records", len(batch), "backoff", backoff, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// flush claims idempotency keys, inserts the rows of first claims and
// replays, then commits the batch's offsets.
func (p *EventsProjector) flush(ctx context.Context, batch []*kgo.Record) error {
	events := make([]ingest.Event, 0, len(batch))
	recs := make([]*kgo.Record, 0, len(batch))
	keys := make([]ClaimKey, 0, len(batch))
	for _, r := range batch {
		var e ingest.Event
		if err := json.Unmarshal(r.Value, &e); err != nil || e.ID == "" || e.MarketplaceID == "" {
			// A record this version cannot read is logged and skipped: it
			// can never become readable by retrying.
			p.log.Error("events projector: undecodable record skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		events = append(events, e)
		recs = append(recs, r)
		keys = append(keys, ClaimKey{Key: e.MarketplaceID + ":" + e.Kind.String() + ":" + e.ID, Partition: r.Partition, Offset: r.Offset})
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	claims, err := p.claimer.Claim(cctx, keys)
	cancel()
	if err != nil {
		return err
	}
	rows := newEventRows(len(events))
	dups := 0
	for i := range events {
		if claims[i] == ClaimDuplicate {
			dups++
			continue
		}
		rows.add(&events[i], recs[i].Partition, recs[i].Offset)
	}
	if dups > 0 {
		telemetry.Duplicates.WithLabelValues("events").Add(float64(dups))
	}
	if rows.n > 0 {
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := rows.insert(ictx, p.ch)
		cancel()
		if err != nil {
			return err
		}
	}
	cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.client.CommitRecords(cctx, batch...); err != nil {
		// The rows are in ClickHouse; the records will be replayed and
		// recognised as replays. Report the error so the batch is retried.
		return err
	}
	return nil
}
