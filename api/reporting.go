package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/reporting/reportapi"
)

// The Reporting API (docs/reference/reporting-api.md), read from the daily rollup.
//
//	GET /reporting-service/marketplace[/daily]
//	GET /reporting-service/vendors/{vendor-id}[/daily]
//	GET /reporting-service/campaigns/{campaign-id}[/daily]
//	GET /reporting-service/products/{product-id}[/daily]
//	GET /reporting-service/interactions?group_by=&granularity=
//
// A vendor-scoped key reads its vendor's reports only: the marketplace's
// are 403 (vendorKeys), another vendor's vendor or campaign report is 404,
// as an unknown one, and the product and interactions reports count its
// vendor's rows only.
func ReportingRoutes(svc *reportapi.Service, camps *campaigns.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &reportingHandlers{svc: svc, camps: camps, p: p}
		r := g.Group("/reporting-service")
		r.GET("/marketplace", p.Limit("default"), h.report(h.marketplace, false))
		r.GET("/marketplace/daily", p.Limit("default"), h.report(h.marketplace, true))
		r.GET("/vendors/:vendor-id", p.Limit("default"), h.report(h.vendor, false))
		r.GET("/vendors/:vendor-id/daily", p.Limit("default"), h.report(h.vendor, true))
		r.GET("/campaigns/:campaign-id", p.Limit("default"), h.report(h.campaign, false))
		r.GET("/campaigns/:campaign-id/daily", p.Limit("default"), h.report(h.campaign, true))
		r.GET("/products/:product-id", p.Limit("default"), h.report(h.product, false))
		r.GET("/products/:product-id/daily", p.Limit("default"), h.report(h.product, true))
		r.GET("/interactions", p.Limit("default"), h.interactions)
		for _, route := range []string{"vendors/:vendor-id", "campaigns/:campaign-id", "products/:product-id"} {
			p.allowVendorKeys(g.BasePath() + "/reporting-service/" + route)
			p.allowVendorKeys(g.BasePath() + "/reporting-service/" + route + "/daily")
		}
		p.allowVendorKeys(g.BasePath() + "/reporting-service/interactions")
	}
}

type reportingHandlers struct {
	svc   *reportapi.Service
	camps *campaigns.Service
	p     *Public
}

// A scope finds the filter of a report from its path (and the key's
// vendor); ok false when it has answered.
type reportScope func(c *gin.Context) (f reportapi.Filter, ok bool)

func (h *reportingHandlers) marketplace(*gin.Context) (reportapi.Filter, bool) {
	return reportapi.Filter{}, true
}

func (h *reportingHandlers) vendor(c *gin.Context) (reportapi.Filter, bool) {
	if !bwPathParams(c, "vendor-id") {
		return reportapi.Filter{}, false
	}
	id := c.Param("vendor-id")
	v, err := h.camps.VendorID(Marketplace(c).ID, id)
	if err == nil && !h.vendorVisible(c, v) {
		err = validation.NotFoundf("vendor %s", id)
	}
	if err != nil {
		h.p.Fail(c, err)
		return reportapi.Filter{}, false
	}
	return reportapi.Filter{VendorID: v}, true
}

func (h *reportingHandlers) campaign(c *gin.Context) (reportapi.Filter, bool) {
	id, err := campaigns.ParseID(c.Param("campaign-id"), "path", "campaign-id")
	if err != nil {
		h.p.Fail(c, err)
		return reportapi.Filter{}, false
	}
	camp, _, err := h.camps.GetCampaign(Marketplace(c).ID, id)
	if err == nil && !h.vendorVisible(c, camp.VendorID) {
		err = validation.NotFoundf("campaign %s", id)
	}
	if err != nil {
		h.p.Fail(c, err)
		return reportapi.Filter{}, false
	}
	// The campaign's vendor puts the read on the sort key's prefix.
	return reportapi.Filter{VendorID: camp.VendorID, CampaignID: id}, true
}

// product reads the rows of a product id, whether or not the catalog still
// holds it (a report outlives the catalog's entries).
func (h *reportingHandlers) product(c *gin.Context) (reportapi.Filter, bool) {
	if !bwPathParams(c, "product-id") {
		return reportapi.Filter{}, false
	}
	id := c.Param("product-id")
	return reportapi.Filter{ProductID: id, VendorID: h.keyVendor(c)}, true
}

// keyVendor is the catalog id of the vendor of a vendor-scoped key ("" for
// a key of the whole marketplace). The key may name its vendor by catalog
// id or UUID; a vendor the catalog does not know is kept as it is (it has
// no rows, and names no other vendor).
func (h *reportingHandlers) keyVendor(c *gin.Context) string {
	s := VendorScope(c)
	if s == "" || h.camps == nil {
		return s
	}
	if v, err := h.camps.VendorID(Marketplace(c).ID, s); err == nil {
		return v
	}
	return s
}

// vendorVisible says whether the key may read the reports of vendor v (a
// catalog id).
func (h *reportingHandlers) vendorVisible(c *gin.Context, v string) bool {
	s := h.keyVendor(c)
	return s == "" || s == v
}

// report answers a total or a daily report of the scope. The query is
// checked first: a bad window is 422 whatever the id.
func (h *reportingHandlers) report(scope reportScope, daily bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		mp := Marketplace(c)
		loc := mp.Location()
		q := c.Request.URL.Query()
		var req reportapi.DailyRequest
		var w reportapi.Window
		if daily {
			// A cursor continues the report of the same path only.
			var err error
			if req, err = reportapi.ParseDaily(q, loc, mp.ID, c.Request.URL.Path, h.p.Cursors); err != nil {
				h.p.Fail(c, err)
				return
			}
			w = req.Page()
		} else {
			var errs validation.Errors
			var ok bool
			if w, ok = reportapi.ParseWindow(q, loc, reportapi.MaxDays, &errs); !ok {
				h.p.Fail(c, errs.Err())
				return
			}
		}
		f, ok := scope(c)
		if !ok {
			return
		}
		ctx := c.Request.Context()
		asOf, err := h.svc.DataAsOf(ctx, w)
		if err != nil {
			h.p.Fail(c, err)
			return
		}
		fr := reportapi.NewFreshness(mp.Currency, asOf)
		if !daily {
			m, err := h.svc.Totals(ctx, mp.ID, f, w)
			if err != nil {
				h.p.Fail(c, err)
				return
			}
			c.JSON(http.StatusOK, reportapi.TotalBody(m, w, fr))
			return
		}
		days, err := h.svc.Daily(ctx, mp.ID, f, w)
		if err != nil {
			h.p.Fail(c, err)
			return
		}
		c.JSON(http.StatusOK, reportapi.DailyBody(days, req.NextPage(h.p.Cursors, mp.ID), fr))
	}
}

func (h *reportingHandlers) interactions(c *gin.Context) {
	mp := Marketplace(c)
	loc := mp.Location()
	vendor := h.keyVendor(c)
	req, err := reportapi.ParseInteractions(c.Request.URL.Query(), loc, mp.ID, vendor, h.p.Cursors)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	ctx := c.Request.Context()
	rows, more, err := h.svc.Interactions(ctx, mp.ID, reportapi.Filter{VendorID: vendor}, req)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	// The freshness of the days the page covers.
	w := req.Window
	if !req.After.Day.IsZero() {
		w.From = req.After.Day
	}
	if more {
		w.To = rows[len(rows)-1].Date
	}
	asOf, err := h.svc.DataAsOf(ctx, w)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	var next *string
	if more {
		next = req.NextPage(h.p.Cursors, mp.ID, rows[len(rows)-1].Position(req.GroupBy))
	}
	c.JSON(http.StatusOK, reportapi.InteractionsBody(rows, req.GroupBy, loc, next, reportapi.NewFreshness(mp.Currency, asOf)))
}
