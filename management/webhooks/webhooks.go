// Package webhooks owns a marketplace's webhook subscriptions and their
// deliveries (docs/reference/webhooks.md).
//
// A webhook (the URL that receives deliveries, the event types it
// subscribed to, its signing secret, whether it is enabled) is one entity
// ("webhook") on the entities log (storage/statelog). The secret is stored as
// generated because deliveries are signed with it, which is why the entities
// topic must be readable only by Endcap's own processes.
//
// Events come from the Kafka topics the system already writes (Router);
// each starts one delivery per subscribed webhook, an entity on a log of its
// own, which the Dispatcher sends, signed per Standard Webhooks, retrying
// on a schedule until it is delivered or given up.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

const typeWebhook = "webhook"

// Limits.
const (
	MaxURLLength = 2048
	// SecretPrefix starts every signing secret.
	SecretPrefix = "whsec_"
	// hintLength is how many characters of the secret (after the prefix)
	// lists and reads show.
	hintLength = 4
)

// Event types.
const (
	TypeBudgetExhausted        = "budget.exhausted"
	TypeCampaignArchived       = "campaign.archived"
	TypeCampaignCreated        = "campaign.created"
	TypeCampaignUpdated        = "campaign.updated"
	TypeExportCompleted        = "export.completed"
	TypeExportFailed           = "export.failed"
	TypePrivacyDeletionDone    = "privacy.deletion.completed"
	TypeScoredAttributionReady = "scored_attribution.ready"
	TypeVendorBalanceLow       = "vendor.balance_low"
	// TypeTest is the event of POST .../test: sent to that webhook only,
	// whatever it subscribed to.
	TypeTest = "webhook.test"
)

// EventTypes are the event types a webhook can subscribe to.
var EventTypes = []string{
	TypeBudgetExhausted,
	TypeCampaignArchived,
	TypeCampaignCreated,
	TypeCampaignUpdated,
	TypeExportCompleted,
	TypeExportFailed,
	TypePrivacyDeletionDone,
	TypeScoredAttributionReady,
	TypeVendorBalanceLow,
}

// Statuses of a webhook.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
)

// Rotation limits: how long the previous secret keeps signing after a
// rotation.
const (
	DefaultRotationOverlap = 24 * time.Hour
	MaxRotationOverlap     = 7 * 24 * time.Hour
)

// Webhook is one stored webhook.
type Webhook struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	EventTypes []string  `json:"eventTypes"`
	Secret     string    `json:"secret"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// PreviousSecret signs beside Secret until PreviousSecretUntil (a
	// rotation's overlap).
	PreviousSecret      string     `json:"previousSecret,omitempty"`
	PreviousSecretUntil *time.Time `json:"previousSecretUntil,omitempty"`
	// Disabled webhooks get no deliveries; DisabledReason says why
	// (410 Gone, failing for days, or by hand).
	Disabled       bool       `json:"disabled,omitempty"`
	DisabledAt     *time.Time `json:"disabledAt,omitempty"`
	DisabledReason string     `json:"disabledReason,omitempty"`
}

// Status is "enabled" or "disabled".
func (w Webhook) Status() string {
	if w.Disabled {
		return StatusDisabled
	}
	return StatusEnabled
}

// Subscribed says whether the webhook receives events of type typ.
func (w Webhook) Subscribed(typ string) bool {
	return !w.Disabled && slices.Contains(w.EventTypes, typ)
}

// SigningKeys are the keys that sign a delivery made at now: the current
// secret's, then the previous one's during a rotation's overlap.
func (w Webhook) SigningKeys(now time.Time) ([][]byte, error) {
	k, err := SecretKey(w.Secret)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{k}
	if w.PreviousSecret != "" && w.PreviousSecretUntil != nil && now.Before(*w.PreviousSecretUntil) {
		if pk, err := SecretKey(w.PreviousSecret); err == nil {
			keys = append(keys, pk)
		}
	}
	return keys, nil
}

// SecretHint is the visible start of the secret ("whsec_" and 4
// characters), for recognising it; lists and reads show only this.
func (w Webhook) SecretHint() string {
	return w.Secret[:min(len(w.Secret), len(SecretPrefix)+hintLength)]
}

// Input is the body of a create, and (with nil meaning "unchanged") of an
// update.
type Input struct {
	URL        *string   `json:"url"`
	EventTypes *[]string `json:"eventTypes"`
	// Status "enabled" re-enables a disabled webhook (clearing the reason);
	// "disabled" stops its deliveries.
	Status *string `json:"status"`
}

// Service is the webhooks view and its operations.
type Service struct {
	items *statelog.Collection[Webhook]
	now   func() time.Time
	// Guard refuses, when a URL is registered, a host that is an address
	// deliveries may not reach or a name that resolves only to such
	// addresses (nil: a Guard that allows no loopback). It should be the
	// dispatcher's, which checks again at every connection.
	Guard *Guard
	// MaxPerMarketplace is how many webhooks a marketplace may have
	// (0: DefaultMaxPerMarketplace).
	MaxPerMarketplace int
}

// DefaultMaxPerMarketplace is how many webhooks a marketplace may have by
// default: Stripe's limit of endpoints per account and mode. Every event
// becomes one delivery per subscribed webhook, kept in memory by every api
// and exporter process for the delivery retention, so the count bounds
// what one event costs.
const DefaultMaxPerMarketplace = 16

// New registers the webhooks collection on log (before the log runs).
func New(log *statelog.Log) *Service {
	return &Service{
		items: statelog.NewCollection[Webhook](log, typeWebhook),
		now:   func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
	}
}

// Create stores a new webhook with a generated id and secret. The returned
// webhook carries the secret: the only time it is shown (and to the retries
// of a request with an idempotency key, which get the webhook its first
// attempt created).
func (s *Service) Create(ctx context.Context, mp string, in Input) (Webhook, int64, error) {
	id, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Webhook{}, 0, err
	}
	if keyed {
		if w, v, ok := s.items.Get(mp, id); ok {
			return w, v, nil
		}
	}
	limit := s.MaxPerMarketplace
	if limit <= 0 {
		limit = DefaultMaxPerMarketplace
	}
	if n := s.items.Len(mp); n >= limit {
		return Webhook{}, 0, validation.New(validation.ValueError, fmt.Sprintf("a marketplace may have at most %d webhooks, and this one has %d: delete one first (one webhook can subscribe to several event types)", limit, n), "body")
	}
	var errs validation.Errors
	w := Webhook{}
	if in.URL == nil {
		errs.Add(validation.Missing, "Field required", "body", "url")
	} else if u, msg := s.checkURL(ctx, *in.URL); msg != "" {
		errs.Add(validation.ValueError, msg, "body", "url")
	} else {
		w.URL = u
	}
	types, terrs := checkEventTypes(in.EventTypes)
	errs = append(errs, terrs...)
	w.CreatedAt = s.now()
	setStatus(&w, in.Status, w.CreatedAt, &errs)
	if len(errs) > 0 {
		return Webhook{}, 0, errs
	}
	w.EventTypes = types
	w.ID = id
	if w.Secret, err = NewSecret(); err != nil {
		return Webhook{}, 0, err
	}
	w.UpdatedAt = w.CreatedAt
	v, err := s.items.Put(ctx, mp, w.ID, 0, w)
	if keyed && errors.Is(err, statelog.ErrConflict) {
		return idempotency.Existing(err, func() (Webhook, int64, bool) { return s.items.Get(mp, id) })
	}
	if err != nil {
		return Webhook{}, 0, err
	}
	return w, v, nil
}

// Get returns a webhook and its version.
func (s *Service) Get(mp, id string) (Webhook, int64, error) {
	w, v, ok := s.items.Get(mp, id)
	if !ok {
		return Webhook{}, 0, validation.NotFoundf("webhook %s", id)
	}
	return w, v, nil
}

// List returns a page of webhooks in id (creation) order.
func (s *Service) List(mp, after string, limit int) ([]Webhook, bool) {
	_, vals, more := s.items.Page(mp, after, limit, nil)
	return vals, more
}

// Update changes the URL, the event types and/or the status (the secret
// changes only by RotateSecret). ifMatch is the expected version, or 0.
func (s *Service) Update(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, in Input) (Webhook, int64, error) {
	w, cur, ok := s.items.Get(mp, id)
	if !ok {
		return Webhook{}, 0, validation.NotFoundf("webhook %s", id)
	}
	if !statelog.Matches(ifMatch, true, cur) {
		return Webhook{}, 0, statelog.ErrConflict
	}
	var errs validation.Errors
	if in.URL != nil {
		if u, msg := s.checkURL(ctx, *in.URL); msg != "" {
			errs.Add(validation.ValueError, msg, "body", "url")
		} else {
			w.URL = u
		}
	}
	if in.EventTypes != nil {
		types, terrs := checkEventTypes(in.EventTypes)
		errs = append(errs, terrs...)
		w.EventTypes = types
	}
	now := s.now()
	setStatus(&w, in.Status, now, &errs)
	if len(errs) > 0 {
		return Webhook{}, 0, errs
	}
	w.UpdatedAt = now
	v, err := s.items.Put(ctx, mp, id, cur, w)
	if err != nil {
		return Webhook{}, 0, err
	}
	return w, v, nil
}

// Delete removes a webhook. ifMatch is the expected version, or 0.
func (s *Service) Delete(ctx context.Context, mp, id string, ifMatch statelog.IfMatch) error {
	_, cur, ok := s.items.Get(mp, id)
	if !ok {
		return validation.NotFoundf("webhook %s", id)
	}
	if !statelog.Matches(ifMatch, true, cur) {
		return statelog.ErrConflict
	}
	return s.items.Delete(ctx, mp, id, cur)
}

// setStatus applies the status of an input: enabling clears the reason and
// the failure streak, so the webhook gets a fresh start.
func setStatus(w *Webhook, st *string, now time.Time, errs *validation.Errors) {
	if st == nil {
		return
	}
	switch *st {
	case StatusEnabled:
		w.Disabled, w.DisabledAt, w.DisabledReason = false, nil, ""
	case StatusDisabled:
		if !w.Disabled {
			w.Disabled, w.DisabledAt, w.DisabledReason = true, &now, ReasonByHand
		}
	default:
		errs.Add("enum", "Input should be 'enabled' or 'disabled'", "body", "status")
	}
}

// Reasons a webhook was disabled (DisabledReason).
const (
	ReasonByHand  = "disabled through the API"
	ReasonGone    = "the endpoint answered 410 Gone"
	reasonFailing = "every delivery attempt failed for %s (since %s)"
)

// RotateSecret gives the webhook a new secret and keeps the current one
// signing beside it for overlap (at most MaxRotationOverlap; 0: the old
// secret stops at once), so that receivers can switch without losing a
// delivery. It returns the webhook with the new secret (the only time it is
// shown). A rotation during an overlap ends the older secret at once.
func (s *Service) RotateSecret(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, overlap time.Duration) (Webhook, int64, error) {
	w, cur, ok := s.items.Get(mp, id)
	if !ok {
		return Webhook{}, 0, validation.NotFoundf("webhook %s", id)
	}
	if !statelog.Matches(ifMatch, true, cur) {
		return Webhook{}, 0, statelog.ErrConflict
	}
	if overlap < 0 || overlap > MaxRotationOverlap {
		return Webhook{}, 0, validation.New("less_than_equal", fmt.Sprintf("overlapSeconds should be from 0 to %d", int(MaxRotationOverlap.Seconds())), "body", "overlapSeconds")
	}
	secret, err := NewSecret()
	if err != nil {
		return Webhook{}, 0, err
	}
	now := s.now()
	until := now.Add(overlap)
	w.PreviousSecret, w.PreviousSecretUntil, w.Secret = w.Secret, &until, secret
	w.UpdatedAt = now
	v, err := s.items.Put(ctx, mp, id, cur, w)
	if err != nil {
		return Webhook{}, 0, err
	}
	return w, v, nil
}

// ErrSecretReplaced: the replay of a create or rotate-secret with an
// Idempotency-Key cannot show the secret its first answer showed, as the
// webhook no longer has it (rotated twice since, or deleted).
var ErrSecretReplaced = errkind.New(errkind.Conflict, "the secret this request's first answer showed has been replaced since (the webhook's secret was rotated again, or the webhook was deleted), so that answer cannot be repeated; read the webhook, or rotate its secret").WithCode("idempotency_secret_replaced")

// SecretFor returns the webhook's current or previous secret, whichever is
// the one match accepts: what the replay of an answer that showed a secret
// shows again (the answers with an Idempotency-Key are kept without their
// secret). A webhook or secret this process's view does not hold yet is
// looked for again once the view has caught up with the log.
func (s *Service) SecretFor(ctx context.Context, mp, id string, match func(secret string) bool) (string, error) {
	find := func() (string, bool) {
		w, _, ok := s.items.Get(mp, id)
		switch {
		case !ok:
			return "", false
		case match(w.Secret):
			return w.Secret, true
		case w.PreviousSecret != "" && match(w.PreviousSecret):
			return w.PreviousSecret, true
		}
		return "", false
	}
	if sec, ok := find(); ok {
		return sec, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.items.Log().CatchUp(cctx); err != nil {
		return "", statelog.ErrUnavailable
	}
	if sec, ok := find(); ok {
		return sec, nil
	}
	return "", ErrSecretReplaced
}

// NewSecret returns a signing secret as the Standard Webhooks libraries
// take it: "whsec_" and 32 random bytes in standard base64 (padded).
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// SecretKey is the HMAC key of a secret: the bytes its base64 after
// "whsec_" encodes. Secrets are standard base64 (padded); secrets made
// before they were are URL-safe base64 without padding (43 characters,
// never valid standard base64 since their length is not a multiple of 4),
// and sign with the bytes they encode the same way (docs/reference/webhooks.md,
// Secrets).
func SecretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("webhooks: secret does not begin with " + SecretPrefix)
	}
	if k, err := base64.StdEncoding.DecodeString(b64); err == nil && len(k) > 0 {
		return k, nil
	}
	k, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhooks: secret is neither standard nor URL-safe base64")
	}
	return k, nil
}

// StandardSecret is secret as the Standard Webhooks libraries take it: the
// same key, in standard base64.
func StandardSecret(secret string) (string, error) {
	k, err := SecretKey(secret)
	if err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(k), nil
}

// checkEventTypes validates the subscribed event types; absent means every
// type there is now (sorted), an explicit list must be non-empty, known and
// without duplicates.
func checkEventTypes(in *[]string) ([]string, validation.Errors) {
	if in == nil {
		return slices.Clone(EventTypes), nil
	}
	var errs validation.Errors
	if len(*in) == 0 {
		errs.Add(validation.TooShort, "List should have at least 1 item after validation, not 0; leave eventTypes out to subscribe to every event type", "body", "eventTypes")
		return nil, errs
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(*in))
	for i, t := range *in {
		switch {
		case !slices.Contains(EventTypes, t):
			errs.Add("enum", "Input should be one of "+strings.Join(EventTypes, ", "), "body", "eventTypes", i)
		case seen[t]:
			errs.Add(validation.ValueError, "Duplicate value: each event type may appear once", "body", "eventTypes", i)
		default:
			seen[t] = true
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, errs
}

// checkURL validates a delivery URL and returns it (trimmed), or why it is
// not acceptable.
func checkURL(raw string) (string, string) {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return "", "URL must not be empty"
	case len(raw) > MaxURLLength:
		return "", "URL should have at most " + strconv.Itoa(MaxURLLength) + " characters"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "URL is not valid: " + strings.TrimPrefix(err.Error(), "parse ")
	}
	if !u.IsAbs() || u.Opaque != "" || u.Host == "" {
		return "", "URL must be absolute, like https://example.com/hooks/endcap"
	}
	if u.User != nil {
		return "", "URL must not contain credentials (user:password@)"
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "", "URL must not contain a fragment (#...)"
	}
	host := u.Hostname()
	if host == "" {
		return "", "URL must have a host"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", "URL port must be between 1 and 65535"
		}
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !isLoopback(host) {
			return "", "URL must use https (http is accepted only for localhost, for development)"
		}
	default:
		return "", "URL must use https"
	}
	return raw, ""
}

// checkURL is checkURL, then the Guard's check of the URL's host.
func (s *Service) checkURL(ctx context.Context, raw string) (string, string) {
	u, msg := checkURL(raw)
	if msg != "" {
		return "", msg
	}
	g := s.Guard
	if g == nil {
		g = &Guard{}
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", "URL is not valid"
	}
	if msg := g.CheckHost(ctx, pu.Hostname()); msg != "" {
		return "", msg
	}
	return u, ""
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// change applies fn to the current webhook and writes it, reading again on a
// conflict with another writer (a user's PATCH, another dispatcher). fn
// returns false to write nothing. ErrGone: the webhook no longer exists.
func (s *Service) change(ctx context.Context, mp, id string, fn func(w *Webhook) bool) error {
	for range 5 {
		w, cur, ok := s.items.Get(mp, id)
		if !ok {
			return errGone
		}
		if !fn(&w) {
			return nil
		}
		_, err := s.items.Put(ctx, mp, id, cur, w)
		if !errors.Is(err, statelog.ErrConflict) {
			return err
		}
	}
	return statelog.ErrConflict
}

var errGone = errors.New("webhooks: webhook deleted")

// disable turns a webhook off with a reason (no-op when it already is).
func (s *Service) disable(ctx context.Context, mp, id, reason string) error {
	now := s.now()
	return s.change(ctx, mp, id, func(w *Webhook) bool {
		if w.Disabled {
			return false
		}
		w.Disabled, w.DisabledAt, w.DisabledReason = true, &now, reason
		return true
	})
}
