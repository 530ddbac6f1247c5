package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/management/offsite"
)

// Advertiser domains of offsite advertising
// (docs/reference/billing-webhooks-invitations-offsite.md).
//
//	PUT    /offsite-ads/ad-network/advertisers/{vendor-id}/domain
//	GET    /offsite-ads/ad-network/advertisers/{vendor-id}/domain
//	DELETE /offsite-ads/ad-network/advertisers/{vendor-id}/domain

// OffsiteRoutes returns the offsite route set.
func OffsiteRoutes(svc *offsite.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &offsiteHandlers{svc: svc, p: p}
		r := g.Group("/offsite-ads/ad-network", p.Limit("default"))
		r.PUT("/advertisers/:vendor-id/domain", h.put)
		r.GET("/advertisers/:vendor-id/domain", h.get)
		r.DELETE("/advertisers/:vendor-id/domain", h.delete)
	}
}

type offsiteHandlers struct {
	svc *offsite.Service
	p   *Public
}

type advertiserDomainOut struct {
	VendorID      string         `json:"vendorId"`
	Domain        string         `json:"domain"`
	UnicodeDomain string         `json:"unicodeDomain"`
	CreatedAt     timestamp.Time `json:"createdAt"`
	UpdatedAt     timestamp.Time `json:"updatedAt"`
}

func advertiserDomainJSON(d offsite.Domain) advertiserDomainOut {
	return advertiserDomainOut{VendorID: d.VendorID, Domain: d.Domain, UnicodeDomain: d.Unicode(), CreatedAt: timestamp.Of(d.CreatedAt), UpdatedAt: timestamp.Of(d.UpdatedAt)}
}

func (h *offsiteHandlers) put(c *gin.Context) {
	if !bwPathParams(c, "vendor-id") {
		return
	}
	var in struct {
		Domain *string `json:"domain"`
	}
	if !h.p.BindJSON(c, &in) {
		return
	}
	d, v, err := h.svc.Put(c.Request.Context(), Marketplace(c).ID, c.Param("vendor-id"), in.Domain, ifMatch(c))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, advertiserDomainJSON(d))
}

func (h *offsiteHandlers) get(c *gin.Context) {
	d, v, err := h.svc.Get(Marketplace(c).ID, c.Param("vendor-id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, advertiserDomainJSON(d))
}

func (h *offsiteHandlers) delete(c *gin.Context) {
	if err := h.svc.Delete(c.Request.Context(), Marketplace(c).ID, c.Param("vendor-id"), ifMatch(c)); err != nil {
		h.p.Fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
