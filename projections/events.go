package projections

import (
	"context"
	"time"

	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/storage/clickhouse"
)

// EventsRaw is the sink of the events fold that copies the events into
// ClickHouse table events_raw (read through the deduplicating view
// `events`). A replayed batch inserts the same rows again, with the same
// Kafka partition and offset, which the view folds into one.
type EventsRaw struct {
	ch clickhouse.Conn
	// skip leaves out the events an interactions sink beside this one folds.
	skip func(*Event) bool
}

// NewEventsRaw returns the events_raw sink. beside is the interactions sink
// that folds the same batches, or nil. The impressions and clicks it folds
// into interactions_raw, which keeps all that their events said, are left
// out of events_raw; the view `events` reads them from interactions_raw
// (migration 0007). Without it, every event is copied.
func NewEventsRaw(ch clickhouse.Conn, beside *Interactions) *EventsRaw {
	s := &EventsRaw{ch: ch, skip: func(*Event) bool { return false }}
	if beside != nil {
		s.skip = folded
	}
	return s
}

// Name names the sink in logs and metrics.
func (*EventsRaw) Name() string { return "events_raw" }

// Fold inserts one row per event it keeps.
func (s *EventsRaw) Fold(ctx context.Context, events []Event) error {
	rows, err := s.rows(ctx, events)
	if err != nil || rows == nil {
		return err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return rows.insert(ictx, s.ch)
}

// rows returns the rows of the events the sink keeps, in the order of
// events_raw's sorting key (SortedOrder); nil when it keeps none.
func (s *EventsRaw) rows(ctx context.Context, events []Event) (*eventRows, error) {
	var kept []*Event
	for i := range events {
		if !s.skip(&events[i]) {
			kept = append(kept, &events[i])
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	order := eventOrder(kept)
	rows := newEventRows(len(kept)) // sized for the events kept: beside the interactions sink, about a sixth of a batch
	for i, k := range order {
		if i > 0 && i%YieldEvery == 0 {
			if err := priority.Yield(ctx); err != nil {
				return nil, err
			}
		}
		rows.add(&kept[k].E, kept[k].Partition, kept[k].Offset)
	}
	return rows, nil
}
