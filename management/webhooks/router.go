package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/statelog"
)

// DefaultRouterGroup is the consumer group of the router.
const DefaultRouterGroup = "endcap-webhooks"

// RouterOptions configure a Router.
type RouterOptions struct {
	Brokers []string
	Conn    kafka.Conn // how the router's client connects (TLS, SASL)
	Group   string
	// Entities is the entities changelog (campaign and export changes);
	// Events the webhook events topic (events other components emit).
	Entities, Events string
	// Decoders make the events of the entities-log records of their type
	// (the map's key): the app registers one for each area whose changes
	// are events (CampaignDecoder, DeletionDecoder, the exports' own).
	// Records of other types make none.
	Decoders       map[string]Decoder
	SessionTimeout time.Duration
	Log            *slog.Logger
	// StartBack: a group with no committed offset (its first start) begins
	// at the records of this long before the process started (0: 1 min),
	// not at the topics' beginnings: history never floods the endpoints.
	StartBack time.Duration
	// Sync, when set, brings this process's webhooks view up to date
	// (statelog.Log.CatchUp of the entities log) before a batch is routed:
	// a webhook created before an event then receives it.
	Sync func(ctx context.Context) error
}

// Router turns what the system writes to Kafka into events, and each event
// into one delivery per subscribed webhook. It is a consumer group on the
// entities changelog and the webhook events topic that commits a record's
// offset only once its deliveries are on the deliveries log; a record read
// again (after a crash or a rebalance) makes the same events (deterministic
// ids), whose deliveries exist already and are not made twice.
type Router struct {
	d  *Deliveries
	o  RouterOptions
	cl *kgo.Client
}

// NewRouter builds the router of d.
func NewRouter(d *Deliveries, o RouterOptions) (*Router, error) {
	if o.Group == "" {
		o.Group = DefaultRouterGroup
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.StartBack <= 0 {
		o.StartBack = time.Minute
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Entities, o.Events),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(time.Now().Add(-o.StartBack).UnixMilli())),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}
	if o.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(o.SessionTimeout), kgo.HeartbeatInterval(min(time.Second, o.SessionTimeout/3)))
	}
	cl, err := kafka.NewClient(o.Brokers, o.Log, o.Conn.With(opts...)...)
	if err != nil {
		return nil, err
	}
	return &Router{d: d, o: o, cl: cl}, nil
}

// Run routes until ctx ends.
func (r *Router) Run(ctx context.Context) error {
	defer r.cl.Close()
	for {
		fetches := r.cl.PollRecords(ctx, 500)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fetches.EachError(func(t string, p int32, err error) {
			r.o.Log.Warn("webhooks router: fetch error", "topic", t, "partition", p, "err", err)
		})
		recs := fetches.Records()
		if len(recs) > 0 && r.o.Sync != nil {
			for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 15*time.Second) {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := r.o.Sync(sctx)
				cancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.o.Log.Warn("webhooks router: webhooks view not brought up to date; retrying", "err", err)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(backoff):
				}
			}
		}
		for _, rec := range recs {
			for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 15*time.Second) {
				err := r.route(ctx, rec)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.o.Log.Warn("webhooks router: record not routed; retrying", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err, "backoff", backoff)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(backoff):
				}
			}
		}
		if len(recs) > 0 {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := r.cl.CommitRecords(cctx, recs...); err != nil && ctx.Err() == nil {
				// Read again by this or another member: routed again, no
				// delivery made twice.
				r.o.Log.Warn("webhooks router: offsets not committed", "err", err)
			}
			cancel()
		}
	}
}

// route makes the deliveries of one record's events.
func (r *Router) route(ctx context.Context, rec *kgo.Record) error {
	var evs []Event
	var err error
	if rec.Topic == r.o.Entities {
		evs, err = r.entityEvents(ctx, rec.Value)
	} else {
		var ev Event
		if json.Unmarshal(rec.Value, &ev) != nil || ev.ID == "" || ev.Type == "" || ev.MarketplaceID == "" {
			r.o.Log.Error("webhooks router: undecodable event skipped", "partition", rec.Partition, "offset", rec.Offset)
			return nil
		}
		evs = []Event{ev}
	}
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := r.Fanout(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// Fanout makes the delivery of ev to every enabled webhook of its
// marketplace that subscribed to its type (none made twice).
func (r *Router) Fanout(ctx context.Context, ev Event) error {
	telemetry.WebhookEvents.WithLabelValues(ev.Type).Inc()
	var targets []string
	r.d.hooks.items.Each(ev.MarketplaceID, func(id string, w Webhook) bool {
		if w.Subscribed(ev.Type) {
			targets = append(targets, id)
		}
		return true
	})
	for _, id := range targets {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.d.create(pctx, ev, id)
		cancel()
		switch {
		case err == nil:
			telemetry.WebhookDeliveries.WithLabelValues("created").Inc()
		case errors.Is(err, statelog.ErrConflict):
			// Made before: this record was read again.
		default:
			return err
		}
	}
	return nil
}

// A Change is one entities-log record of a type a Decoder was registered
// for: a live entity's new version (deletions make no event).
type Change struct {
	MarketplaceID string
	ID            string // the entity's id within its marketplace
	Version       int64  // 1 for its creation
	At            time.Time
	State         json.RawMessage
	// Subscribed says whether a webhook of the marketplace takes events of
	// a type (a decoder may skip costly work, a presigned URL, when none does).
	Subscribed func(typ string) bool
}

// A Decoder turns a Change into at most one event: its type and its data
// (the entity's view, marshalled as the event's data); typ "" makes none. A
// record it cannot read makes none either (an older or newer layout); err
// is for a failure worth retrying the record for (a dependency).
type Decoder func(ctx context.Context, c Change) (typ string, data any, err error)

// entityEvents are the events of one entities-log record, by the decoder of
// its type.
func (r *Router) entityEvents(ctx context.Context, value []byte) ([]Event, error) {
	// Most records are of other types (catalog, bids...): look at the type
	// before decoding the whole record.
	if typ, ok := recordType(value); ok && r.o.Decoders[typ] == nil {
		return nil, nil
	}
	var rec statelog.Record
	if err := json.Unmarshal(value, &rec); err != nil || rec.Deleted {
		return nil, nil
	}
	decode := r.o.Decoders[rec.Type]
	if decode == nil {
		return nil, nil
	}
	mp, id, ok := strings.Cut(rec.ID, "/")
	if !ok {
		return nil, nil
	}
	typ, view, err := decode(ctx, Change{MarketplaceID: mp, ID: id, Version: rec.Version, At: time.UnixMilli(rec.AtMs).UTC(),
		State: rec.State, Subscribed: func(typ string) bool { return r.subscribed(mp, typ) }})
	if err != nil || typ == "" {
		return nil, err
	}
	data, err := marshal(view)
	if err != nil {
		return nil, err
	}
	evID := EventID("entities", rec.Type, rec.ID, strconv.FormatInt(rec.Version, 10), typ)
	return []Event{{ID: evID, Type: typ, MarketplaceID: mp, Timestamp: time.UnixMilli(rec.AtMs).UTC(), Subject: id, Data: data}}, nil
}

// CampaignDecoder makes campaign.created, .updated and .archived, with the
// campaign's view (its status reason and spend at the time of routing);
// loc is a marketplace's time zone (nil: UTC).
func CampaignDecoder(s *campaigns.Service, loc func(mp string) *time.Location) Decoder {
	return func(ctx context.Context, ch Change) (string, any, error) {
		var c campaigns.Campaign
		if err := json.Unmarshal(ch.State, &c); err != nil {
			return "", nil, nil
		}
		typ := TypeCampaignUpdated
		switch {
		case ch.Version == 1:
			typ = TypeCampaignCreated
		case c.Archived():
			typ = TypeCampaignArchived // an archived campaign changes no more: its last record
		}
		l := time.UTC
		if loc != nil {
			l = loc(ch.MarketplaceID)
		}
		return typ, s.View(ctx, ch.MarketplaceID, l, c)[0], nil
	}
}

// DeletionDecoder makes privacy.deletion.completed.
func DeletionDecoder(ctx context.Context, ch Change) (string, any, error) {
	var d privacy.Deletion
	if err := json.Unmarshal(ch.State, &d); err != nil || d.Status != privacy.StatusCompleted {
		return "", nil, nil
	}
	return TypePrivacyDeletionDone, privacy.ViewOf(d), nil
}

func (r *Router) subscribed(mp, typ string) bool {
	found := false
	r.d.hooks.items.Each(mp, func(_ string, w Webhook) bool {
		found = w.Subscribed(typ)
		return !found
	})
	return found
}

// recordType reads the type of an entities-log record written as
// {"type":"...", ...} without decoding the rest; ok is false for any other
// shape.
func recordType(v []byte) (string, bool) {
	const p = `{"type":"`
	if !bytes.HasPrefix(v, []byte(p)) {
		return "", false
	}
	rest := v[len(p):]
	i := bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return "", false
	}
	return string(rest[:i]), true
}
