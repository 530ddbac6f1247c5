package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/storage/statelog"
)

// CampaignControlRoutes serves a campaign's timetable (dayparting) and the
// negative keywords of campaigns and bids, under /campaign-service
// (docs/reference/campaigns.md, Dayparting and Negative keywords).
func CampaignControlRoutes(svc *campaigns.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &campaignHandlers{svc: svc, p: p}
		cs := g.Group("/campaign-service", p.Limit("default"))
		cs.GET("/campaigns/:campaign_id/timetables", onCampaign(h, h.readCampaign, campaigns.TimetablesOf))
		cs.PUT("/campaigns/:campaign_id/timetables", onCampaign(h, withBody(h.p, svc.PutTimetables), campaigns.TimetablesOf))
		cs.DELETE("/campaigns/:campaign_id/timetables", onCampaign(h, h.deleteTimetables, campaigns.TimetablesOf))
		cs.GET("/campaigns/:campaign_id/negative-keywords", onCampaign(h, h.readCampaign, campaigns.CampaignNegatives))
		cs.PUT("/campaigns/:campaign_id/negative-keywords", onCampaign(h, withBody(h.p, svc.PutCampaignNegatives), campaigns.CampaignNegatives))
		cs.GET("/campaigns/:campaign_id/bids/:bid_id/negative-keywords", onBid(h, h.readBid, campaigns.BidNegatives))
		cs.PUT("/campaigns/:campaign_id/bids/:bid_id/negative-keywords", onBid(h, h.putBidNegatives, campaigns.BidNegatives))
	}
}

// errAnswered is what an operation returns when it has answered the request
// itself (a body that does not bind).
var errAnswered = errors.New("api: the request is answered")

// onCampaign serves a route of one part of a campaign (its timetables, its
// negative keywords): op reads or changes the campaign of the path's
// campaign_id, and the answer is that part (view) with the campaign's ETag.
func onCampaign[V any](h *campaignHandlers, op func(c *gin.Context, mp, id string) (campaigns.Campaign, int64, error), view func(campaigns.Campaign) V) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, ok := h.pathID(c, "campaign_id")
		if !ok {
			return
		}
		camp, v, err := op(c, Marketplace(c).ID, id)
		answerVersioned(h.p, c, camp, v, err, view)
	}
}

// onBid is onCampaign for a part of the bid of the path's bid_id.
func onBid[V any](h *campaignHandlers, op func(c *gin.Context, mp, campaignID, bidID string) (campaigns.Bid, int64, error), view func(campaigns.Bid) V) gin.HandlerFunc {
	return func(c *gin.Context) {
		cid, bid, ok := h.bidIDs(c)
		if !ok {
			return
		}
		b, v, err := op(c, Marketplace(c).ID, cid, bid)
		answerVersioned(h.p, c, b, v, err, view)
	}
}

// answerVersioned answers 200 with view(x) and x's version as its ETag, or
// err's documented body.
func answerVersioned[T, V any](p *Public, c *gin.Context, x T, version int64, err error, view func(T) V) {
	switch {
	case errors.Is(err, errAnswered):
	case err != nil:
		p.Fail(c, err)
	default:
		setETag(c, version)
		c.JSON(http.StatusOK, view(x))
	}
}

// withBody is a write of the request's JSON body, under its If-Match.
func withBody[In, T any](p *Public, write func(ctx context.Context, mp, id string, m statelog.IfMatch, in In) (T, int64, error)) func(*gin.Context, string, string) (T, int64, error) {
	return func(c *gin.Context, mp, id string) (T, int64, error) {
		var in In
		if !p.BindJSON(c, &in) {
			var zero T
			return zero, 0, errAnswered
		}
		return write(c.Request.Context(), mp, id, ifMatch(c), in)
	}
}

func (h *campaignHandlers) readCampaign(_ *gin.Context, mp, id string) (campaigns.Campaign, int64, error) {
	return h.svc.GetCampaign(mp, id)
}

func (h *campaignHandlers) deleteTimetables(c *gin.Context, mp, id string) (campaigns.Campaign, int64, error) {
	days, err := campaigns.ParseDaysOfWeek(c.QueryArray("day_of_week"))
	if err != nil {
		return campaigns.Campaign{}, 0, err
	}
	return h.svc.DeleteTimetables(c.Request.Context(), mp, id, ifMatch(c), days)
}

func (h *campaignHandlers) readBid(_ *gin.Context, mp, cid, bid string) (campaigns.Bid, int64, error) {
	_, b, v, err := h.svc.GetBid(mp, cid, bid)
	return b, v, err
}

func (h *campaignHandlers) putBidNegatives(c *gin.Context, mp, cid, bid string) (campaigns.Bid, int64, error) {
	var in campaigns.NegativeKeywordsInput
	if !h.p.BindJSON(c, &in) {
		return campaigns.Bid{}, 0, errAnswered
	}
	_, b, v, err := h.svc.PutBidNegatives(c.Request.Context(), mp, cid, bid, ifMatch(c), in)
	return b, v, err
}
