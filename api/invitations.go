package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/management/invitations"
)

// Invitations of vendors' users (docs/reference/billing-webhooks-invitations-offsite.md).
//
//	POST /invitation-service/invitations
//	GET  /invitation-service/invitations
//	GET  /invitation-service/invitations/{invitation_id}

// InvitationRoutes returns the invitations route set.
func InvitationRoutes(svc *invitations.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &invitationHandlers{svc: svc, p: p}
		r := g.Group("/invitation-service", p.Limit("default"))
		r.POST("/invitations", h.create)
		r.GET("/invitations", h.list)
		r.GET("/invitations/:invitation_id", h.get)
	}
}

type invitationHandlers struct {
	svc *invitations.Service
	p   *Public
}

type invitationOut struct {
	ID             string         `json:"id"`
	VendorID       string         `json:"vendorId"`
	VendorEmail    string         `json:"vendorEmail"`
	TargetUserRole string         `json:"targetUserRole"`
	Status         string         `json:"status"`
	CreatedAt      timestamp.Time `json:"createdAt"`
	ExpiresAt      timestamp.Time `json:"expiresAt"`
	// AcceptedAt is when the invited person accepted (accepted only).
	AcceptedAt *timestamp.Time `json:"acceptedAt,omitempty"`
}

func (h *invitationHandlers) json(invs []invitations.Invitation) []invitationOut {
	now := h.svc.Now()
	out := make([]invitationOut, len(invs))
	for i, inv := range invs {
		out[i] = invitationOut{
			ID: inv.ID, VendorID: inv.VendorID, VendorEmail: inv.VendorEmail, TargetUserRole: inv.TargetUserRole,
			Status: inv.StatusAt(now), CreatedAt: timestamp.Of(inv.CreatedAt), ExpiresAt: timestamp.Of(inv.ExpiresAt),
		}
		if inv.AcceptedAt != nil {
			at := timestamp.Of(*inv.AcceptedAt)
			out[i].AcceptedAt = &at
		}
	}
	return out
}

type invitationsCreated struct {
	Invitations []invitationOut `json:"invitations"`
}

type invitationList struct {
	HasMore     bool            `json:"hasMore"`
	Invitations []invitationOut `json:"invitations"`
	NextPage    *string         `json:"nextPage"`
}

func (h *invitationHandlers) create(c *gin.Context) {
	var in struct {
		Invites *[]invitations.Invite `json:"invites"`
	}
	if !h.p.BindJSON(c, &in) {
		return
	}
	invs, err := h.svc.Create(c.Request.Context(), Marketplace(c).ID, in.Invites)
	if capErr, ok := errors.AsType[*invitations.CapError](err); ok {
		c.Header("Retry-After", strconv.Itoa(max(ceilSeconds(time.Until(capErr.Reset)), 1)))
	}
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, invitationsCreated{Invitations: h.json(invs)})
}

func (h *invitationHandlers) list(c *gin.Context) {
	vendorID := c.Query("vendor_id")
	after, limit, ok := h.p.PageQuery(c, "invitations", vendorID, bwDefaultLimit, bwMaxLimit)
	if !ok {
		return
	}
	invs, more := h.svc.List(Marketplace(c).ID, vendorID, after, limit)
	var last string
	if len(invs) > 0 {
		last = invs[len(invs)-1].ID
	}
	c.JSON(http.StatusOK, invitationList{HasMore: more, Invitations: h.json(invs), NextPage: h.p.NextPage(c, "invitations", vendorID, last, more)})
}

func (h *invitationHandlers) get(c *gin.Context) {
	inv, v, err := h.svc.Get(Marketplace(c).ID, c.Param("invitation_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, h.json([]invitations.Invitation{inv})[0])
}
