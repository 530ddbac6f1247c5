package console

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/spend"
)

// --- campaigns ---

// campaignRow is a campaign of a list with what the page shows of it. The
// read-time fields (Reason, spend) are set by the lists that read them.
type campaignRow struct {
	campaigns.Campaign
	Status     string
	Reason     string // the status reason ("" when not read)
	VendorName string
	// Spend: SpendRead when the list read it; SpendOK when Redis answered
	// (otherwise the page says "unavailable").
	SpendRead, SpendOK  bool
	Today, Total        int64
	ThisWeek, ThisMonth int64
	// Period and PeriodMicros: the campaign's budget of a period, as the
	// API's budget field says it (campaigns.Budget*; "" and 0 when none);
	// PeriodSpent its spend (today's without one).
	Period       string
	PeriodMicros int64
	PeriodSpent  int64
}

// newCampaignRow is the row of x with its budget of a period; the spend,
// when read, is set with withSpend.
func newCampaignRow(x campaigns.Campaign, status string) campaignRow {
	r := campaignRow{Campaign: x, Status: status}
	r.Period, r.PeriodMicros = campaigns.BudgetPeriod(x)
	return r
}

// withSpend sets the row's spend from the campaign's view (nil, or not
// available: the page says it is unavailable).
func (r *campaignRow) withSpend(sp *campaigns.SpendJSON) {
	r.SpendRead = true
	if sp == nil || !sp.Available {
		return
	}
	r.SpendOK, r.Today, r.Total = true, int64(*sp.Today), int64(*sp.Total)
	r.ThisWeek, r.ThisMonth = int64(*sp.ThisWeek), int64(*sp.ThisMonth)
	switch r.Period {
	case campaigns.BudgetWeekly:
		r.PeriodSpent = r.ThisWeek
	case campaigns.BudgetMonthly:
		r.PeriodSpent = r.ThisMonth
	default:
		r.PeriodSpent = r.Today
	}
}

type campaignsData struct {
	Vendor *catalog.VendorView // a vendor user's vendor
	Admin  bool
	// The filters as the form shows them.
	VendorID, Name, Status, Type string
	Statuses, Types              []string
	Campaigns                    []campaignRow
	Next                         template.URL // the next page's link ("" on the last page)
	Currency                     string
}

// campaignListName is the console's list of campaigns, for its cursors.
const campaignListName = "console.campaigns"

// campaignFilters are the query parameters of the campaigns page: those of
// the API's marketplace-wide list (campaigns.ParseFilter).
var campaignFilters = []string{"vendor_id", "status", "type", "name"}

// campaignsPage lists the marketplace's campaigns to an admin and its own
// vendor's to a vendor user (the vendor is the session's, whatever the
// query says), filtered as the API's list is, a page at a time, with their
// status reason and today's and all-time spend (read for the whole page at
// once).
func (c *Console) campaignsPage(ctx *gin.Context) {
	v := viewerOf(ctx)
	mp := v.Marketplace.ID
	d := campaignsData{Admin: !v.User.Role.IsVendor(), Statuses: campaigns.Statuses, Types: campaigns.Types, Currency: v.Marketplace.Currency}
	// The form sends every field, empty ones too: an empty field is no
	// filter.
	q := url.Values{}
	for _, k := range campaignFilters {
		if s := trimTo(ctx.Query(k), 4*campaigns.MaxFilterLen); s != "" {
			q.Set(k, s)
		}
	}
	if !d.Admin {
		q.Del("vendor_id")
		if vv, _, err := c.o.Catalog.GetVendor(mp, v.User.VendorID); err == nil {
			d.Vendor = &vv
		}
	}
	d.VendorID, d.Name, d.Status, d.Type = q.Get("vendor_id"), q.Get("name"), q.Get("status"), q.Get("type")
	f, err := campaigns.ParseFilter(q)
	if err != nil {
		c.listError(ctx, err, d)
		return
	}
	f = c.o.Campaigns.Resolve(mp, f)
	if !d.Admin {
		f.VendorID = v.User.VendorID
	}
	after := ""
	if cur := ctx.Query("cursor"); cur != "" {
		cc, err := c.cursors.Decode(cur, campaignListName, mp, f.Scope())
		if err != nil {
			c.listError(ctx, errkind.New(errkind.Invalid, "this page's link is not valid for these filters: start again from the first page"), d)
			return
		}
		after = cc.After
	}
	cs, more := c.o.Campaigns.ListAll(mp, f, after, pageSize)
	d.Campaigns = c.campaignRows(ctx, cs)
	if more && len(cs) > 0 {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("cursor", c.cursors.Encode(pagination.Cursor{List: campaignListName, Marketplace: mp, Scope: f.Scope(), After: cs[len(cs)-1].ID}))
		d.Next = template.URL("/console/campaigns?" + next.Encode()) // built here: every value escaped
	}
	c.render(ctx, http.StatusOK, "campaigns", "Campaigns", d)
}

// listError shows the campaigns page's form with the message of a bad
// filter or cursor, and no list.
func (c *Console) listError(ctx *gin.Context, err error, d campaignsData) {
	if msg, ok := asValidation(err); ok {
		err = errkind.New(errkind.Invalid, msg)
	}
	c.formError(ctx, err, func() { c.render(ctx, ctx.Writer.Status(), "campaigns", "Campaigns", d) })
}

// campaignRows renders campaigns with their vendor's name, their status
// reason and spend: campaigns.Service.View, which reads the spend of them
// all in one round trip to Redis (and says when it could not).
func (c *Console) campaignRows(ctx *gin.Context, cs []campaigns.Campaign) []campaignRow {
	v := viewerOf(ctx)
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
	defer cancel()
	views := c.o.Campaigns.View(rctx, v.Marketplace.ID, v.Marketplace.Location(), cs...)
	rows := make([]campaignRow, len(cs))
	names := map[string]string{}
	for i, x := range cs {
		r := newCampaignRow(x, views[i].Status)
		r.Reason = views[i].StatusReason
		r.withSpend(views[i].Spend)
		name, ok := names[x.VendorID]
		if !ok {
			if vv, found := c.o.Catalog.Vendor(v.Marketplace.ID, x.VendorID); found {
				name = vv.Name
			}
			names[x.VendorID] = name
		}
		r.VendorName = name
		rows[i] = r
	}
	return rows
}

type campaignData struct {
	C    campaigns.Campaign
	Row  campaignRow
	Bids []bidRow
	// MoreBids: the campaign has more bids than the page lists.
	MoreBids bool
	// The pacing of today (the marketplace's local day).
	Day       string
	Pacing    string // campaigns.Pacing* ("" when the spend is unavailable)
	Chart     template.JS
	ChartErr  string // why the chart is not drawn
	Hours     []pacingHour
	Currency  string
	TimeZone  string
	HasBudget bool
	// Period and PeriodMicros: the budget of a period (campaigns.Budget*,
	// "" when none), shown and edited by the budget form; PeriodSpent its
	// spend (today's, this week's or this month's).
	Period       string
	PeriodMicros int64
	PeriodSpent  int64
	// Schedule, Exact, Phrase: the dayparting and negative keywords forms
	// (controls.go).
	Schedule      []scheduleDay
	Exact, Phrase string
	// Caps: the frequency caps section (freqcaps.go).
	Caps capsData
}

// pacingHour is a row of the table under the pacing chart: the spend at
// the end of a local hour against the lines.
type pacingHour struct {
	At                   time.Time
	Spent, Even, Allowed int64
	Future               bool // after now: no spend yet
}

// campaignPage shows a campaign: any of the marketplace's to an admin, only
// its own vendor's to a vendor user (another's is not found). With its
// status reason, its spend against its budgets, and today's pacing.
func (c *Console) campaignPage(ctx *gin.Context) {
	v := viewerOf(ctx)
	mp := v.Marketplace.ID
	cp, ver, ok := c.o.Campaigns.Campaign(mp, ctx.Param("id"))
	if !ok || (v.User.Role.IsVendor() && cp.VendorID != v.User.VendorID) {
		c.notFound(ctx, "The campaign")
		return
	}
	rows := c.campaignRows(ctx, []campaigns.Campaign{cp})
	d := campaignData{C: cp, Row: rows[0], Currency: v.Marketplace.Currency, TimeZone: v.Marketplace.Timezone}
	d.Period, d.PeriodMicros, d.PeriodSpent = d.Row.Period, d.Row.PeriodMicros, d.Row.PeriodSpent
	d.HasBudget = d.PeriodMicros > 0
	d.Bids, d.MoreBids = c.bidRows(mp, cp)
	loc := v.Marketplace.Location()
	now := c.o.Now()
	d.Day = spend.DayOf(now, loc)
	if d.Row.SpendOK {
		d.Pacing = campaigns.Pacing(cp, now, loc, spend.Spent{Day: d.Row.Today, Week: d.Row.ThisWeek, Month: d.Row.ThisMonth, Total: d.Row.Total})
	}
	c.pacingChart(ctx, &d, now, loc)
	d.Schedule = scheduleOf(cp)
	d.Exact, d.Phrase = negativesText(cp.NegativeKeywords, campaigns.MatchExact), negativesText(cp.NegativeKeywords, campaigns.MatchPhrase)
	d.Caps = capsOf(ctx, cp, ver)
	c.render(ctx, ctx.Writer.Status(), "campaign", cp.Name, d) // 200, or a form's error (formError set it)
}

// bidRow is a bid as the campaign page lists it: the API's view of it
// (campaigns.Service.BidJSON: isActive, isEligible, ineligibleReason and
// its sentence).
type bidRow struct {
	campaigns.BidJSON
	AmountMicros int64
	// Serves: active and eligible (what the campaign's bids allow still
	// depends on the campaign's status and budgets, shown above).
	Serves bool
	// Why is the ineligibility as a sentence ("" when eligible).
	Why string
}

// maxBidRows bounds the bids a campaign page lists.
const maxBidRows = 200

// bidRows renders the campaign's first bids with their eligibility, as
// GET …/bids answers it.
func (c *Console) bidRows(mp string, cp campaigns.Campaign) ([]bidRow, bool) {
	bids := c.o.Campaigns.BidsOf(mp, cp.ID)
	more := len(bids) > maxBidRows
	if more {
		bids = bids[:maxBidRows]
	}
	rows := make([]bidRow, len(bids))
	for i, b := range bids {
		j := c.o.Campaigns.BidJSON(mp, cp, b)
		rows[i] = bidRow{BidJSON: j, AmountMicros: b.AmountMicros, Serves: j.IsActive && j.IsEligible}
		if j.IneligibleMessage != nil {
			rows[i].Why = sentence(*j.IneligibleMessage)
		}
	}
	return rows, more
}

// pacingStep is the step of the pacing chart.
const pacingStep = 5 * time.Minute

// pacingChart draws the campaign's cumulative spend through the local day
// holding now (from the charges in ClickHouse) against the daily budget's
// even spread (spend.EvenIn) and the pacing limit the auction applies
// (spend.AllowedIn), both over the campaign's served hours when it has a
// timetable. For a weekly or monthly budget the lines are today's share of
// what the period has left (spend.PeriodEvenIn, spend.PeriodAllowedIn, with
// the period's spend before today).
func (c *Console) pacingChart(ctx *gin.Context, d *campaignData, now time.Time, loc *time.Location) {
	if c.o.Performance == nil {
		d.ChartErr = "The spend over the day is not read by this process."
		return
	}
	from, to := spend.DayBounds(now, loc)
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 3*time.Second)
	defer cancel()
	steps, err := c.o.Performance.SpendSteps(rctx, viewerOf(ctx).Marketplace.ID, d.C.ID, from, to, pacingStep)
	if err != nil {
		c.o.Log.WarnContext(ctx, "console: pacing chart", "campaign", d.C.ID, "err", err)
		d.ChartErr = "The spend over the day cannot be read right now."
		if errors.Is(err, context.DeadlineExceeded) {
			d.ChartErr = "The spend over the day took too long to read."
		}
		return
	}
	daily := d.C.DailyBudgetMicros
	hours := campaigns.ServedHours(d.C.Timetables) // a timetable: the budget spreads over its hours
	var period spend.Period
	switch d.Period {
	case campaigns.BudgetWeekly:
		period = spend.PeriodWeek
	case campaigns.BudgetMonthly:
		period = spend.PeriodMonth
	}
	before := max(d.PeriodSpent-d.Row.Today, 0) // the period's spend before today
	lines := func(at time.Time) (e, a int64) {
		if period != 0 {
			return spend.PeriodEvenIn(d.PeriodMicros, before, period, hours, at, loc), spend.PeriodAllowedIn(d.PeriodMicros, before, period, hours, at, loc)
		}
		return spend.EvenIn(daily, hours, at, loc), spend.AllowedIn(daily, hours, at, loc)
	}
	n := len(steps) + 1
	x := make([]int64, n)
	spent := make([]*float64, n)
	even := make([]*float64, n)
	allowed := make([]*float64, n)
	var sum int64
	unit := func(m int64) *float64 { f := float64(m) / 1e6; return &f }
	for i := range n {
		at := from.Add(time.Duration(i) * pacingStep)
		if i == n-1 {
			at = to
		}
		x[i] = at.Unix()
		if i > 0 {
			sum += steps[i-1]
		}
		// The spend is known up to now: the step that holds now is the
		// last one drawn (its charges so far).
		future := at.After(now) && (i == 0 || from.Add(time.Duration(i-1)*pacingStep).After(now))
		if !future {
			spent[i] = unit(sum)
		}
		var e, a int64
		if d.HasBudget {
			switch {
			case i == n-1 && period == 0:
				e, a = daily, daily // the day's end: its whole budget
			case i == n-1:
				e, a = lines(to.Add(-time.Second)) // the day's last second: today's share
			default:
				e, a = lines(at)
			}
			even[i], allowed[i] = unit(e), unit(a)
		}
		if i > 0 && (at.Sub(from)%time.Hour == 0 || i == n-1) {
			d.Hours = append(d.Hours, pacingHour{At: at.In(loc), Spent: sum, Even: e, Allowed: a, Future: future})
		}
	}
	series := []Series{{Label: "Spend", Values: spent, Color: colorBlue, Format: "money"}}
	if d.HasBudget {
		series = append(series,
			Series{Label: "Even pace", Values: even, Color: colorGreen, Format: "money"},
			Series{Label: "Pacing limit", Values: allowed, Color: colorOrange, Format: "money"})
	}
	d.Chart = chartsJSON([]Chart{{ID: "chart-pacing", X: x, Series: series, TZ: loc.String(), Time: true}})
}

// spentCell is a figure of spend against a budget (0: none), for the
// template "spent".
type spentCell struct {
	OK                  bool // the spend was read
	Spent, Budget, High int64
}

// spendCell makes a spentCell; High (90 % of the budget) colours the gauge.
func spendCell(ok bool, spent, budget int64) spentCell {
	return spentCell{OK: ok, Spent: spent, Budget: budget, High: budget / 10 * 9}
}

// setBudget sets the campaign's budget of a period from the form (period
// daily, weekly or monthly and its amount; period none removes it), as
// PATCH …/campaigns/{id} with {"budget": …} does: the same rules.
func (c *Console) setBudget(ctx *gin.Context) {
	cp, ok := c.ownCampaignForm(ctx)
	if !ok {
		return
	}
	pf := ctx.Request.PostForm
	in := campaigns.CampaignInput{Budget: campaigns.Opt[campaigns.BudgetInput]{Set: true, Null: true}}
	if p := strings.TrimSpace(pf.Get("period")); p != "none" {
		amount := strings.TrimSpace(pf.Get("amount"))
		b := campaigns.BudgetInput{Type: campaigns.Opt[string]{Set: true, V: p}}
		if amount != "" {
			b.Amount = campaigns.Opt[json.RawMessage]{Set: true, V: json.RawMessage(amount)}
		}
		in.Budget = campaigns.Opt[campaigns.BudgetInput]{Set: true, V: b}
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	if _, _, err := c.o.Campaigns.UpdateCampaign(rctx, viewerOf(ctx).Marketplace.ID, cp.ID, 0, in); err != nil {
		c.formError(ctx, controlError(err), func() { c.campaignPage(ctx) })
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/campaigns/"+cp.ID+"?done=budget")
}
