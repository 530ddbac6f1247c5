package projections

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/telemetry"
)

// EventsGroup is the consumer group of the events projector.
const EventsGroup = "endcap-projector-events"

// EventsProjector folds the events topic into ClickHouse table events_raw
// (read through the deduplicating view `events`).
type EventsProjector struct {
	b       batcher
	ch      clickhouse.Conn
	claimer *Claimer
	log     *slog.Logger
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
	cl, err := newGroupClient(o.Brokers, EventsGroup, []string{o.Topic}, o.Log)
	if err != nil {
		return nil, err
	}
	p := &EventsProjector{ch: o.ClickHouse, claimer: o.Claimer, log: o.Log}
	p.b = batcher{client: cl, group: EventsGroup, maxRows: o.MaxRows, flushInterval: o.FlushInterval, log: o.Log, flush: p.flush}
	return p, nil
}

// Close leaves the group. Uncommitted records are consumed again by the
// next owner of their partitions.
func (p *EventsProjector) Close() { p.b.client.Close() }

// Run consumes until ctx ends (see batcher for the guarantees).
func (p *EventsProjector) Run(ctx context.Context) error { return p.b.run(ctx) }

// flush claims idempotency keys and inserts the rows of first claims and
// replays; the batcher commits the offsets afterwards.
func (p *EventsProjector) flush(ctx context.Context, batch []*kgo.Record) error {
	events := make([]ingest.Event, 0, len(batch))
	recs := make([]*kgo.Record, 0, len(batch))
	keys := make([]ClaimKey, 0, len(batch))
	for _, r := range batch {
		var e ingest.Event
		if err := ingest.DecodeRecord(r.Value, &e); err != nil || e.ID == "" || e.MarketplaceID == "" {
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
	if rows.n == 0 {
		return nil
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return rows.insert(ictx, p.ch)
}
