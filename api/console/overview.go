package console

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/performance"
)

// The overview: the admin's landing page. The marketplace's sponsored
// results today and over 7 and 30 local days, the top campaigns and
// vendors of the last 7 days (all from the daily rollup, as the
// performance pages), and what needs attention: running campaigns that do
// not serve, bids that cannot win, failing webhooks, failed exports.

// Bounds of the overview's work, whatever the marketplace's size.
const (
	overviewTop = 5 // campaigns and vendors ranked
	// overviewCampaigns: the running campaigns whose status reason and
	// bids are checked (the oldest first); the page says when there are
	// more.
	overviewCampaigns = 1000
	// overviewBids: the bids whose eligibility is checked, over those
	// campaigns.
	overviewBids = 20000
	overviewList = 5 // campaigns, bids, webhooks or exports named per item
)

type overviewPeriod struct {
	Label string
	performance.Totals
}

type rankedRow struct {
	performance.Ranked
	Name, VendorName string
}

// attention is an item of "needs attention": a count and the first few it
// names.
type attention struct {
	Kind  string // a stable name (data-attention)
	Title string
	Count int
	Items []attentionItem
}

type attentionItem struct {
	Link, Label, Detail string
}

type overviewData struct {
	Currency  string
	Today     string // the marketplace's local day
	Periods   []overviewPeriod
	Campaigns []rankedRow
	Vendors   []rankedRow
	FigureErr string // why the figures are not shown
	Attention []attention
	// Checked and MoreCampaigns: the running campaigns checked, and
	// whether the marketplace has more.
	Checked       int
	MoreCampaigns bool
	Chart         template.JS
}

// overviewPage is the admin's landing page.
func (c *Console) overviewPage(ctx *gin.Context) {
	v := viewerOf(ctx)
	loc := v.Marketplace.Location()
	now := c.o.Now().In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC) // the rollup's local day
	d := overviewData{Currency: v.Marketplace.Currency, Today: today.Format(time.DateOnly)}
	c.overviewFigures(ctx, &d, today)
	c.overviewAttention(ctx, &d)
	c.render(ctx, http.StatusOK, "overview", "Overview", d)
}

// overviewFigures reads the results of the 30 local days to today and the
// top spenders of the last 7.
func (c *Console) overviewFigures(ctx *gin.Context, d *overviewData, today time.Time) {
	if c.o.Performance == nil {
		d.FigureErr = "The results are not read by this process."
		return
	}
	mp := viewerOf(ctx).Marketplace.ID
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 5*time.Second)
	defer cancel()
	ov, err := c.o.Performance.Marketplace(rctx, mp, today.AddDate(0, 0, -29), today.AddDate(0, 0, -6), today, overviewTop)
	if err != nil {
		c.o.Log.Warn("console: overview figures", "err", err)
		d.FigureErr = "The results cannot be read right now; the rest of the page is current."
		return
	}
	for _, p := range []struct {
		label string
		days  int
	}{{"Today", 1}, {"Last 7 days", 7}, {"Last 30 days", 30}} {
		x := overviewPeriod{Label: p.label}
		for _, day := range ov.Days[len(ov.Days)-p.days:] {
			x.Impressions += day.Impressions
			x.Clicks += day.Clicks
			x.SpendMicros += day.SpendMicros
			x.SalesMicros += day.SalesMicros
		}
		d.Periods = append(d.Periods, x)
	}
	for _, r := range ov.Campaigns {
		row := rankedRow{Ranked: r, Name: r.Campaign, VendorName: c.vendorName(mp, r.VendorID)}
		if cp, _, ok := c.o.Campaigns.Campaign(mp, r.CampaignID); ok {
			row.Name = cp.Name // its name now
		}
		d.Campaigns = append(d.Campaigns, row)
	}
	for _, r := range ov.Vendors {
		d.Vendors = append(d.Vendors, rankedRow{Ranked: r, VendorName: c.vendorName(mp, r.VendorID)})
	}
	d.Chart = chartsJSON(dayCharts(ov.Days, "chart-spend", "chart-sales"))
}

func (c *Console) vendorName(mp, id string) string {
	if v, ok := c.o.Catalog.Vendor(mp, id); ok && v.Name != "" {
		return v.Name
	}
	return ""
}

// notServing are the status reasons of a running campaign that does not
// take part in auctions, which the overview lists, in this order.
var notServing = []string{campaigns.ReasonOutOfBudget, campaigns.ReasonOutOfMonthlyBudget, campaigns.ReasonOutOfWeeklyBudget,
	campaigns.ReasonOutOfDailyBudget, campaigns.ReasonNoEligibleProducts,
	campaigns.ReasonNoActiveBids, campaigns.ReasonNoBids}

// overviewAttention lists what needs attention.
func (c *Console) overviewAttention(ctx *gin.Context, d *overviewData) {
	v := viewerOf(ctx)
	mp := v.Marketplace.ID
	// Running campaigns: their status reasons (the spend of them all in one
	// read of Redis) and their active bids' eligibility.
	f := campaigns.Filter{Statuses: []string{campaigns.StatusRunning}}
	cs, more := c.o.Campaigns.ListAll(mp, f, "", overviewCampaigns)
	d.Checked, d.MoreCampaigns = len(cs), more
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
	views := c.o.Campaigns.View(rctx, mp, v.Marketplace.Location(), cs...)
	cancel()
	byReason := map[string]*attention{}
	for _, r := range notServing {
		byReason[r] = &attention{Kind: r, Title: "Running campaigns: " + words(statusReasons, r)}
	}
	bids := attention{Kind: "ineligible_bids", Title: "Active bids that cannot win an auction"}
	checked := 0
	for i, cp := range cs {
		link := "/console/campaigns/" + url.PathEscape(cp.ID)
		if a := byReason[views[i].StatusReason]; a != nil {
			a.Count++
			if len(a.Items) < overviewList {
				a.Items = append(a.Items, attentionItem{Link: link, Label: cp.Name, Detail: c.vendorName(mp, cp.VendorID)})
			}
		}
		if cp.Type == campaigns.TypeAutomated {
			continue
		}
		for _, b := range c.o.Campaigns.BidsOf(mp, cp.ID) {
			if checked >= overviewBids {
				break
			}
			checked++
			if !b.Active {
				continue
			}
			if ok, why := c.o.Campaigns.Eligibility(mp, cp, b); !ok {
				bids.Count++
				if len(bids.Items) < overviewList {
					bids.Items = append(bids.Items, attentionItem{Link: link, Label: cp.Name + " · " + b.TargetType + " " + b.Target, Detail: sentence(why.Message)})
				}
			}
		}
	}
	for _, r := range notServing {
		if a := byReason[r]; a.Count > 0 {
			d.Attention = append(d.Attention, *a)
		}
	}
	if bids.Count > 0 {
		d.Attention = append(d.Attention, bids)
	}
	// Webhooks that fail or were disabled.
	hooks := attention{Kind: "webhooks", Title: "Webhooks failing or disabled"}
	hs, _ := c.o.Webhooks.List(mp, "", 200)
	for _, h := range hs {
		detail := ""
		switch {
		case h.Disabled:
			detail = "disabled"
			if h.DisabledReason != "" {
				detail += ": " + h.DisabledReason
			}
		case c.o.Deliveries != nil:
			if since := c.o.Deliveries.FailingSince(mp, h.ID); since != nil {
				detail = "failing since " + localTime(*since, v.Marketplace.Location())
			}
		}
		if detail == "" {
			continue
		}
		hooks.Count++
		if len(hooks.Items) < overviewList {
			hooks.Items = append(hooks.Items, attentionItem{Link: "/console/webhooks/" + url.PathEscape(h.ID), Label: h.URL, Detail: detail})
		}
	}
	if hooks.Count > 0 {
		d.Attention = append(d.Attention, hooks)
	}
	// Exports that failed in the last 7 days.
	if c.o.Exports != nil {
		ectx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
		defer cancel()
		q := exports.ListQuery{Status: exports.StatusFailed, CreatedFromMs: c.o.Now().Add(-7 * 24 * time.Hour).UnixMilli(), Limit: 100}
		if page, err := c.o.Exports.List(ectx, mp, q); err == nil && len(page.Exports) > 0 {
			a := attention{Kind: "exports", Title: "Exports failed in the last 7 days", Count: len(page.Exports)}
			for _, e := range page.Exports[:min(len(page.Exports), overviewList)] {
				detail := ""
				if e.Error != nil {
					detail = e.Error.Message
				}
				a.Items = append(a.Items, attentionItem{Link: "/console/exports?status=failed", Label: e.Dataset + " " + e.StartDate + " – " + e.EndDate, Detail: detail})
			}
			if page.HasMore {
				a.Title += " (the newest 100)"
			}
			d.Attention = append(d.Attention, a)
		}
	}
}
