package projections

import (
	"context"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
)

// EventsRaw is the sink of the events fold that copies every event into
// ClickHouse table events_raw (read through the deduplicating view
// `events`). A replayed batch inserts the same rows again, with the same
// Kafka partition and offset, which the view folds into one.
type EventsRaw struct {
	ch clickhouse.Conn
}

// NewEventsRaw returns the events_raw sink.
func NewEventsRaw(ch clickhouse.Conn) *EventsRaw { return &EventsRaw{ch: ch} }

// Name names the sink in logs and metrics.
func (*EventsRaw) Name() string { return "events_raw" }

// Fold inserts one row per event.
func (s *EventsRaw) Fold(ctx context.Context, events []Event) error {
	rows := newEventRows(len(events))
	for i := range events {
		rows.add(&events[i].E, events[i].Partition, events[i].Offset)
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return rows.insert(ictx, s.ch)
}
