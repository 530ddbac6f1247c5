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
	"github.com/endcap/endcap/internal/priority"
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
// decodes every record once, claims every event id once (Claims: the first
// record of a partition to claim an id owns it; a later copy is a duplicate
// and dropped, a replay of the owner is kept), hands the events kept to
// every sink at once while the new claims go to the claims changelog, and
// commits the offsets after all of it succeeded. A sink failing fails the
// batch: it is retried whole, on every sink, with backoff, never skipped
// (docs/design/projector.md).
type EventFold struct {
	b      *batcher
	claims *Claims
	sinks  []EventSink
	log    *slog.Logger
	// gate and yieldBudget: the fold gives way to the API's requests
	// (Yield), for at most yieldBudget a batch.
	gate        *priority.Gate
	yieldBudget time.Duration
}

// EventFoldOptions configure an EventFold.
type EventFoldOptions struct {
	Brokers       []string
	Topic         string // the events topic
	Claims        *Claims
	Sinks         []EventSink
	MaxRows       int
	FlushInterval time.Duration
	Group         GroupOptions
	Log           *slog.Logger
	// Yield, when set, is the gate of the API's requests in this process:
	// the fold's batches give way to them (priority.Yield between units of
	// YieldEvery records, and between the columns of an insert), waiting
	// for at most a third of the flush timeout a batch.
	Yield *priority.Gate
}

// YieldEvery is how many records the fold and its sinks work through
// between two priority.Yield calls: a millisecond or two of a core.
const YieldEvery = 1_000

// NewEventFold joins the consumer group (it starts consuming on Run).
func NewEventFold(o EventFoldOptions) (*EventFold, error) {
	if o.Claims == nil || len(o.Sinks) == 0 {
		return nil, errors.New("event fold: Claims and at least one sink are required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	f := &EventFold{claims: o.Claims, sinks: o.Sinks, log: o.Log,
		gate: o.Yield, yieldBudget: o.Group.withDefaults().FlushTimeout / 3}
	var err error
	moved := partitionHooks{
		assigned: func(ps map[string][]int32) { f.claims.Assigned(ps[o.Topic]) },
		revoked:  func(ps map[string][]int32) { f.claims.Revoked(ps[o.Topic]) },
	}
	if f.b, err = newBatcher(o.Brokers, EventsGroup, []string{o.Topic}, o.MaxRows, o.FlushInterval, o.Group, o.Log, f.flush, moved); err != nil {
		return nil, err
	}
	return f, nil
}

// Health is the fold's consume loop, for readiness checks.
func (f *EventFold) Health() Health { return f.b }

// Run consumes until ctx ends (see batcher for the guarantees).
func (f *EventFold) Run(ctx context.Context) error { return f.b.run(ctx) }

// Close leaves the group and closes the fold's Claims. Uncommitted records
// are consumed again by the next owner of their partitions.
func (f *EventFold) Close() {
	f.b.client.Close()
	if err := f.claims.Close(); err != nil {
		f.log.Warn("event fold: closing the claims", "err", err)
	}
}

func (f *EventFold) flush(ctx context.Context, batch []*kgo.Record) error {
	ctx = priority.With(ctx, f.gate, f.yieldBudget)
	if err := priority.Yield(ctx); err != nil {
		return err
	}
	start := time.Now()
	events := f.decode(ctx, batch)
	start = observeStep(EventsGroup, "decode", start)
	if len(events) == 0 {
		return nil
	}
	if err := priority.Yield(ctx); err != nil {
		return err
	}
	keys, claims, err := f.claim(ctx, events)
	if err != nil {
		return err
	}
	start = observeStep(EventsGroup, "claim", start)
	kept := keepOwners(events, claims)
	if dups := len(events) - len(kept); dups > 0 {
		telemetry.Duplicates.WithLabelValues("events").Add(float64(dups))
	}
	if err := priority.Yield(ctx); err != nil {
		return err
	}
	// The sinks and the claims' changelog at once; the batch is committed
	// once all of them succeeded.
	errs := make([]error, len(f.sinks)+1)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = f.claims.Keep(ctx, keys, claims) })
	if len(kept) > 0 {
		for i, s := range f.sinks {
			wg.Go(func() { errs[i+1] = f.fold(ctx, s, kept) })
		}
	}
	wg.Wait()
	if err = errors.Join(errs...); err == nil {
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

// claim claims every event's id and returns the keys and their outcomes,
// in the events' order. The changelog's catch-up of a partition just
// assigned runs within the flush's deadline; the decision itself within 10 s.
func (f *EventFold) claim(ctx context.Context, events []Event) ([]ClaimKey, []Claim, error) {
	keys := make([]ClaimKey, len(events))
	for i := range events {
		e := &events[i]
		keys[i] = ClaimKey{Key: eventClaimKey(e.E.MarketplaceID, e.E.Kind, e.E.ID), Partition: e.Partition, Offset: e.Offset}
	}
	claims, err := f.claims.Claim(ctx, keys)
	if err != nil {
		return nil, nil, err
	}
	return keys, claims, nil
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
// own, for decoding.
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

// decode decodes the batch, in batch order, chunks of it in parallel. Each
// record is decoded in its place in one slice (an Event is a few hundred
// bytes: a copy of the batch's would cost more than its decoding's
// allocations); only the chunks after one that skipped a record move.
func (f *EventFold) decode(ctx context.Context, batch []*kgo.Record) []Event {
	out := make([]Event, len(batch))
	parts := chunks(len(batch))
	if len(parts) == 1 {
		return out[:f.decodeRange(ctx, batch, out)]
	}
	n := make([]int, len(parts))
	var wg sync.WaitGroup
	for i, c := range parts {
		wg.Go(func() { n[i] = f.decodeRange(ctx, batch[c[0]:c[1]], out[c[0]:c[1]]) })
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
// read first and in order, and returns how many it could. It yields every
// YieldEvery records (a context that ended is the flush's to notice).
func (f *EventFold) decodeRange(ctx context.Context, batch []*kgo.Record, out []Event) int {
	n := 0
	// The last marketplace id parsed: a batch has few, in runs.
	var lastID string
	var lastMP uuid.UUID
	for i, r := range batch {
		if i > 0 && i%YieldEvery == 0 {
			_ = priority.Yield(ctx)
		}
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
		if d.E.MarketplaceID == lastID {
			d.MP = lastMP
		} else if mp, err := uuid.Parse(d.E.MarketplaceID); err == nil {
			d.MP, lastID, lastMP = mp, d.E.MarketplaceID, mp
		}
		d.Partition, d.Offset = r.Partition, r.Offset
		d.derive()
		n++
	}
	return n
}
