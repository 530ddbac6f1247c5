package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/campaigns"
)

// CampaignControlRoutes serves a campaign's timetable (dayparting) and the
// negative keywords of campaigns and bids, under /campaign-service
// (docs/reference/campaigns.md, Dayparting and Negative keywords).
func CampaignControlRoutes(svc *campaigns.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &campaignHandlers{svc: svc, p: p}
		cs := g.Group("/campaign-service", p.Limit("default"))
		cs.GET("/campaigns/:campaign_id/timetables", h.getTimetables)
		cs.PUT("/campaigns/:campaign_id/timetables", h.putTimetables)
		cs.DELETE("/campaigns/:campaign_id/timetables", h.deleteTimetables)
		cs.GET("/campaigns/:campaign_id/negative-keywords", h.getCampaignNegatives)
		cs.PUT("/campaigns/:campaign_id/negative-keywords", h.putCampaignNegatives)
		cs.GET("/campaigns/:campaign_id/bids/:bid_id/negative-keywords", h.getBidNegatives)
		cs.PUT("/campaigns/:campaign_id/bids/:bid_id/negative-keywords", h.putBidNegatives)
	}
}

func (h *campaignHandlers) getTimetables(c *gin.Context) {
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
	c.JSON(http.StatusOK, campaigns.TimetablesOf(camp))
}

func (h *campaignHandlers) putTimetables(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	var in campaigns.TimetablesInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	camp, v, err := h.svc.PutTimetables(c.Request.Context(), Marketplace(c).ID, id, ifMatch(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, campaigns.TimetablesOf(camp))
}

func (h *campaignHandlers) deleteTimetables(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	days, err := campaigns.ParseDaysOfWeek(c.QueryArray("day_of_week"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	camp, v, err := h.svc.DeleteTimetables(c.Request.Context(), Marketplace(c).ID, id, ifMatch(c), days)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, campaigns.TimetablesOf(camp))
}

func (h *campaignHandlers) getCampaignNegatives(c *gin.Context) {
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
	c.JSON(http.StatusOK, campaigns.CampaignNegatives(camp))
}

func (h *campaignHandlers) putCampaignNegatives(c *gin.Context) {
	id, ok := h.pathID(c, "campaign_id")
	if !ok {
		return
	}
	var in campaigns.NegativeKeywordsInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	camp, v, err := h.svc.PutCampaignNegatives(c.Request.Context(), Marketplace(c).ID, id, ifMatch(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, campaigns.CampaignNegatives(camp))
}

func (h *campaignHandlers) getBidNegatives(c *gin.Context) {
	cid, bid, ok := h.bidIDs(c)
	if !ok {
		return
	}
	_, b, v, err := h.svc.GetBid(Marketplace(c).ID, cid, bid)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, campaigns.BidNegatives(b))
}

func (h *campaignHandlers) putBidNegatives(c *gin.Context) {
	cid, bid, ok := h.bidIDs(c)
	if !ok {
		return
	}
	var in campaigns.NegativeKeywordsInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	_, b, v, err := h.svc.PutBidNegatives(c.Request.Context(), Marketplace(c).ID, cid, bid, ifMatch(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, campaigns.BidNegatives(b))
}
