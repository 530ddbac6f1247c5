package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/management/webhooks"
)

// Webhooks (docs/reference/webhooks.md).
//
//	POST   /webhooks/webhooks
//	GET    /webhooks/webhooks
//	GET    /webhooks/webhooks/{webhook_id}
//	PATCH  /webhooks/webhooks/{webhook_id}
//	DELETE /webhooks/webhooks/{webhook_id}
//	POST   /webhooks/webhooks/{webhook_id}/rotate-secret
//	POST   /webhooks/webhooks/{webhook_id}/test
//	GET    /webhooks/webhooks/{webhook_id}/deliveries
//	GET    /webhooks/webhooks/{webhook_id}/deliveries/{delivery_id}
//	POST   /webhooks/webhooks/{webhook_id}/deliveries/{delivery_id}/retry

// WebhookRoutes returns the webhooks route set.
func WebhookRoutes(svc *webhooks.Service, deliveries *webhooks.Deliveries) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &webhookHandlers{svc: svc, dl: deliveries, p: p}
		p.setRefiller(refillWebhookSecret, func(c *gin.Context, args []string, sum string) (string, error) {
			if len(args) != 1 {
				return "", fmt.Errorf("webhook secret refill: %d arguments", len(args))
			}
			return svc.SecretFor(c.Request.Context(), Marketplace(c).ID, args[0], func(s string) bool { return idempotency.SecretSum(s) == sum })
		})
		r := g.Group("/webhooks", p.Limit("default"))
		r.POST("/webhooks", h.create)
		r.GET("/webhooks", h.list)
		r.GET("/webhooks/:webhook_id", h.get)
		r.PATCH("/webhooks/:webhook_id", h.update)
		r.DELETE("/webhooks/:webhook_id", h.delete)
		r.POST("/webhooks/:webhook_id/rotate-secret", h.rotate)
		r.POST("/webhooks/:webhook_id/test", h.test)
		r.GET("/webhooks/:webhook_id/deliveries", h.deliveries)
		r.GET("/webhooks/:webhook_id/deliveries/:delivery_id", h.delivery)
		r.POST("/webhooks/:webhook_id/deliveries/:delivery_id/retry", h.retry)
	}
}

// refillWebhookSecret: the answers of create and rotate-secret are kept for
// their Idempotency-Key without the secret, which a replay reads again.
const refillWebhookSecret = "webhook-secret"

type webhookHandlers struct {
	svc *webhooks.Service
	dl  *webhooks.Deliveries
	p   *Public
}

// webhookOut is a webhook as shown: the whole secret only in the creation
// response (Secret), otherwise only its first characters (SecretPrefix).
type webhookOut struct {
	ID            string   `json:"id"`
	MarketplaceID string   `json:"marketplaceId"`
	URL           string   `json:"url"`
	EventTypes    []string `json:"eventTypes"`
	Secret        string   `json:"secret,omitempty"`
	SecretPrefix  string   `json:"secretPrefix"`
	// PreviousSecretExpiresAt: until then the previous secret signs too
	// (after a rotation).
	PreviousSecretExpiresAt *timestamp.Time `json:"previousSecretExpiresAt,omitempty"`
	Status                  string          `json:"status"`
	DisabledAt              *timestamp.Time `json:"disabledAt"`
	DisabledReason          *string         `json:"disabledReason"`
	FailingSince            *timestamp.Time `json:"failingSince"`
	CreatedAt               timestamp.Time  `json:"createdAt"`
	UpdatedAt               timestamp.Time  `json:"updatedAt"`
}

func (h *webhookHandlers) webhookJSON(c *gin.Context, w webhooks.Webhook, withSecret bool) webhookOut {
	out := webhookOut{
		ID: w.ID, MarketplaceID: Marketplace(c).ID, URL: w.URL, EventTypes: w.EventTypes,
		SecretPrefix: w.SecretHint(), CreatedAt: timestamp.Of(w.CreatedAt), UpdatedAt: timestamp.Of(w.UpdatedAt),
		Status: w.Status(), DisabledAt: timestamp.OptOf(w.DisabledAt),
	}
	if h.dl != nil {
		out.FailingSince = timestamp.OptOf(h.dl.FailingSince(Marketplace(c).ID, w.ID))
	}
	if w.DisabledReason != "" {
		r := w.DisabledReason
		out.DisabledReason = &r
	}
	if w.PreviousSecretUntil != nil && time.Now().Before(*w.PreviousSecretUntil) {
		out.PreviousSecretExpiresAt = timestamp.OptOf(w.PreviousSecretUntil)
	}
	if out.EventTypes == nil {
		out.EventTypes = []string{}
	}
	if withSecret {
		out.Secret = w.Secret
	}
	return out
}

type webhookList struct {
	HasMore  bool         `json:"hasMore"`
	Webhooks []webhookOut `json:"webhooks"`
	NextPage *string      `json:"nextPage"`
}

// answer answers webhook w of version v with status, or err; withSecret:
// with its whole secret, which no cache keeps.
func (h *webhookHandlers) answer(c *gin.Context, status int, w webhooks.Webhook, v int64, err error, withSecret bool) {
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	if withSecret {
		c.Header("Cache-Control", "no-store")
		answersSecret(c, w.Secret, refillWebhookSecret, w.ID)
	}
	c.JSON(status, h.webhookJSON(c, w, withSecret))
}

func (h *webhookHandlers) create(c *gin.Context) {
	var in webhooks.Input
	if !h.p.BindJSON(c, &in) {
		return
	}
	w, v, err := h.svc.Create(c.Request.Context(), Marketplace(c).ID, in)
	h.answer(c, http.StatusCreated, w, v, err, true)
}

func (h *webhookHandlers) list(c *gin.Context) {
	after, limit, ok := h.p.PageQuery(c, "webhooks", "", bwDefaultLimit, bwMaxLimit)
	if !ok {
		return
	}
	ws, more := h.svc.List(Marketplace(c).ID, after, limit)
	out := make([]webhookOut, len(ws))
	var last string
	for i, w := range ws {
		out[i] = h.webhookJSON(c, w, false)
		last = w.ID
	}
	c.JSON(http.StatusOK, webhookList{HasMore: more, Webhooks: out, NextPage: h.p.NextPage(c, "webhooks", "", last, more)})
}

func (h *webhookHandlers) get(c *gin.Context) {
	w, v, err := h.svc.Get(Marketplace(c).ID, c.Param("webhook_id"))
	h.answer(c, http.StatusOK, w, v, err, false)
}

func (h *webhookHandlers) update(c *gin.Context) {
	var in webhooks.Input
	if !h.p.BindJSON(c, &in) {
		return
	}
	w, v, err := h.svc.Update(c.Request.Context(), Marketplace(c).ID, c.Param("webhook_id"), ifMatch(c), in)
	h.answer(c, http.StatusOK, w, v, err, false)
}

func (h *webhookHandlers) delete(c *gin.Context) {
	if err := h.svc.Delete(c.Request.Context(), Marketplace(c).ID, c.Param("webhook_id"), ifMatch(c)); err != nil {
		h.p.Fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// rotateInput is the body of rotate-secret (optional).
type rotateInput struct {
	OverlapSeconds *int64 `json:"overlapSeconds"`
}

func (h *webhookHandlers) rotate(c *gin.Context) {
	var in rotateInput
	if c.Request.ContentLength != 0 {
		if !h.p.BindJSON(c, &in) {
			return
		}
	}
	overlap := webhooks.DefaultRotationOverlap
	if in.OverlapSeconds != nil {
		overlap = time.Duration(*in.OverlapSeconds) * time.Second
		if *in.OverlapSeconds < 0 || *in.OverlapSeconds > int64(webhooks.MaxRotationOverlap/time.Second) {
			overlap = -1
		}
	}
	w, v, err := h.svc.RotateSecret(c.Request.Context(), Marketplace(c).ID, c.Param("webhook_id"), ifMatch(c), overlap)
	h.answer(c, http.StatusOK, w, v, err, true)
}

// deliveryOut is a delivery as the delivery log shows it.
type deliveryOut struct {
	ID             string          `json:"id"`
	WebhookID      string          `json:"webhookId"`
	EventID        string          `json:"eventId"`
	EventType      string          `json:"eventType"`
	EventTimestamp timestamp.Time  `json:"eventTimestamp"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	LastAttemptAt  *timestamp.Time `json:"lastAttemptAt"`
	LastStatusCode *int            `json:"lastStatusCode"`
	LastError      *string         `json:"lastError"`
	LastLatencyMs  *int64          `json:"lastLatencyMs"`
	LastResponse   *string         `json:"lastResponse,omitempty"`
	NextAttemptAt  *timestamp.Time `json:"nextAttemptAt"`
	CreatedAt      timestamp.Time  `json:"createdAt"`
	FinishedAt     *timestamp.Time `json:"finishedAt"`
	Payload        json.RawMessage `json:"payload,omitempty"`
}

func deliveryJSON(x webhooks.Delivery, full bool) deliveryOut {
	out := deliveryOut{ID: x.ID, WebhookID: x.WebhookID, EventID: x.EventID, EventType: x.EventType,
		EventTimestamp: timestamp.Of(x.EventAt), Status: x.Status, Attempts: x.Attempts, LastAttemptAt: timestamp.OptOf(x.LastAttemptAt),
		NextAttemptAt: timestamp.OptOf(x.NextAttemptAt), CreatedAt: timestamp.Of(x.CreatedAt), FinishedAt: timestamp.OptOf(x.FinishedAt)}
	if x.LastAttemptAt != nil {
		lat := x.LastLatencyMs
		out.LastLatencyMs = &lat
		if x.LastStatusCode != 0 {
			code := x.LastStatusCode
			out.LastStatusCode = &code
		}
	}
	if x.LastError != "" {
		e := x.LastError
		out.LastError = &e
	}
	if full {
		r := x.LastResponse
		out.LastResponse = &r
		out.Payload = json.RawMessage(x.Body)
	}
	return out
}

type deliveryList struct {
	HasMore    bool          `json:"hasMore"`
	Deliveries []deliveryOut `json:"deliveries"`
	NextPage   *string       `json:"nextPage"`
}

func (h *webhookHandlers) deliveries(c *gin.Context) {
	id := c.Param("webhook_id")
	after, limit, ok := h.p.PageQuery(c, "webhook-deliveries", id, bwDefaultLimit, bwMaxLimit)
	if !ok {
		return
	}
	xs, more, err := h.dl.List(Marketplace(c).ID, id, c.Query("status"), after, limit)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	out := make([]deliveryOut, len(xs))
	var last string
	for i, x := range xs {
		out[i] = deliveryJSON(x, false)
		last = x.ID
	}
	c.JSON(http.StatusOK, deliveryList{HasMore: more, Deliveries: out, NextPage: h.p.NextPage(c, "webhook-deliveries", id, last, more)})
}

func (h *webhookHandlers) delivery(c *gin.Context) {
	x, err := h.dl.Get(Marketplace(c).ID, c.Param("webhook_id"), c.Param("delivery_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, deliveryJSON(x, true))
}

func (h *webhookHandlers) retry(c *gin.Context) {
	x, err := h.dl.Retry(c.Request.Context(), Marketplace(c).ID, c.Param("webhook_id"), c.Param("delivery_id"))
	if err != nil {
		h.deliveryFail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, deliveryJSON(x, false))
}

func (h *webhookHandlers) test(c *gin.Context) {
	x, err := h.dl.Test(c.Request.Context(), Marketplace(c).ID, c.Param("webhook_id"))
	if err != nil {
		h.deliveryFail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, deliveryJSON(x, false))
}

func (h *webhookHandlers) deliveryFail(c *gin.Context, err error) { h.p.Fail(c, err) }
