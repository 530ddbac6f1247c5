package console

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/reporting/vendorcharges"
	"github.com/endcap/endcap/spend"
)

// A vendor's refused charges (docs/design/charges.md): the clicks refused as
// invalid and the clicks and impressions refused for a budget or for the
// vendor's funds, recorded and not charged, as the vendor charges list
// them with include_refused: counted per reason over a window of local
// days, the newest listed. A vendor user sees its own; an admin any
// vendor's, from the vendor's page.

// refusedListed is how many refused charges the page lists (the counts
// are of them all).
const refusedListed = 100

// refusedDays is the page's default window: the last 7 local days.
const refusedDays = 7

// refusedWords says each refusal reason in words.
var refusedWords = map[string]string{
	string(spend.NoChargeInvalidNoImpression): "Invalid click: no impression of its ad came before it",
	string(spend.NoChargeInvalidTooFast):      "Invalid click: it came too soon after its impression",
	string(spend.NoChargeInvalidRepeat):       "Invalid click: the shopper had just clicked the campaign",
	string(spend.NoChargeInvalidRate):         "Invalid click: the shopper clicked the campaign too often in the hour",
	string(spend.NoChargeDailyBudget):         "Not charged: it would have taken the campaign over its daily budget",
	string(spend.NoChargeTotalBudget):         "Not charged: it would have taken the campaign over its total budget",
	string(spend.NoChargeInsufficientBalance): "Not charged: the vendor's funds did not cover it",
}

// refusedRow is a listed refused charge.
type refusedRow struct {
	vendorcharges.RefusedCharge
	At           time.Time
	CampaignName string
}

type refusedData struct {
	Vendor   catalog.VendorView
	From, To string // the window's local days, as the form shows them
	Base     string
	Counts   []vendorcharges.ReasonCount
	Total    uint64
	Rows     []refusedRow
	Listed   int
	More     bool // more were refused than are listed
	TimeZone string
	Err      string // why nothing is shown
}

// refusedPage is a vendor user's own refused charges.
func (c *Console) refusedPage(ctx *gin.Context) {
	v := viewerOf(ctx)
	if !v.User.Role.IsVendor() {
		ctx.Redirect(http.StatusSeeOther, "/console/vendors")
		return
	}
	vv, _, err := c.o.Catalog.GetVendor(v.Marketplace.ID, v.User.VendorID)
	if err != nil {
		c.notFound(ctx, "Your vendor")
		return
	}
	c.renderRefused(ctx, vv, "/console/refused")
}

// vendorRefusedPage is a vendor's refused charges, for an admin.
func (c *Console) vendorRefusedPage(ctx *gin.Context) {
	vv, ok := c.pathVendor(ctx)
	if !ok {
		return
	}
	c.renderRefused(ctx, vv, "/console/vendors/"+vv.ID+"/refused")
}

func (c *Console) renderRefused(ctx *gin.Context, vv catalog.VendorView, base string) {
	v := viewerOf(ctx)
	loc := v.Marketplace.Location()
	d := refusedData{Vendor: vv, Base: base, Listed: refusedListed, TimeZone: loc.String()}
	w, err := c.refusedWindow(ctx, loc, &d)
	if err == nil {
		if c.o.Charges == nil {
			err = errkind.New(errkind.Unavailable, "the charges are not read by this process")
		} else {
			rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
			var r vendorcharges.Refused
			r, err = c.o.Charges.VendorRefused(rctx, v.Marketplace.ID, vv.ID, w, refusedListed)
			cancel()
			d.Counts, d.Total = r.Counts, r.Total()
			names := map[string]string{}
			for _, x := range r.Latest {
				name, ok := names[x.CampaignID]
				if !ok {
					if cp, _, found := c.o.Campaigns.Campaign(v.Marketplace.ID, x.CampaignID); found {
						name = cp.Name
					}
					names[x.CampaignID] = name
				}
				d.Rows = append(d.Rows, refusedRow{RefusedCharge: x, At: time.UnixMilli(x.TimestampMs), CampaignName: name})
			}
			d.More = d.Total > uint64(len(d.Rows))
		}
	}
	if err != nil {
		status, msg := statusOf(err)
		if status == http.StatusInternalServerError {
			c.fail(ctx, err)
			return
		}
		if status == http.StatusServiceUnavailable {
			c.o.Log.WarnContext(ctx, "console: refused charges", "vendor", vv.ID, "err", err)
			status = http.StatusOK // the page, saying what cannot be read
		}
		d.Err = msg
		c.render(ctx, status, "refused", "Refused charges of "+vv.Name, d)
		return
	}
	c.render(ctx, http.StatusOK, "refused", "Refused charges of "+vv.Name, d)
}

// refusedWindow reads ?from=&to= (local days, both included; by default
// the last refusedDays days to today) as the instants the vendor charges
// compare: at most their longest window.
func (c *Console) refusedWindow(ctx *gin.Context, loc *time.Location, d *refusedData) (vendorcharges.Window, error) {
	now := c.o.Now().In(loc)
	to := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	from := to.AddDate(0, 0, -(refusedDays - 1))
	d.From, d.To = from.Format(time.DateOnly), to.Format(time.DateOnly)
	var err error
	if s := trimTo(ctx.Query("from"), 32); s != "" {
		d.From = s
		if from, err = time.ParseInLocation(time.DateOnly, s, loc); err != nil {
			return vendorcharges.Window{}, errkind.New(errkind.Invalid, "From: the first day must be a date (YYYY-MM-DD)")
		}
	}
	if s := trimTo(ctx.Query("to"), 32); s != "" {
		d.To = s
		if to, err = time.ParseInLocation(time.DateOnly, s, loc); err != nil {
			return vendorcharges.Window{}, errkind.New(errkind.Invalid, "To: the last day must be a date (YYYY-MM-DD)")
		}
	}
	end := to.AddDate(0, 0, 1) // the end of the last day, local
	switch {
	case to.Before(from):
		return vendorcharges.Window{}, errkind.New(errkind.Invalid, "To: the last day must not be before the first")
	case end.Sub(from) > vendorcharges.MaxWindow:
		return vendorcharges.Window{}, errkind.New(errkind.Invalid, "the window may be at most 32 days, as the vendor charges' (their longest window)")
	}
	return vendorcharges.Window{StartMs: from.UnixMilli(), EndMs: end.UnixMilli()}, nil
}
