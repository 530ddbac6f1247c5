package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/campaigns"
)

// CampaignRoutes serves campaigns and bids under /campaign-service and the
// bids of automated campaigns under /automation (docs/campaigns.md).
func CampaignRoutes(svc *campaigns.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &campaignHandlers{svc: svc, p: p}
		cs := g.Group("/campaign-service", p.Limits.Limit("default"))
		cs.POST("/vendors/:vendor_id/campaigns", h.create)
		cs.GET("/vendors/:vendor_id/campaigns", h.list)
		cs.GET("/campaigns/:campaign_id", h.get)
		cs.PATCH("/campaigns/:campaign_id", h.update)
		cs.PUT("/campaigns/:campaign_id/billing-contact", h.setBillingContact)
		cs.POST("/campaigns/:campaign_id/bids", h.createBid)
		cs.GET("/campaigns/:campaign_id/bids", h.listBids)
		cs.GET("/campaigns/:campaign_id/bids/:bid_id", h.getBid)
		cs.PATCH("/campaigns/:campaign_id/bids/:bid_id", h.updateBid)
		cs.DELETE("/campaigns/:campaign_id/bids/:bid_id", h.deleteBid)
		au := g.Group("/automation", p.Limits.Limit("default"))
		au.GET("/campaigns/:campaign-id/bids", h.automatedBids)
	}
}

// Page sizes of the campaign lists.
const (
	campaignListDefault = 50
	campaignListMax     = 100
	bidListDefault      = 100
	bidListMax          = 100
)

type campaignHandlers struct {
	svc *campaigns.Service
	p   *Public
}

// pathID reads a UUID path parameter (422 at path.<name> otherwise).
func (h *campaignHandlers) pathID(c *gin.Context, name string) (string, bool) {
	id, err := campaigns.ParseID(c.Param(name), "path", name)
	if err != nil {
		h.p.Fail(c, err)
		return "", false
	}
	return id, true
}

func (h *campaignHandlers) create(c *gin.Context) {
	var in campaigns.CampaignInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	mp := Marketplace(c).ID
	camp, v, err := h.svc.CreateCampaign(c.Request.Context(), mp, c.Param("vendor_id"), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.Header("Location", "/public/v1/campaign-service/campaigns/"+camp.ID)
	c.JSON(http.StatusCreated, h.svc.JSON(camp))
}

func (h *campaignHandlers) list(c *gin.Context) {
	// The vendor's catalog id, however the path names it: a cursor is the
	// same for both.
	vendorID, err := h.svc.VendorID(Marketplace(c).ID, c.Param("vendor_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	after, limit, ok := h.p.PageQuery(c, "campaigns", vendorID, campaignListDefault, campaignListMax)
	if !ok {
		return
	}
	cs, more, err := h.svc.ListCampaigns(Marketplace(c).ID, vendorID, after, limit)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	out := make([]campaigns.CampaignJSON, len(cs))
	last := ""
	for i, x := range cs {
		out[i] = h.svc.JSON(x)
		last = x.ID
	}
	c.JSON(http.StatusOK, gin.H{"hasMore": more, "campaigns": out, "nextPage": h.p.NextPage(c, "campaigns", vendorID, last, more)})
}

func (h *campaignHandlers) get(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	camp, v, err := h.svc.GetCampaign(Marketplace(c).ID, id)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, h.svc.JSON(camp))
}

func (h *campaignHandlers) update(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	var in campaigns.CampaignInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	camp, v, err := h.svc.UpdateCampaign(c.Request.Context(), Marketplace(c).ID, id, ifMatchOrZero(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, h.svc.JSON(camp))
}

func (h *campaignHandlers) setBillingContact(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	var in campaigns.BillingContactInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	camp, v, err := h.svc.SetBillingContact(c.Request.Context(), Marketplace(c).ID, id, ifMatchOrZero(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, h.svc.JSON(camp))
}

func (h *campaignHandlers) createBid(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	var in campaigns.BidInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	mp := Marketplace(c).ID
	camp, b, v, err := h.svc.CreateBid(c.Request.Context(), mp, id, in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.Header("Location", "/public/v1/campaign-service/campaigns/"+id+"/bids/"+b.ID)
	c.JSON(http.StatusCreated, h.svc.BidJSON(mp, camp, b))
}

func (h *campaignHandlers) listBids(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	after, limit, ok := h.p.PageQuery(c, "bids", id, bidListDefault, bidListMax)
	if !ok {
		return
	}
	mp := Marketplace(c).ID
	camp, bs, more, err := h.svc.ListBids(mp, id, after, limit)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	out := make([]campaigns.BidJSON, len(bs))
	last := ""
	for i, b := range bs {
		out[i] = h.svc.BidJSON(mp, camp, b)
		last = b.ID
	}
	c.JSON(http.StatusOK, gin.H{"hasMore": more, "bids": out, "nextPage": h.p.NextPage(c, "bids", id, last, more)})
}

func (h *campaignHandlers) bidIDs(c *gin.Context) (string, string, bool) {
	cid, ok := h.pathID(c, "campaign_id")
	if !ok {
		return "", "", false
	}
	bid, ok := h.pathID(c, "bid_id")
	return cid, bid, ok
}

func (h *campaignHandlers) getBid(c *gin.Context) {
	cid, bid, ok := h.bidIDs(c)
	if !ok {
		return
	}
	mp := Marketplace(c).ID
	camp, b, v, err := h.svc.GetBid(mp, cid, bid)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, h.svc.BidJSON(mp, camp, b))
}

func (h *campaignHandlers) updateBid(c *gin.Context) {
	cid, bid, ok := h.bidIDs(c)
	if !ok {
		return
	}
	var in campaigns.BidInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	mp := Marketplace(c).ID
	camp, b, v, err := h.svc.UpdateBid(c.Request.Context(), mp, cid, bid, ifMatchOrZero(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, h.svc.BidJSON(mp, camp, b))
}

func (h *campaignHandlers) deleteBid(c *gin.Context) {
	cid, bid, ok := h.bidIDs(c)
	if !ok {
		return
	}
	if err := h.svc.DeleteBid(c.Request.Context(), Marketplace(c).ID, cid, bid, ifMatchOrZero(c)); err != nil {
		h.p.Fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *campaignHandlers) automatedBids(c *gin.Context) {
	id, ok := h.pathID(c, "campaign-id")
	if !ok {
		return
	}
	after, limit, ok := h.p.PageQuery(c, "automation-bids", id, bidListDefault, bidListMax)
	if !ok {
		return
	}
	bids, more, err := h.svc.AutomatedBids(Marketplace(c).ID, id, after, limit)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	last := ""
	if len(bids) > 0 {
		last = bids[len(bids)-1].Target
	}
	c.JSON(http.StatusOK, gin.H{"hasMore": more, "bids": bids, "nextPage": h.p.NextPage(c, "automation-bids", id, last, more)})
}
