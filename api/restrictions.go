package api

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/campaigns"
)

// RestrictionRoutes serves the campaigns' restrictions (frequency caps per
// shopper) and their types under /campaign-service (docs/reference/campaigns.md,
// Restrictions).
func RestrictionRoutes(svc *campaigns.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &restrictionHandlers{campaignHandlers{svc: svc, p: p}}
		cs := g.Group("/campaign-service", p.Limit("default"))
		cs.GET("/restriction-types", h.types)
		cs.GET("/restriction-types/:restriction_type_id", h.getType)
		cs.GET("/campaigns/:campaign_id/restrictions", h.list)
		cs.POST("/campaigns/:campaign_id/restrictions", h.create)
		cs.GET("/campaigns/:campaign_id/restrictions/:restriction_id", h.get)
		cs.PATCH("/campaigns/:campaign_id/restrictions/:restriction_id", h.update)
	}
}

type restrictionHandlers struct{ campaignHandlers }

func (h *restrictionHandlers) types(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"restrictionTypes": campaigns.RestrictionTypes()})
}

func (h *restrictionHandlers) getType(c *gin.Context) {
	id, ok := h.intParam(c, "restriction_type_id")
	if !ok {
		return
	}
	t, found := campaigns.RestrictionTypeByID(int(id))
	if !found {
		h.p.Fail(c, validation.NotFoundf("restriction type %d", id))
		return
	}
	c.JSON(http.StatusOK, t)
}

// intParam reads a positive integer path parameter (422 at path.<name>).
func (h *restrictionHandlers) intParam(c *gin.Context, name string) (int64, bool) {
	v, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || v < 1 {
		h.p.Fail(c, validation.New("int_parsing", "Input should be a positive integer", "path", name))
		return 0, false
	}
	return v, true
}

func (h *restrictionHandlers) list(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	mp := Marketplace(c).ID
	camp, v, err := h.svc.Restrictions(mp, id)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	out := make([]campaigns.RestrictionJSON, 0, len(camp.Restrictions))
	for _, r := range camp.Restrictions {
		out = append(out, campaigns.RestrictionJSONOf(mp, camp, r))
	}
	setETag(c, v)
	c.JSON(http.StatusOK, gin.H{"restrictions": out})
}

func (h *restrictionHandlers) create(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	var in campaigns.RestrictionInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	mp := Marketplace(c).ID
	camp, r, v, err := h.svc.CreateRestriction(c.Request.Context(), mp, id, ifMatch(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.Header("Location", "/public/v1/campaign-service/campaigns/"+id+"/restrictions/"+strconv.FormatInt(r.ID, 10))
	c.JSON(http.StatusCreated, campaigns.RestrictionJSONOf(mp, camp, r))
}

func (h *restrictionHandlers) ids(c *gin.Context) (string, int64, bool) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return "", 0, false
	}
	rid, ok := h.intParam(c, "restriction_id")
	return id, rid, ok
}

func (h *restrictionHandlers) get(c *gin.Context) {
	id, rid, ok := h.ids(c)
	if !ok {
		return
	}
	mp := Marketplace(c).ID
	camp, r, v, err := h.svc.Restriction(mp, id, rid)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, campaigns.RestrictionJSONOf(mp, camp, r))
}

func (h *restrictionHandlers) update(c *gin.Context) {
	id, rid, ok := h.ids(c)
	if !ok {
		return
	}
	var in campaigns.RestrictionInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	mp := Marketplace(c).ID
	camp, r, v, err := h.svc.UpdateRestriction(c.Request.Context(), mp, id, rid, ifMatch(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, campaigns.RestrictionJSONOf(mp, camp, r))
}
