package console

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/management/webhooks"
)

// --- API keys ---

type keyRow struct {
	accounts.APIKey
	Status   string
	LastUsed *time.Time
}

type keysData struct {
	Keys []keyRow
	// New is the key just created, shown this once.
	New     string
	NewKey  *accounts.APIKey
	Name    string
	Type    string
	Expires string
}

func (c *Console) keysData(ctx *gin.Context) keysData {
	v := viewerOf(ctx)
	keys := c.o.Accounts.Keys(v.Marketplace.ID)
	now := c.o.Now()
	var used map[string]time.Time
	if c.o.KeyUsage != nil {
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = k.ID
		}
		rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
		used, _ = c.o.KeyUsage.LastUsed(rctx, ids) // a hint: the page shows without it
		cancel()
	}
	out := keysData{Type: string(accounts.KeyMarketplace)}
	// Newest first.
	for i := len(keys) - 1; i >= 0; i-- {
		k := keys[i]
		r := keyRow{APIKey: k, Status: "active"}
		switch {
		case k.RevokedAt != nil:
			r.Status = "revoked"
		case !k.Live(now):
			r.Status = "expired"
		}
		if t, ok := used[k.ID]; ok {
			r.LastUsed = &t
		}
		out.Keys = append(out.Keys, r)
	}
	return out
}

func (c *Console) keysPage(ctx *gin.Context) {
	c.render(ctx, http.StatusOK, "keys", "API keys", c.keysData(ctx))
}

func (c *Console) createKey(ctx *gin.Context) {
	v := viewerOf(ctx)
	name, typ, expires := ctx.PostForm("name"), ctx.PostForm("type"), strings.TrimSpace(ctx.PostForm("expires"))
	again := func() {
		d := c.keysData(ctx)
		d.Name, d.Type, d.Expires = name, typ, expires
		c.render(ctx, ctx.Writer.Status(), "keys", "API keys", d)
	}
	t, err := accounts.ParseKeyType(typ)
	if err != nil {
		c.formError(ctx, errkind.New(errkind.Invalid, "choose a marketplace or an advanced key"), again)
		return
	}
	var opts accounts.KeyOptions
	opts.Name = name
	if expires != "" {
		// A date: the key works until the end of that day in the
		// marketplace's time zone.
		d, err := time.ParseInLocation(time.DateOnly, expires, v.Marketplace.Location())
		if err != nil {
			c.formError(ctx, errkind.New(errkind.Invalid, "the expiry must be a date (YYYY-MM-DD)"), again)
			return
		}
		end := d.AddDate(0, 0, 1)
		opts.ExpiresAt = &end
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	secret, k, err := c.o.Accounts.CreateKeyWith(rctx, v.Marketplace.ID, t, opts)
	if err != nil {
		c.formError(ctx, err, again)
		return
	}
	d := c.keysData(ctx)
	d.New, d.NewKey = secret, &k
	// The key is in this answer only: never cached, never sent again.
	ctx.Header("Cache-Control", "no-store")
	c.render(ctx, http.StatusCreated, "keys", "API keys", d)
}

func (c *Console) revokeKey(ctx *gin.Context) {
	v := viewerOf(ctx)
	k, ok := c.o.Accounts.Key(ctx.Param("id"))
	if !ok || k.MarketplaceID != v.Marketplace.ID {
		c.notFound(ctx, "The key")
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.o.Accounts.RevokeKey(rctx, k.ID); err != nil {
		c.fail(ctx, err)
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/keys?done=revoked")
}

// --- settings ---

type settingsData struct {
	M        accounts.Marketplace
	CPC, CPM string
}

func (c *Console) settingsPage(ctx *gin.Context) {
	m := viewerOf(ctx).Marketplace
	c.render(ctx, http.StatusOK, "settings", "Settings", settingsData{M: m, CPC: money.Micros(m.ReserveCPCMicros).String(), CPM: money.Micros(m.ReserveCPMMicros).String()})
}

func (c *Console) setReserve(ctx *gin.Context) {
	v := viewerOf(ctx)
	cpc, cpm := strings.TrimSpace(ctx.PostForm("cpc")), strings.TrimSpace(ctx.PostForm("cpm"))
	again := func() {
		c.render(ctx, ctx.Writer.Status(), "settings", "Settings", settingsData{M: v.Marketplace, CPC: cpc, CPM: cpm})
	}
	amount := func(what, s string) (int64, error) {
		if strings.Trim(s, "0.") == "" {
			return 0, nil
		}
		m, err := campaigns.ParseMoneyText(s)
		if err != nil {
			return 0, errkind.Newf(errkind.Invalid, "the %s reserve %q is not an amount: %v", what, s, err)
		}
		return m, nil
	}
	cpcM, err := amount("CPC", cpc)
	if err != nil {
		c.formError(ctx, err, again)
		return
	}
	cpmM, err := amount("CPM", cpm)
	if err != nil {
		c.formError(ctx, err, again)
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.o.Accounts.SetReserve(rctx, v.Marketplace.ID, cpcM, cpmM); err != nil {
		c.formError(ctx, err, again)
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/settings?done=reserve")
}

// --- vendors and products ---

type vendorsData struct {
	Q       string
	Vendors []catalog.VendorView
	Next    string
}

const pageSize = 50

func (c *Console) vendorsPage(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	q := trimTo(ctx.Query("q"), 200)
	vs, more := c.o.Catalog.SearchVendors(mp, q, ctx.Query("after"), pageSize)
	d := vendorsData{Q: q, Vendors: vs}
	if more && len(vs) > 0 {
		d.Next = vs[len(vs)-1].ID
	}
	c.render(ctx, http.StatusOK, "vendors", "Vendors", d)
}

type vendorData struct {
	Vendor    catalog.VendorView
	Products  int
	Campaigns []campaignRow
	More      bool
}

func (c *Console) vendorPage(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	v, _, err := c.o.Catalog.GetVendor(mp, ctx.Param("vendor"))
	if err != nil {
		c.notFound(ctx, "The vendor")
		return
	}
	rows, more, err := c.vendorCampaigns(mp, v.ID, ctx.Query("after"))
	if err != nil {
		c.fail(ctx, err)
		return
	}
	c.render(ctx, http.StatusOK, "vendor", "Vendor "+v.Name, vendorData{Vendor: v, Products: c.o.Catalog.VendorProductCount(mp, v.ID), Campaigns: rows, More: more})
}

// vendorCampaigns is a page of a vendor's campaigns with their statuses.
func (c *Console) vendorCampaigns(mp, vendor, after string) ([]campaignRow, bool, error) {
	cs, more, err := c.o.Campaigns.ListCampaigns(mp, vendor, after, 200)
	if err != nil {
		return nil, false, err
	}
	now := c.o.Now()
	rows := make([]campaignRow, len(cs))
	for i, x := range cs {
		rows[i] = newCampaignRow(x, campaigns.Status(x, now))
	}
	return rows, more, nil
}

type productsData struct {
	Q, Vendor string
	Searched  bool
	Products  []catalog.ProductView
	More      bool
}

// productsPage finds a product by its id, or a vendor's products by id or
// name.
func (c *Console) productsPage(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	d := productsData{Q: trimTo(ctx.Query("q"), 200), Vendor: trimTo(ctx.Query("vendor"), 255)}
	if d.Q != "" || d.Vendor != "" {
		d.Searched = true
		rctx, cancel := context.WithTimeout(ctx.Request.Context(), 5*time.Second)
		defer cancel()
		var err error
		if d.Products, d.More, err = c.o.Catalog.SearchProducts(rctx, mp, d.Vendor, d.Q, pageSize); err != nil {
			c.fail(ctx, err)
			return
		}
	}
	c.render(ctx, http.StatusOK, "products", "Products", d)
}

func trimTo(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

// --- users and invitations ---

type inviteRow struct {
	invitations.Invitation
	Status string
	Link   string // shown when e-mail is off
}

type usersData struct {
	Users       []users.User
	Invitations []inviteRow
	// MoreInvitations: older invitations than those listed exist.
	MoreInvitations bool
	MailEnabled     bool
	Email           string
	VendorID        string
	Role            string
}

func (c *Console) usersData(ctx *gin.Context) usersData {
	mp := viewerOf(ctx).Marketplace.ID
	d := usersData{Users: c.o.Users.List(mp), MailEnabled: c.o.MailEnabled, Role: invitations.RoleVendorAnalyst}
	invs, more := c.o.Invitations.Newest(mp, 200)
	d.MoreInvitations = more
	now := c.o.Invitations.Now()
	for _, inv := range invs {
		r := inviteRow{Invitation: inv, Status: inv.StatusAt(now)}
		if !c.o.MailEnabled && r.Status == invitations.StatusPending && c.o.Links.Ready() {
			r.Link = c.o.Links.URL(mp, inv)
		}
		d.Invitations = append(d.Invitations, r)
	}
	sort.SliceStable(d.Invitations, func(i, j int) bool { return d.Invitations[i].CreatedAt.After(d.Invitations[j].CreatedAt) })
	return d
}

func (c *Console) usersPage(ctx *gin.Context) {
	c.render(ctx, http.StatusOK, "users", "Users", c.usersData(ctx))
}

func (c *Console) invite(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	email, vendor, role := strings.TrimSpace(ctx.PostForm("email")), strings.TrimSpace(ctx.PostForm("vendor")), ctx.PostForm("role")
	again := func() {
		d := c.usersData(ctx)
		d.Email, d.VendorID, d.Role = email, vendor, role
		c.render(ctx, ctx.Writer.Status(), "users", "Users", d)
	}
	// The marketplace's own users only: whether the address has an account
	// on another marketplace is none of its business.
	if _, ok := c.o.Users.Lookup(mp, email); ok && email != "" {
		c.formError(ctx, users.ErrEmailTaken, again)
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	list := []invitations.Invite{{VendorID: &vendor, VendorEmail: &email, TargetUserRole: &role}}
	invs, err := c.o.Invitations.Create(rctx, mp, &list)
	if err != nil {
		if v, ok := asValidation(err); ok {
			ctx.Set("console.error", v)
			ctx.Status(http.StatusUnprocessableEntity)
			again()
			return
		}
		c.fail(ctx, err)
		return
	}
	if err := c.o.Audit.Record(rctx, mp, "invitation.create", invs[0].ID, role+" of vendor "+vendor+" for "+email, c.o.Now()); err != nil {
		c.o.Log.WarnContext(ctx, "console: invitation created, its audit entry not written", "invitation", invs[0].ID, "err", err)
	}
	ctx.Redirect(http.StatusSeeOther, "/console/users?done=invited")
}

func (c *Console) setUserDisabled(disabled bool) gin.HandlerFunc {
	return func(ctx *gin.Context) {
		v := viewerOf(ctx)
		if ctx.Param("id") == v.User.ID {
			c.forbidden(ctx, "You cannot disable yourself.")
			return
		}
		rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
		defer cancel()
		if _, err := c.o.Users.SetDisabled(rctx, v.Marketplace.ID, ctx.Param("id"), disabled); err != nil {
			c.fail(ctx, err)
			return
		}
		done := "enabled"
		if disabled {
			done = "disabled"
		}
		ctx.Redirect(http.StatusSeeOther, "/console/users?done="+done)
	}
}

// --- webhooks ---

type webhookRow struct {
	webhooks.Webhook
	FailingSince *time.Time
}

func (c *Console) webhooksPage(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	hs, _ := c.o.Webhooks.List(mp, "", 200)
	rows := make([]webhookRow, len(hs))
	for i, h := range hs {
		rows[i] = webhookRow{Webhook: h}
		if c.o.Deliveries != nil {
			rows[i].FailingSince = c.o.Deliveries.FailingSince(mp, h.ID)
		}
	}
	c.render(ctx, http.StatusOK, "webhooks", "Webhooks", rows)
}

type webhookData struct {
	Hook       webhooks.Webhook
	Deliveries []webhooks.Delivery
	HasLog     bool
	Status     string
	Next       string
}

func (c *Console) webhookPage(ctx *gin.Context) { c.webhookPageStatus(ctx, http.StatusOK) }

func (c *Console) webhookPageStatus(ctx *gin.Context, status int) {
	mp := viewerOf(ctx).Marketplace.ID
	h, _, err := c.o.Webhooks.Get(mp, ctx.Param("id"))
	if err != nil {
		c.notFound(ctx, "The webhook")
		return
	}
	d := webhookData{Hook: h, Status: ctx.Query("status")}
	if c.o.Deliveries != nil {
		ds, more, err := c.o.Deliveries.List(mp, h.ID, d.Status, ctx.Query("before"), pageSize)
		if err != nil {
			c.fail(ctx, err)
			return
		}
		d.Deliveries, d.HasLog = ds, true
		if more && len(ds) > 0 {
			d.Next = ds[len(ds)-1].ID
		}
	}
	c.render(ctx, status, "webhook", "Webhook", d)
}

// testWebhook sends a webhook.test event to the webhook now, as POST
// /public/v1/webhooks/webhooks/{id}/test does (the same limits).
func (c *Console) testWebhook(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	if c.o.Deliveries == nil {
		c.errorPage(ctx, http.StatusServiceUnavailable, "This process does not send webhook deliveries.")
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	x, err := c.o.Deliveries.Test(rctx, mp, ctx.Param("id"))
	if err != nil {
		c.webhookError(ctx, err)
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/webhooks/"+url.PathEscape(x.WebhookID)+"?done=webhook-test")
}

// retryDelivery sends a delivery again now, as POST
// /public/v1/webhooks/webhooks/{id}/deliveries/{delivery}/retry does.
func (c *Console) retryDelivery(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	if c.o.Deliveries == nil {
		c.errorPage(ctx, http.StatusServiceUnavailable, "This process does not send webhook deliveries.")
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	x, err := c.o.Deliveries.Retry(rctx, mp, ctx.Param("id"), ctx.Param("delivery"))
	if err != nil {
		c.webhookError(ctx, err)
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/webhooks/"+url.PathEscape(x.WebhookID)+"?done=webhook-retry")
}

// webhookError answers a refused test or retry: an unknown webhook or
// delivery is 404; a disabled webhook, a delivery in flight or too many
// tests are the webhook's page again with the message.
func (c *Console) webhookError(ctx *gin.Context, err error) {
	if e, ok := errkind.Of(err); ok && e.Kind == errkind.NotFound {
		c.notFound(ctx, "The webhook or delivery")
		return
	}
	c.formError(ctx, err, func() {
		status := ctx.Writer.Status()
		ctx.Request.URL.RawQuery = ""
		c.webhookPageStatus(ctx, status)
	})
}

// --- audit log ---

type auditData struct {
	Entries []audit.Entry
	Next    string
}

func (c *Console) auditPage(ctx *gin.Context) {
	mp := viewerOf(ctx).Marketplace.ID
	es, more := c.o.Audit.Page(mp, ctx.Query("before"), 100)
	d := auditData{Entries: es}
	if more && len(es) > 0 {
		d.Next = es[len(es)-1].ID
	}
	c.render(ctx, http.StatusOK, "audit", "Audit log", d)
}
