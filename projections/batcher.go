package projections

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/endcap/endcap/internal/retry"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/kafka"
)

// GroupOptions are the consumer-group timings every projector shares
// (docs/design/projector.md, Faults and recovery). Zero values take the defaults.
type GroupOptions struct {
	// SessionTimeout: how long the broker waits for a member's heartbeats
	// before it gives the member's partitions to the others. It bounds the
	// time a crashed process's partitions stay unfolded. Default 10 s.
	SessionTimeout time.Duration
	// RebalanceTimeout: how long the broker waits for every member to
	// rejoin at a rebalance; a member that takes longer is dropped from the
	// group (and rejoins afterwards). Members rejoin between batches, so it
	// must exceed FlushTimeout. Default 60 s.
	RebalanceTimeout time.Duration
	// FlushTimeout bounds one attempt at folding and committing a batch. An
	// attempt that fails or takes longer is abandoned: the batch is read
	// again from the last commit after a backoff. Default 30 s.
	FlushTimeout time.Duration
	// StopGrace: how long a batch in flight when the process is stopped
	// may still take to be folded and committed (within FlushTimeout); past
	// it the attempt is abandoned and the partition's next owner folds the
	// batch again. Default 5 s.
	StopGrace time.Duration
	// Conn: how the group's client connects (TLS, SASL).
	Conn kafka.Conn
}

// Default consumer-group timings.
const (
	DefaultSessionTimeout   = 10 * time.Second
	DefaultRebalanceTimeout = 60 * time.Second
	DefaultFlushTimeout     = 30 * time.Second
	DefaultStopGrace        = 5 * time.Second
)

func (o GroupOptions) withDefaults() GroupOptions {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.RebalanceTimeout <= 0 {
		o.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = DefaultFlushTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	return o
}

// heartbeatInterval is how often a member heartbeats: a member learns of a
// rebalance at its next heartbeat, so a short interval hands partitions over
// sooner. At most a third of the session timeout, as Kafka advises.
func (o GroupOptions) heartbeatInterval() time.Duration {
	return min(time.Second, o.SessionTimeout/3)
}

// batcher is the consume loop every projector shares: poll records, flush a
// batch when it holds maxRows records or its oldest waited flushInterval,
// commit offsets only after the flush succeeded.
//
// A batch is folded and committed in one attempt, bounded by FlushTimeout.
// When the attempt fails (a sink down, ClickHouse or Redis frozen, the commit
// refused because the member lost its place in the group), the batch is
// dropped: its partitions are rewound to their first records (the last
// commit), the group may rebalance, and after a backoff the same records are
// polled again, by this member or by the partition's new owner. Nothing is
// skipped, and the sinks tolerate folding a batch again. Rebalances are held
// only while an attempt runs, so a member never misses one for longer than
// FlushTimeout, and one that was dropped from the group anyway (a broker
// restart, a paused broker) rejoins at its next poll.
type batcher struct {
	client        *kgo.Client
	group         string
	topics        []string
	maxRows       int
	flushInterval time.Duration
	flushTimeout  time.Duration
	stopGrace     time.Duration
	log           *slog.Logger
	flush         func(ctx context.Context, batch []*kgo.Record) error

	// progress is when the batcher last showed it is not stuck (Unix ns):
	// a batch committed, or a poll that found nothing to fold while no
	// dropped batch is owed. owed: a batch was dropped and not folded since
	// (cleared when a batch is committed, or at a rebalance).
	progress atomic.Int64
	owed     atomic.Bool
	// attempting is when the attempt in flight began (Unix ns; 0: none),
	// for the stall warnings of watch.
	attempting atomic.Int64
}

// partitionHooks are told of the partitions a member is assigned and those
// it loses (revoked at a rebalance, or lost when it was dropped from the
// group), by topic; nil: not told.
type partitionHooks struct {
	assigned, revoked func(map[string][]int32)
}

func newBatcher(brokers []string, group string, topics []string, maxRows int, flushInterval time.Duration,
	o GroupOptions, log *slog.Logger, flush func(context.Context, []*kgo.Record) error, hooks ...partitionHooks) (*batcher, error) {
	o = o.withDefaults()
	b := &batcher{group: group, topics: topics, maxRows: maxRows, flushInterval: flushInterval,
		flushTimeout: o.FlushTimeout, stopGrace: o.StopGrace, log: log, flush: flush}
	b.progress.Store(time.Now().UnixNano())
	// A batch owed on partitions that moved away (a rebalance the member
	// took part in) is their new owner's now; a new assignment means the
	// member is in the group again, and the next polls say whether it has
	// work. Partitions lost (the member was dropped from the group) leave the
	// debt in place: until the member is back, it makes no progress.
	settled := func(context.Context, *kgo.Client, map[string][]int32) { b.owed.Store(false) }
	assigned, revoked := settled, settled
	for _, h := range hooks {
		if h.assigned != nil {
			assigned = func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) { h.assigned(ps); settled(ctx, cl, ps) }
		}
		if h.revoked != nil {
			revoked = func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) { h.revoked(ps); settled(ctx, cl, ps) }
		}
	}
	lost := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		for _, h := range hooks {
			if h.revoked != nil {
				h.revoked(ps)
			}
		}
	}
	cl, err := kafka.NewClient(brokers, log, o.Conn.With(
		kgo.ClientID(group),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(o.SessionTimeout),
		kgo.RebalanceTimeout(o.RebalanceTimeout),
		kgo.HeartbeatInterval(o.heartbeatInterval()),
		kgo.OnPartitionsRevoked(revoked),
		kgo.OnPartitionsAssigned(assigned),
		kgo.OnPartitionsLost(lost),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxBytes(64<<20),
	)...)
	if err != nil {
		return nil, err
	}
	b.client = cl
	return b, nil
}

// Health is what a process's readiness check reads of a projector's
// consume loop.
type Health interface {
	// Group is the consumer group's name.
	Group() string
	// StalledFor is how long the loop has gone without progress (see
	// batcher.StalledFor).
	StalledFor(now time.Time) time.Duration
}

// Group is the consumer group's name.
func (b *batcher) Group() string { return b.group }

// StalledFor is how long the batcher has gone without progress: without
// committing a batch, or without finding nothing to fold (caught up) while
// no batch it dropped was waiting. A healthy batcher stays under a few
// flush intervals; one that keeps failing grows without bound.
func (b *batcher) StalledFor(now time.Time) time.Duration {
	return max(0, now.Sub(time.Unix(0, b.progress.Load())))
}

func (b *batcher) markProgress() { b.progress.Store(time.Now().UnixNano()) }

func (b *batcher) run(ctx context.Context) error {
	// The group's counters exist from its start, at 0 (deploy/monitoring).
	telemetry.ProjectorBatchRetries.WithLabelValues(b.group)
	telemetry.UndecodableRecords.WithLabelValues(b.group)
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); b.watch(wctx) }()
	defer func() { stopWatch(); <-watched }()

	var (
		batch   []*kgo.Record
		first   time.Time
		seen    = map[partitionKey]fetched{} // per partition, what the batch's fetches saw
		backoff = retry.New(minBackoff, maxBackoff)
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
				if !b.owed.Load() {
					b.markProgress()
				}
				b.client.AllowRebalance()
				continue
			}
			if len(batch) < b.maxRows && time.Since(first) < b.flushInterval {
				continue
			}
		}
		err := b.attempt(ctx, batch)
		var pause time.Duration
		if err == nil {
			b.owed.Store(false)
			b.markProgress()
			b.reportLag(seen)
			backoff.Reset()
		} else {
			if ctx.Err() != nil {
				b.client.AllowRebalance()
				return ctx.Err()
			}
			pause = backoff.Next()
			b.log.Error("projector: batch failed; it is read again from the last commit after the backoff",
				"group", b.group, "records", len(batch), "backoff", pause, "err", err)
			telemetry.ProjectorBatchRetries.WithLabelValues(b.group).Inc()
			b.rewind(batch)
			b.owed.Store(true)
		}
		clear(seen)
		clear(batch)
		batch = batch[:0]
		b.client.AllowRebalance()
		if err := retry.Sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// The backoff between two attempts at a failed batch (with jitter).
const (
	minBackoff = 200 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// attempt folds the batch and commits its offsets, within flushTimeout.
// A batch in flight when ctx ends (the process is being stopped) is still
// folded and committed, for up to stopGrace more: else its partitions' next
// owner folds it again.
func (b *batcher) attempt(ctx context.Context, batch []*kgo.Record) error {
	b.attempting.Store(time.Now().UnixNano())
	defer b.attempting.Store(0)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.flushTimeout)
	defer cancel()
	stopping := context.AfterFunc(ctx, func() {
		t := time.NewTimer(b.stopGrace)
		defer t.Stop()
		select {
		case <-fctx.Done():
		case <-t.C:
			cancel()
		}
	})
	defer stopping()
	fctx, span := b.batchSpan(fctx, batch)
	defer span.End()
	if err := b.flush(fctx, batch); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	// Once written, the batch is committed whatever happens meanwhile.
	committing := time.Now()
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer ccancel()
	if err := b.client.CommitRecords(cctx, batch...); err != nil {
		return err
	}
	observeStep(b.group, "commit", committing)
	return nil
}

// batchSpan starts the span of a batch's attempt (with traces on): its
// inserts and charges are its children, and it links to the traces the
// records carry in their headers (the requests that produced them), up to
// the SDK's link limit (128; OTEL_SPAN_LINK_COUNT_LIMIT).
func (b *batcher) batchSpan(ctx context.Context, batch []*kgo.Record) (context.Context, trace.Span) {
	if !telemetry.Tracing() {
		return telemetry.StartSpan(ctx, tracerName, "")
	}
	var links []trace.Link
	seen := map[trace.SpanID]bool{}
	for _, r := range batch {
		if sc := kafka.RecordSpanContext(r); sc.IsValid() && !seen[sc.SpanID()] {
			seen[sc.SpanID()] = true
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return telemetry.StartSpan(ctx, tracerName, b.group+" batch", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(telemetry.AttrGroup.String(b.group), telemetry.AttrRows.Int(len(batch))))
}

// rewind sets each partition of a dropped batch back to its first record in
// the batch (the offset after the last commit), and drops whatever the
// client had fetched beyond it, so that the next poll reads the batch again.
// It runs while rebalances are still held, so the partitions are this
// member's; a partition the member lost meanwhile is skipped, and its next
// owner starts from the last commit.
func (b *batcher) rewind(batch []*kgo.Record) {
	to := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range batch {
		ps := to[r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			to[r.Topic] = ps
		}
		if o, ok := ps[r.Partition]; !ok || r.Offset < o.Offset {
			ps[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
		}
	}
	b.client.SetOffsets(to)
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
// fetched: what docs/design/attribution.md and docs/reference/scored-attribution.md take it
// to mean. watch sets the same gauge from the broker every few seconds.
func (b *batcher) reportLag(seen map[partitionKey]fetched) {
	for k, f := range seen {
		telemetry.ConsumerLag.WithLabelValues(k.topic, b.group, strconv.Itoa(int(k.partition))).Set(float64(max(0, f.hwm-f.next)))
	}
}

// watchInterval is how often watch asks the broker for the group's lag.
const watchInterval = 5 * time.Second

// watch keeps the health gauges of the group until ctx ends: how long the
// batcher has been stalled, and the lag of every partition of its topics,
// from the broker (end offset − the group's committed offset), whoever owns
// the partition: those of a member that died, or that no member owns, are
// counted too. Each process running the group reports the same figures:
// aggregate them with max, not sum. A partition with records waiting whose
// committed offset has not moved for stallWarnAfter is logged as a warning
// (once a stall), and again when it moves.
func (b *batcher) watch(ctx context.Context) {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	adm := kadm.NewClient(b.client)
	stalls := stallTracker{after: stallWarnAfter}
	for {
		now := time.Now()
		telemetry.ProjectorStalledSeconds.WithLabelValues(b.group).Set(b.StalledFor(now).Seconds())
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		lags, err := groupLag(lctx, adm, b.group, b.topics)
		cancel()
		if err == nil {
			for k, l := range lags {
				telemetry.ConsumerLag.WithLabelValues(k.topic, b.group, strconv.Itoa(int(k.partition))).Set(float64(l.records))
			}
			stalled, moved := stalls.observe(now, lags)
			for _, s := range stalled {
				attempt := time.Duration(0)
				if at := b.attempting.Load(); at != 0 {
					attempt = now.Sub(time.Unix(0, at)).Round(time.Millisecond)
				}
				b.log.Warn("projector: a partition with records waiting has not been folded (whoever owns it)",
					"group", b.group, "topic", s.topic, "partition", s.partition, "records_waiting", s.records,
					"committed", s.committed, "for", s.stalled.Round(time.Second),
					"this_member_batch_in_flight_for", attempt, "this_member_without_progress_for", b.StalledFor(now).Round(time.Second))
			}
			for _, s := range moved {
				b.log.Info("projector: a stalled partition is folded again",
					"group", b.group, "topic", s.topic, "partition", s.partition, "after", s.stalled.Round(time.Second))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stallWarnAfter is how long a partition with records waiting may keep its
// committed offset before watch logs it: longer than a flush attempt
// (FlushTimeout) and a rebalance usually take.
const stallWarnAfter = 45 * time.Second

// stallTracker follows, per partition, since when its committed offset has
// not moved while records were waiting.
type stallTracker struct {
	after time.Duration
	since map[partitionKey]*stallState
}

type stallState struct {
	committed int64
	from      time.Time
	warned    bool
}

// stall is a partition that has not moved for stalled (records waiting,
// at committed).
type stall struct {
	partitionKey
	records, committed int64
	stalled            time.Duration
}

// observe takes the lags read at now and returns the partitions that have
// just been stalled for the tracker's bound, and those that were reported
// and have moved since (or have nothing waiting any more).
func (s *stallTracker) observe(now time.Time, lags map[partitionKey]partitionLag) (stalled, moved []stall) {
	if s.since == nil {
		s.since = map[partitionKey]*stallState{}
	}
	for k, st := range s.since {
		l, ok := lags[k]
		if !ok || (l.records > 0 && l.committed == st.committed) {
			continue // not read this time, or still where it was
		}
		if st.warned {
			moved = append(moved, stall{partitionKey: k, records: l.records, committed: l.committed, stalled: now.Sub(st.from)})
		}
		delete(s.since, k)
	}
	for k, l := range lags {
		if l.records == 0 {
			continue
		}
		st := s.since[k]
		if st == nil {
			s.since[k] = &stallState{committed: l.committed, from: now}
			continue
		}
		if !st.warned && now.Sub(st.from) >= s.after {
			st.warned = true
			stalled = append(stalled, stall{partitionKey: k, records: l.records, committed: l.committed, stalled: now.Sub(st.from)})
		}
	}
	sortStalls(stalled)
	sortStalls(moved)
	return stalled, moved
}

func sortStalls(ss []stall) {
	slices.SortFunc(ss, func(a, b stall) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
}

// partitionLag is a partition's records waiting (end offset − the offset
// the group starts from) and that offset.
type partitionLag struct{ records, committed int64 }

// groupLag is, for every partition of topics, its end offset minus the
// group's committed offset (minus its start offset where the group has
// committed nothing: the group starts there), and that offset.
func groupLag(ctx context.Context, adm *kadm.Client, group string, topics []string) (map[partitionKey]partitionLag, error) {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[partitionKey]partitionLag{}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil || e.Offset < 0 {
			return
		}
		from := int64(-1)
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.Err == nil && c.At >= 0 {
			from = c.At
		} else if s, ok := starts.Lookup(e.Topic, e.Partition); ok && s.Err == nil {
			from = s.Offset
		}
		if from >= 0 {
			out[partitionKey{e.Topic, e.Partition}] = partitionLag{records: max(0, e.Offset-from), committed: from}
		}
	})
	return out, nil
}
