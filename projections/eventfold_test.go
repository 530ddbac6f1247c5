package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// foldEnv is what a test of the fold needs: a Kafka cluster of its own with
// the events topic (3 partitions), and Redis for the claims.
type foldEnv struct {
	kc      *kfake.Cluster
	brokers []string
	cfg     config.Config
	cl      *kgo.Client
	topics  kafka.Topics
	rdb     redis.UniversalClient
}

func newFoldEnv(t *testing.T) *foldEnv {
	env := testenv.Get(t)
	kc, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cl, topics := testenv.Topics(t, t.Context(), cfg, brokers, 3)
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	return &foldEnv{kc: kc, brokers: brokers, cfg: cfg, cl: cl, topics: topics, rdb: rdb}
}

// committed sums the offsets the fold's group committed (-1 when unknown).
func (e *foldEnv) committed(ctx context.Context) int64 {
	offs, err := kadm.NewClient(e.cl).FetchOffsets(ctx, projections.EventsGroup)
	if err != nil {
		return -1
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) { n += o.At })
	return n
}

// recordingSink records the event ids of every batch it folds and fails
// the calls it is told to.
type recordingSink struct {
	name    string
	mu      sync.Mutex
	fail    int // calls left to fail
	calls   int
	batches [][]string
}

func (s *recordingSink) Name() string { return s.name }

func (s *recordingSink) Fold(_ context.Context, events []projections.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail > 0 {
		s.fail--
		return errors.New("sink down")
	}
	ids := make([]string, len(events))
	for i := range events {
		ids[i] = events[i].E.ID
	}
	slices.Sort(ids)
	s.batches = append(s.batches, ids)
	return nil
}

func (s *recordingSink) folded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []string
	for _, b := range s.batches {
		all = append(all, b...)
	}
	slices.Sort(all)
	return all
}

// TestEventFold: every sink gets every event once, duplicates of a claimed
// id dropped for all of them alike; a sink failing fails the batch, which
// is retried on every sink and committed only after all succeeded; an
// undecodable record is skipped.
func TestEventFold(t *testing.T) {
	fe := newFoldEnv(t)
	ctx, cl, topics, brokers := t.Context(), fe.cl, fe.topics, fe.brokers

	var recs []*kgo.Record
	var want []string
	for i := range 30 {
		e := records.Event{Kind: records.KindPageView, MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001", ID: fmt.Sprintf("ev-%02d", i),
			OccurredAtMs: time.Now().UnixMilli(), ReceivedAtMs: time.Now().UnixMilli(), OpaqueUserID: fmt.Sprint("u", i%4)}
		v, _ := json.Marshal(&e)
		recs = append(recs, &kgo.Record{Topic: topics.Events, Key: records.EventKey(&e), Value: v})
		want = append(want, e.ID)
		if i%10 == 0 { // a client retry: the same id again
			recs = append(recs, &kgo.Record{Topic: topics.Events, Key: records.EventKey(&e), Value: v})
		}
	}
	recs = append(recs, &kgo.Record{Topic: topics.Events, Value: []byte(`{"kind":`)})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ok, flaky := &recordingSink{name: "ok"}, &recordingSink{name: "flaky", fail: 2}
	f, err := projections.NewEventFold(projections.EventFoldOptions{Brokers: brokers, Topic: topics.Events,
		Claims: openClaims(t, brokers, topics, time.Hour),
		Sinks:  []projections.EventSink{ok, flaky}, MaxRows: 1000, FlushInterval: 100 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	committed := func() int64 { return fe.committed(ctx) }
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(pctx) }()
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := committed(); n != int64(len(recs)) {
			return fmt.Errorf("committed %d of %d", n, len(recs))
		}
		return nil
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if flaky.calls < 3 {
		t.Errorf("the flaky sink was called %d times, want its 2 failures and a success", flaky.calls)
	}
	// The batch that failed was retried whole, on the healthy sink too: it
	// may have folded a batch twice, never an event of another batch.
	if got := slices.Compact(ok.folded()); !slices.Equal(got, want) {
		t.Errorf("healthy sink folded %v, want %v", got, want)
	}
	if got := flaky.folded(); !slices.Equal(got, want) {
		t.Errorf("flaky sink folded %v, want each of %v once", got, want)
	}
}

// slowSink is a recordingSink that takes a while over every batch, so that
// the fold always has a batch in flight while it prepares the next.
type slowSink struct {
	recordingSink
	delay time.Duration
}

func (s *slowSink) Fold(ctx context.Context, events []projections.Event) error {
	time.Sleep(s.delay)
	return s.recordingSink.Fold(ctx, events)
}

// TestEventFoldRebalance: a second process joins the group while the first
// folds, then the first leaves. Partitions change hands between batches
// only, and a batch folded while the first is being stopped is still
// committed: every record is committed, every event folded exactly once.
func TestEventFoldRebalance(t *testing.T) {
	fe := newFoldEnv(t)
	ctx, cl, topics, brokers := t.Context(), fe.cl, fe.topics, fe.brokers

	var want []string
	var produced atomic.Int64
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			e := records.Event{Kind: records.KindPageView, MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001", ID: fmt.Sprintf("ev-%05d", i),
				OccurredAtMs: time.Now().UnixMilli(), ReceivedAtMs: time.Now().UnixMilli(), OpaqueUserID: fmt.Sprint("u", i%97)}
			v, _ := json.Marshal(&e)
			recs = append(recs, &kgo.Record{Topic: topics.Events, Key: records.EventKey(&e), Value: v})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Error(err)
		}
		produced.Add(int64(len(recs)))
	}
	start := func(s projections.EventSink) (stop func()) {
		f, err := projections.NewEventFold(projections.EventFoldOptions{Brokers: brokers, Topic: topics.Events,
			Claims: openClaims(t, brokers, topics, time.Hour),
			Sinks:  []projections.EventSink{s}, MaxRows: 100, FlushInterval: 50 * time.Millisecond, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.Run(pctx) }()
		return func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
			f.Close()
		}
	}
	committed := func() int64 { return fe.committed(ctx) }
	a, b := &slowSink{recordingSink{name: "a"}, 20 * time.Millisecond}, &slowSink{recordingSink{name: "b"}, 20 * time.Millisecond}
	stopA := start(a)
	// produce 100 events every 20 ms until told to stop, after a has left
	var prod sync.WaitGroup
	var stopProducing atomic.Bool
	prod.Go(func() {
		for i := 0; !stopProducing.Load() && i < 90_000; i += 100 {
			produce(i, i+100)
			time.Sleep(20 * time.Millisecond)
		}
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		if len(a.folded()) < 500 {
			return errors.New("a has not folded 500 events yet")
		}
		return nil
	})
	stopB := start(b)
	defer stopB()
	// b gets partitions at a rebalance, which a allows between batches
	testenv.Eventually(t, 60*time.Second, func() error {
		if len(b.folded()) == 0 {
			return errors.New("b has folded nothing yet")
		}
		return nil
	})
	stopA()
	time.Sleep(500 * time.Millisecond) // b folds a's partitions too
	stopProducing.Store(true)
	prod.Wait()
	for i := range produced.Load() {
		want = append(want, fmt.Sprintf("ev-%05d", i))
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := committed(); n != produced.Load() {
			return fmt.Errorf("committed %d of %d", n, produced.Load())
		}
		return nil
	})
	all := append(a.folded(), b.folded()...)
	slices.Sort(all)
	if got := slices.Compact(slices.Clone(all)); !slices.Equal(got, want) {
		t.Errorf("%d distinct events folded over both processes, want %d", len(got), len(want))
	}
	if extra := len(all) - len(want); extra != 0 {
		t.Errorf("%d events folded twice (%d by a, %d by b)", extra, len(a.folded()), len(b.folded()))
	}
}

// TestEventFoldLag: the lag gauge counts what is not yet committed. While a
// sink fails, every record of the batch stays in it (fetched or not) and it
// grows with the topic; once the batch is written and committed it is 0.
func TestEventFoldLag(t *testing.T) {
	fe := newFoldEnv(t)
	ctx, topics := t.Context(), fe.topics
	produce := func(from, n int) {
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			e := records.Event{Kind: records.KindPageView, MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001", ID: fmt.Sprintf("lag-%02d", i),
				OccurredAtMs: time.Now().UnixMilli(), ReceivedAtMs: time.Now().UnixMilli(), OpaqueUserID: "u"}
			v, _ := json.Marshal(&e)
			recs = append(recs, &kgo.Record{Topic: topics.Events, Key: records.EventKey(&e), Value: v})
		}
		if err := fe.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	lag := func() float64 {
		var sum float64
		for p := range 3 {
			sum += testutil.ToFloat64(telemetry.ConsumerLag.WithLabelValues(topics.Events, projections.EventsGroup, strconv.Itoa(p)))
		}
		return sum
	}
	steps := []string{"poll", "decode", "claim", "sinks", "commit"}
	counts := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, s := range steps {
			var d dto.Metric
			if err := telemetry.ProjectorStepSeconds.WithLabelValues(projections.EventsGroup, s).(prometheus.Metric).Write(&d); err != nil {
				t.Fatal(err)
			}
			m[s] = d.GetHistogram().GetSampleCount()
		}
		return m
	}
	before := counts()
	produce(0, 12)
	down := &recordingSink{name: "down", fail: 1 << 30}
	f, err := projections.NewEventFold(projections.EventFoldOptions{Brokers: fe.brokers, Topic: topics.Events,
		Claims: openClaims(t, fe.brokers, topics, time.Hour),
		Sinks:  []projections.EventSink{down}, MaxRows: 1000, FlushInterval: 100 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(pctx) }()
	var runErr error
	stopped := false
	stop := func() { // before f.Close, also when the test fails: a fold retrying its batch blocks Close
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
	}
	defer stop()
	// Every record is fetched (the batch is retried), none committed.
	testenv.Eventually(t, 30*time.Second, func() error {
		if l := lag(); l != 12 {
			return fmt.Errorf("lag %v while the sink fails, want 12", l)
		}
		down.mu.Lock()
		defer down.mu.Unlock()
		if down.calls < 2 {
			return errors.New("the sink has not failed twice yet")
		}
		return nil
	})
	// The steps: each try decodes and claims; a failed one reaches neither
	// the end of its sinks nor a commit.
	failing := counts()
	for _, s := range []string{"poll", "decode", "claim"} {
		if failing[s] <= before[s] {
			t.Errorf("step %s observed %d times while the sink fails, want more than %d", s, failing[s], before[s])
		}
	}
	for _, s := range []string{"sinks", "commit"} {
		if failing[s] != before[s] {
			t.Errorf("step %s observed %d times while the sink fails, want %d (none)", s, failing[s], before[s])
		}
	}
	produce(12, 5) // behind the failing batch: the gauge follows the topic
	testenv.Eventually(t, 30*time.Second, func() error {
		if l := lag(); l != 17 {
			return fmt.Errorf("lag %v after 5 more records, want 17", l)
		}
		return nil
	})
	down.mu.Lock()
	down.fail = 0
	down.mu.Unlock()
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := fe.committed(ctx); n != 17 {
			return fmt.Errorf("committed %d of 17", n)
		}
		if l := lag(); l != 0 {
			return fmt.Errorf("lag %v after everything was committed", l)
		}
		return nil
	})
	stop()
	if !errors.Is(runErr, context.Canceled) {
		t.Fatal(runErr)
	}
	if got := len(down.folded()); got != 17 {
		t.Errorf("folded %d events, want 17", got)
	}
	if after := counts(); after["sinks"] <= failing["sinks"] || after["commit"] <= failing["commit"] {
		t.Errorf("steps after the batch was committed: %v, before: %v", after, failing)
	}
}

// members is the number of members the fold's group has on the broker.
func (e *foldEnv) members(ctx context.Context) (int, error) {
	ds, err := kadm.NewClient(e.cl).DescribeGroups(ctx, projections.EventsGroup)
	if err != nil {
		return 0, err
	}
	d := ds[projections.EventsGroup]
	return len(d.Members), d.Err
}

// TestEventFoldRejoinsAfterLosingMembership: while a sink is down and the
// batch keeps failing, the broker drops the member from the group (its
// heartbeats do not arrive for longer than the session timeout, as when the
// broker is paused or restarted). Once the sink is back, the member rejoins
// by itself and folds and commits everything, with no restart.
func TestEventFoldRejoinsAfterLosingMembership(t *testing.T) {
	fe := newFoldEnv(t)
	ctx, topics := t.Context(), fe.topics
	var recs []*kgo.Record
	for i := range 20 {
		e := records.Event{Kind: records.KindPageView, MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001", ID: fmt.Sprintf("m-%02d", i),
			OccurredAtMs: time.Now().UnixMilli(), ReceivedAtMs: time.Now().UnixMilli(), OpaqueUserID: fmt.Sprint("u", i)}
		v, _ := json.Marshal(&e)
		recs = append(recs, &kgo.Record{Topic: topics.Events, Key: records.EventKey(&e), Value: v})
	}
	if err := fe.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// While dropping is set, the broker loses every request of the group's
	// membership (heartbeats, joins), as a paused broker would.
	var dropping atomic.Bool
	for _, k := range []kmsg.Key{kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup} {
		fe.kc.ControlKey(k.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			fe.kc.KeepControl()
			if !dropping.Load() {
				return nil, nil, false
			}
			return nil, errors.New("request lost"), true // closes the connection
		})
	}
	down := &recordingSink{name: "down", fail: 1 << 30}
	f, err := projections.NewEventFold(projections.EventFoldOptions{Brokers: fe.brokers, Topic: topics.Events,
		Claims: openClaims(t, fe.brokers, topics, time.Hour),
		Sinks:  []projections.EventSink{down}, MaxRows: 1000, FlushInterval: 100 * time.Millisecond, Log: quiet,
		Group: projections.GroupOptions{SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second, FlushTimeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(pctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
		f.Close()
	}()
	testenv.Eventually(t, 30*time.Second, func() error {
		if n, err := fe.members(ctx); n != 1 {
			return fmt.Errorf("%d members (%v), want 1", n, err)
		}
		down.mu.Lock()
		defer down.mu.Unlock()
		if down.calls < 2 {
			return errors.New("the sink has not failed twice yet")
		}
		return nil
	})
	dropping.Store(true)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n, err := fe.members(ctx); n != 0 {
			return fmt.Errorf("%d members (%v), want the member dropped", n, err)
		}
		return nil
	})
	if s := f.Health().StalledFor(time.Now()); s < 5*time.Second {
		t.Errorf("stalled for %s while every batch fails, want the time since it began", s)
	}
	dropping.Store(false)
	down.mu.Lock()
	down.fail = 0
	down.mu.Unlock()
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := fe.committed(ctx); n != int64(len(recs)) {
			return fmt.Errorf("committed %d of %d", n, len(recs))
		}
		if n, err := fe.members(ctx); n != 1 {
			return fmt.Errorf("%d members (%v), want the member back", n, err)
		}
		return nil
	})
	if got := len(slices.Compact(down.folded())); got != len(recs) {
		t.Errorf("folded %d distinct events, want %d", got, len(recs))
	}
	if s := f.Health().StalledFor(time.Now()); s > 5*time.Second {
		t.Errorf("stalled for %s once everything is committed", s)
	}
}

// TestEventFoldYieldsToTheAPI: a fold given the gate of the API's requests
// (a process that serves the API and folds) folds nothing while a request
// is in flight and the gate lets it wait, folds everything once the last
// request leaves; and with a short wait a gate held all the time slows the
// fold without stopping it.
func TestEventFoldYieldsToTheAPI(t *testing.T) {
	const n = 3_000 // at least three batches
	run := func(t *testing.T, gate *priority.Gate) (*foldEnv, *recordingSink, func() int64) {
		fe := newFoldEnv(t)
		ctx := t.Context()
		recs := make([]*kgo.Record, 0, n)
		for i := range n {
			e := records.Event{Kind: records.KindPageView, MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001", ID: fmt.Sprintf("ev-%05d", i),
				OccurredAtMs: time.Now().UnixMilli(), ReceivedAtMs: time.Now().UnixMilli(), OpaqueUserID: fmt.Sprint("u", i%7)}
			v, _ := json.Marshal(&e)
			recs = append(recs, &kgo.Record{Topic: fe.topics.Events, Key: records.EventKey(&e), Value: v})
		}
		if err := fe.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		sink := &recordingSink{name: "sink"}
		f, err := projections.NewEventFold(projections.EventFoldOptions{Brokers: fe.brokers, Topic: fe.topics.Events,
			Claims: openClaims(t, fe.brokers, fe.topics, time.Hour), Sinks: []projections.EventSink{sink},
			MaxRows: 1000, FlushInterval: 50 * time.Millisecond, Log: quiet,
			Group: projections.GroupOptions{FlushTimeout: 45 * time.Second}, // so up to 15 s of yielding a batch
			Yield: gate})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.Run(pctx) }()
		t.Cleanup(func() {
			cancel()
			<-done
			f.Close()
		})
		return fe, sink, func() int64 { return fe.committed(ctx) }
	}
	allCommitted := func(committed func() int64) func() error {
		return func() error {
			if c := committed(); c != n {
				return fmt.Errorf("committed %d of %d", c, n)
			}
			return nil
		}
	}

	t.Run("waits while a request is in flight", func(t *testing.T) {
		gate := priority.NewGate(time.Hour)
		gate.Enter() // a request in flight from the start
		_, sink, committed := run(t, gate)
		testenv.Eventually(t, 30*time.Second, func() error {
			if gate.Waiting() == 0 {
				return errors.New("the fold does not wait at the gate")
			}
			return nil
		})
		if c, got := committed(), len(sink.folded()); c > 0 || got > 0 {
			t.Fatalf("the fold committed %d records and its sink folded %d while a request was in flight", c, got)
		}
		gate.Leave()
		testenv.Eventually(t, 30*time.Second, allCommitted(committed))
		if got := sink.folded(); len(slices.Compact(got)) != n {
			t.Fatalf("folded %d distinct events, want %d", len(slices.Compact(got)), n)
		}
		if calls, waited := gate.Waited(); calls == 0 || waited <= 0 {
			t.Fatalf("the gate saw %d waits (%v)", calls, waited)
		}
	})

	t.Run("a busy API slows it, never stops it", func(t *testing.T) {
		gate := priority.NewGate(5 * time.Millisecond)
		gate.Enter() // the API never rests
		defer gate.Leave()
		_, _, committed := run(t, gate)
		testenv.Eventually(t, 60*time.Second, allCommitted(committed))
		// Every batch (at least n/1000) waited at each of its steps: its
		// start, before the claims and before the sinks.
		if calls, _ := gate.Waited(); calls < 3*n/1000 {
			t.Fatalf("the fold gave way %d times for %d records in batches of 1,000", calls, n)
		}
	})
}
