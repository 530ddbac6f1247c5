// Package webhooks owns a marketplace's webhook subscriptions: the URL that
// receives deliveries, the event types it subscribed to, and the signing
// secret. Each webhook is one entity ("webhook") on the entities log
// (storage/statelog). Delivery itself is a later issue; the secret is stored
// as generated because deliveries must be signed with it, which is why the
// entities topic must be readable only by Endcap's own processes.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/endcap/endcap/idempotency"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/validation"
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

// EventTypes are the event types a webhook can subscribe to.
var EventTypes = []string{
	"budget.exhausted",
	"campaign.created",
	"campaign.updated",
	"export.completed",
	"export.failed",
}

// Webhook is one stored webhook.
type Webhook struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	EventTypes []string  `json:"eventTypes"`
	Secret     string    `json:"secret"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
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
}

// Service is the webhooks view and its operations.
type Service struct {
	items *statelog.Collection[Webhook]
	now   func() time.Time
}

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
	var errs validation.Errors
	w := Webhook{}
	if in.URL == nil {
		errs.Add(validation.Missing, "Field required", "body", "url")
	} else if u, msg := checkURL(*in.URL); msg != "" {
		errs.Add(validation.ValueError, msg, "body", "url")
	} else {
		w.URL = u
	}
	types, terrs := checkEventTypes(in.EventTypes)
	errs = append(errs, terrs...)
	if len(errs) > 0 {
		return Webhook{}, 0, errs
	}
	w.EventTypes = types
	w.ID = id
	if w.Secret, err = NewSecret(); err != nil {
		return Webhook{}, 0, err
	}
	w.CreatedAt = s.now()
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

// Update changes the URL and/or the event types (the secret never
// changes). ifMatch is the expected version, or 0.
func (s *Service) Update(ctx context.Context, mp, id string, ifMatch int64, in Input) (Webhook, int64, error) {
	w, cur, ok := s.items.Get(mp, id)
	if !ok {
		return Webhook{}, 0, validation.NotFoundf("webhook %s", id)
	}
	if ifMatch != 0 && ifMatch != cur {
		return Webhook{}, 0, statelog.ErrConflict
	}
	var errs validation.Errors
	if in.URL != nil {
		if u, msg := checkURL(*in.URL); msg != "" {
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
	if len(errs) > 0 {
		return Webhook{}, 0, errs
	}
	w.UpdatedAt = s.now()
	v, err := s.items.Put(ctx, mp, id, cur, w)
	if err != nil {
		return Webhook{}, 0, err
	}
	return w, v, nil
}

// Delete removes a webhook. ifMatch is the expected version, or 0.
func (s *Service) Delete(ctx context.Context, mp, id string, ifMatch int64) error {
	_, cur, ok := s.items.Get(mp, id)
	if !ok {
		return validation.NotFoundf("webhook %s", id)
	}
	if ifMatch != 0 && ifMatch != cur {
		return statelog.ErrConflict
	}
	return s.items.Delete(ctx, mp, id, cur)
}

// NewSecret returns a signing secret: "whsec_" and 32 random bytes in
// URL-safe base64 without padding.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
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

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
