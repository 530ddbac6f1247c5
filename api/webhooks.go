package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/webhooks"
)

// Webhooks (docs/billing-webhooks-invitations-offsite.md).
//
//	POST   /webhooks/webhooks
//	GET    /webhooks/webhooks
//	GET    /webhooks/webhooks/{webhook_id}
//	PATCH  /webhooks/webhooks/{webhook_id}
//	DELETE /webhooks/webhooks/{webhook_id}

// WebhookRoutes returns the webhooks route set.
func WebhookRoutes(svc *webhooks.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &webhookHandlers{svc: svc, p: p}
		r := g.Group("/webhooks", p.Limits.Limit("default"))
		r.POST("/webhooks", h.create)
		r.GET("/webhooks", h.list)
		r.GET("/webhooks/:webhook_id", h.get)
		r.PATCH("/webhooks/:webhook_id", h.update)
		r.DELETE("/webhooks/:webhook_id", h.delete)
	}
}

type webhookHandlers struct {
	svc *webhooks.Service
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
	CreatedAt     string   `json:"createdAt"`
	UpdatedAt     string   `json:"updatedAt"`
}

func webhookJSON(c *gin.Context, w webhooks.Webhook, withSecret bool) webhookOut {
	out := webhookOut{
		ID: w.ID, MarketplaceID: Marketplace(c).ID, URL: w.URL, EventTypes: w.EventTypes,
		SecretPrefix: w.SecretHint(), CreatedAt: bwTime(w.CreatedAt), UpdatedAt: bwTime(w.UpdatedAt),
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

func (h *webhookHandlers) create(c *gin.Context) {
	var in webhooks.Input
	if !h.p.BindJSON(c, &in) {
		return
	}
	w, v, err := h.svc.Create(c.Request.Context(), Marketplace(c).ID, in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, webhookJSON(c, w, true))
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
		out[i] = webhookJSON(c, w, false)
		last = w.ID
	}
	c.JSON(http.StatusOK, webhookList{HasMore: more, Webhooks: out, NextPage: h.p.NextPage(c, "webhooks", "", last, more)})
}

func (h *webhookHandlers) get(c *gin.Context) {
	w, v, err := h.svc.Get(Marketplace(c).ID, c.Param("webhook_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, webhookJSON(c, w, false))
}

func (h *webhookHandlers) update(c *gin.Context) {
	var in webhooks.Input
	if !h.p.BindJSON(c, &in) {
		return
	}
	w, v, err := h.svc.Update(c.Request.Context(), Marketplace(c).ID, c.Param("webhook_id"), ifMatchOrZero(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, webhookJSON(c, w, false))
}

func (h *webhookHandlers) delete(c *gin.Context) {
	if err := h.svc.Delete(c.Request.Context(), Marketplace(c).ID, c.Param("webhook_id"), ifMatchOrZero(c)); err != nil {
		h.p.Fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
