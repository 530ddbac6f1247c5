package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/privacy"
)

// Erasure of shoppers (docs/operations/privacy.md).
//
//	POST /privacy-service/deletions                 202 the pending deletion request
//	GET  /privacy-service/deletions                 200 a page of the requests, newest first
//	GET  /privacy-service/deletions/{deletion_id}   200 the request: its status and what was removed per store

const (
	deletionsDefaultLimit = 50
	deletionsMaxLimit     = 100
)

// PrivacyRoutes returns the privacy route set.
func PrivacyRoutes(svc *privacy.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &privacyHandlers{svc: svc, p: p}
		r := g.Group("/privacy-service/deletions", p.Limit("default"))
		r.POST("", h.create)
		r.GET("", h.list)
		r.GET("/:deletion_id", h.get)
	}
}

type privacyHandlers struct {
	svc *privacy.Service
	p   *Public
}

type deletionList struct {
	HasMore   bool           `json:"hasMore"`
	Deletions []privacy.View `json:"deletions"`
	NextPage  *string        `json:"nextPage"`
}

func (h *privacyHandlers) create(c *gin.Context) {
	var in privacy.Input
	if !h.p.BindJSON(c, &in) {
		return
	}
	d, err := h.svc.Create(c.Request.Context(), Marketplace(c).ID, in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, privacy.ViewOf(d))
}

func (h *privacyHandlers) get(c *gin.Context) {
	d, err := h.svc.Get(Marketplace(c).ID, c.Param("deletion_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, privacy.ViewOf(d))
}

func (h *privacyHandlers) list(c *gin.Context) {
	before, limit, ok := h.p.PageQuery(c, "privacy-deletions", "", deletionsDefaultLimit, deletionsMaxLimit)
	if !ok {
		return
	}
	ds, more := h.svc.List(Marketplace(c).ID, before, limit)
	out := make([]privacy.View, len(ds))
	var last string
	for i, d := range ds {
		out[i] = privacy.ViewOf(d)
		last = d.ID
	}
	c.JSON(http.StatusOK, deletionList{HasMore: more, Deletions: out, NextPage: h.p.NextPage(c, "privacy-deletions", "", last, more)})
}
