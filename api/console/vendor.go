package console

import (
	"context"
	"encoding/csv"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/performance"
)

// asValidation turns a domain's field errors into one sentence.
func asValidation(err error) (string, bool) {
	v, ok := validation.As(err)
	if !ok {
		return "", false
	}
	names := map[string]string{"vendorId": "Vendor", "vendorEmail": "E-mail", "targetUserRole": "Role",
		"vendor_id": "Vendor", "status": "Status", "type": "Type", "name": "Name"} // the campaigns list's filters
	var parts []string
	for _, f := range v {
		field := ""
		if n := len(f.Loc); n > 0 {
			field = names[fmt.Sprint(f.Loc[n-1])]
		}
		if field != "" {
			parts = append(parts, field+": "+f.Msg)
		} else {
			parts = append(parts, f.Msg)
		}
	}
	return strings.Join(parts, "; ") + ".", true
}

// --- performance ---

type perfData struct {
	VendorID, VendorName string
	From, To             string
	Days                 []performance.Day
	Campaigns            []performance.Campaign
	Total                performance.Totals
	Currency             string
	Chart                template.JS // the charts (chartsJSON)
	CSV                  string      // the table's download link
	Base                 string      // the page's path (the form's action)
}

// window reads ?from=&to= (local days), by default the 30 days to today.
func (c *Console) window(ctx *gin.Context, loc *time.Location) (from, to time.Time, err error) {
	today := c.o.Now().In(loc)
	to = time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, time.UTC)
	from = to.AddDate(0, 0, -29)
	if s := ctx.Query("from"); s != "" {
		if from, err = time.Parse(time.DateOnly, s); err != nil {
			return from, to, validation.New(validation.ValueError, "the first day must be a date (YYYY-MM-DD)", "query", "from")
		}
	}
	if s := ctx.Query("to"); s != "" {
		if to, err = time.Parse(time.DateOnly, s); err != nil {
			return from, to, validation.New(validation.ValueError, "the last day must be a date (YYYY-MM-DD)", "query", "to")
		}
	}
	return from, to, performance.Window(from, to)
}

func (c *Console) performance(ctx *gin.Context, vendor, base string) (perfData, error) {
	v := viewerOf(ctx)
	d := perfData{VendorID: vendor, VendorName: vendor, Currency: v.Marketplace.Currency, Base: base}
	if vv, ok := c.o.Catalog.Vendor(v.Marketplace.ID, vendor); ok && vv.Name != "" {
		d.VendorName = vv.Name
	}
	from, to, err := c.window(ctx, v.Marketplace.Location())
	d.From, d.To = from.Format(time.DateOnly), to.Format(time.DateOnly)
	if err != nil {
		return d, err
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	rows, err := c.o.Performance.Vendor(rctx, v.Marketplace.ID, vendor, from, to)
	if err != nil {
		return d, err
	}
	d.Days = performance.ByDay(rows, from, to)
	d.Campaigns = performance.ByCampaign(rows)
	for i := range d.Campaigns {
		// The campaign's name now, when it still exists.
		if cp, _, ok := c.o.Campaigns.Campaign(v.Marketplace.ID, d.Campaigns[i].ID); ok {
			d.Campaigns[i].Name = cp.Name
		}
	}
	for _, r := range rows {
		d.Total.Add(r)
	}
	d.Chart = chartsJSON(dayCharts(d.Days, performanceCharts...))
	d.CSV = base + ".csv?from=" + d.From + "&to=" + d.To
	return d, nil
}

// dayCharts are charts of days, one quantity each (its own scale), by id:
// chart-impressions, chart-clicks, chart-spend, chart-sales, chart-roas,
// chart-acos.
func dayCharts(days []performance.Day, ids ...string) []Chart {
	n := len(days)
	x := make([]int64, n)
	for i, d := range days {
		x[i] = d.Day.Unix()
	}
	num := func(f func(d performance.Day) float64) []*float64 {
		return values(n, func(i int) (float64, bool) { return f(days[i]), true })
	}
	all := map[string]Series{
		"chart-impressions": {Label: "Impressions", Color: colorBlue, Format: "int", Values: num(func(d performance.Day) float64 { return float64(d.Impressions) })},
		"chart-clicks":      {Label: "Clicks", Color: colorOrange, Format: "int", Values: num(func(d performance.Day) float64 { return float64(d.Clicks) })},
		"chart-spend":       {Label: "Spend", Color: colorBlue, Format: "money", Values: num(func(d performance.Day) float64 { return float64(d.SpendMicros) / 1e6 })},
		"chart-sales":       {Label: "Sales", Color: colorGreen, Format: "money", Values: num(func(d performance.Day) float64 { return float64(d.SalesMicros) / 1e6 })},
		"chart-roas":        {Label: "ROAS", Color: colorGreen, Format: "ratio", Values: values(n, func(i int) (float64, bool) { return days[i].ROAS() })},
		"chart-acos":        {Label: "ACOS %", Color: colorPurple, Format: "pct", Values: values(n, func(i int) (float64, bool) { a, ok := days[i].ACOS(); return a * 100, ok })},
	}
	out := make([]Chart, 0, len(ids))
	for _, id := range ids {
		out = append(out, Chart{ID: id, X: x, Series: []Series{all[id]}})
	}
	return out
}

// performanceCharts are the performance page's charts: one per quantity.
var performanceCharts = []string{"chart-impressions", "chart-clicks", "chart-spend", "chart-sales", "chart-roas", "chart-acos"}

func (c *Console) performancePage(ctx *gin.Context) {
	v := viewerOf(ctx)
	if !v.User.Role.IsVendor() {
		c.vendorsPage(ctx)
		return
	}
	c.renderPerformance(ctx, v.User.VendorID, "/console/performance")
}

func (c *Console) vendorPerformancePage(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	if _, ok := c.o.Catalog.Vendor(mp, ctx.Param("vendor")); !ok {
		c.notFound(ctx, "The vendor")
		return
	}
	c.renderPerformance(ctx, ctx.Param("vendor"), "/console/vendors/"+ctx.Param("vendor")+"/performance")
}

func (c *Console) renderPerformance(ctx *gin.Context, vendor, base string) {
	d, err := c.performance(ctx, vendor, base)
	if err != nil {
		c.formError(ctx, err, func() { c.render(ctx, ctx.Writer.Status(), "performance", "Performance", d) })
		return
	}
	c.render(ctx, http.StatusOK, "performance", "Performance", d)
}

func (c *Console) performanceCSV(ctx *gin.Context) {
	v := viewerOf(ctx)
	if !v.User.Role.IsVendor() {
		c.forbidden(ctx, "Choose a vendor first.")
		return
	}
	c.writeCSV(ctx, v.User.VendorID)
}

func (c *Console) vendorPerformanceCSV(ctx *gin.Context) {
	if _, ok := c.o.Catalog.Vendor(viewerOf(ctx).Marketplace.ID, ctx.Param("vendor")); !ok {
		c.notFound(ctx, "The vendor")
		return
	}
	c.writeCSV(ctx, ctx.Param("vendor"))
}

// writeCSV answers the vendor's results per day and campaign as CSV.
func (c *Console) writeCSV(ctx *gin.Context, vendor string) {
	v := viewerOf(ctx)
	from, to, err := c.window(ctx, v.Marketplace.Location())
	if err != nil {
		c.fail(ctx, err)
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	rows, err := c.o.Performance.Vendor(rctx, v.Marketplace.ID, vendor, from, to)
	if err != nil {
		c.fail(ctx, err)
		return
	}
	ctx.Header("Content-Type", "text/csv; charset=utf-8")
	ctx.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="performance-%s-%s.csv"`, from.Format("20060102"), to.Format("20060102")))
	w := csv.NewWriter(ctx.Writer)
	_ = w.Write([]string{"day_local", "campaign_id", "campaign_name", "impressions", "clicks", "ad_spend", "total_purchase_amount", "roas", "acos", "currency_code"})
	for _, r := range rows {
		var t performance.Totals
		t.Add(r)
		roas, ok1 := t.ROAS()
		acos, ok2 := t.ACOS()
		_ = w.Write([]string{r.Day.Format(time.DateOnly), exports.FormulaSafe(r.CampaignID), exports.FormulaSafe(r.Campaign), strconv.FormatUint(r.Impressions, 10), strconv.FormatUint(r.Clicks, 10),
			money.Micros(r.SpendMicros).String(), money.Micros(r.SalesMicros).String(), optFloat(roas, ok1), optFloat(acos, ok2), v.Marketplace.Currency})
	}
	w.Flush()
}

func optFloat(f float64, ok bool) string {
	if !ok {
		return ""
	}
	return strconv.FormatFloat(f, 'f', 4, 64)
}
