package webhooks

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/storage/statelog"
)

// Defaults of DispatcherOptions.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxInFlight  = 3
	DefaultDisableAfter = 5 * 24 * time.Hour
	// claimGrace: how long past its timeout an attempt whose process went
	// silent counts as lost.
	claimGrace = 20 * time.Second
	// MaxResponseBytes of a response are read (LastResponse keeps the first
	// 512 of them).
	MaxResponseBytes  = 4 << 10
	keptResponseBytes = 512
)

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	// Guard vets every address a delivery connects to.
	Guard *Guard
	// Timeout bounds one attempt: connection, request and response.
	Timeout time.Duration
	// MaxInFlight: attempts in flight at once per webhook (in this
	// process).
	MaxInFlight int
	Schedule    Schedule
	// DisableAfter: a webhook whose attempts have all failed for this long
	// is disabled.
	DisableAfter time.Duration
	Log          *slog.Logger
	// UserAgent of the requests.
	UserAgent string
	// RecordRetention: a finished delivery is deleted this long after it
	// finished (0: DefaultRecordRetention). Every api and exporter process
	// holds the deliveries of the log in memory, bodies included.
	RecordRetention time.Duration
	// Now is the clock of the sweep of old records (nil: time.Now).
	Now func() time.Time
}

// Dispatcher sends the pending deliveries of the deliveries log. It keeps
// one queue per webhook, ordered by due time, with at most MaxInFlight
// attempts in flight each: a slow or dead endpoint holds up only its own
// deliveries. Each attempt is claimed on the log first (a versioned write),
// so that of several dispatchers one makes it, and a dispatcher that dies
// mid-attempt leaves the delivery due again once the claim runs out.
type Dispatcher struct {
	d      *Deliveries
	o      DispatcherOptions
	client *http.Client

	mu      sync.Mutex
	queues  map[string]*queue // marketplace/webhook id → queue
	ctx     context.Context   // set by Run; nil before
	running sync.WaitGroup
}

// NewDispatcher returns the dispatcher of d's deliveries. It listens to the
// deliveries collection: call it before the deliveries log runs.
func NewDispatcher(d *Deliveries, o DispatcherOptions) *Dispatcher {
	if o.Guard == nil {
		o.Guard = &Guard{}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.DisableAfter <= 0 {
		o.DisableAfter = DefaultDisableAfter
	}
	o.Schedule = o.Schedule.withDefaults()
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.UserAgent == "" {
		o.UserAgent = "Endcap-Webhooks/1"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RecordRetention <= 0 {
		o.RecordRetention = DefaultRecordRetention
	}
	tr := &http.Transport{
		Proxy:               nil, // a proxy would be vetted instead of the endpoint
		DialContext:         o.Guard.DialContext,
		TLSHandshakeTimeout: o.Timeout, // the attempt's context bounds the rest
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: o.MaxInFlight,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	p := &Dispatcher{d: d, o: o, queues: map[string]*queue{}, client: &http.Client{
		Transport: tr,
		// Redirects are not followed: a 3xx is a failed attempt. A signed
		// delivery goes to the URL its webhook names, never elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	d.items.Listen(p.changed)
	return p
}

// changed follows the deliveries collection (under its lock: only the
// queues are touched).
func (p *Dispatcher) changed(mp, id string, _, nw *Delivery) {
	if nw == nil || nw.Status != DeliveryPending || nw.NextAttemptAt == nil {
		p.unschedule(mp, id, nw)
		return
	}
	p.schedule(mp, nw.WebhookID, id, *nw.NextAttemptAt)
}

// Run sends deliveries until ctx ends. Call it once the deliveries log and
// the entities log have caught up.
func (p *Dispatcher) Run(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	for _, mp := range p.d.items.Marketplaces() {
		p.d.items.Each(mp, func(id string, x Delivery) bool {
			if x.Status == DeliveryPending && x.NextAttemptAt != nil {
				p.schedule(mp, x.WebhookID, id, *x.NextAttemptAt)
			}
			return true
		})
	}
	gauges := time.NewTicker(5 * time.Second)
	sweep := time.NewTicker(time.Hour)
	defer gauges.Stop()
	defer sweep.Stop()
	p.sweep(ctx)
	for {
		select {
		case <-ctx.Done():
			p.running.Wait()
			return ctx.Err()
		case <-gauges.C:
			p.gauges()
		case <-sweep.C:
			p.sweep(ctx)
		}
	}
}

// queue is one webhook's deliveries due or scheduled in this process.
type queue struct {
	key      string
	due      map[string]time.Time // delivery id → due
	h        dueHeap
	inflight map[string]bool
	wake     chan struct{}
	active   bool // its loop runs
}

type dueItem struct {
	at time.Time
	id string
}

type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (p *Dispatcher) schedule(mp, webhookID, id string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := mp + "/" + webhookID
	q := p.queues[key]
	if q == nil {
		q = &queue{key: key, due: map[string]time.Time{}, inflight: map[string]bool{}, wake: make(chan struct{}, 1)}
		p.queues[key] = q
	}
	if cur, ok := q.due[id]; !ok || !cur.Equal(at) {
		q.due[id] = at
		heap.Push(&q.h, dueItem{at, id})
	}
	p.kick(q)
}

func (p *Dispatcher) unschedule(mp, id string, nw *Delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range p.queues {
		if nw != nil && q.key != mp+"/"+nw.WebhookID {
			continue
		}
		delete(q.due, id) // its heap entry is skipped when it comes up
	}
}

// kick runs q's loop, or wakes it (under p.mu).
func (p *Dispatcher) kick(q *queue) {
	if p.ctx == nil {
		return // Run schedules everything when it starts
	}
	if q.active {
		select {
		case q.wake <- struct{}{}:
		default:
		}
		return
	}
	q.active = true
	p.running.Add(1)
	go p.loop(p.ctx, q)
}

// loop starts q's attempts as they come due, at most MaxInFlight at once,
// and ends when q is empty.
func (p *Dispatcher) loop(ctx context.Context, q *queue) {
	defer p.running.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		for len(q.h) > 0 {
			top := q.h[0]
			if at, ok := q.due[top.id]; ok && at.Equal(top.at) && !q.inflight[top.id] {
				break
			}
			heap.Pop(&q.h)
		}
		if len(q.h) == 0 {
			q.active = false
			if len(q.inflight) == 0 {
				delete(p.queues, q.key)
			}
			p.mu.Unlock()
			return
		}
		top := q.h[0]
		wait := time.Until(top.at)
		if wait <= 0 && len(q.inflight) < p.o.MaxInFlight {
			heap.Pop(&q.h)
			delete(q.due, top.id)
			q.inflight[top.id] = true
			p.running.Add(1)
			go func() {
				defer p.running.Done()
				p.attempt(ctx, q.key, top.id, top.at)
				p.mu.Lock()
				delete(q.inflight, top.id)
				delete(q.due, top.id) // scheduled again below from what the log holds now
				if q.active {
					p.kick(q)
				} else if len(q.h) == 0 && len(q.inflight) == 0 && p.queues[q.key] == q {
					delete(p.queues, q.key)
				}
				p.mu.Unlock()
				mp, _, _ := strings.Cut(q.key, "/")
				if x, _, ok := p.d.items.Get(mp, top.id); ok && x.Status == DeliveryPending && x.NextAttemptAt != nil && ctx.Err() == nil {
					p.schedule(mp, x.WebhookID, top.id, *x.NextAttemptAt)
				}
			}()
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		if wait <= 0 {
			wait = time.Hour // at the in-flight limit: an attempt's end wakes the loop
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			p.mu.Lock()
			q.active = false
			p.mu.Unlock()
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}

// gauges updates the age of the oldest pending delivery and the longest
// overdue attempt.
func (p *Dispatcher) gauges() {
	now := time.Now()
	var oldest time.Time
	for _, mp := range p.d.items.Marketplaces() {
		p.d.items.Each(mp, func(_ string, x Delivery) bool {
			if x.Status == DeliveryPending && (oldest.IsZero() || x.CreatedAt.Before(oldest)) {
				oldest = x.CreatedAt
			}
			return true
		})
	}
	if oldest.IsZero() {
		telemetry.WebhookOldestPending.Set(0)
	} else {
		telemetry.WebhookOldestPending.Set(now.Sub(oldest).Seconds())
	}
	var overdue time.Duration
	p.mu.Lock()
	for _, q := range p.queues {
		for _, at := range q.due {
			overdue = max(overdue, now.Sub(at))
		}
	}
	p.mu.Unlock()
	telemetry.WebhookOverdue.Set(overdue.Seconds())
}

// sweep deletes the deliveries finished longer than RecordRetention ago,
// and the failure streaks of webhooks that were deleted. A streak that
// started within the last hour is left: its webhook may be one created
// elsewhere that this process does not see yet.
func (p *Dispatcher) sweep(ctx context.Context) {
	now := p.o.Now()
	for _, mp := range p.d.items.Marketplaces() {
		var old []string
		p.d.items.Each(mp, func(id string, x Delivery) bool {
			if x.FinishedAt != nil && now.Sub(*x.FinishedAt) > p.o.RecordRetention {
				old = append(old, id)
			}
			return true
		})
		sweepRecords(ctx, p.o.Log, p.d.items, mp, old, "expired delivery")
	}
	for _, mp := range p.d.health.Marketplaces() {
		var streaks []string
		p.d.health.Each(mp, func(id string, h Health) bool {
			if h.FailingSince == nil || now.Sub(*h.FailingSince) > time.Hour {
				streaks = append(streaks, id)
			}
			return true
		})
		var gone []string
		for _, id := range streaks {
			if _, _, ok := p.d.hooks.items.Get(mp, id); !ok {
				gone = append(gone, id)
			}
		}
		sweepRecords(ctx, p.o.Log, p.d.health, mp, gone, "deleted webhook's failure streak")
	}
}

// sweepRecords deletes the records ids of marketplace mp from c, each at
// its current version (one changed meanwhile is left).
func sweepRecords[T any](ctx context.Context, log *slog.Logger, c *statelog.Collection[T], mp string, ids []string, what string) {
	for _, id := range ids {
		_, ver, ok := c.Get(mp, id)
		if !ok {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.Delete(dctx, mp, id, ver); err != nil && !errors.Is(err, statelog.ErrConflict) && ctx.Err() == nil {
			log.Warn("webhooks: "+what+" not deleted", "marketplace", mp, "id", id, "err", err)
		}
		cancel()
	}
}

// attempt makes one attempt of a delivery that came due at due.
func (p *Dispatcher) attempt(ctx context.Context, key, id string, due time.Time) {
	mp, webhookID, _ := strings.Cut(key, "/")
	x, ver, ok := p.d.items.Get(mp, id)
	if !ok || x.Status != DeliveryPending || x.NextAttemptAt == nil || x.WebhookID != webhookID {
		return
	}
	if !x.NextAttemptAt.Equal(due) {
		return // changed meanwhile: the change scheduled it again
	}
	now := p.d.now()
	if x.InFlight {
		// The claim of an attempt ran out: that attempt is lost.
		x.LastError = "the attempt did not finish (the process delivering it stopped)"
	}
	w, _, ok := p.d.hooks.items.Get(mp, webhookID)
	switch {
	case !ok:
		p.finish(ctx, mp, x, ver, "the webhook was deleted")
		return
	case w.Disabled:
		p.finish(ctx, mp, x, ver, "the webhook is disabled: "+w.DisabledReason)
		return
	}
	// Claim the attempt.
	lost := now.Add(p.o.Timeout + claimGrace)
	x.Attempts++
	x.Round++
	x.InFlight, x.LastAttemptAt, x.NextAttemptAt = true, &now, &lost
	ver, err := p.put(ctx, mp, x, ver)
	if err != nil {
		if !errors.Is(err, statelog.ErrConflict) && ctx.Err() == nil {
			p.o.Log.Warn("webhooks: attempt not claimed; trying again shortly", "delivery", id, "err", err)
			select { // the delivery is scheduled again (unchanged) when this returns
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return
	}
	res := p.send(ctx, w, &x, now)
	if ctx.Err() != nil {
		// Shutting down: the delivery is due again at once (for the next
		// process); if this write fails too, when the claim runs out.
		x.InFlight, x.NextAttemptAt, x.LastError = false, &now, "the attempt was interrupted: the process delivering it stopped"
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		_, _ = p.put(sctx, mp, x, ver)
		cancel()
		return
	}
	if x.Attempts == 1 {
		telemetry.WebhookEventToAttemptSeconds.Observe(time.Since(x.EventAt).Seconds())
	}
	telemetry.WebhookAttemptSeconds.Observe(res.latency.Seconds())
	x.InFlight = false
	x.LastStatusCode, x.LastError, x.LastLatencyMs, x.LastResponse = res.status, res.err, res.latency.Milliseconds(), res.response
	fin := p.d.now()
	outcome := "retry"
	switch {
	case res.ok():
		x.Status, x.NextAttemptAt, x.FinishedAt = DeliveryDelivered, nil, &fin
		outcome = "delivered"
	case res.status == http.StatusGone:
		x.Status, x.NextAttemptAt, x.FinishedAt = DeliveryFailed, nil, &fin
		outcome = "gone"
	default:
		if d, more := p.o.Schedule.Delay(x.Round); more {
			next := fin.Add(d)
			x.NextAttemptAt = &next
		} else {
			x.Status, x.NextAttemptAt, x.FinishedAt = DeliveryFailed, nil, &fin
			outcome = "failed"
		}
	}
	if res.refused {
		p.o.Log.Info("webhooks: delivery refused: its destination is not a public address", "marketplace", mp, "webhook", webhookID, "delivery", id, "detail", res.detail)
	}
	if res.refused && outcome == "retry" {
		telemetry.WebhookAttempts.WithLabelValues("refused").Inc()
	} else {
		telemetry.WebhookAttempts.WithLabelValues(outcome).Inc()
	}
	if x.Status == DeliveryDelivered {
		telemetry.WebhookDeliveries.WithLabelValues("delivered").Inc()
	} else if x.Status == DeliveryFailed {
		telemetry.WebhookDeliveries.WithLabelValues("failed").Inc()
	}
	if _, err := p.putResult(ctx, mp, x, ver); err != nil {
		p.o.Log.Warn("webhooks: attempt result not stored; the delivery is due again when its claim runs out", "delivery", id, "err", err)
	}
	p.o.Log.Debug("webhooks: attempt", "marketplace", mp, "webhook", webhookID, "delivery", id, "event", x.EventType,
		"attempt", x.Attempts, "status", res.status, "err", res.err, "latency", res.latency, "outcome", outcome)
	// The webhook's own state: 410 disables it at once; failing for
	// DisableAfter disables it too.
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if outcome == "gone" {
		if err := p.d.hooks.disable(hctx, mp, webhookID, ReasonGone); err != nil && !errors.Is(err, errGone) {
			p.o.Log.Warn("webhooks: webhook not disabled after 410", "webhook", webhookID, "err", err)
		}
		p.o.Log.Info("webhooks: webhook disabled: its endpoint answered 410 Gone", "marketplace", mp, "webhook", webhookID)
		return
	}
	failing, err := p.d.noteResult(hctx, mp, w, res.ok(), now)
	if err != nil {
		p.o.Log.Warn("webhooks: failure streak not recorded", "webhook", webhookID, "err", err)
	}
	if !res.ok() && failing >= p.o.DisableAfter {
		since := now.Add(-failing)
		d := failing.Round(time.Second)
		if failing < time.Second {
			d = failing.Round(time.Millisecond)
		}
		reason := fmt.Sprintf(reasonFailing, d, timestamp.Format(since))
		if err := p.d.hooks.disable(hctx, mp, webhookID, reason); err == nil {
			p.o.Log.Warn("webhooks: webhook disabled", "marketplace", mp, "webhook", webhookID, "reason", reason)
		}
	}
}

// finish fails a delivery that can no longer be sent.
func (p *Dispatcher) finish(ctx context.Context, mp string, x Delivery, ver int64, why string) {
	fin := p.d.now()
	x.Status, x.NextAttemptAt, x.InFlight, x.FinishedAt, x.LastError = DeliveryFailed, nil, false, &fin, why
	if _, err := p.putResult(ctx, mp, x, ver); err == nil {
		telemetry.WebhookDeliveries.WithLabelValues("failed").Inc()
	}
}

func (p *Dispatcher) put(ctx context.Context, mp string, x Delivery, ver int64) (int64, error) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return p.d.items.Put(pctx, mp, x.ID, ver, x)
}

// putResult writes an attempt's result, trying a few times: until it is
// stored, the claim stands, and the delivery is due again when it runs out.
func (p *Dispatcher) putResult(ctx context.Context, mp string, x Delivery, ver int64) (int64, error) {
	var err error
	for i := range 3 {
		var v int64
		if v, err = p.put(ctx, mp, x, ver); err == nil || errors.Is(err, statelog.ErrConflict) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(i+1) * time.Second):
		}
	}
	return 0, err
}

// result is the outcome of one request.
type result struct {
	status   int
	err      string
	response string
	latency  time.Duration
	refused  bool
	detail   string // of a refusal: the address and why (logged, never shown)
}

func (r result) ok() bool { return r.status >= 200 && r.status < 300 }

// send makes the request of one attempt, signed per Standard Webhooks.
func (p *Dispatcher) send(ctx context.Context, w Webhook, x *Delivery, now time.Time) result {
	keys, err := w.SigningKeys(now)
	if err != nil {
		return result{err: "the webhook's secret is unusable: " + err.Error()}
	}
	body := []byte(x.Body)
	ts := now.Unix()
	actx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return result{err: "the URL is not usable: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", p.o.UserAgent)
	req.Header.Set("webhook-id", x.EventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(keys, x.EventID, ts, body))
	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		r := result{latency: time.Since(start)}
		switch rf, refused := refusal(err); {
		case refused:
			r.err, r.refused, r.detail = rf.Error(), true, rf.Detail()
		case ctx.Err() == nil && (actx.Err() != nil || isTimeout(err)):
			r.err = "timed out after " + p.o.Timeout.String()
		default:
			r.err = trimErr(err)
		}
		return r
	}
	// The status decides; a body cut off (by the timeout, a broken
	// connection) keeps what came of it.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	resp.Body.Close()
	r := result{status: resp.StatusCode, latency: time.Since(start), response: keep(b)}
	if !r.ok() {
		r.err = "HTTP " + strconv.Itoa(resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			r.err += " (redirects are not followed)"
		}
	}
	return r
}

// keep is the start of a response body, as valid UTF-8.
func keep(b []byte) string {
	if len(b) > keptResponseBytes {
		b = b[:keptResponseBytes]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// trimErr is a connection error without Go's request prefix.
func trimErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "\": "); i >= 0 && strings.HasPrefix(s, "Post \"") {
		s = s[i+3:]
	}
	if len(s) > 300 {
		s = s[:300]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
