package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/campaigns"
)

// A campaign's dayparting and negative keywords on its page: shown to
// whoever sees the campaign, changed by the same people (an admin, or a
// user of the campaign's vendor) through the campaigns service, as the
// API's routes do (docs/guide/console.md).

// scheduleDay is a day of the campaign page's timetable form.
type scheduleDay struct {
	Day        int
	Name       string
	Start, End string // "" when the day has no hours
}

var weekdayNames = [...]string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// scheduleOf is c's timetable as the form's seven days.
func scheduleOf(c campaigns.Campaign) []scheduleDay {
	out := make([]scheduleDay, 7)
	for i := range out {
		out[i] = scheduleDay{Day: i + 1, Name: weekdayNames[i]}
	}
	for _, d := range c.Timetables {
		if d.DayOfWeek >= 1 && d.DayOfWeek <= 7 {
			out[d.DayOfWeek-1].Start, out[d.DayOfWeek-1].End = strconv.Itoa(d.StartHour), strconv.Itoa(d.EndHour)
		}
	}
	return out
}

// negativesText is c's negative keywords of one match type, one a line.
func negativesText(list []campaigns.NegativeKeyword, matchType string) string {
	var b strings.Builder
	for _, k := range list {
		if k.MatchType == matchType {
			b.WriteString(k.Keyword)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// ownCampaign returns the campaign of the path that the viewer may change,
// or answers not found.
func (c *Console) ownCampaign(ctx *gin.Context) (campaigns.Campaign, bool) {
	v := viewerOf(ctx)
	cp, _, ok := c.o.Campaigns.Campaign(v.Marketplace.ID, ctx.Param("id"))
	if !ok || (v.User.Role.IsVendor() && cp.VendorID != v.User.VendorID) {
		c.notFound(ctx, "The campaign")
		return campaigns.Campaign{}, false
	}
	return cp, true
}

// ownCampaignForm is ownCampaign for a form posted to the campaign's page:
// the form read, or the page again with the error.
func (c *Console) ownCampaignForm(ctx *gin.Context) (campaigns.Campaign, bool) {
	cp, ok := c.ownCampaign(ctx)
	if !ok {
		return cp, false
	}
	if err := ctx.Request.ParseForm(); err != nil {
		c.formError(ctx, errkind.New(errkind.Invalid, "the form could not be read"), func() { c.campaignPage(ctx) })
		return cp, false
	}
	return cp, true
}

// controlError makes a service error the console's: a validation error a
// sentence of its problems.
func controlError(err error) error {
	if errs, ok := validation.As(err); ok {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			loc := make([]string, 0, len(e.Loc))
			for _, l := range e.Loc[1:] { // without "body"
				loc = append(loc, strings.Trim(strings.TrimSpace(fmtAny(l)), "."))
			}
			msgs[i] = strings.Join(loc, ".") + ": " + e.Msg
		}
		return errkind.New(errkind.Invalid, strings.Join(msgs, "; "))
	}
	return err
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	}
	return ""
}

// setTimetables replaces the campaign's timetable with the form's days (a
// day with both hours empty is not served; all empty: every hour).
func (c *Console) setTimetables(ctx *gin.Context) {
	cp, ok := c.ownCampaignForm(ctx)
	if !ok {
		return
	}
	pf := ctx.Request.PostForm
	var days []campaigns.TimetableInput
	hour := func(s string) campaigns.Opt[int] {
		s = strings.TrimSpace(s)
		if s == "" {
			return campaigns.Opt[int]{}
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return campaigns.Opt[int]{Set: true, Null: true}
		}
		return campaigns.Opt[int]{Set: true, V: n}
	}
	for d := 1; d <= 7; d++ {
		start, end := hour(pf.Get("start_"+strconv.Itoa(d))), hour(pf.Get("end_"+strconv.Itoa(d)))
		if !start.Set && !end.Set {
			continue
		}
		days = append(days, campaigns.TimetableInput{DayOfWeek: campaigns.Opt[int]{Set: true, V: d}, StartHour: start, EndHour: end})
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	if _, _, err := c.o.Campaigns.ReplaceTimetables(rctx, viewerOf(ctx).Marketplace.ID, cp.ID, 0, days); err != nil {
		c.formError(ctx, controlError(err), func() { c.campaignPage(ctx) })
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/campaigns/"+cp.ID+"?done=timetable")
}

// setNegatives replaces the campaign's negative keywords with the form's
// (one a line, in the exact and the phrase boxes).
func (c *Console) setNegatives(ctx *gin.Context) {
	cp, ok := c.ownCampaignForm(ctx)
	if !ok {
		return
	}
	pf := ctx.Request.PostForm
	in := campaigns.NegativeKeywordsInput{NegativeKeywords: campaigns.Opt[[]campaigns.NegativeKeywordInput]{Set: true, V: []campaigns.NegativeKeywordInput{}}}
	for _, mt := range []string{campaigns.MatchExact, campaigns.MatchPhrase} {
		for _, line := range strings.Split(pf.Get(mt), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				in.NegativeKeywords.V = append(in.NegativeKeywords.V, campaigns.NegativeKeywordInput{
					Keyword: campaigns.Opt[string]{Set: true, V: line}, MatchType: campaigns.Opt[string]{Set: true, V: mt}})
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	if _, _, err := c.o.Campaigns.PutCampaignNegatives(rctx, viewerOf(ctx).Marketplace.ID, cp.ID, 0, in); err != nil {
		c.formError(ctx, controlError(err), func() { c.campaignPage(ctx) })
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/campaigns/"+cp.ID+"?done=negatives")
}
