// Package statelog keeps an in-memory view of entity state that lives in a
// compacted Kafka changelog topic, as docs/state.md describes.
//
// Every record carries one entity's whole new state and its version. Each
// process reads the topic from the start, applies records in log order, and
// tails it. A record is applied when its version is higher than the view's
// version of that entity; otherwise every view rejects it the same way.
//
// Writes go through Append: it checks the caller's expected version against
// the view, appends the record with acks=all, and returns only after this
// process's own view has applied it, so a writer reads its own writes.
// Writes to one entity from one process are serialised; the losing side of a
// race sees ErrConflict.
package statelog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/storage/kafka"
)

var (
	// ErrConflict means the entity's version was not the expected one.
	ErrConflict = errors.New("statelog: version conflict")
	// ErrNotReady means the view has not caught up with the log yet.
	ErrNotReady = errors.New("statelog: state is still loading")
	// ErrUnavailable means the log did not take the write in time.
	ErrUnavailable = errors.New("statelog: log unavailable")
)

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
// log's single applying goroutine, in log order.
type ApplyFunc func(Record)

// Log is the view of one changelog topic.
type Log struct {
	topic    string
	consumer *kgo.Client
	producer *kgo.Client
	log      *slog.Logger

	mu       sync.Mutex
	versions map[string]int64
	appliers map[string]ApplyFunc
	waiters  map[string]chan bool
	applied  atomic.Int64

	// keyLocks serialise this process's writes per entity: a key always maps
	// to the same stripe, so memory stays bounded however many entities.
	keyLocks [256]sync.Mutex

	ready     chan struct{}
	readyOnce sync.Once
}

// New returns a view of topic. producer is used for appends; a consumer of
// its own is created from brokers. Register appliers before Run.
func New(topic string, brokers []string, producer *kgo.Client, log *slog.Logger) (*Log, error) {
	consumer, err := kafka.NewClient(brokers, log,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	return &Log{
		topic:    topic,
		consumer: consumer,
		producer: producer,
		log:      log,
		versions: map[string]int64{},
		appliers: map[string]ApplyFunc{},
		waiters:  map[string]chan bool{},
		ready:    make(chan struct{}),
	}, nil
}

// Register sets the applier of one entity type.
func (l *Log) Register(typ string, fn ApplyFunc) {
	l.mu.Lock()
	l.appliers[typ] = fn
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
func (l *Log) Close() { l.consumer.Close() }

// Run consumes the topic until ctx ends.
func (l *Log) Run(ctx context.Context) error {
	var end map[int32]int64
	for {
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
		time.Sleep(time.Second)
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
	var rec Record
	if err := json.Unmarshal(r.Value, &rec); err != nil || rec.Type == "" || rec.ID == "" {
		l.log.Error("state log: undecodable record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		return
	}
	key := rec.Type + "/" + rec.ID
	l.mu.Lock()
	accepted := rec.Version > l.versions[key]
	if accepted {
		l.versions[key] = rec.Version
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

// Version is the view's version of an entity (0 when it does not exist).
func (l *Log) Version(typ, id string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.versions[typ+"/"+id]
}

// Append writes the entity's new state, expecting its current version to be
// expected (0 to create). It returns the new version once this process's
// view has applied it.
func (l *Log) Append(ctx context.Context, typ, id string, expected int64, state any, deleted bool) (int64, error) {
	if !l.Ready() {
		return 0, ErrNotReady
	}
	key := typ + "/" + id
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	mu := &l.keyLocks[h.Sum32()%uint32(len(l.keyLocks))]
	mu.Lock()
	defer mu.Unlock()

	if cur := l.Version(typ, id); cur != expected {
		return cur, ErrConflict
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return 0, err
	}
	rec := Record{Type: typ, ID: id, Version: expected + 1, WriteID: uuid.NewString(), AtMs: time.Now().UnixMilli(), Deleted: deleted, State: raw}
	val, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	ch := make(chan bool, 1)
	l.mu.Lock()
	l.waiters[rec.WriteID] = ch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.waiters, rec.WriteID)
		l.mu.Unlock()
	}()
	if err := l.producer.ProduceSync(ctx, &kgo.Record{Topic: l.topic, Key: []byte(key), Value: val}).FirstErr(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	select {
	case ok := <-ch:
		if !ok {
			return l.Version(typ, id), ErrConflict
		}
		return rec.Version, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: appended but not yet applied: %v", ErrUnavailable, ctx.Err())
	}
}
