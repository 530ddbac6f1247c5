package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// stack is a broker and its topics; proc is one delivering process on it
// (its own views, built from the topics, its router and dispatcher).
type stack struct {
	t       *testing.T
	brokers []string
	topics  kafka.Topics
	cl      *kgo.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	_, brokers := testenv.Kafka(t)
	cl, err := kafka.NewClient(brokers, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topics := kafka.TopicNames("wd.")
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 2, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}
	return &stack{t: t, brokers: brokers, topics: topics, cl: cl}
}

type proc struct {
	hooks  *webhooks.Service
	dl     *webhooks.Deliveries
	router *webhooks.Router
	stop   func()
}

// testOptions: a fast schedule (10 ms base: 9 retries within a couple of
// seconds at most), the loopback allowed (httptest servers).
func testOptions() webhooks.DispatcherOptions {
	return webhooks.DispatcherOptions{Guard: &webhooks.Guard{AllowLoopback: true}, Timeout: 2 * time.Second,
		Schedule: webhooks.Schedule{Base: 10 * time.Millisecond}, Log: quiet}
}

func (s *stack) start(o webhooks.DispatcherOptions) *proc {
	t := s.t
	t.Helper()
	ent, err := statelog.New(s.topics.Entities, s.brokers, s.cl, quiet)
	if err != nil {
		t.Fatal(err)
	}
	dlog, err := statelog.New(s.topics.WebhookDeliveries, s.brokers, s.cl, quiet)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{hooks: webhooks.New(ent)}
	p.hooks.Guard = o.Guard
	p.dl = webhooks.NewDeliveries(dlog, p.hooks)
	disp := webhooks.NewDispatcher(p.dl, o)
	if p.router, err = webhooks.NewRouter(p.dl, webhooks.RouterOptions{Brokers: s.brokers, Entities: s.topics.Entities,
		Events: s.topics.WebhookEvents, Log: quiet, Sync: ent.CatchUp}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, fn := range []func(context.Context) error{ent.Run, dlog.Run} {
		wg.Go(func() { _ = fn(ctx) })
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := ent.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	if err := dlog.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = disp.Run(ctx) })
	wg.Go(func() { _ = p.router.Run(ctx) })
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			ent.Close()
			dlog.Close()
		})
	}
	t.Cleanup(p.stop)
	return p
}

// receiver is an endpoint on loopback that verifies every request with
// the Standard Webhooks library.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []got
	answer func(n int, r *http.Request) int // status of the n-th request (1-based)
	verify *standardwebhooks.Webhook
	extra  []*standardwebhooks.Webhook // must verify too (rotation)
}

type got struct {
	id, ts string
	body   []byte
	at     time.Time
	valid  error
}

func newReceiver(t *testing.T, answer func(n int, r *http.Request) int) *receiver {
	rc := &receiver{t: t, answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		g := got{id: r.Header.Get("webhook-id"), ts: r.Header.Get("webhook-timestamp"), body: body, at: time.Now()}
		if rc.verify != nil {
			g.valid = rc.verify.Verify(body, r.Header)
			for _, x := range rc.extra {
				if err := x.Verify(body, r.Header); err != nil {
					g.valid = fmt.Errorf("extra secret: %w", err)
				}
			}
		}
		rc.reqs = append(rc.reqs, g)
		n := len(rc.reqs)
		rc.mu.Unlock()
		status := http.StatusOK
		if rc.answer != nil {
			status = rc.answer(n, r)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []got {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]got(nil), rc.reqs...)
}

func (rc *receiver) secret(t *testing.T, w webhooks.Webhook) {
	s, err := webhooks.StandardSecret(w.Secret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := standardwebhooks.NewWebhook(s)
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.verify = v
	rc.mu.Unlock()
}

func createHook(t *testing.T, p *proc, mp, url string, types ...string) webhooks.Webhook {
	t.Helper()
	in := webhooks.Input{URL: &url}
	if len(types) > 0 {
		in.EventTypes = &types
	}
	w, _, err := p.hooks.Create(context.Background(), mp, in)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func event(mp, typ string) webhooks.Event {
	return webhooks.Event{ID: uuid.NewString(), Type: typ, MarketplaceID: mp, Timestamp: time.Now().UTC(),
		Subject: "c1", Data: json.RawMessage(`{"id":"c1","name":"Spring <sale> & more"}`)}
}

func deliveriesOf(t *testing.T, p *proc, mp, hook string) []webhooks.Delivery {
	t.Helper()
	xs, _, err := p.dl.List(mp, hook, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return xs
}

func waitDelivery(t *testing.T, p *proc, mp, hook string, d time.Duration, ok func(webhooks.Delivery) error) webhooks.Delivery {
	t.Helper()
	var last webhooks.Delivery
	testenv.Eventually(t, d, func() error {
		xs := deliveriesOf(t, p, mp, hook)
		if len(xs) != 1 {
			return fmt.Errorf("%d deliveries", len(xs))
		}
		last = xs[0]
		return ok(last)
	})
	return last
}

func status(want string) func(webhooks.Delivery) error {
	return func(x webhooks.Delivery) error {
		if x.Status != want || x.InFlight {
			return fmt.Errorf("status %s (in flight %v), attempts %d, last %d %s", x.Status, x.InFlight, x.Attempts, x.LastStatusCode, x.LastError)
		}
		return nil
	}
}

// An event through the Kafka path (emitter → events topic → router) is
// delivered once, signed so that the Standard Webhooks library verifies it,
// with the documented body; the same event emitted and routed again makes
// no second request.
func TestDeliveredOnce(t *testing.T) {
	s := newStack(t)
	p := s.start(testOptions())
	rdb := testenv.Get(t).Redis(t)
	mp := uuid.NewString()
	rc := newReceiver(t, nil)
	w := createHook(t, p, mp, rc.srv.URL+"/hook", webhooks.TypeCampaignUpdated)
	other := createHook(t, p, mp, rc.srv.URL+"/other", webhooks.TypeExportFailed) // not subscribed
	rc.secret(t, w)
	em := &webhooks.Emitter{Kafka: s.cl, Topic: s.topics.WebhookEvents, Redis: rdb}
	ev := event(mp, webhooks.TypeCampaignUpdated)
	ctx := context.Background()
	if err := em.Emit(ctx, []webhooks.Event{ev, ev}); err != nil {
		t.Fatal(err)
	}
	x := waitDelivery(t, p, mp, w.ID, 10*time.Second, status(webhooks.DeliveryDelivered))
	if x.Attempts != 1 || x.LastStatusCode != 200 || x.EventID != ev.ID || x.LastResponse != `{"ok":true}` {
		t.Fatalf("delivery %+v", x)
	}
	// Emitted again (its marker is there: nothing appended), and routed
	// again by hand (as after a crash before the commit): no new request.
	if err := em.Emit(ctx, []webhooks.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if err := p.router.Fanout(ctx, ev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	reqs := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if reqs[0].valid != nil || reqs[0].id != ev.ID {
		t.Fatalf("request: id %q, verification %v", reqs[0].id, reqs[0].valid)
	}
	want := fmt.Sprintf(`{"type":"campaign.updated","timestamp":%q,"data":{"id":"c1","name":"Spring \u003csale\u003e \u0026 more"}}`, timestamp.Format(ev.Timestamp))
	if string(reqs[0].body) != want {
		t.Fatalf("body\n%s\nwant\n%s", reqs[0].body, want)
	}
	if n := len(deliveriesOf(t, p, mp, other.ID)); n != 0 {
		t.Fatalf("unsubscribed webhook got %d deliveries", n)
	}
}

// The receiver is down (503, then a refused connection), then up: the
// delivery is retried on the schedule with the same webhook-id and body,
// and delivered.
func TestReceiverDownThenUp(t *testing.T) {
	s := newStack(t)
	p := s.start(testOptions())
	mp := uuid.NewString()
	rc := newReceiver(t, func(n int, _ *http.Request) int {
		if n <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	w := createHook(t, p, mp, rc.srv.URL)
	rc.secret(t, w)
	ev := event(mp, webhooks.TypeBudgetExhausted)
	if err := p.router.Fanout(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	x := waitDelivery(t, p, mp, w.ID, 20*time.Second, status(webhooks.DeliveryDelivered))
	reqs := rc.requests()
	if len(reqs) != 4 || x.Attempts != 4 || x.LastStatusCode != 204 {
		t.Fatalf("%d requests, delivery %+v", len(reqs), x)
	}
	for i, r := range reqs {
		if r.id != ev.ID || string(r.body) != string(reqs[0].body) || r.valid != nil {
			t.Fatalf("request %d: id %q (want %q), verification %v", i, r.id, ev.ID, r.valid)
		}
		if i > 0 && r.at.Sub(reqs[i-1].at) < 7*time.Millisecond {
			t.Fatalf("retry %d came %s after the previous one: no backoff", i, r.at.Sub(reqs[i-1].at))
		}
	}
	// The streak ends with a write of its own, after the delivery's: it
	// may land a moment after the delivery reads delivered.
	testenv.Eventually(t, 5*time.Second, func() error {
		if since := p.dl.FailingSince(mp, w.ID); since != nil {
			return fmt.Errorf("failing since %s after the success", since)
		}
		return nil
	})
	if hw, _, _ := p.hooks.Get(mp, w.ID); hw.Disabled {
		t.Fatalf("webhook after success: %+v", hw)
	}
}

// 410 Gone fails the delivery and disables the webhook at once, with the
// reason; it gets no deliveries until PATCH enables it.
func TestGoneDisables(t *testing.T) {
	s := newStack(t)
	p := s.start(testOptions())
	mp := uuid.NewString()
	var gone atomic.Bool
	gone.Store(true)
	rc := newReceiver(t, func(int, *http.Request) int {
		if gone.Load() {
			return http.StatusGone
		}
		return http.StatusOK
	})
	w := createHook(t, p, mp, rc.srv.URL)
	ctx := context.Background()
	if err := p.router.Fanout(ctx, event(mp, webhooks.TypeCampaignCreated)); err != nil {
		t.Fatal(err)
	}
	x := waitDelivery(t, p, mp, w.ID, 10*time.Second, status(webhooks.DeliveryFailed))
	if x.Attempts != 1 || x.LastStatusCode != 410 {
		t.Fatalf("delivery %+v", x)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if hw, _, _ := p.hooks.Get(mp, w.ID); !hw.Disabled || hw.DisabledReason != webhooks.ReasonGone {
			return fmt.Errorf("webhook %+v", hw)
		}
		return nil
	})
	if err := p.router.Fanout(ctx, event(mp, webhooks.TypeCampaignCreated)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.dl.Test(ctx, mp, w.ID); !errors.Is(err, webhooks.ErrDisabled) {
		t.Fatalf("test of a disabled webhook: %v", err)
	}
	if _, err := p.dl.Retry(ctx, mp, w.ID, x.ID); !errors.Is(err, webhooks.ErrDisabled) {
		t.Fatalf("retry on a disabled webhook: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.requests()); n != 1 {
		t.Fatalf("%d requests to a disabled webhook's endpoint", n)
	}
	gone.Store(false)
	on := webhooks.StatusEnabled
	if hw, _, err := p.hooks.Update(ctx, mp, w.ID, 0, webhooks.Input{Status: &on}); err != nil || hw.Disabled || hw.DisabledReason != "" {
		t.Fatalf("enable: %v %+v", err, hw)
	}
	// Retried by hand: the same delivery, delivered now.
	if _, err := p.dl.Retry(ctx, mp, w.ID, x.ID); err != nil {
		t.Fatal(err)
	}
	x = waitDelivery(t, p, mp, w.ID, 10*time.Second, status(webhooks.DeliveryDelivered))
	if x.Attempts != 2 || len(rc.requests()) != 2 || rc.requests()[1].id != x.EventID {
		t.Fatalf("after retry: %+v", x)
	}
}

// A receiver slower than the timeout: each attempt fails ("timed out")
// at the timeout and is retried; a webhook failing for longer than
// DisableAfter is disabled, with the reason in its state, and its pending
// delivery fails.
func TestSlowReceiverAndDisableAfter(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := func(n int, r *http.Request) int {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return 200
	}
	o := testOptions()
	o.Timeout = 300 * time.Millisecond
	o.Schedule.Attempts = 3
	for _, disableAfter := range []time.Duration{time.Hour, 200 * time.Millisecond} {
		s := newStack(t)
		o.DisableAfter = disableAfter
		p := s.start(o)
		mp := uuid.NewString()
		rc := newReceiver(t, slow)
		w := createHook(t, p, mp, rc.srv.URL)
		start := time.Now()
		if err := p.router.Fanout(context.Background(), event(mp, webhooks.TypeExportCompleted)); err != nil {
			t.Fatal(err)
		}
		x := waitDelivery(t, p, mp, w.ID, 15*time.Second, status(webhooks.DeliveryFailed))
		hw, _, _ := p.hooks.Get(mp, w.ID)
		if disableAfter == time.Hour {
			if x.Attempts != 3 || x.LastError != "timed out after 300ms" || x.LastLatencyMs < 290 || hw.Disabled || p.dl.FailingSince(mp, w.ID) == nil {
				t.Fatalf("delivery %+v, webhook %+v", x, hw)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("3 attempts of at most 300 ms took %s", took)
			}
			continue
		}
		// Failing since the first attempt's end: the second one's failure
		// (about 300 ms later) disables it.
		if x.Attempts != 2 || !strings.HasPrefix(x.LastError, "the webhook is disabled: every delivery attempt failed for ") ||
			!hw.Disabled || !strings.HasPrefix(hw.DisabledReason, "every delivery attempt failed for ") || hw.DisabledAt == nil {
			t.Fatalf("delivery %+v, webhook %+v", x, hw)
		}
	}
}

// The delivering process stops in the middle of a retry schedule and
// another starts: every delivery is delivered once, with its webhook-id,
// no attempt is lost and none is repeated beyond the schedule (no flood:
// the new process makes one request per pending delivery).
func TestRestartMidSchedule(t *testing.T) {
	s := newStack(t)
	o := testOptions()
	o.Schedule.Base = 300 * time.Millisecond // 0.3 s, 1.2 s, 4.8 s...
	p1 := s.start(o)
	mp := uuid.NewString()
	var up atomic.Bool
	rc := newReceiver(t, func(int, *http.Request) int {
		if up.Load() {
			return 200
		}
		return 500
	})
	w := createHook(t, p1, mp, rc.srv.URL)
	rc.secret(t, w)
	const n = 20
	ids := map[string]bool{}
	for range n {
		ev := event(mp, webhooks.TypeCampaignUpdated)
		ids[ev.ID] = true
		if err := p1.router.Fanout(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	// Two attempts each (0 s and about 0.3 s), then the process stops
	// while the third is scheduled about 1.2 s later.
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, x := range deliveriesOf(t, p1, mp, w.ID) {
			if x.Attempts < 2 || x.InFlight {
				return fmt.Errorf("delivery %s: %d attempts", x.ID, x.Attempts)
			}
		}
		return nil
	})
	p1.stop()
	before := len(rc.requests())
	up.Store(true)
	p2 := s.start(o)
	testenv.Eventually(t, 20*time.Second, func() error {
		xs, _, _ := p2.dl.List(mp, w.ID, webhooks.DeliveryDelivered, "", 100)
		if len(xs) != n {
			return fmt.Errorf("%d of %d delivered", len(xs), n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	reqs := rc.requests()
	if after := len(reqs) - before; after != n {
		t.Fatalf("%d requests after the restart for %d pending deliveries", after, n)
	}
	seen := map[string]int{}
	for _, r := range reqs {
		if !ids[r.id] || r.valid != nil {
			t.Fatalf("request id %q verification %v", r.id, r.valid)
		}
		seen[r.id]++
	}
	total := 0
	for _, x := range deliveriesOf(t, p2, mp, w.ID) {
		total += x.Attempts
		if x.Attempts != seen[x.EventID] {
			t.Fatalf("delivery %s: %d attempts recorded, %d requests", x.ID, x.Attempts, seen[x.EventID])
		}
	}
	if total != len(reqs) {
		t.Fatalf("%d attempts recorded, %d requests", total, len(reqs))
	}
}

// Two marketplaces: one's endpoint hangs (every attempt runs to the
// timeout), the other's deliveries arrive on time all the same.
func TestHangingEndpointDelaysNoOther(t *testing.T) {
	s := newStack(t)
	o := testOptions()
	o.Timeout = 5 * time.Second
	p := s.start(o)
	mpA, mpB := uuid.NewString(), uuid.NewString()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	slow := newReceiver(t, func(_ int, r *http.Request) int {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		return 200
	})
	fast := newReceiver(t, nil)
	wa := createHook(t, p, mpA, slow.srv.URL)
	wb := createHook(t, p, mpB, fast.srv.URL)
	fast.secret(t, wb)
	ctx := context.Background()
	for range 10 {
		if err := p.router.Fanout(ctx, event(mpA, webhooks.TypeCampaignUpdated)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // A's attempts are in flight, hanging
	start := time.Now()
	for range 10 {
		if err := p.router.Fanout(ctx, event(mpB, webhooks.TypeCampaignUpdated)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 4*time.Second, func() error {
		xs, _, _ := p.dl.List(mpB, wb.ID, webhooks.DeliveryDelivered, "", 100)
		if len(xs) != 10 {
			return fmt.Errorf("%d of B's 10 delivered", len(xs))
		}
		return nil
	})
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("B's deliveries took %s while A's endpoint hangs", took)
	}
	if got := len(slow.requests()); got != webhooks.DefaultMaxInFlight {
		t.Fatalf("the hanging endpoint has %d requests in flight, want %d", got, webhooks.DefaultMaxInFlight)
	}
	for _, r := range fast.requests() {
		if r.valid != nil {
			t.Fatal(r.valid)
		}
	}
	_ = wa
}

// Deliveries never reach internal addresses without the development
// setting: a loopback service (like Redis on 127.0.0.1:6379), a host name
// that resolves to a private address, a redirect to one.
func TestSSRF(t *testing.T) {
	s := newStack(t)
	// An internal service on loopback that counts its connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	internal := "http://" + ln.Addr().String() + "/"
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	o := testOptions()
	o.Schedule.Attempts = 1
	o.Guard = &webhooks.Guard{Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "internal.example":
			return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
		case "mapped.example":
			return []netip.Addr{netip.MustParseAddr("::ffff:169.254.169.254")}, nil
		case "loop.example":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "zoned.example":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1%lo")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}}
	p := s.start(o)
	// The names resolve at delivery only (as a name that changes its
	// address after it was registered does), and the literals are
	// registered with loopback allowed: here the check at each connection
	// is the guard.
	p.hooks.Guard = &webhooks.Guard{AllowLoopback: true, Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return nil, errors.New("not resolved at registration")
	}}
	mp := uuid.NewString()
	for _, url := range []string{"http://127.0.0.1:6379/", internal, "http://[::1]:6379/", "http://[::ffff:127.0.0.1]:" + port + "/",
		"https://internal.example/hook", "https://mapped.example/hook", "https://loop.example:6379/", "https://zoned.example:" + port + "/"} {
		w := createHook(t, p, mp, url)
		if err := p.router.Fanout(context.Background(), event(mp, webhooks.TypeCampaignCreated)); err != nil {
			t.Fatal(err)
		}
		x := waitDelivery(t, p, mp, w.ID, 10*time.Second, status(webhooks.DeliveryFailed))
		if x.LastError != webhooks.MsgRefused || x.LastStatusCode != 0 {
			t.Errorf("%s: %q (status %d), want %q", url, x.LastError, x.LastStatusCode, webhooks.MsgRefused)
		}
		if err := p.hooks.Delete(context.Background(), mp, w.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the internal service got %d connections", n)
	}

	// A redirect to the internal service is not followed (here with the
	// loopback allowed, so that the receiver itself is reachable).
	s2 := newStack(t)
	o2 := testOptions()
	o2.Schedule.Attempts = 1
	p2 := s2.start(o2)
	var hits atomic.Int32
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, internal, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redir.Close)
	w := createHook(t, p2, mp, redir.URL)
	if err := p2.router.Fanout(context.Background(), event(mp, webhooks.TypeCampaignCreated)); err != nil {
		t.Fatal(err)
	}
	x := waitDelivery(t, p2, mp, w.ID, 10*time.Second, status(webhooks.DeliveryFailed))
	if x.LastStatusCode != 307 || !strings.Contains(x.LastError, "redirects are not followed") || hits.Load() != 1 {
		t.Fatalf("redirect: %+v", x)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the redirect reached the internal service (%d connections)", n)
	}
}

// A rotation keeps the previous secret signing beside the new one for the
// overlap: receivers holding either verify every delivery.
func TestRotationSignsWithBoth(t *testing.T) {
	s := newStack(t)
	p := s.start(testOptions())
	mp := uuid.NewString()
	rc := newReceiver(t, nil)
	w := createHook(t, p, mp, rc.srv.URL)
	rc.secret(t, w)
	old := rc.verify
	ctx := context.Background()
	nw, _, err := p.hooks.RotateSecret(ctx, mp, w.ID, 0, time.Hour)
	if err != nil || nw.Secret == w.Secret || nw.PreviousSecret != w.Secret {
		t.Fatalf("rotate: %v %+v", err, nw)
	}
	rc.secret(t, nw)
	rc.extra = []*standardwebhooks.Webhook{old}
	x, err := p.dl.Test(ctx, mp, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	waitDelivery(t, p, mp, w.ID, 10*time.Second, status(webhooks.DeliveryDelivered))
	reqs := rc.requests()
	if len(reqs) != 1 || reqs[0].valid != nil || reqs[0].id != x.EventID || !strings.Contains(string(reqs[0].body), `"type":"webhook.test"`) {
		t.Fatalf("requests %+v", reqs)
	}
	// Without overlap the old secret stops at once.
	if _, _, err := p.hooks.RotateSecret(ctx, mp, w.ID, 0, 0); err != nil {
		t.Fatal(err)
	}
	cur, _, _ := p.hooks.Get(mp, w.ID)
	keys, err := cur.SigningKeys(time.Now())
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys after a rotation without overlap: %d %v", len(keys), err)
	}
}

// The sweep deletes the deliveries finished more than the retention ago
// (the default, or the one configured) and the failure streak of a deleted
// webhook; a webhook that still exists keeps its streak, however old.
func TestSweep(t *testing.T) {
	s := newStack(t)
	opts := func() webhooks.DispatcherOptions {
		o := testOptions()
		o.Schedule.Attempts = 3 // failed for good within a second
		return o
	}
	p := s.start(opts())
	mp := uuid.NewString()
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusServiceUnavailable })
	gone, kept := createHook(t, p, mp, rc.srv.URL), createHook(t, p, mp, rc.srv.URL)
	if err := p.router.Fanout(context.Background(), event(mp, webhooks.TypeBudgetExhausted)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []webhooks.Webhook{gone, kept} {
		waitDelivery(t, p, mp, w.ID, 30*time.Second, status(webhooks.DeliveryFailed))
		if p.dl.FailingSince(mp, w.ID) == nil {
			t.Fatalf("webhook %s failed with no streak", w.ID)
		}
	}
	if err := p.hooks.Delete(context.Background(), mp, gone.ID, 0); err != nil {
		t.Fatal(err)
	}
	// A sweep now: the streaks are younger than an hour, the deliveries
	// than RecordRetention; nothing goes.
	p.stop()
	p = s.start(opts())
	time.Sleep(time.Second) // the sweep runs as the dispatcher starts: long done
	if p.dl.FailingSince(mp, gone.ID) == nil || len(deliveriesOf(t, p, mp, kept.ID)) != 1 {
		t.Fatal("the sweep deleted records of the last hour")
	}
	// Two hours later: the deleted webhook's streak goes; the deliveries
	// stay for the retention (30 days by default).
	later := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
	p.stop()
	o := opts()
	o.Now = later(2 * time.Hour)
	p = s.start(o)
	testenv.Eventually(t, 20*time.Second, func() error {
		if p.dl.FailingSince(mp, gone.ID) != nil {
			return errors.New("the deleted webhook's streak is still there")
		}
		return nil
	})
	if n := len(deliveriesOf(t, p, mp, kept.ID)); n != 1 {
		t.Fatalf("%d deliveries two hours on, want 1", n)
	}
	// With a retention of an hour (ENDCAP_WEBHOOK_DELIVERY_RETENTION), and
	// a month later with the default: the deliveries go; the live webhook
	// keeps its streak.
	for _, c := range []struct {
		retention, later time.Duration
	}{{time.Hour, 2 * time.Hour}, {0, webhooks.DefaultRecordRetention + time.Hour}} {
		if err := p.router.Fanout(context.Background(), event(mp, webhooks.TypeBudgetExhausted)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			xs := deliveriesOf(t, p, mp, kept.ID)
			if len(xs) == 0 || xs[0].Status != webhooks.DeliveryFailed {
				return fmt.Errorf("%d deliveries, the newest not failed yet", len(xs))
			}
			return nil
		})
		p.stop()
		o := opts()
		o.RecordRetention, o.Now = c.retention, later(c.later)
		p = s.start(o)
		testenv.Eventually(t, 20*time.Second, func() error {
			if n := len(deliveriesOf(t, p, mp, kept.ID)); n != 0 {
				return fmt.Errorf("retention %s, %s later: %d deliveries left", c.retention, c.later, n)
			}
			return nil
		})
		if p.dl.FailingSince(mp, kept.ID) == nil {
			t.Error("the live webhook's streak was deleted")
		}
	}
}

// Test deliveries are capped per marketplace per hour and per day (429
// with the time until the oldest leaves the window), and a marketplace
// keeps at most Kept of them: a new test deletes the oldest finished ones.
func TestTestDeliveryLimits(t *testing.T) {
	s := newStack(t)
	p := s.start(testOptions())
	p.dl.Tests = webhooks.TestLimits{PerHour: 2, PerDay: 3, Kept: 3}
	base := time.Now().UTC().Add(-30 * time.Hour).Truncate(time.Millisecond)
	now := base
	webhooks.SetNow(p.dl, func() time.Time { return now })
	mp := uuid.NewString()
	rc := newReceiver(t, nil)
	w := createHook(t, p, mp, rc.srv.URL)
	ctx := context.Background()
	test := func() error {
		t.Helper()
		_, err := p.dl.Test(ctx, mp, w.ID)
		return err
	}
	tooMany := func(err error, wait time.Duration) {
		t.Helper()
		e, ok := errkind.Of(err)
		if !ok || e.Kind != errkind.TooMany || e.RetryAfter != wait {
			t.Fatalf("%v (%+v), want a 429 with Retry-After %s", err, e, wait)
		}
	}
	for range 2 {
		if err := test(); err != nil {
			t.Fatal(err)
		}
	}
	tooMany(test(), time.Hour)
	now = base.Add(61 * time.Minute)
	if err := test(); err != nil {
		t.Fatal(err)
	}
	tooMany(test(), 24*time.Hour-61*time.Minute)
	countTests := func() (n, finished int) {
		xs, _, _ := p.dl.List(mp, w.ID, "", "", 100)
		for _, x := range xs {
			if x.EventType == webhooks.TypeTest {
				n++
				if x.Status != webhooks.DeliveryPending {
					finished++
				}
			}
		}
		return
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n, f := countTests(); n != 3 || f != 3 {
			return fmt.Errorf("%d tests, %d finished", n, f)
		}
		return nil
	})
	// A day later: allowed again, and the oldest test makes room.
	now = base.Add(25 * time.Hour)
	if err := test(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n, _ := countTests(); n != 3 {
			return fmt.Errorf("%d tests kept, want 3", n)
		}
		return nil
	})
}
