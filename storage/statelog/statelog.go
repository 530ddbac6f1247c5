// Package statelog keeps an in-memory view of entity state that lives in a
// compacted Kafka changelog topic, as docs/design/state.md describes.
//
// Every record carries one entity's whole new state and its version. Each
// process reads the topic from the start, applies records in log order, and
// tails it. A record is applied when its version is higher than the view's
// version of that entity; otherwise every view rejects it the same way.
//
// Writes go through Append and AppendBatch: they check the caller's expected
// version against the view, append with acks=all, and return only after this
// process's own view has applied the records, so a writer reads its own writes.
// Writes to one entity from one process that expect a version are
// serialised; the losing side of a race sees ErrConflict. Last-writer-wins
// writes (AnyVersion) are not: one that loses a race is written again on
// top of the winner.
package statelog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/retry"
	"github.com/endcap/endcap/storage/kafka"
)

var (
	// ErrConflict means the entity's version was not the expected one.
	ErrConflict = errkind.New(errkind.Conflict, "the resource was changed by another request; read it again and retry")
	// ErrNotReady means the view has not caught up with the log yet.
	ErrNotReady = errkind.New(errkind.Unavailable, "the service is still loading its state; retry later")
	// ErrUnavailable means the log did not take the write in time.
	ErrUnavailable = errkind.New(errkind.Unavailable, "the change could not be stored right now; retry later")
	// ErrLocked means another writer holds the entity's lock: a conflict.
	ErrLocked = fmt.Errorf("%w: the entity is being changed by another request", ErrConflict)
	// ErrInFlight means the caller's context ended after the write was
	// handed to Kafka and before this view applied it: it may still be
	// applied, whole (the records are never failed because the caller
	// stopped waiting). It wraps ErrUnavailable.
	ErrInFlight = fmt.Errorf("%w: the write may still be applied", ErrUnavailable)
)

// applyWait bounds how long a write whose caller stopped waiting keeps its
// locks after Kafka acknowledged it, waiting for this view to apply it.
const applyWait = 30 * time.Second

// defaultMaxGivenUp is how many writes whose callers stopped waiting may wait
// for Kafka at once; past it, writes fail at once, writing nothing (each
// holds its records in memory until Kafka answers).
const defaultMaxGivenUp = 256

// Record is one entity change on the changelog topic.
type Record struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Version int64           `json:"version"`
	WriteID string          `json:"writeId"`
	AtMs    int64           `json:"at"`
	Deleted bool            `json:"deleted,omitempty"`
	State   json.RawMessage `json:"state,omitempty"`
}

// ApplyFunc folds an accepted record into a domain's view. It runs on the
// log's single applying goroutine, in log order. The record's State shares
// the bytes of the consumed Kafka record: an applier keeps nothing of it
// beyond its call (a decoder copies what it keeps).
type ApplyFunc func(Record)

// Log is the view of one changelog topic.
type Log struct {
	topic    string
	consumer *kgo.Client
	producer *kgo.Client
	log      *slog.Logger

	mu sync.Mutex
	// versions holds the version of every entity of a type without a
	// versioner (RegisterVersioned) by a 128-bit hash of its key
	// (versionKey), not by the key: a map without pointers, which the
	// garbage collector does not scan. The collections keep their entities'
	// versions in their entries instead (docs/design/state.md, Memory): a map
	// beside them cost a million-product catalog 60 bytes a product.
	versions   map[versionKey]int64
	seeds      [2]maphash.Seed
	appliers   map[string]ApplyFunc
	versioners map[string]func(id string) int64
	waiters    map[string]chan bool
	applied    atomic.Int64

	// keyLocks serialise this process's writes per entity: a key always maps
	// to the same stripe, so memory stays bounded however many entities.
	// Each is a semaphore of one, so that a wait for it ends with the
	// writer's context.
	keyLocks [256]chan struct{}
	locker   Locker

	givenUp    atomic.Int64 // writes in flight whose callers stopped waiting
	maxGivenUp int64

	ready     chan struct{}
	readyOnce sync.Once
	// closed ends the waits of the writes whose callers stopped waiting
	// (Close: this view applies nothing more).
	closed    chan struct{}
	closeOnce sync.Once

	// next is the offset after the last record applied, per partition
	// (under mu); progress is closed and replaced whenever it moves.
	next     map[int32]int64
	progress chan struct{}

	// dec decodes the records apply is given (on the applying goroutine).
	dec recordDecoder
}

// New returns a view of topic. producer is used for appends; a consumer of
// its own is created from brokers, connecting with conn (the process's
// kafka.Conn: TLS, SASL). Register appliers before Run.
func New(topic string, brokers []string, producer *kgo.Client, log *slog.Logger, conn ...kgo.Opt) (*Log, error) {
	consumer, err := kafka.NewClient(brokers, log, kafka.Conn(conn).With(
		kgo.ClientID("endcap-view-"+topic),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)...)
	if err != nil {
		return nil, err
	}
	l := &Log{
		topic:    topic,
		consumer: consumer,
		producer: producer,
		log:      log,
		versions: map[versionKey]int64{},
		seeds:    [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		appliers: map[string]ApplyFunc{},

		versioners: map[string]func(string) int64{},
		waiters:    map[string]chan bool{},
		ready:      make(chan struct{}),
		closed:     make(chan struct{}),
		next:       map[int32]int64{},
		progress:   make(chan struct{}),

		maxGivenUp: defaultMaxGivenUp,
	}
	for i := range l.keyLocks {
		l.keyLocks[i] = make(chan struct{}, 1)
	}
	return l, nil
}

// Register sets the applier of one entity type.
func (l *Log) Register(typ string, fn ApplyFunc) {
	l.mu.Lock()
	l.appliers[typ] = fn
	l.mu.Unlock()
}

// RegisterVersioned sets the applier of one entity type that keeps its
// entities' versions itself: version(id) answers the version of every
// record fn was given for id (0 when none), deleted entities included.
// Both run on the log's applying goroutine; version may also be called by
// writers at any time.
func (l *Log) RegisterVersioned(typ string, fn ApplyFunc, version func(id string) int64) {
	l.mu.Lock()
	l.appliers[typ] = fn
	l.versioners[typ] = version
	l.mu.Unlock()
}

// Ready reports whether the view has caught up with the log as it was when
// Run started.
func (l *Log) Ready() bool {
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// WaitReady blocks until the view caught up or ctx ends.
func (l *Log) WaitReady(ctx context.Context) error {
	select {
	case <-l.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrNotReady, ctx.Err())
	}
}

// Applied is the number of records applied or rejected so far.
func (l *Log) Applied() int64 { return l.applied.Load() }

// Close stops the consumer.
func (l *Log) Close() {
	l.closeOnce.Do(func() { close(l.closed) })
	l.consumer.Close()
}

// Run consumes the topic until ctx ends.
func (l *Log) Run(ctx context.Context) error {
	var end map[int32]int64
	for backoff := retry.New(250*time.Millisecond, 5*time.Second); ; {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		end, err = kafka.EndOffsets(ectx, l.producer, l.topic)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.log.Warn("state log: waiting for topic", "topic", l.topic, "err", err)
		if _, err := backoff.Wait(ctx); err != nil {
			return err
		}
	}
	pending := map[int32]int64{}
	for p, o := range end {
		if o > 0 {
			pending[p] = o
		}
	}
	if len(pending) == 0 {
		l.markReady()
	}
	for {
		fetches := l.consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fetches.EachError(func(t string, p int32, err error) {
			l.log.Warn("state log: fetch error", "topic", t, "partition", p, "err", err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			l.apply(r)
			if want, ok := pending[r.Partition]; ok && r.Offset+1 >= want {
				delete(pending, r.Partition)
				if len(pending) == 0 {
					l.markReady()
				}
			}
		})
		l.mu.Lock()
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if n := len(p.Records); n > 0 {
				l.next[p.Partition] = p.Records[n-1].Offset + 1
			}
		})
		close(l.progress)
		l.progress = make(chan struct{})
		l.mu.Unlock()
	}
}

// CatchUp returns once the view has applied every record the topic held
// when it was called: a change written (and acknowledged) before then is
// visible after it.
func (l *Log) CatchUp(ctx context.Context) error {
	end, err := kafka.EndOffsets(ctx, l.producer, l.topic)
	if err != nil {
		return err
	}
	for {
		l.mu.Lock()
		done := true
		for p, o := range end {
			if o > 0 && l.next[p] < o {
				done = false
				break
			}
		}
		ch := l.progress
		l.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrNotReady, ctx.Err())
		case <-ch:
		}
	}
}

func (l *Log) markReady() {
	l.readyOnce.Do(func() {
		l.log.Info("state log caught up", "topic", l.topic, "records", l.applied.Load())
		close(l.ready)
	})
}

func (l *Log) apply(r *kgo.Record) {
	defer l.applied.Add(1)
	// rec.ID is a part of key. The views copy a new entity's id into their
	// own chunks (keyArena): key and the decoded record are garbage once
	// applied.
	rec, key, err := l.dec.decode(r.Value)
	if err != nil || rec.Type == "" || rec.ID == "" {
		l.log.Error("state log: undecodable record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		return
	}
	l.mu.Lock()
	var accepted bool
	if version := l.versioners[rec.Type]; version != nil {
		accepted = rec.Version > version(rec.ID)
	} else {
		vk := l.versionKey(key)
		if accepted = rec.Version > l.versions[vk]; accepted {
			l.versions[vk] = rec.Version
		}
	}
	if accepted {
		if fn := l.appliers[rec.Type]; fn != nil {
			fn(rec)
		}
	}
	w := l.waiters[rec.WriteID]
	delete(l.waiters, rec.WriteID)
	l.mu.Unlock()
	if w != nil {
		w <- accepted
	}
}

// versionKey is an entity key's hash: two 64-bit hashes of independent
// random seeds (this process's; the map lives in memory only). Two of the
// keys a process holds share a hash with a probability of about n²/2¹²⁹:
// 10⁻²⁶ for 1.4 M entities.
type versionKey [2]uint64

func (l *Log) versionKey(key string) versionKey {
	return versionKey{maphash.String(l.seeds[0], key), maphash.String(l.seeds[1], key)}
}

// Version is the view's version of an entity (0 when it does not exist).
func (l *Log) Version(typ, id string) int64 {
	l.mu.Lock()
	version := l.versioners[typ]
	if version == nil {
		defer l.mu.Unlock()
		return l.versions[l.versionKey(typ+"/"+id)]
	}
	l.mu.Unlock()
	return version(id)
}

// AnyVersion as an expected version means "whatever the current version is":
// last writer wins (upserts). A write that loses a race is retried.
const AnyVersion int64 = -1

// Change is one entity write of a batch.
type Change struct {
	Type     string
	ID       string
	Expected int64 // version the entity must have (0: must not exist), or AnyVersion
	State    any
	Deleted  bool
}

// Locker serialises writes to one entity across processes (a short Redis
// lock), so that the loser of a race never appends a record: compaction keeps
// the last record of a key, and a loser's record must never be it. Lock
// returns an error wrapping ErrLocked when another writer holds the lock.
type Locker interface {
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

// SetLocker sets the cross-process locker used by single-entity writes
// with an expected version.
func (l *Log) SetLocker(lk Locker) { l.locker = lk }

// Append writes the entity's new state, expecting its current version to be
// expected (0 to create, AnyVersion to overwrite). It returns the new version
// once this process's view has applied it.
//
// Every wait honours ctx: the entity's lock (Redis), the stripe of this
// process, Kafka's acknowledgement and the view. When ctx ends after the
// record was handed to Kafka, Append returns an error wrapping ErrInFlight
// and keeps the entity's locks until the record is acknowledged and
// applied (or fails), so that no other writer of this entity appends in
// between.
func (l *Log) Append(ctx context.Context, typ, id string, expected int64, state any, deleted bool) (int64, error) {
	var unlock func()
	if l.locker != nil && expected != AnyVersion {
		u, err := l.lock(ctx, l.topic+"/"+typ+"/"+id)
		if err != nil {
			if errors.Is(err, ErrLocked) {
				return 0, err
			}
			return 0, fmt.Errorf("%w: lock: %v", ErrUnavailable, err)
		}
		unlock = u
	}
	vs, err := l.appendBatch(ctx, []Change{{Type: typ, ID: id, Expected: expected, State: state, Deleted: deleted}}, unlock)
	if err != nil {
		if len(vs) == 1 {
			return vs[0], err
		}
		return 0, err
	}
	return vs[0], nil
}

// lock takes the cross-process lock of key, giving up when ctx ends even if
// the locker does not (a lock taken after that is released at once).
func (l *Log) lock(ctx context.Context, key string) (func(), error) {
	return bounded.Call(ctx, func(ctx context.Context) (func(), error) { return l.locker.Lock(ctx, key) }, func(unlock func()) { unlock() })
}

// AppendBatch writes every change and returns their new versions once this
// process's view has applied all of them. A change with an expected version
// that does not match fails the whole batch with ErrConflict before anything
// is written. Changes with AnyVersion that lose a race with another writer
// (of this process or another) are written again on top of the winner.
//
// Only changes with an expected version take the lock stripes: a bulk
// last-writer-wins batch (500 catalog products cover most of the 256
// stripes) would otherwise hold nearly every stripe for a Kafka round trip
// and serialise all the other batches of the process.
//
// When ctx ends once the records are handed to Kafka, AppendBatch returns
// an error wrapping ErrInFlight: the batch may still land, whole.
func (l *Log) AppendBatch(ctx context.Context, changes []Change) ([]int64, error) {
	return l.appendBatch(ctx, changes, nil)
}

// appendBatch is AppendBatch calling settled (when not nil) once the write
// is settled: when it returns, or later, when it returns ErrInFlight, once
// the records are acknowledged and applied or failed.
func (l *Log) appendBatch(ctx context.Context, changes []Change, settled func()) ([]int64, error) {
	var held []chan struct{}
	handedOff := false
	defer func() {
		if !handedOff {
			release(held, settled)
		}
	}()
	if !l.Ready() {
		return nil, ErrNotReady
	}
	if len(changes) == 0 {
		return nil, nil
	}
	if n := l.givenUp.Load(); n >= l.maxGivenUp {
		return nil, fmt.Errorf("%w: %d earlier writes still wait for Kafka", ErrUnavailable, n)
	}
	var err error
	if held, err = l.lockStripes(ctx, changes); err != nil {
		return nil, err
	}
	versions := make([]int64, len(changes))
	for i, c := range changes {
		cur := l.Version(c.Type, c.ID)
		if c.Expected != AnyVersion && cur != c.Expected {
			return []int64{cur}, ErrConflict
		}
		versions[i] = cur + 1
	}
	pending := make([]int, len(changes))
	for i := range pending {
		pending[i] = i
	}
	for attempt := 0; ; attempt++ {
		lost, fl, err := l.write(ctx, changes, versions, pending)
		if fl != nil {
			handedOff = true
			l.givenUp.Add(1)
			go func() {
				fl.settle()
				release(held, settled)
				l.givenUp.Add(-1)
			}()
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if len(lost) == 0 {
			return versions, nil
		}
		for _, i := range lost {
			if changes[i].Expected != AnyVersion || attempt >= 20 {
				return []int64{l.Version(changes[i].Type, changes[i].ID)}, ErrConflict
			}
		}
		// Lost to a concurrent writer of another process: its record is
		// applied now. Wait a random moment (so that two writers do not keep
		// colliding) and write on top of it.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, context.Cause(ctx))
		case <-time.After(time.Duration(1+rand.IntN(10)) * time.Millisecond):
		}
		for _, i := range lost {
			versions[i] = l.Version(changes[i].Type, changes[i].ID) + 1
		}
		pending = lost
	}
}

func release(stripes []chan struct{}, settled func()) {
	for _, s := range stripes {
		<-s
	}
	if settled != nil {
		settled()
	}
}

// inflight is a write whose caller stopped waiting.
type inflight struct {
	l     *Log
	p     *kafka.Pending
	waits []wait
	ids   []string
}

type wait struct {
	i    int
	ch   chan bool
	seen bool
}

// settle waits until the records are acknowledged (or failed) and, if
// acknowledged, applied by this view (at most applyWait), then forgets them.
func (f *inflight) settle() {
	defer f.forget()
	select {
	case <-f.p.Done():
	case <-f.l.closed:
		return
	}
	if err := f.p.Err(); err != nil {
		f.l.log.Warn("state log: a write given up by its caller failed", "topic", f.l.topic, "err", err)
		return
	}
	timeout := time.NewTimer(applyWait)
	defer timeout.Stop()
	for _, w := range f.waits {
		if w.seen {
			continue
		}
		select {
		case <-w.ch:
		case <-timeout.C:
			return
		case <-f.l.closed:
			return
		}
	}
}

func (f *inflight) forget() {
	f.l.mu.Lock()
	for _, id := range f.ids {
		delete(f.l.waiters, id)
	}
	f.l.mu.Unlock()
}

// write appends changes[idx] with versions[idx] and waits until the view
// applied or rejected each; it returns the indexes that were rejected. When
// ctx ends before that, it returns the write in flight (and ErrInFlight).
func (l *Log) write(ctx context.Context, changes []Change, versions []int64, idx []int) ([]int, *inflight, error) {
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, context.Cause(ctx))
	}
	fl := &inflight{l: l, waits: make([]wait, 0, len(idx)), ids: make([]string, 0, len(idx))}
	recs := make([]*kgo.Record, 0, len(idx))
	now := time.Now().UnixMilli()
	for _, i := range idx {
		c := changes[i]
		raw, err := json.Marshal(c.State)
		if err != nil {
			return nil, nil, err
		}
		rec := Record{Type: c.Type, ID: c.ID, Version: versions[i], WriteID: uuid.NewString(), AtMs: now, Deleted: c.Deleted, State: raw}
		val, err := json.Marshal(rec)
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, &kgo.Record{Topic: l.topic, Key: []byte(c.Type + "/" + c.ID), Value: val})
		fl.waits = append(fl.waits, wait{i: i, ch: make(chan bool, 1)})
		fl.ids = append(fl.ids, rec.WriteID)
	}
	l.mu.Lock()
	for k, w := range fl.waits {
		l.waiters[fl.ids[k]] = w.ch
	}
	l.mu.Unlock()
	// The records are produced detached from ctx: a caller that gives up
	// never fails part of a batch (see kafka.Produce).
	fl.p = kafka.Produce(ctx, l.producer, recs...)
	if err := fl.p.Wait(ctx); err != nil {
		if errors.Is(err, kafka.ErrNotAcknowledged) {
			return nil, fl, fmt.Errorf("%w: %v", ErrInFlight, err)
		}
		fl.forget()
		return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var lost []int
	for k := range fl.waits {
		w := &fl.waits[k]
		select {
		case ok := <-w.ch:
			w.seen = true
			if !ok {
				lost = append(lost, w.i)
			}
		case <-ctx.Done():
			return nil, fl, fmt.Errorf("%w: appended but not yet applied: %v", ErrInFlight, context.Cause(ctx))
		}
	}
	fl.forget()
	return lost, nil, nil
}

// lockStripes takes the lock stripes of the changes' entities that expect a
// version, each once, in a fixed order so that concurrent batches cannot
// deadlock. It gives up when ctx ends.
func (l *Log) lockStripes(ctx context.Context, changes []Change) ([]chan struct{}, error) {
	var seen [len(l.keyLocks)]bool
	for _, c := range changes {
		if c.Expected == AnyVersion {
			continue
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(c.Type))
		_, _ = h.Write([]byte{'/'})
		_, _ = h.Write([]byte(c.ID))
		seen[h.Sum32()%uint32(len(l.keyLocks))] = true
	}
	var held []chan struct{}
	for i, ok := range seen {
		if !ok {
			continue
		}
		select {
		case l.keyLocks[i] <- struct{}{}:
			held = append(held, l.keyLocks[i])
		case <-ctx.Done():
			release(held, nil)
			return nil, fmt.Errorf("%w: waiting for a concurrent write of this process: %v", ErrUnavailable, context.Cause(ctx))
		}
	}
	return held, nil
}
