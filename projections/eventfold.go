package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
)

// EventsGroup is the consumer group that folds the events topic.
const EventsGroup = "endcap-projector-events"

// LegacyEventsGroups are the consumer groups that folded the events topic
// before one group fed every sink: the interactions and the attribution
// projectors had groups of their own. EventFold.Run adopts their offsets
// once (AdoptLegacyOffsets) and deletes them.
var LegacyEventsGroups = []string{"endcap-projector-interactions", "endcap-projector-attribution"}

// Event is one record of the events topic as the fold hands it to its sinks:
// decoded, not a duplicate of an event id another record claimed first.
type Event struct {
	E records.Event
	// MP is E.MarketplaceID parsed; uuid.Nil when it is not a UUID (a
	// sink that needs it skips the event).
	MP        uuid.UUID
	Partition int32
	Offset    int64
	// Token is the resolvedBidId of an impression or click, decoded once for
	// every sink (not verified: the API verified it), when HasToken;
	// TokenErr says why a token the event carries cannot be used.
	Token    bidtoken.Claims
	HasToken bool
	TokenErr error
	// Interaction is the InteractionID of an impression or click (computed
	// once for every sink); zero for other kinds.
	Interaction uuid.UUID
}

// derive computes, once for every sink, what the sinks derive from a
// decoded event: its interaction id and its token.
func (d *Event) derive() {
	if d.E.Kind == records.KindImpression || d.E.Kind == records.KindClick {
		d.Interaction = InteractionID(d.E.MarketplaceID, d.E.Kind, d.E.ID)
	}
	d.readToken()
}

// readToken decodes the resolvedBidId of an impression or click. A token
// that names another marketplace than the event's is unusable too.
func (d *Event) readToken() {
	if d.E.ResolvedBidID == "" || (d.E.Kind != records.KindImpression && d.E.Kind != records.KindClick) {
		return
	}
	c, err := bidtoken.DecodeUnverified(d.E.ResolvedBidID)
	if err == nil && c.MarketplaceID != d.MP {
		err = errors.New("the token names another marketplace")
	}
	if err != nil {
		d.TokenErr = err
		return
	}
	d.Token, d.HasToken = c, true
}

// An EventSink folds batches of events into its tables. Fold may be called
// again with a batch it has seen (after a failure, a crash or a rebalance,
// the batch is replayed) and must then leave its tables and counters as if
// it had been called once. It must not modify events (the sinks share them).
type EventSink interface {
	Name() string
	Fold(ctx context.Context, events []Event) error
}

// EventFold is the consumer group of the events topic. For a batch it
// decodes every record once, claims every event id once (the Claimer: the
// first record to claim an id owns it; a later copy is a duplicate and
// dropped, a replay of the owner is kept), hands the events kept to every
// sink at once, and commits the offsets after all of them succeeded. A sink
// failing fails the batch: it is retried whole, on every sink, with backoff,
// never skipped (docs/projector.md).
type EventFold struct {
	b       *batcher
	claimer *Claimer
	sinks   []EventSink
	log     *slog.Logger
}

// EventFoldOptions configure an EventFold.
type EventFoldOptions struct {
	Brokers       []string
	Topic         string // the events topic
	Claimer       *Claimer
	Sinks         []EventSink
	MaxRows       int
	FlushInterval time.Duration
	Group         GroupOptions
	Log           *slog.Logger
}

// NewEventFold joins the consumer group (it starts consuming on Run).
func NewEventFold(o EventFoldOptions) (*EventFold, error) {
	if o.Claimer == nil || len(o.Sinks) == 0 {
		return nil, errors.New("event fold: a Claimer and at least one sink are required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	f := &EventFold{claimer: o.Claimer, sinks: o.Sinks, log: o.Log}
	var err error
	if f.b, err = newBatcher(o.Brokers, EventsGroup, []string{o.Topic}, o.MaxRows, o.FlushInterval, o.Group, o.Log, f.flush); err != nil {
		return nil, err
	}
	return f, nil
}

// Health is the fold's consume loop, for readiness checks.
func (f *EventFold) Health() Health { return f.b }

// Run consumes until ctx ends (see batcher for the guarantees).
func (f *EventFold) Run(ctx context.Context) error { return f.b.run(ctx) }

// Close leaves the group. Uncommitted records are consumed again by the
// next owner of their partitions.
func (f *EventFold) Close() { f.b.client.Close() }

func (f *EventFold) flush(ctx context.Context, batch []*kgo.Record) error {
	start := time.Now()
	events := f.decode(batch)
	start = observeStep(EventsGroup, "decode", start)
	if len(events) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	kept, err := f.dedupe(cctx, events)
	cancel()
	if err != nil {
		return err
	}
	start = observeStep(EventsGroup, "claim", start)
	if len(kept) == 0 {
		return nil
	}
	if len(f.sinks) == 1 {
		err = f.fold(ctx, f.sinks[0], kept)
	} else {
		errs := make([]error, len(f.sinks))
		var wg sync.WaitGroup
		for i, s := range f.sinks {
			wg.Go(func() { errs[i] = f.fold(ctx, s, kept) })
		}
		wg.Wait()
		err = errors.Join(errs...)
	}
	if err == nil {
		observeStep(EventsGroup, "sinks", start)
	}
	return err
}

func (f *EventFold) fold(ctx context.Context, s EventSink, events []Event) error {
	start := time.Now()
	if err := s.Fold(ctx, events); err != nil {
		return fmt.Errorf("%s: %w", s.Name(), err)
	}
	telemetry.SinkBatchSeconds.WithLabelValues(s.Name()).Observe(time.Since(start).Seconds())
	return nil
}

// dedupe claims every event's id and returns the events that own theirs.
func (f *EventFold) dedupe(ctx context.Context, events []Event) ([]Event, error) {
	keys := make([]ClaimKey, len(events))
	for i := range events {
		e := &events[i]
		keys[i] = ClaimKey{Key: eventClaimKey(e.E.MarketplaceID, e.E.Kind, e.E.ID), Partition: e.Partition, Offset: e.Offset}
	}
	claims, err := f.claim(ctx, keys)
	if err != nil {
		return nil, err
	}
	kept := keepOwners(events, claims)
	if dups := len(events) - len(kept); dups > 0 {
		telemetry.Duplicates.WithLabelValues("events").Add(float64(dups))
	}
	return kept, nil
}

// keepOwners compacts events in place to those whose claim is not a
// duplicate, in order, and clears the places left behind. An event moves
// only after a duplicate: in a batch without one nothing is copied.
func keepOwners(events []Event, claims []Claim) []Event {
	kept := events[:0]
	for i := range events {
		if claims[i] == ClaimDuplicate {
			continue
		}
		if len(kept) != i {
			events[len(kept)] = events[i]
		}
		kept = kept[:len(kept)+1]
	}
	clear(events[len(kept):])
	return kept
}

// eventClaimKey is the idempotency key of an event id (an id is unique per
// marketplace and kind).
func eventClaimKey(mp string, kind records.Kind, id string) string {
	return mp + ":" + kind.String() + ":" + id
}

// parallelChunk is the smallest share of a batch worth a goroutine of its
// own, for decoding and for claiming.
const parallelChunk = 5_000

// chunks cuts n items into up to GOMAXPROCS ranges of at least
// parallelChunk items.
func chunks(n int) [][2]int {
	k := min(runtime.GOMAXPROCS(0), max(1, n/parallelChunk))
	out := make([][2]int, k)
	for i := range k {
		out[i] = [2]int{i * n / k, (i + 1) * n / k}
	}
	return out
}

// claim claims keys in chunks on several connections at once (the client
// encodes and parses replies in parallel; Redis decides each key as one
// SET NX, so which of two equal keys wins is still one first claim).
func (f *EventFold) claim(ctx context.Context, keys []ClaimKey) ([]Claim, error) {
	parts := chunks(len(keys))
	if len(parts) == 1 {
		return f.claimer.Claim(ctx, keys)
	}
	out := make([]Claim, len(keys))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, c := range parts {
		wg.Go(func() {
			var got []Claim
			if got, errs[i] = f.claimer.Claim(ctx, keys[c[0]:c[1]]); errs[i] == nil {
				copy(out[c[0]:], got)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// decode decodes the batch, in batch order, chunks of it in parallel. Each
// record is decoded in its place in one slice (an Event is a few hundred
// bytes: a copy of the batch's would cost more than its decoding's
// allocations); only the chunks after one that skipped a record move.
func (f *EventFold) decode(batch []*kgo.Record) []Event {
	out := make([]Event, len(batch))
	parts := chunks(len(batch))
	if len(parts) == 1 {
		return out[:f.decodeRange(batch, out)]
	}
	n := make([]int, len(parts))
	var wg sync.WaitGroup
	for i, c := range parts {
		wg.Go(func() { n[i] = f.decodeRange(batch[c[0]:c[1]], out[c[0]:c[1]]) })
	}
	wg.Wait()
	w := 0
	for i, c := range parts {
		if w != c[0] {
			copy(out[w:], out[c[0]:c[0]+n[i]])
		}
		w += n[i]
	}
	clear(out[w:]) // no strings kept alive by the moved chunks' old places
	return out[:w]
}

// decodeRange decodes batch into out (as long as batch), the events it can
// read first and in order, and returns how many it could.
func (f *EventFold) decodeRange(batch []*kgo.Record, out []Event) int {
	n := 0
	for _, r := range batch {
		d := &out[n]
		err := records.DecodeEvent(r.Value, &d.E)
		if err == nil && (d.E.ID == "" || d.E.MarketplaceID == "") {
			err = errors.New("no event id or marketplace id")
		}
		if err != nil {
			// A record this version cannot read is logged and skipped: it
			// can never become readable by retrying.
			*d = Event{}
			telemetry.UndecodableRecords.WithLabelValues(EventsGroup).Inc()
			f.log.Error("event fold: undecodable record skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		if mp, err := uuid.Parse(d.E.MarketplaceID); err == nil {
			d.MP = mp
		}
		d.Partition, d.Offset = r.Partition, r.Offset
		d.derive()
		n++
	}
	return n
}
