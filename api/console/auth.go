package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/users"
)

type loginData struct {
	Email string
	Next  string
	// Marketplace: the account to sign in to (a per-marketplace link's
	// ?marketplace=); empty: whichever the password matches (signin.go).
	Marketplace string
	// SSO: single sign-on is configured (oidc.go).
	SSO bool
}

func (c *Console) loginPage(ctx *gin.Context) {
	c.render(ctx, http.StatusOK, "login", "Sign in", loginData{Next: safeNext(ctx.Query("next")),
		Email: prefill(ctx.Query("email")), Marketplace: safeMarketplace(ctx.Query("marketplace")), SSO: c.o.SSO != nil})
}

// prefill keeps an address of a link when it could be one.
func prefill(email string) string {
	if len(email) > users.MaxEmail {
		return ""
	}
	return email
}

// safeNext keeps a post-sign-in destination only when it is a console page.
func safeNext(n string) string {
	if strings.HasPrefix(n, "/console/") && !strings.HasPrefix(n, "//") && !strings.ContainsAny(n, "\\\r\n") {
		return n
	}
	return ""
}

func (c *Console) login(ctx *gin.Context) {
	email := strings.TrimSpace(ctx.PostForm("email"))
	password := ctx.PostForm("password")
	data := loginData{Email: email, Next: safeNext(ctx.PostForm("next")), Marketplace: safeMarketplace(ctx.PostForm("marketplace")), SSO: c.o.SSO != nil}
	again := func() { c.render(ctx, ctx.Writer.Status(), "login", "Sign in", data) }
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 5*time.Second)
	defer cancel()
	if email == "" || password == "" || len(email) > users.MaxEmail || len(password) > 4*users.MaxPassword {
		c.formError(ctx, users.ErrBadPassword, again)
		return
	}
	if err := c.o.Throttle.Allow(rctx, email, ctx.ClientIP()); err != nil {
		c.formError(ctx, err, again)
		return
	}
	matched, err := c.o.Users.Authenticate(rctx, data.Marketplace, email, password)
	c.recordAttempt(rctx, email, ctx.ClientIP(), err)
	if err == nil {
		matched, err = c.passwordAllowed(matched)
	}
	if err != nil {
		c.o.Log.InfoContext(ctx, "console: sign-in refused", "client", ctx.ClientIP())
		c.formError(ctx, err, again)
		return
	}
	c.signedIn(ctx, rctx, matched, data.Next)
}

func (c *Console) logout(ctx *gin.Context) {
	v := viewerOf(ctx)
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
	defer cancel()
	if err := c.o.Sessions.Delete(rctx, v.token); err != nil {
		c.fail(ctx, err)
		return
	}
	c.setCookie(ctx, sessionCookie, "", -1)
	ctx.Redirect(http.StatusSeeOther, "/console/login")
}

type inviteData struct {
	Invitation  invitations.Invitation
	Marketplace string
	// MarketplaceID prefills the sign-in link of an address that has an
	// account on the marketplace already.
	MarketplaceID string
}

// invitation finds the pending invitation of a link, or answers.
func (c *Console) invitation(ctx *gin.Context) (invitations.Invitation, string, bool) {
	mp := ctx.Param("mp")
	inv, _, err := c.o.Invitations.Get(mp, ctx.Param("id"))
	if err != nil || !c.o.Links.Verify(mp, inv, ctx.Param("sig")) {
		c.errorPage(ctx, http.StatusNotFound, "This invitation link is not valid.")
		return inv, mp, false
	}
	if inv.StatusAt(c.o.Invitations.Now()) != invitations.StatusPending {
		c.errorPage(ctx, http.StatusGone, "This invitation was accepted already or has expired. Sign in, or ask the marketplace for a new invitation.")
		return inv, mp, false
	}
	return inv, mp, true
}

func (c *Console) invitePage(ctx *gin.Context) {
	inv, mp, ok := c.invitation(ctx)
	if !ok {
		return
	}
	m, _ := c.o.Accounts.Marketplace(mp)
	// The link is a credential: keep it out of the Referer of any request.
	ctx.Header("Referrer-Policy", "no-referrer")
	c.render(ctx, http.StatusOK, "invite", "Accept your invitation", inviteData{Invitation: inv, Marketplace: m.Name, MarketplaceID: mp})
}

func (c *Console) acceptInvite(ctx *gin.Context) {
	inv, mp, ok := c.invitation(ctx)
	if !ok {
		return
	}
	m, _ := c.o.Accounts.Marketplace(mp)
	again := func() {
		c.render(ctx, ctx.Writer.Status(), "invite", "Accept your invitation", inviteData{Invitation: inv, Marketplace: m.Name, MarketplaceID: mp})
	}
	p1, p2 := ctx.PostForm("password"), ctx.PostForm("password2")
	if p1 != p2 {
		ctx.Set("console.error", "The two passwords differ.")
		ctx.Status(http.StatusUnprocessableEntity)
		again()
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	u, err := c.o.Users.Accept(rctx, mp, inv.ID, p1)
	if err != nil {
		c.formError(ctx, err, again)
		return
	}
	token, _, err := c.o.Sessions.Create(rctx, u)
	if err != nil {
		c.fail(ctx, err)
		return
	}
	c.setCookie(ctx, sessionCookie, token, 0)
	ctx.Redirect(http.StatusSeeOther, "/console")
}

func (c *Console) accountPage(ctx *gin.Context) {
	c.render(ctx, http.StatusOK, "account", "Account", nil)
}

func (c *Console) changePassword(ctx *gin.Context) {
	v := viewerOf(ctx)
	again := func() { c.render(ctx, ctx.Writer.Status(), "account", "Account", nil) }
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	if v.Marketplace.SSOOnly {
		c.formError(ctx, errSSOOnly, again)
		return
	}
	// The current password is guessed like a sign-in's: throttled alike.
	if err := c.o.Throttle.Allow(rctx, v.User.Email, ctx.ClientIP()); err != nil {
		c.formError(ctx, err, again)
		return
	}
	err := c.o.Users.CheckCurrentPassword(rctx, v.User.ID, ctx.PostForm("current"))
	c.recordAttempt(rctx, v.User.Email, ctx.ClientIP(), err)
	if errors.Is(err, users.ErrBadPassword) {
		ctx.Set("console.error", "The current password is wrong.")
		ctx.Status(http.StatusUnprocessableEntity)
		again()
		return
	}
	if err != nil {
		c.fail(ctx, err)
		return
	}
	if ctx.PostForm("password") != ctx.PostForm("password2") {
		ctx.Set("console.error", "The two new passwords differ.")
		ctx.Status(http.StatusUnprocessableEntity)
		again()
		return
	}
	u, err := c.o.Users.SetPassword(rctx, v.User.ID, ctx.PostForm("password"))
	if err != nil {
		c.formError(ctx, err, again)
		return
	}
	// The change ended every session of the user (its epoch moved): open
	// a new one for this browser.
	_ = c.o.Sessions.Delete(rctx, v.token)
	token, _, err := c.o.Sessions.Create(rctx, u)
	if err != nil {
		c.fail(ctx, err)
		return
	}
	c.setCookie(ctx, sessionCookie, token, 0)
	ctx.Redirect(http.StatusSeeOther, "/console/account?done=password")
}
