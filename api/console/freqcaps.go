package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/storage/statelog"
)

// A campaign's frequency caps (its restrictions, docs/reference/campaigns.md) on its
// page: listed to whoever sees the campaign, added and changed by the same
// people as its dayparting (controls.go), through the campaigns service
// the restrictions' routes call. Every form carries the campaign's version
// it was rendered with: a change of the campaign meanwhile is a conflict,
// said on the page, which shows the campaign as it is now.

// capRow is a restriction as the page lists it.
type capRow struct {
	campaigns.Restriction
	Type campaigns.RestrictionType
}

// capsData is the frequency caps section of the campaign page.
type capsData struct {
	Rows []capRow
	// Version is the campaign's version the forms carry.
	Version int64
	// Without is the campaign's capsWithoutShopper (serve or skip).
	Without string
	// Error is the message of a refused caps form, shown beside the forms.
	Error string
	// Form is what a refused add form sent, shown again.
	Form url.Values
	// The add form's choices.
	Interactions, Frequencies, Levels []string
	Max                               int64
}

const capsErrorKey = "console.capsError"

// capsOf is the caps section of campaign cp at version ver.
func capsOf(ctx *gin.Context, cp campaigns.Campaign, ver int64) capsData {
	d := capsData{Version: ver, Without: campaigns.CapsServe, Max: campaigns.MaxRestrictionLimit,
		Interactions: []string{campaigns.InteractionImpressions, campaigns.InteractionClicks},
		Frequencies:  []string{campaigns.FrequencyDaily, campaigns.FrequencyWeekly, campaigns.FrequencyMonthly},
		Levels:       []string{campaigns.LevelCampaign, campaigns.LevelBid}}
	if cp.CapsWithoutShopper == campaigns.CapsSkip {
		d.Without = campaigns.CapsSkip
	}
	for _, r := range cp.Restrictions {
		d.Rows = append(d.Rows, capRow{Restriction: r, Type: r.Type()})
	}
	if e, ok := ctx.Get(capsErrorKey); ok {
		d.Error, _ = e.(string)
		if ctx.Request.Method == http.MethodPost && strings.HasSuffix(ctx.Request.URL.Path, "/restrictions") {
			d.Form = ctx.Request.PostForm
		}
	}
	return d
}

// formVersion reads the campaign version a form carries (MatchAny when it
// has none: the version read at the write).
func formVersion(ctx *gin.Context) statelog.IfMatch {
	n, err := strconv.ParseInt(ctx.Request.PostForm.Get("version"), 10, 64)
	if err != nil || n < 1 {
		return statelog.MatchAny
	}
	return statelog.IfMatch(n)
}

// capsForm runs a caps form's change: on success back to the page's
// section; a refusal (bad input, a conflict) is shown beside the forms, the
// page showing the campaign as it is now.
func (c *Console) capsForm(ctx *gin.Context, change func(context.Context, string, campaigns.Campaign) error) {
	cp, ok := c.ownCampaignForm(ctx)
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	if err := change(rctx, viewerOf(ctx).Marketplace.ID, cp); err != nil {
		if errors.Is(err, statelog.ErrConflict) {
			err = errkind.New(errkind.Conflict, "the campaign was changed meanwhile (in another tab, or by someone else): "+
				"its frequency caps are shown as they are now; make your change again")
		}
		status, msg := statusOf(controlError(err))
		if status != http.StatusUnprocessableEntity && status != http.StatusConflict && status != http.StatusNotFound {
			c.fail(ctx, err)
			return
		}
		ctx.Set(capsErrorKey, msg)
		ctx.Status(status)
		c.campaignPage(ctx)
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/campaigns/"+cp.ID+"?done=caps#frequency-caps")
}

// formLimit reads a form's limit as the API's body would carry it: absent
// when empty, null when not an integer (the service says what is wrong).
func formLimit(s string) campaigns.Opt[int64] {
	s = strings.TrimSpace(s)
	if s == "" {
		return campaigns.Opt[int64]{}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return campaigns.Opt[int64]{Set: true, Null: true}
	}
	return campaigns.Opt[int64]{Set: true, V: n}
}

// formText is a form's field as an optional string: absent when empty.
func formText(s string) campaigns.Opt[string] {
	if s = strings.TrimSpace(s); s == "" {
		return campaigns.Opt[string]{}
	}
	return campaigns.Opt[string]{Set: true, V: s}
}

// addCap adds a restriction: its type by the three names, its limit.
func (c *Console) addCap(ctx *gin.Context) {
	c.capsForm(ctx, func(rctx context.Context, mp string, cp campaigns.Campaign) error {
		pf := ctx.Request.PostForm
		in := campaigns.RestrictionInput{InteractionType: formText(pf.Get("interactionType")), FrequencyType: formText(pf.Get("frequencyType")),
			Level: formText(pf.Get("level")), Limit: formLimit(pf.Get("limit"))}
		_, _, _, err := c.o.Campaigns.CreateRestriction(rctx, mp, cp.ID, formVersion(ctx), in)
		return err
	})
}

// updateCap changes a restriction's limit and status (inactive: it caps and
// counts nothing; there is no deletion, as in the API).
func (c *Console) updateCap(ctx *gin.Context) {
	c.capsForm(ctx, func(rctx context.Context, mp string, cp campaigns.Campaign) error {
		rid, err := strconv.ParseInt(ctx.Param("rid"), 10, 64)
		if err != nil || rid < 1 {
			return errkind.New(errkind.NotFound, "this frequency cap was not found")
		}
		pf := ctx.Request.PostForm
		in := campaigns.RestrictionInput{Status: formText(pf.Get("status"))}
		if _, ok := pf["limit"]; ok {
			in.Limit = formLimit(pf.Get("limit"))
			if !in.Limit.Set {
				in.Limit = campaigns.Opt[int64]{Set: true, Null: true}
			}
		}
		_, _, _, err = c.o.Campaigns.UpdateRestriction(rctx, mp, cp.ID, rid, formVersion(ctx), in)
		return err
	})
}

// setCapsWithoutShopper sets what the caps do for a shopper they cannot
// count (serve or skip), as the campaign's PATCH does.
func (c *Console) setCapsWithoutShopper(ctx *gin.Context) {
	c.capsForm(ctx, func(rctx context.Context, mp string, cp campaigns.Campaign) error {
		in := campaigns.CampaignInput{CapsWithoutShopper: formText(ctx.Request.PostForm.Get("capsWithoutShopper"))}
		if !in.CapsWithoutShopper.Set {
			in.CapsWithoutShopper = campaigns.Opt[string]{Set: true, V: ""}
		}
		_, _, err := c.o.Campaigns.UpdateCampaign(rctx, mp, cp.ID, formVersion(ctx), in)
		return err
	})
}
