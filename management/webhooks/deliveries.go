package webhooks

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

// TypeDelivery is the entity type of deliveries on the deliveries log.
const TypeDelivery = "webhook_delivery"

// Delivery statuses.
const (
	DeliveryPending   = "pending"   // an attempt is due, in flight, or scheduled
	DeliveryDelivered = "delivered" // an attempt got a 2xx
	DeliveryFailed    = "failed"    // given up: attempts used, 410, or the webhook disabled or deleted
)

// DefaultRecordRetention: a finished delivery is deleted from the log (and
// from the delivery log of the API) this long after it finished, unless
// DispatcherOptions.RecordRetention says otherwise.
const DefaultRecordRetention = 30 * 24 * time.Hour

// Delivery is one event's delivery to one webhook, with the state of its
// attempts. It is an entity ("webhook_delivery", keyed by marketplace and
// delivery id) on the deliveries log; every attempt writes it twice (claimed,
// then its result), so that a process that dies mid-attempt leaves a
// delivery another process takes up.
type Delivery struct {
	ID        string    `json:"id"`
	WebhookID string    `json:"webhookId"`
	EventID   string    `json:"eventId"` // the webhook-id header
	EventType string    `json:"eventType"`
	EventAt   time.Time `json:"eventAt"`
	Body      string    `json:"body"` // the exact bytes sent and signed
	CreatedAt time.Time `json:"createdAt"`
	Status    string    `json:"status"`
	// Attempts made in all; Round counts those of the current schedule (a
	// retry by hand starts a new one).
	Attempts int `json:"attempts"`
	Round    int `json:"round"`
	// NextAttemptAt is when the next attempt is due (pending only). While
	// an attempt is in flight (InFlight), it is when that attempt counts as
	// lost and the delivery is due again.
	NextAttemptAt  *time.Time `json:"nextAttemptAt,omitempty"`
	InFlight       bool       `json:"inFlight,omitempty"`
	LastAttemptAt  *time.Time `json:"lastAttemptAt,omitempty"`
	LastStatusCode int        `json:"lastStatusCode,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
	LastLatencyMs  int64      `json:"lastLatencyMs,omitempty"`
	LastResponse   string     `json:"lastResponse,omitempty"`
	FinishedAt     *time.Time `json:"finishedAt,omitempty"`
}

// TypeHealth is the entity type of a webhook's failure streak on the
// deliveries log.
const TypeHealth = "webhook_health"

// Health is a webhook's failure streak, kept on the deliveries log (keyed
// by marketplace and webhook id) rather than on the webhook, so that
// deliveries never change a webhook's version (its ETag).
type Health struct {
	// FailingSince is the first failed attempt since the last success
	// (nil: the last attempt succeeded).
	FailingSince *time.Time `json:"failingSince,omitempty"`
}

// Defaults of TestLimits.
const (
	DefaultTestsPerHour = 20
	DefaultTestsPerDay  = 100
	DefaultTestsKept    = 100
)

// TestLimits bound the test deliveries (POST …/test) of a marketplace, which
// every api and exporter process keeps in memory like any delivery.
type TestLimits struct {
	// PerHour and PerDay: test deliveries a marketplace may make in any
	// hour and any 24 hours (429 past them).
	PerHour, PerDay int
	// Kept: test deliveries of a marketplace that are kept; past it the
	// oldest finished ones are deleted. At least PerDay.
	Kept int
}

func (l TestLimits) withDefaults() TestLimits {
	if l.PerHour <= 0 {
		l.PerHour = DefaultTestsPerHour
	}
	if l.PerDay <= 0 {
		l.PerDay = DefaultTestsPerDay
	}
	if l.Kept <= 0 {
		l.Kept = DefaultTestsKept
	}
	l.Kept = max(l.Kept, l.PerDay)
	return l
}

// Deliveries is the view of the deliveries log and the delivery log's API
// operations.
type Deliveries struct {
	items  *statelog.Collection[Delivery]
	health *statelog.Collection[Health]
	hooks  *Service
	now    func() time.Time
	// Tests bounds the test deliveries of each marketplace.
	Tests TestLimits
}

// NewDeliveries registers the deliveries collection on log (before it
// runs). hooks is the webhooks view.
func NewDeliveries(log *statelog.Log, hooks *Service) *Deliveries {
	return &Deliveries{items: statelog.NewCollection[Delivery](log, TypeDelivery), health: statelog.NewCollection[Health](log, TypeHealth),
		hooks: hooks, now: func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }}
}

// FailingSince is the start of a webhook's failure streak (nil: none).
func (d *Deliveries) FailingSince(mp, webhookID string) *time.Time {
	h, _, _ := d.health.Get(mp, webhookID)
	return h.FailingSince
}

// noteResult records the outcome of an attempt on the webhook's failure
// streak: a success ends it, a failure starts it (written only when the
// streak starts or ends). It returns how long the webhook has been failing.
// A streak that began before the webhook was last enabled starts anew.
func (d *Deliveries) noteResult(ctx context.Context, mp string, w Webhook, ok bool, at time.Time) (time.Duration, error) {
	for range 5 {
		h, cur, _ := d.health.Get(mp, w.ID)
		switch {
		case ok && h.FailingSince == nil:
			return 0, nil
		case !ok && h.FailingSince != nil && !h.FailingSince.Before(w.UpdatedAt):
			return at.Sub(*h.FailingSince), nil
		case ok:
			h.FailingSince = nil
		default:
			t := at.UTC().Truncate(time.Millisecond)
			h.FailingSince = &t
		}
		_, err := d.health.Put(ctx, mp, w.ID, cur, h)
		if !errors.Is(err, statelog.ErrConflict) {
			return 0, err
		}
	}
	return 0, statelog.ErrConflict
}

// Hooks is the webhooks view the deliveries belong to.
func (d *Deliveries) Hooks() *Service { return d.hooks }

// List returns a page of a webhook's deliveries, newest event first,
// starting before the delivery id before ("" for the first page), of one
// status when status is not "".
func (d *Deliveries) List(mp, webhookID, status, before string, limit int) ([]Delivery, bool, error) {
	if _, _, ok := d.hooks.items.Get(mp, webhookID); !ok {
		return nil, false, validation.NotFoundf("webhook %s", webhookID)
	}
	switch status {
	case "", DeliveryPending, DeliveryDelivered, DeliveryFailed:
	default:
		return nil, false, validation.New("enum", "Input should be 'pending', 'delivered' or 'failed'", "query", "status")
	}
	_, vals, more := d.items.PageDesc(mp, before, limit, func(_ string, x Delivery) bool {
		return x.WebhookID == webhookID && (status == "" || x.Status == status)
	})
	return vals, more, nil
}

// Get returns a delivery of a webhook.
func (d *Deliveries) Get(mp, webhookID, id string) (Delivery, error) {
	if _, _, ok := d.hooks.items.Get(mp, webhookID); !ok {
		return Delivery{}, validation.NotFoundf("webhook %s", webhookID)
	}
	x, _, ok := d.items.Get(mp, id)
	if !ok || x.WebhookID != webhookID {
		return Delivery{}, validation.NotFoundf("delivery %s", id)
	}
	return x, nil
}

// Errors of Retry and Test.
var (
	// ErrDisabled: the webhook is disabled; enable it first.
	ErrDisabled = errkind.New(errkind.Conflict, "the webhook is disabled: enable it (PATCH status \"enabled\") first").WithCode("webhook_disabled")
	// ErrInFlight: an attempt of the delivery is in flight.
	ErrInFlight = errkind.New(errkind.Conflict, "an attempt of this delivery is in flight; retry when it has finished").WithCode("delivery_in_flight")
)

// Retry sends a delivery again now, with the same webhook-id and body: a
// pending one is brought forward, a finished one starts a new schedule.
func (d *Deliveries) Retry(ctx context.Context, mp, webhookID, id string) (Delivery, error) {
	w, _, ok := d.hooks.items.Get(mp, webhookID)
	if !ok {
		return Delivery{}, validation.NotFoundf("webhook %s", webhookID)
	}
	x, ver, ok := d.items.Get(mp, id)
	if !ok || x.WebhookID != webhookID {
		return Delivery{}, validation.NotFoundf("delivery %s", id)
	}
	if w.Disabled {
		return Delivery{}, ErrDisabled
	}
	now := d.now()
	if x.InFlight && x.NextAttemptAt != nil && now.Before(*x.NextAttemptAt) {
		return Delivery{}, ErrInFlight
	}
	if x.Status != DeliveryPending {
		x.Round = 0
	}
	x.Status, x.NextAttemptAt, x.InFlight, x.FinishedAt = DeliveryPending, &now, false, nil
	if _, err := d.items.Put(ctx, mp, id, ver, x); err != nil {
		return Delivery{}, err
	}
	return x, nil
}

type testRef struct {
	id       string
	at       time.Time
	finished bool
}

// Test creates a delivery of a webhook.test event to one webhook, sent at
// once whatever the webhook subscribed to, within the marketplace's
// TestLimits (counted on the view: two tests at the same moment on two
// processes may both pass the last place).
func (d *Deliveries) Test(ctx context.Context, mp, webhookID string) (Delivery, error) {
	w, _, ok := d.hooks.items.Get(mp, webhookID)
	if !ok {
		return Delivery{}, validation.NotFoundf("webhook %s", webhookID)
	}
	if w.Disabled {
		return Delivery{}, ErrDisabled
	}
	now := d.now()
	lim := d.Tests.withDefaults()
	var tests []testRef
	d.items.Each(mp, func(id string, x Delivery) bool {
		if x.EventType == TypeTest {
			tests = append(tests, testRef{id: id, at: x.CreatedAt, finished: x.Status != DeliveryPending})
		}
		return true
	})
	slices.SortFunc(tests, func(a, b testRef) int { return a.at.Compare(b.at) })
	for _, win := range []struct {
		d    time.Duration
		max  int
		name string
	}{{time.Hour, lim.PerHour, "hour"}, {24 * time.Hour, lim.PerDay, "24 hours"}} {
		var in []time.Time
		for _, t := range tests {
			if t.at.After(now.Add(-win.d)) {
				in = append(in, t.at)
			}
		}
		if len(in) >= win.max {
			// Free again when the oldest test of the window leaves it.
			after := in[len(in)-win.max].Add(win.d).Sub(now)
			return Delivery{}, errkind.Newf(errkind.TooMany, "a marketplace may send %d test deliveries per %s; retry in %s", win.max, win.name, after.Round(time.Second)).WithRetryAfter(after)
		}
	}
	data, _ := marshal(map[string]any{"webhookId": w.ID, "url": w.URL,
		"message": "A test event sent through POST /public/v1/webhooks/webhooks/" + w.ID + "/test."})
	ev := Event{ID: uuid.NewString(), Type: TypeTest, MarketplaceID: mp, Timestamp: now, Subject: w.ID, Data: data}
	x, err := d.create(ctx, ev, w.ID)
	if err != nil {
		return Delivery{}, err
	}
	// Past Kept, the oldest finished tests go (a failed deletion is done
	// by the next test).
	excess := len(tests) + 1 - lim.Kept
	for _, t := range tests {
		if excess <= 0 {
			break
		}
		if !t.finished {
			continue
		}
		if _, ver, ok := d.items.Get(mp, t.id); ok && d.items.Delete(ctx, mp, t.id, ver) == nil {
			excess--
		}
	}
	return x, nil
}

// create writes the pending delivery of ev to a webhook, due now. It
// returns statelog.ErrConflict when the delivery exists (the event was
// handled before).
func (d *Deliveries) create(ctx context.Context, ev Event, webhookID string) (Delivery, error) {
	body, err := ev.Body()
	if err != nil {
		return Delivery{}, err
	}
	now := d.now()
	x := Delivery{ID: DeliveryID(ev.ID, webhookID, ev.Timestamp), WebhookID: webhookID, EventID: ev.ID, EventType: ev.Type,
		EventAt: ev.Timestamp.UTC(), Body: string(body), CreatedAt: now, Status: DeliveryPending, NextAttemptAt: &now}
	if _, err := d.items.Put(ctx, ev.MarketplaceID, x.ID, 0, x); err != nil {
		return Delivery{}, err
	}
	return x, nil
}
