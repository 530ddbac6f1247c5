package console

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/management/users"
)

// An e-mail address may have an account on several marketplaces. A
// sign-in (password or single sign-on) that matches one opens its session;
// one that matches several asks which marketplace, listing only those: the
// accounts it matched wait in Redis under a token the choosing form
// carries (users.Sessions.SaveChoice), so that the password is not sent
// again. Nothing here says whether an address has an account on a
// marketplace the password did not match.

// errSSOOnly refuses a password on a marketplace that signs in by single
// sign-on only.
var errSSOOnly = errkind.New(errkind.Conflict, "this marketplace signs in by single sign-on only: use “Sign in with single sign-on”")

// safeMarketplace keeps a marketplace id of a form or link when it has the
// shape of one.
func safeMarketplace(mp string) string {
	if len(mp) > 64 {
		return ""
	}
	for _, r := range mp {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return ""
		}
	}
	return mp
}

// passwordAllowed drops the accounts of marketplaces that sign in by single
// sign-on only from those a password matched; errSSOOnly when none is left
// (said only after the password matched: it tells nothing to whoever does
// not know it).
func (c *Console) passwordAllowed(matched []users.User) ([]users.User, error) {
	var out []users.User
	for _, u := range matched {
		if m, ok := c.o.Accounts.Marketplace(u.MarketplaceID); ok && !m.SSOOnly {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, errSSOOnly
	}
	return out, nil
}

// signedIn opens the session of the one account of us, or asks the user
// which of them (their marketplaces) to open.
func (c *Console) signedIn(ctx *gin.Context, rctx context.Context, us []users.User, next string) {
	if len(us) == 1 {
		c.openSession(ctx, rctx, us[0], next)
		return
	}
	token, err := c.o.Sessions.SaveChoice(rctx, us)
	if err != nil {
		c.fail(ctx, err)
		return
	}
	c.render(ctx, http.StatusOK, "choose", "Choose a marketplace", c.chooseData(token, next, us))
}

func (c *Console) openSession(ctx *gin.Context, rctx context.Context, u users.User, next string) {
	token, _, err := c.o.Sessions.Create(rctx, u)
	if err != nil {
		c.fail(ctx, err)
		return
	}
	c.setCookie(ctx, sessionCookie, token, 0)
	c.o.Log.InfoContext(ctx, "console: signed in", "user", u.ID, "role", u.Role, "marketplace", u.MarketplaceID)
	if next == "" {
		next = "/console"
	}
	ctx.Redirect(http.StatusSeeOther, next)
}

type chooseOption struct{ ID, Name string }

type chooseData struct {
	Token, Next string
	Options     []chooseOption
}

func (c *Console) chooseData(token, next string, us []users.User) chooseData {
	d := chooseData{Token: token, Next: next}
	for _, u := range us {
		m, _ := c.o.Accounts.Marketplace(u.MarketplaceID)
		name := m.Name
		if name == "" {
			name = u.MarketplaceID
		}
		d.Options = append(d.Options, chooseOption{ID: u.MarketplaceID, Name: name})
	}
	sort.SliceStable(d.Options, func(i, j int) bool { return d.Options[i].Name < d.Options[j].Name })
	return d
}

// choose opens the session of the account the user picked from a choice.
func (c *Console) choose(ctx *gin.Context) {
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 5*time.Second)
	defer cancel()
	ids, ok, err := c.o.Sessions.TakeChoice(rctx, ctx.PostForm("choice"))
	if err != nil {
		c.fail(ctx, err)
		return
	}
	if !ok {
		c.errorPage(ctx, http.StatusGone, "This choice has expired or was made already: sign in again.")
		return
	}
	mp := ctx.PostForm("marketplace")
	for id, epoch := range ids {
		u, found := c.o.Users.Get(id)
		if found && u.MarketplaceID == mp && u.Active() && u.Epoch == epoch {
			c.openSession(ctx, rctx, u, safeNext(ctx.PostForm("next")))
			return
		}
	}
	c.errorPage(ctx, http.StatusUnprocessableEntity, "That marketplace was not one of the choices: sign in again.")
}
