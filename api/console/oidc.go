package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/users"
)

// Single sign-on (users.SSO): the login page's link, /console/sso/start
// (a GET: the pages' Content-Security-Policy lets forms go to the console
// only, redirects included), sends the browser to the provider with a state
// also kept in a cookie of this browser; the provider sends it back to
// /console/sso/callback, which checks both and opens the session (or asks
// which marketplace, as a password does).

const ssoCookie = "endcap_sso"

func (c *Console) ssoStart(ctx *gin.Context) {
	if c.o.SSO == nil {
		c.notFound(ctx, "Single sign-on")
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 15*time.Second)
	defer cancel()
	to, state, err := c.o.SSO.Start(rctx, safeNext(ctx.Query("next")), safeMarketplace(ctx.Query("marketplace")))
	if err != nil {
		c.o.Log.WarnContext(ctx, "console: single sign-on could not start", "err", err)
		c.fail(ctx, err)
		return
	}
	http.SetCookie(ctx.Writer, &http.Cookie{Name: ssoCookie, Value: state, Path: "/console/sso", MaxAge: int(users.StateTTL / time.Second),
		HttpOnly: true, Secure: c.o.SecureCookies, SameSite: http.SameSiteLaxMode})
	ctx.Redirect(http.StatusSeeOther, to)
}

func (c *Console) ssoCallback(ctx *gin.Context) {
	if c.o.SSO == nil {
		c.notFound(ctx, "Single sign-on")
		return
	}
	cookie, _ := ctx.Cookie(ssoCookie)
	http.SetCookie(ctx.Writer, &http.Cookie{Name: ssoCookie, Value: "", Path: "/console/sso", MaxAge: -1,
		HttpOnly: true, Secure: c.o.SecureCookies, SameSite: http.SameSiteLaxMode})
	if e := ctx.Query("error"); e != "" {
		c.o.Log.InfoContext(ctx, "console: the identity provider refused a sign-in", "error", e)
		// The state is still ended: the sign-in cannot be completed later.
		rctx, cancel := context.WithTimeout(ctx.Request.Context(), 5*time.Second)
		_, _ = c.o.SSO.Finish(rctx, ctx.Query("state"), cookie, "")
		cancel()
		c.errorPage(ctx, http.StatusForbidden, "The identity provider did not sign you in ("+truncate(e, 64)+"). Start again from the sign-in page.")
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 30*time.Second)
	defer cancel()
	res, err := c.o.SSO.Finish(rctx, ctx.Query("state"), cookie, ctx.Query("code"))
	if err != nil {
		c.o.Log.InfoContext(ctx, "console: single sign-on refused", "client", ctx.ClientIP(), "err", err)
		status, msg := statusOf(err)
		if errors.Is(err, users.ErrSSOState) || errors.Is(err, users.ErrSSORefused) {
			status = http.StatusBadRequest
		}
		c.errorPage(ctx, status, msg+".")
		return
	}
	c.signedIn(ctx, rctx, res.Users, res.Next)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
