// Package console is the web console served at /console by the API target:
// server-rendered pages (html/template) for a marketplace's administrators
// and for the users of its vendors, with charts drawn in the browser by
// uPlot. Every asset is embedded in the binary; nothing is fetched at run
// time. See docs/guide/console.md.
//
// Handlers decode a form, call a domain service and render a page; the
// rules (who may sign in, what a key or an invitation is, what a vendor
// may read) live in the domain packages and in the middleware here, which
// checks the session, the role and the CSRF token of every form.
package console

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/management/billing"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/performance"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/reporting/vendorcharges"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options are what the console reads and writes.
type Options struct {
	Accounts    *accounts.Service
	KeyUsage    *accounts.Usage // nil: "last used" is not shown
	Users       *users.Service
	Sessions    *users.Sessions
	Throttle    *users.Throttle
	Links       *users.Links
	SSO         *users.SSO // nil: no single sign-on
	Audit       *audit.Log
	Catalog     *catalog.Service
	Campaigns   *campaigns.Service
	Invitations *invitations.Service
	Webhooks    *webhooks.Service
	Deliveries  *webhooks.Deliveries // nil: no delivery log in this process
	Performance *performance.Reader
	ScoredFiles *scoredfiles.Service
	Exports     *exports.Service
	Balances    *billing.Balances
	// Charges reads the refused charges (nil: the page says it cannot).
	Charges *vendorcharges.Store
	Health  *Sampler
	// Cursors signs the page links of the campaigns and exports lists
	// (nil: a key of this process's own, so that a link works on this
	// process only).
	Cursors *pagination.Signer
	// Auctions explains auctions (nil: the explain page says it cannot),
	// listing at most ExplainMaxCandidates candidates a request (0: no
	// limit), as POST /v2/auctions/explain.
	Auctions             Explainer
	ExplainMaxCandidates int
	// MailEnabled: invitations are e-mailed; otherwise the console shows
	// each pending invitation's link to the admin.
	MailEnabled bool
	// Downloads bounds the downloads a user runs at once.
	Downloads *users.Slots
	// SecureCookies marks the cookies Secure (HTTPS only), names them
	// __Host-… (Path=/, no Domain: no other host or plain-HTTP page can
	// set them) and makes every answer ask for HTTPS (HSTS).
	SecureCookies bool
	Log           *slog.Logger
	Now           func() time.Time
}

// Console serves the pages.
type Console struct {
	o       Options
	pages   map[string]*template.Template
	cursors *pagination.Signer
	// assets maps a static file's name to its versioned path.
	assets map[string]string
}

// Cookie names (with the __Host- prefix when the cookies are Secure).
const (
	sessionCookie = "endcap_session"
	csrfCookie    = "endcap_csrf" // the anonymous forms' double-submit token
)

// hsts is the Strict-Transport-Security of the answers when the cookies
// are Secure: a year, this host only.
const hsts = "max-age=31536000"

// New builds the console.
func New(o Options) (*Console, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Console{o: o, cursors: o.Cursors}
	if c.cursors == nil {
		c.cursors = pagination.NewSigner([]byte(users.RandomToken()))
	}
	if err := c.loadAssets(); err != nil {
		return nil, err
	}
	if err := c.parse(); err != nil {
		return nil, err
	}
	return c, nil
}

// Install adds the console's routes under g (the /console group).
func (c *Console) Install(g *gin.RouterGroup) {
	g.Use(c.headers, c.sameOrigin, c.formLimit)
	g.GET("/static/*file", c.static)
	g.GET("", c.home)
	g.GET("/login", c.loginPage)
	g.POST("/login", c.anonCSRF, c.login)
	g.POST("/login/choose", c.anonCSRF, c.choose)
	g.GET("/sso/start", c.ssoStart)
	g.GET("/sso/callback", c.ssoCallback)
	g.GET("/invite/:mp/:id/:sig", c.invitePage)
	g.POST("/invite/:mp/:id/:sig", c.anonCSRF, c.acceptInvite)

	u := g.Group("", c.session, c.csrf)
	u.POST("/logout", c.logout)
	u.GET("/account", c.accountPage)
	u.POST("/account/password", c.changePassword)
	// Pages every user has; what they show depends on the role (vendor
	// users see their own vendor only).
	u.GET("/campaigns", c.campaignsPage)
	u.GET("/campaigns/:id", c.campaignPage)
	u.POST("/campaigns/:id/timetables", c.setTimetables)
	u.POST("/campaigns/:id/negative-keywords", c.setNegatives)
	u.POST("/campaigns/:id/restrictions", c.addCap)
	u.POST("/campaigns/:id/restrictions/:rid", c.updateCap)
	u.POST("/campaigns/:id/caps-without-shopper", c.setCapsWithoutShopper)
	u.POST("/campaigns/:id/budget", c.setBudget)
	u.GET("/performance", c.performancePage)
	u.GET("/performance.csv", c.performanceCSV)
	// Exports and files: an admin's are the marketplace's, a vendor user's
	// its vendor's own (exports.go).
	u.GET("/exports", c.exportsPage)
	u.POST("/exports", c.createExport)
	u.GET("/exports/:id/download", c.downloadExport)
	u.GET("/files", c.filesPage)
	u.GET("/files/:day/download", c.downloadFile)
	// A vendor user's balance and refused charges (an admin is sent to the
	// operators' pages).
	u.GET("/balance", c.balancePage)
	u.GET("/refused", c.refusedPage)

	a := u.Group("", c.adminOnly)
	for _, r := range c.adminRoutes() {
		a.Handle(r.method, r.path, r.h)
	}
}

type route struct {
	method, path string
	h            gin.HandlerFunc
}

// adminRoutes are the marketplace admin's pages (handler tests walk them to
// check that a vendor user reaches none).
func (c *Console) adminRoutes() []route {
	return []route{
		{"GET", "/overview", c.overviewPage},
		{"GET", "/keys", c.keysPage},
		{"POST", "/keys", c.createKey},
		{"POST", "/keys/:id/revoke", c.revokeKey},
		{"GET", "/settings", c.settingsPage},
		{"POST", "/settings/reserve", c.setReserve},
		{"GET", "/vendors", c.vendorsPage},
		{"GET", "/vendors/:vendor", c.vendorPage},
		{"GET", "/vendors/:vendor/performance", c.vendorPerformancePage},
		{"GET", "/vendors/:vendor/performance.csv", c.vendorPerformanceCSV},
		{"GET", "/vendors/:vendor/refused", c.vendorRefusedPage},
		{"GET", "/balances", c.balancesPage},
		{"GET", "/balances/:vendor", c.vendorBalancePage},
		{"POST", "/balances/:vendor/top-up", c.topUp},
		{"POST", "/balances/:vendor/credit-limit", c.setCreditLimit},
		{"GET", "/products", c.productsPage},
		{"GET", "/users", c.usersPage},
		{"POST", "/users/invite", c.invite},
		{"POST", "/users/:id/disable", c.setUserDisabled(true)},
		{"POST", "/users/:id/enable", c.setUserDisabled(false)},
		{"GET", "/webhooks", c.webhooksPage},
		{"GET", "/webhooks/:id", c.webhookPage},
		{"POST", "/webhooks/:id/test", c.testWebhook},
		{"POST", "/webhooks/:id/deliveries/:delivery/retry", c.retryDelivery},
		{"GET", "/health", c.healthPage},
		{"GET", "/audit", c.auditPage},
		{"GET", "/explain", c.explainPage},
		{"POST", "/explain", c.explain},
	}
}

// navItem is an entry of the menu.
type navItem struct {
	Path, Label string
}

// nav is the menu of a role. A new page is a handler, a template and an
// entry here.
func nav(r users.Role) []navItem {
	if r.IsVendor() {
		return []navItem{{"/console/performance", "Performance"}, {"/console/campaigns", "Campaigns"}, {"/console/balance", "Balance"},
			{"/console/refused", "Refused charges"}, {"/console/exports", "Exports"}, {"/console/files", "Files"}, {"/console/account", "Account"}}
	}
	return []navItem{
		{"/console/overview", "Overview"}, {"/console/keys", "API keys"}, {"/console/settings", "Settings"}, {"/console/vendors", "Vendors"},
		{"/console/balances", "Balances"},
		{"/console/products", "Products"}, {"/console/campaigns", "Campaigns"}, {"/console/explain", "Auction explain"}, {"/console/users", "Users"},
		{"/console/webhooks", "Webhooks"}, {"/console/exports", "Exports"}, {"/console/files", "Files"}, {"/console/health", "Health"},
		{"/console/audit", "Audit log"}, {"/console/account", "Account"},
	}
}

// headers sets the security headers of every console answer.
func (c *Console) headers(ctx *gin.Context) {
	c.setHeaders(ctx.Writer.Header())
	ctx.Next()
}

func (c *Console) setHeaders(h http.Header) {
	if c.o.SecureCookies {
		h.Set("Strict-Transport-Security", hsts)
	}
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// sameOrigin refuses a state-changing request sent from another site
// (the browser says so in Sec-Fetch-Site or Origin), before any CSRF token
// is looked at.
func (c *Console) sameOrigin(ctx *gin.Context) {
	if ctx.Request.Method == http.MethodGet || ctx.Request.Method == http.MethodHead {
		ctx.Next()
		return
	}
	if s := ctx.GetHeader("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		c.forbidden(ctx, "This form was sent from another site.")
		return
	}
	if o := ctx.GetHeader("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != ctx.Request.Host {
			c.forbidden(ctx, "This form was sent from another site.")
			return
		}
	}
	ctx.Next()
}

// anonCSRF checks the double-submit token of the forms shown before
// sign-in (login, invitation): the form's field equals the cookie.
func (c *Console) anonCSRF(ctx *gin.Context) {
	ck, err := c.cookie(ctx, csrfCookie)
	if err != nil || ck == "" || subtle.ConstantTimeCompare([]byte(ck), []byte(ctx.PostForm("csrf"))) != 1 {
		c.forbidden(ctx, "The form expired: reload the page and try again.")
		return
	}
	ctx.Next()
}

// anonToken returns the double-submit token, setting its cookie when new.
func (c *Console) anonToken(ctx *gin.Context) string {
	if ck, err := c.cookie(ctx, csrfCookie); err == nil && len(ck) >= 32 && len(ck) <= 64 {
		return ck
	}
	t := users.RandomToken()
	c.setCookie(ctx, csrfCookie, t, 0)
	return t
}

// cookieName is the name of a cookie: __Host-name when Secure (a browser
// keeps such a cookie only if it is Secure, of Path=/ and of no Domain).
func (c *Console) cookieName(name string) string {
	if c.o.SecureCookies {
		return "__Host-" + name
	}
	return name
}

func (c *Console) cookie(ctx *gin.Context, name string) (string, error) {
	return ctx.Cookie(c.cookieName(name))
}

func (c *Console) setCookie(ctx *gin.Context, name, value string, maxAge int) {
	path := "/console"
	if c.o.SecureCookies {
		path = "/"
	}
	http.SetCookie(ctx.Writer, &http.Cookie{Name: c.cookieName(name), Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: c.o.SecureCookies, SameSite: http.SameSiteLaxMode})
}

// viewer is the signed-in user of a request.
type viewer struct {
	User        users.User
	Session     users.Session
	token       string
	Marketplace accounts.Marketplace
}

const viewerKey = "console.viewer"

func viewerOf(ctx *gin.Context) *viewer {
	v, _ := ctx.Get(viewerKey)
	w, _ := v.(*viewer)
	return w
}

// session finds the request's live session, or sends the browser to the
// sign-in page. The user's changes of the request are audited as theirs.
// While the users are still being read, a request with a session waits
// (503, the session kept): it may well be valid.
func (c *Console) session(ctx *gin.Context) {
	token, _ := c.cookie(ctx, sessionCookie)
	if token != "" && !c.o.Users.Ready() {
		c.starting(ctx)
		return
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
	sess, ok, err := c.o.Sessions.Get(rctx, token)
	cancel()
	if err != nil {
		c.fail(ctx, err)
		return
	}
	var u users.User
	var m accounts.Marketplace
	if ok {
		u, ok = c.o.Users.Get(sess.UserID)
		ok = ok && u.Active() && u.Epoch == sess.Epoch
	}
	if ok {
		m, ok = c.o.Accounts.Marketplace(u.MarketplaceID)
	}
	if !ok {
		if token != "" {
			c.setCookie(ctx, sessionCookie, "", -1)
		}
		if ctx.Request.Method == http.MethodGet {
			ctx.Redirect(http.StatusSeeOther, "/console/login?next="+url.QueryEscape(ctx.Request.URL.RequestURI()))
		} else {
			ctx.Redirect(http.StatusSeeOther, "/console/login")
		}
		ctx.Abort()
		return
	}
	ctx.Set(viewerKey, &viewer{User: u, Session: sess, token: token, Marketplace: m})
	ctx.Request = ctx.Request.WithContext(audit.WithActor(ctx.Request.Context(), audit.Actor{Kind: "user", ID: u.ID, Name: u.Email}))
	ctx.Next()
}

// csrf checks the session's token on every form.
func (c *Console) csrf(ctx *gin.Context) {
	if ctx.Request.Method != http.MethodGet && ctx.Request.Method != http.MethodHead {
		v := viewerOf(ctx)
		if subtle.ConstantTimeCompare([]byte(v.Session.CSRF), []byte(ctx.PostForm("csrf"))) != 1 {
			c.forbidden(ctx, "The form expired: reload the page and try again.")
			return
		}
	}
	ctx.Next()
}

// adminOnly lets marketplace admins through; a vendor user gets 403.
func (c *Console) adminOnly(ctx *gin.Context) {
	if viewerOf(ctx).User.Role != users.RoleAdmin {
		c.forbidden(ctx, "This page is for the marketplace's administrators.")
		return
	}
	ctx.Next()
}

// page is what every template gets.
type page struct {
	Title  string
	V      *viewer
	Nav    []navItem
	Active string
	CSRF   string
	Notice string
	Error  string
	Assets map[string]string
	Data   any
}

// notices are the messages of ?done= after a form's redirect.
var notices = map[string]string{
	"password":      "Your password was changed.",
	"revoked":       "The key was revoked.",
	"reserve":       "The reserve prices were saved.",
	"invited":       "The invitation was created.",
	"disabled":      "The user was disabled: their sessions have ended.",
	"enabled":       "The user was enabled.",
	"webhook-test":  "A test event was sent: its delivery is listed below.",
	"webhook-retry": "The delivery is being sent again.",
	"export":        "The export was requested: it is listed below and can be downloaded once completed.",
	"caps":          "The frequency caps were saved.",
	"top-up":        "The amount was added to the vendor's balance.",
	"credit-limit":  "The credit limit was set.",
	"budget":        "The budget was saved.",
}

// render writes a page with status.
func (c *Console) render(ctx *gin.Context, status int, name, title string, data any) {
	t := c.pages[name]
	if t == nil {
		c.o.Log.ErrorContext(ctx, "console: no template", "name", name)
		ctx.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	p := page{Title: title, V: viewerOf(ctx), Assets: c.assets, Data: data, Active: ctx.FullPath()}
	if p.V != nil {
		p.Nav, p.CSRF = nav(p.V.User.Role), p.V.Session.CSRF
	} else {
		p.CSRF = c.anonToken(ctx)
	}
	if e, ok := ctx.Get("console.error"); ok {
		p.Error, _ = e.(string)
	}
	if n, ok := ctx.Get("console.notice"); ok {
		p.Notice, _ = n.(string)
	} else if n, ok := notices[ctx.Query("done")]; ok {
		p.Notice = n
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.o.Log.ErrorContext(ctx, "console: template", "name", name, "err", err)
		ctx.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	ctx.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// errorPage answers status with a message.
func (c *Console) errorPage(ctx *gin.Context, status int, msg string) {
	ctx.Set("console.error", msg)
	c.render(ctx, status, "error", http.StatusText(status), nil)
	ctx.Abort()
}

func (c *Console) forbidden(ctx *gin.Context, msg string) {
	c.errorPage(ctx, http.StatusForbidden, msg)
}

func (c *Console) notFound(ctx *gin.Context, what string) {
	c.errorPage(ctx, http.StatusNotFound, what+" was not found.")
}

// fail answers a domain error: the vocabulary's kinds as statuses, with
// the error's message; anything else is logged and answered 500.
func (c *Console) fail(ctx *gin.Context, err error) {
	status, msg := statusOf(err)
	if status == http.StatusInternalServerError {
		c.o.Log.ErrorContext(ctx, "console: request failed", "path", ctx.Request.URL.Path, "err", err)
	}
	if !setRetryAfter(ctx, err) && status == http.StatusServiceUnavailable {
		ctx.Header("Retry-After", "2")
	}
	c.errorPage(ctx, status, msg)
}

func statusOf(err error) (int, string) {
	var te *users.ThrottledError
	var be *users.BusyError
	if errors.As(err, &te) || errors.As(err, &be) {
		return http.StatusTooManyRequests, sentence(err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable, "The service did not answer in time; try again."
	}
	// A domain's own error (*errkind.Error) or a kind wrapped with a message
	// (fmt.Errorf("%w: ...", errkind.Invalid)). Of an error that wraps
	// several, the outermost *errkind.Error decides, as in the API
	// (an export not confirmed yet is unavailable, whatever it wraps).
	statuses := []struct {
		kind   errkind.Kind
		status int
	}{{errkind.Invalid, http.StatusUnprocessableEntity}, {errkind.NotFound, http.StatusNotFound}, {errkind.Conflict, http.StatusConflict},
		{errkind.Unavailable, http.StatusServiceUnavailable}, {errkind.Forbidden, http.StatusForbidden}, {errkind.TooMany, http.StatusTooManyRequests}}
	msg := err.Error()
	if e, ok := errkind.Of(err); ok {
		msg = e.Msg
		for _, k := range statuses {
			if e.Kind == k.kind {
				return k.status, cleanInvalid(msg)
			}
		}
	}
	for _, k := range statuses {
		if errors.Is(err, k.kind) {
			return k.status, cleanInvalid(msg)
		}
	}
	return http.StatusInternalServerError, "Something went wrong on our side; try again."
}

// formError re-renders a form page with a message: invalid input is the
// user's to fix, anything else is an error page.
func (c *Console) formError(ctx *gin.Context, err error, again func()) {
	status, msg := statusOf(err)
	if status != http.StatusUnprocessableEntity && status != http.StatusConflict && status != http.StatusTooManyRequests {
		c.fail(ctx, err)
		return
	}
	setRetryAfter(ctx, err)
	ctx.Set("console.error", msg)
	ctx.Status(status)
	again()
}

// cleanInvalid drops a kind's prefix ("invalid: ") from a message and
// makes it a sentence.
func cleanInvalid(msg string) string {
	for _, k := range []errkind.Kind{errkind.Invalid, errkind.NotFound, errkind.Conflict, errkind.Unavailable} {
		msg = strings.TrimPrefix(msg, k.String()+": ")
	}
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return msg
}

// NotFound answers a path under /console that no page has, as a page.
func (c *Console) NotFound(ctx *gin.Context) {
	c.setHeaders(ctx.Writer.Header())
	c.errorPage(ctx, http.StatusNotFound, "There is no such page.")
}

// home sends the browser to the user's first page.
func (c *Console) home(ctx *gin.Context) {
	token, _ := c.cookie(ctx, sessionCookie)
	if token == "" {
		ctx.Redirect(http.StatusSeeOther, "/console/login")
		return
	}
	c.session(ctx)
	if ctx.IsAborted() {
		return
	}
	if viewerOf(ctx).User.Role.IsVendor() {
		ctx.Redirect(http.StatusSeeOther, "/console/performance")
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/overview")
}

// --- templates and assets ---

func (c *Console) parse() error {
	funcs := template.FuncMap{
		"money":   formatMicros,
		"decimal": func(m int64) string { return money.Micros(m).String() }, // a number an attribute reads (<meter value>)
		"spend":   spendCell,
		"add":     func(a, b int) int { return a + b },
		"sub":     func(a, b int) int { return a - b },
		"quality": func(ppm int64) string { return money.Micros(ppm).String() }, // parts per million, as the API writes it
		"date":    func(t time.Time) string { return t.Format(time.DateOnly) },
		"roas":    func(t performance.Totals) string { return formatRatio(t.ROAS()) },
		"acos":    func(t performance.Totals) string { return formatPct(t.ACOS()) },
		"ctr":     func(t performance.Totals) string { return formatPct(t.CTR()) },
		"num":     formatInt,
		"deref":   func(b *bool) bool { return b != nil && *b },
		"deref64": func(n *int64) int64 { return *n },
		"join":    strings.Join,
		"active":  func(cur, path string) bool { return cur == path || strings.HasPrefix(cur, path+"/") },
		"words":   func(table, code string) string { return words(wordTables[table], code) },
	}
	layout, err := template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	c.pages = map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return fmt.Errorf("console template %s: %w", n, err)
		}
		c.pages[base] = t
	}
	return nil
}

// AdminRoutes lists the method and path (under /console) of every
// marketplace admin's page, for the tests that check a vendor user reaches
// none of them.
func AdminRoutes() [][2]string {
	var c *Console // only the routes' names are read
	var out [][2]string
	for _, r := range c.adminRoutes() {
		out = append(out, [2]string{r.method, r.path})
	}
	return out
}
