package api

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/campaigns"
)

// CampaignRoutes serves campaigns and bids under /campaign-service and the
// bids of automated campaigns under /automation (docs/reference/campaigns.md).
func CampaignRoutes(svc *campaigns.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &campaignHandlers{svc: svc, p: p}
		cs := g.Group("/campaign-service", p.Limit("default"))
		cs.POST("/vendors/:vendor_id/campaigns", h.create)
		cs.GET("/vendors/:vendor_id/campaigns", h.list)
		cs.GET("/campaigns", h.listAll)
		cs.GET("/campaigns/:campaign_id", h.get)
		cs.PATCH("/campaigns/:campaign_id", h.update)
		cs.DELETE("/campaigns/:campaign_id", h.archive)
		cs.PUT("/campaigns/:campaign_id/billing-contact", h.setBillingContact)
		cs.POST("/campaigns/:campaign_id/bids", h.createBid)
		cs.GET("/campaigns/:campaign_id/bids", h.listBids)
		cs.GET("/campaigns/:campaign_id/bids/:bid_id", h.getBid)
		cs.PATCH("/campaigns/:campaign_id/bids/:bid_id", h.updateBid)
		cs.DELETE("/campaigns/:campaign_id/bids/:bid_id", h.deleteBid)
		au := g.Group("/automation", p.Limit("default"))
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

// view renders campaigns as the API answers them (with their status reason
// and spend, read in one round trip).
func (h *campaignHandlers) view(c *gin.Context, cs ...campaigns.Campaign) []campaigns.CampaignJSON {
	m := Marketplace(c)
	return h.svc.View(c.Request.Context(), m.ID, m.Location(), cs...)
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

// answer answers a campaign of version v with status, or err.
func (h *campaignHandlers) answer(c *gin.Context, status int, camp campaigns.Campaign, v int64, err error) {
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	if status == http.StatusCreated {
		c.Header("Location", "/public/v1/campaign-service/campaigns/"+camp.ID)
	}
	c.JSON(status, h.view(c, camp)[0])
}

// answerBid answers a bid of campaign camp, of the campaign's version v,
// with status, or err.
func (h *campaignHandlers) answerBid(c *gin.Context, status int, mp string, camp campaigns.Campaign, b campaigns.Bid, v int64, err error) {
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	if status == http.StatusCreated {
		c.Header("Location", "/public/v1/campaign-service/campaigns/"+camp.ID+"/bids/"+b.ID)
	}
	c.JSON(status, h.svc.BidJSON(mp, camp, b))
}

func (h *campaignHandlers) create(c *gin.Context) {
	var in campaigns.CampaignInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	camp, v, err := h.svc.CreateCampaign(c.Request.Context(), Marketplace(c).ID, c.Param("vendor_id"), in)
	h.answer(c, http.StatusCreated, camp, v, err)
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
	last := ""
	if len(cs) > 0 {
		last = cs[len(cs)-1].ID
	}
	c.JSON(http.StatusOK, gin.H{"hasMore": more, "campaigns": h.view(c, cs...), "nextPage": h.p.NextPage(c, "campaigns", vendorID, last, more)})
}

// listAll pages every campaign of the marketplace, filtered.
func (h *campaignHandlers) listAll(c *gin.Context) {
	q, qerr := url.ParseQuery(c.Request.URL.RawQuery)
	f, err := campaigns.ParseFilter(q)
	if err == nil && qerr == nil {
		// The vendor's catalog id, however the filter names it: a cursor
		// is the same for both.
		f = h.svc.Resolve(Marketplace(c).ID, f)
	}
	scope := f.Scope()
	after, limit, errs := h.p.pageQuery(c, "campaigns.all", scope, campaignListDefault, campaignListMax, err == nil && qerr == nil)
	v, _ := validation.As(err)
	if qerr != nil {
		v.Add(validation.ValueError, "The query string is malformed: "+qerr.Error(), "query")
	}
	if len(v)+len(errs) > 0 {
		abort422(c, append(v, errs...))
		return
	}
	cs, more := h.svc.ListAll(Marketplace(c).ID, f, after, limit)
	last := ""
	if len(cs) > 0 {
		last = cs[len(cs)-1].ID
	}
	c.JSON(http.StatusOK, gin.H{"hasMore": more, "campaigns": h.view(c, cs...), "nextPage": h.p.NextPage(c, "campaigns.all", scope, last, more)})
}

func (h *campaignHandlers) get(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	camp, v, err := h.svc.GetCampaign(Marketplace(c).ID, id)
	h.answer(c, http.StatusOK, camp, v, err)
}

func (h *campaignHandlers) update(c *gin.Context) {
	var in campaigns.CampaignInput
	id, ok := h.pathID(c, "campaign_id")
	if !ok || !h.p.BindJSON(c, &in) {
		return
	}
	camp, v, err := h.svc.UpdateCampaign(c.Request.Context(), Marketplace(c).ID, id, ifMatch(c), in)
	h.answer(c, http.StatusOK, camp, v, err)
}

// archive archives a campaign (DELETE): 200 with the archived campaign,
// also when it was archived before.
func (h *campaignHandlers) archive(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	camp, v, err := h.svc.ArchiveCampaign(c.Request.Context(), Marketplace(c).ID, id, ifMatch(c))
	h.answer(c, http.StatusOK, camp, v, err)
}

func (h *campaignHandlers) setBillingContact(c *gin.Context) {
	var in campaigns.BillingContactInput
	id, ok := h.pathID(c, "campaign_id")
	if !ok || !h.p.BindJSON(c, &in) {
		return
	}
	camp, v, err := h.svc.SetBillingContact(c.Request.Context(), Marketplace(c).ID, id, ifMatch(c), in)
	h.answer(c, http.StatusOK, camp, v, err)
}

func (h *campaignHandlers) createBid(c *gin.Context) {
	var in campaigns.BidInput
	id, ok := h.pathID(c, "campaign_id")
	if !ok || !h.p.BindJSON(c, &in) {
		return
	}
	mp := Marketplace(c).ID
	camp, b, v, err := h.svc.CreateBid(c.Request.Context(), mp, id, in)
	h.answerBid(c, http.StatusCreated, mp, camp, b, v, err)
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
	h.answerBid(c, http.StatusOK, mp, camp, b, v, err)
}

func (h *campaignHandlers) updateBid(c *gin.Context) {
	var in campaigns.BidInput
	cid, bid, ok := h.bidIDs(c)
	if !ok || !h.p.BindJSON(c, &in) {
		return
	}
	mp := Marketplace(c).ID
	camp, b, v, err := h.svc.UpdateBid(c.Request.Context(), mp, cid, bid, ifMatch(c), in)
	h.answerBid(c, http.StatusOK, mp, camp, b, v, err)
}

func (h *campaignHandlers) deleteBid(c *gin.Context) {
	cid, bid, ok := h.bidIDs(c)
	if !ok {
		return
	}
	if err := h.svc.DeleteBid(c.Request.Context(), Marketplace(c).ID, cid, bid, ifMatch(c)); err != nil {
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
