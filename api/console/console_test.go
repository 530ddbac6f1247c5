package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/api/console"
	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

// sys is an api process with a marketplace, an admin and two vendors.
type sys struct {
	a       *app.App
	cfg     config.Config
	url     string
	mp      accounts.Marketplace
	brokers []string
}

const adminEmail, adminPassword = "admin@handlers.test", "the admin's long password"

func start(t *testing.T) *sys { t.Helper(); return startWith(t, nil) }

// startWith is start with changes to the configuration, made before the
// process starts (with the brokers of its logs).
func startWith(t *testing.T, change func(*config.Config, []string)) *sys {
	t.Helper()
	return startIn(t, "Europe/Paris", change)
}

// startAtNoon is start with the marketplace in a zone where it is noon
// (testenv.NoonZone): a test of today's (or this week's) spend or rows
// stays inside that local day while it runs, at whatever hour.
func startAtNoon(t *testing.T) *sys { t.Helper(); return startIn(t, testenv.NoonZone(time.Now()), nil) }

// startIn is startWith with the marketplace in time zone tz.
func startIn(t *testing.T, tz string, change func(*config.Config, []string)) *sys {
	t.Helper()
	ta := testapp.Start(t, testapp.Target(app.TargetAPI), testapp.Configure(func(c *config.Config, brokers []string) {
		c.ConsoleSecureCookies = true
		if change != nil {
			change(c, brokers)
		}
	}))
	a := ta.App
	wctx, wcancel := context.WithTimeout(t.Context(), time.Minute)
	defer wcancel()
	s := &sys{a: a, cfg: ta.Cfg, url: ta.URL, brokers: ta.Brokers}
	var err error
	if s.mp, err = a.Accounts.CreateMarketplace(wctx, "Handlers", "EUR", tz); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Users.CreateAdmin(wctx, s.mp.ID, adminEmail, adminPassword); err != nil {
		t.Fatal(err)
	}
	name := func(s string) *string { return &s }
	if _, err := a.Catalog.UpsertVendors(wctx, s.mp.ID, []catalog.VendorInput{{ID: name("v-1"), Name: name("One")}, {ID: name("v-2"), Name: name("Two")}}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	return s
}

// client is a browser: its cookies, whatever their Secure flag (the test
// server is plain http).
type client struct {
	t       *testing.T
	s       *sys
	cookies map[string]*http.Cookie
	origin  string
	// from, when set, is the client's address a trusted proxy forwards
	// (X-Forwarded-For).
	from string
	// contentType and body, when set, replace the form's.
	contentType string
	body        []byte
}

// sessionCookie is the session's cookie name (the cookies are Secure).
const sessionCookie = "__Host-endcap_session"

func (s *sys) client(t *testing.T) *client {
	return &client{t: t, s: s, cookies: map[string]*http.Cookie{}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(method, path string, form url.Values) answer {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(method, c.s.url+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	if c.from != "" {
		req.Header.Set("X-Forwarded-For", c.from)
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	for _, ck := range c.cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	cl := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the form token of a page.
func (c *client) csrf(path string) string {
	c.t.Helper()
	r := c.do("GET", path, nil)
	m := csrfField.FindStringSubmatch(r.body)
	if m == nil {
		c.t.Fatalf("GET %s: %d, no csrf field", path, r.status)
	}
	return m[1]
}

func (c *client) login(email, password string) answer {
	c.t.Helper()
	return c.do("POST", "/console/login", url.Values{"csrf": {c.csrf("/console/login")}, "email": {email}, "password": {password}})
}

// admin is a client signed in as the marketplace's admin.
func (s *sys) admin(t *testing.T) *client {
	t.Helper()
	c := s.client(t)
	if r := c.login(adminEmail, adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("the admin's sign-in: %d %s", r.status, errorOf(r.body))
	}
	return c
}

// campaign creates a campaign of vendor named name (campaignInput's).
func (s *sys) campaign(t *testing.T, vendor, name string) campaigns.Campaign {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cp, _, err := s.a.Campaigns.CreateCampaign(ctx, s.mp.ID, vendor, campaignInput(name))
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// campaignPage is the setup of the campaign page's forms: a campaign of v-1
// named name, and the admin signed in; it returns the campaign, the admin's
// client, the campaign's page and its forms' token.
func (s *sys) campaignPage(t *testing.T, name string) (cp campaigns.Campaign, c *client, page, tok string) {
	t.Helper()
	cp = s.campaign(t, "v-1", name)
	c = s.admin(t)
	page = "/console/campaigns/" + cp.ID
	return cp, c, page, c.csrf(page)
}

// lacks reports, as errors of t, each of want that the page's text lacks.
func lacks(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
}

func TestSignIn(t *testing.T) {
	s := start(t)
	c := s.client(t)
	r := c.do("GET", "/console/keys", nil)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/console/login") {
		t.Fatalf("a page without a session: %d %s", r.status, r.header.Get("Location"))
	}
	// The sign-in form without its token, or sent from another site.
	if r := c.do("POST", "/console/login", url.Values{"email": {adminEmail}, "password": {adminPassword}}); r.status != http.StatusForbidden {
		t.Fatalf("sign-in without a token: %d", r.status)
	}
	tok := c.csrf("/console/login")
	c.origin = "https://evil.example"
	if r := c.do("POST", "/console/login", url.Values{"csrf": {tok}, "email": {adminEmail}, "password": {adminPassword}}); r.status != http.StatusForbidden {
		t.Fatalf("sign-in from another origin: %d", r.status)
	}
	c.origin = ""
	for _, tc := range []struct{ email, password string }{{adminEmail, "wrong password!"}, {"nobody@handlers.test", adminPassword}, {"", ""}, {adminEmail, strings.Repeat("x", 5000)}} {
		if r := c.login(tc.email, tc.password); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "Wrong e-mail address or password") {
			t.Fatalf("sign-in %q: %d", tc.email, r.status)
		}
	}
	if _, ok := c.cookies[sessionCookie]; ok {
		t.Fatal("a refused sign-in set a session")
	}
	r = c.login(adminEmail, adminPassword)
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
	ck := c.cookies[sessionCookie]
	if ck == nil || !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
		t.Fatalf("session cookie %+v", ck)
	}
	if ck := c.cookies["__Host-endcap_csrf"]; ck == nil || !ck.Secure || ck.Path != "/" {
		t.Fatalf("the sign-in form's cookie %+v", ck)
	}
	if r := c.do("GET", "/console/no-such-page", nil); r.status != http.StatusNotFound || !strings.Contains(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("an unknown console page: %d %s", r.status, r.header.Get("Content-Type"))
	}
	r = c.do("GET", "/console/keys", nil)
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'self'") || r.header.Get("X-Frame-Options") != "DENY" ||
		r.header.Get("Strict-Transport-Security") != "max-age=31536000" {
		t.Fatalf("keys: %d %v", r.status, r.header)
	}
	// A form of the session without the session's token.
	if r := c.do("POST", "/console/keys", url.Values{"type": {"marketplace"}}); r.status != http.StatusForbidden {
		t.Fatalf("a form without its token: %d", r.status)
	}
	if r := c.do("POST", "/console/keys", url.Values{"type": {"marketplace"}, "csrf": {c.csrf("/console/login")}}); r.status != http.StatusForbidden {
		t.Fatalf("a form with the anonymous token: %d", r.status)
	}
	// Sign-out ends the session in Redis, not only in the browser.
	old := *ck
	if r := c.do("POST", "/console/logout", url.Values{"csrf": {c.csrf("/console/keys")}}); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.status)
	}
	c.cookies[sessionCookie] = &old
	if r := c.do("GET", "/console/keys", nil); r.status != http.StatusSeeOther {
		t.Fatalf("the old session after logout: %d", r.status)
	}
}

// TestSignInThrottled: failures slow the client that makes them, for the
// account they try, with delays; the account's owner, from another
// address, signs in all the same; an IPv6 client is its /64; the current
// password of a password change is throttled alike.
func TestSignInThrottled(t *testing.T) {
	s := startWith(t, func(c *config.Config, _ []string) { c.TrustedProxies = []string{"127.0.0.1", "::1"} })
	from := func(addr string) *client { c := s.client(t); c.from = addr; return c }
	// Twelve failures from three addresses: none is slowed (five each
	// are free).
	for _, addr := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		c := from(addr)
		for i := 0; i < 4; i++ {
			if r := c.login(adminEmail, "not the password"); r.status != http.StatusUnprocessableEntity {
				t.Fatalf("%s, failure %d: %d", addr, i+1, r.status)
			}
		}
	}
	// The owner, from their own address, is not locked out.
	owner := from("198.51.100.7")
	if r := owner.login(adminEmail, adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("the owner after the others' failures: %d", r.status)
	}
	// The fifth failure of one address makes it wait, even with the right
	// password.
	c := from("192.0.2.1")
	if r := c.login(adminEmail, "not the password"); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("fifth failure: %d", r.status)
	}
	for _, p := range []string{"not the password", adminPassword} {
		r := c.login(adminEmail, p)
		if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many sign-in attempts") || r.header.Get("Retry-After") != "1" {
			t.Fatalf("past the free failures: %d %q", r.status, r.header.Get("Retry-After"))
		}
	}
	// Another address of the same IPv6 /64 is the same client.
	for i := 0; i < 5; i++ {
		if r := from(fmt.Sprintf("2001:db8:5:5::%x", i+1)).login(adminEmail, "not the password"); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("IPv6 failure %d: %d", i+1, r.status)
		}
	}
	if r := from("2001:db8:5:5::ffff").login(adminEmail, adminPassword); r.status != http.StatusTooManyRequests {
		t.Fatalf("another address of the /64: %d", r.status)
	}
	if r := from("2001:db8:5:6::1").login(adminEmail, adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("an address of another /64: %d", r.status)
	}
	// The current password of a password change.
	tok := owner.csrf("/console/account")
	for i := 0; i < 5; i++ {
		r := owner.do("POST", "/console/account/password", url.Values{"csrf": {tok}, "current": {"not the password"}, "password": {"a new long password"}, "password2": {"a new long password"}})
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "current password is wrong") {
			t.Fatalf("password change %d with a wrong current password: %d", i+1, r.status)
		}
	}
	r := owner.do("POST", "/console/account/password", url.Values{"csrf": {tok}, "current": {adminPassword}, "password": {"a new long password"}, "password2": {"a new long password"}})
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("password change past the free failures: %d", r.status)
	}
}

// TestFormLimits: a form's body is capped (413, a page), a larger one is
// accepted where the form needs it, and only URL-encoded forms are read
// (a multipart body is 415).
func TestFormLimits(t *testing.T) {
	s := start(t)
	c := s.client(t)
	tok := c.csrf("/console/login")
	big := url.Values{"csrf": {tok}, "email": {adminEmail}, "password": {"x"}, "pad": {strings.Repeat("p", 64<<10)}}
	if r := c.do("POST", "/console/login", big); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("a sign-in form of 64 KB: %d", r.status)
	}
	var mp bytes.Buffer
	w := multipart.NewWriter(&mp)
	for k, v := range map[string]string{"csrf": tok, "email": adminEmail, "password": adminPassword} {
		_ = w.WriteField(k, v)
	}
	_ = w.Close()
	c.contentType, c.body = w.FormDataContentType(), mp.Bytes()
	if r := c.do("POST", "/console/login", nil); r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("a multipart sign-in: %d", r.status)
	}
	c.contentType, c.body = "", nil
	if r := c.login(adminEmail, adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", r.status)
	}
	// The explain form takes an auction's JSON, up to 256 KB.
	tok = c.csrf("/console/explain")
	json := `{"auctions":[{"products":[` + strings.Repeat(`{"id":"p"},`, 20000) + `{"id":"p"}]}]}`
	r := c.do("POST", "/console/explain", url.Values{"csrf": {tok}, "mode": {"json"}, "json": {json}})
	if r.status == http.StatusRequestEntityTooLarge || r.status == http.StatusForbidden {
		t.Fatalf("an explain form of %d KB: %d", len(json)>>10, r.status)
	}
	if r := c.do("POST", "/console/keys", url.Values{"csrf": {tok}, "name": {strings.Repeat("n", 70<<10)}}); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a key form of 70 KB: %d", r.status)
	}
}

// TestDownloadsPerUser: a user runs ENDCAP_CONSOLE_DOWNLOADS_PER_USER
// downloads at once; one more is 429 with Retry-After.
func TestDownloadsPerUser(t *testing.T) {
	s := start(t)
	c := s.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, _ := s.a.Users.Lookup(s.mp.ID, adminEmail)
	slots := users.NewSlots(s.a.Redis, s.cfg.KafkaTopicPrefix, s.cfg.ConsoleDownloads, console.DownloadHold)
	var releases []func()
	for i := 0; i < s.cfg.ConsoleDownloads; i++ {
		release, err := slots.Take(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	path := "/console/exports/01a00000-0000-7000-8000-000000000000/download"
	for _, p := range []string{path, "/console/files/2026-01-01/download"} {
		if r := c.do("GET", p, nil); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "downloads running") {
			t.Fatalf("%s with every slot taken: %d %q", p, r.status, r.header.Get("Retry-After"))
		}
	}
	releases[0]()
	if r := c.do("GET", path, nil); r.status != http.StatusNotFound {
		t.Fatalf("with a slot free: %d", r.status)
	}
}

// invite creates an invitation of vendor and returns its link's path.
func (s *sys) invite(t *testing.T, vendor, email string) (string, invitations.Invitation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	role := invitations.RoleVendorAnalyst
	invs, err := s.a.Invitations.Create(ctx, s.mp.ID, &[]invitations.Invite{{VendorID: &vendor, VendorEmail: &email, TargetUserRole: &role}})
	if err != nil {
		t.Fatal(err)
	}
	// The console shows the link when no SMTP server is configured.
	page := s.admin(t).do("GET", "/console/users", nil)
	m := regexp.MustCompile(`value="http://[^/]+(/console/invite/` + regexp.QuoteMeta(s.mp.ID+"/"+invs[0].ID) + `/[^"]+)"`).FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no link of invitation %s on the users page", invs[0].ID)
	}
	return m[1], invs[0]
}

// vendorUser accepts an invitation of vendor and returns the signed-in client.
func (s *sys) vendorUser(t *testing.T, vendor, email string) *client {
	t.Helper()
	link, _ := s.invite(t, vendor, email)
	c := s.client(t)
	tok := c.csrf(link)
	r := c.do("POST", link, url.Values{"csrf": {tok}, "password": {"vendor's own password"}, "password2": {"vendor's own password"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	return c
}

func TestInvitationLink(t *testing.T) {
	s := start(t)
	link, inv := s.invite(t, "v-1", "one@vendor.test")
	c := s.client(t)
	// A link whose signature is not the invitation's.
	bad := link[:len(link)-4] + "AAAA"
	if r := c.do("GET", bad, nil); r.status != http.StatusNotFound {
		t.Fatalf("tampered link: %d", r.status)
	}
	other := strings.Replace(link, inv.ID, "01a00000-0000-7000-8000-000000000000", 1)
	if r := c.do("GET", other, nil); r.status != http.StatusNotFound {
		t.Fatalf("another invitation's id: %d", r.status)
	}
	tok := c.csrf(link)
	for _, tc := range []struct{ p1, p2, want string }{{"short", "short", "at least 12"}, {"long enough one", "long enough two", "differ"}, {"one@vendor.test", "one@vendor.test", "cannot be the e-mail"}} {
		r := c.do("POST", link, url.Values{"csrf": {tok}, "password": {tc.p1}, "password2": {tc.p2}})
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, tc.want) {
			t.Fatalf("password %q: %d, want 422 %q", tc.p1, r.status, tc.want)
		}
	}
	r := c.do("POST", link, url.Values{"csrf": {tok}, "password": {"a good password"}, "password2": {"a good password"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	if r := c.do("GET", "/console", nil); r.header.Get("Location") != "/console/performance" {
		t.Fatalf("a vendor user's home: %d %s", r.status, r.header.Get("Location"))
	}
	// Once.
	c2 := s.client(t)
	if r := c2.do("GET", link, nil); r.status != http.StatusGone {
		t.Fatalf("the link again: %d", r.status)
	}
	got, _, _ := s.a.Invitations.Get(s.mp.ID, inv.ID)
	if got.Status != invitations.StatusAccepted {
		t.Fatalf("invitation %+v", got)
	}
	// A second invitation of the same address cannot make a second account.
	link2, _ := s.invite(t, "v-2", "one@vendor.test")
	tok = c2.csrf(link2)
	if r := c2.do("POST", link2, url.Values{"csrf": {tok}, "password": {"another password"}, "password2": {"another password"}}); r.status != http.StatusConflict {
		t.Fatalf("a second account for the address: %d", r.status)
	}
	if u, _ := s.a.Users.Lookup(s.mp.ID, "one@vendor.test"); u.VendorID != "v-1" {
		t.Fatalf("user %+v", u)
	}
}

// TestVendorScope: a vendor user reaches no admin page (every route, GET
// and POST, with its own session and token), only its own vendor's
// campaigns, and the operator pages it reaches are scoped on the server.
func TestVendorScope(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mine, theirs := s.campaign(t, "v-1", "Campaign of v-1").ID, s.campaign(t, "v-2", "Campaign of v-2").ID
	c := s.vendorUser(t, "v-1", "analyst@one.test")
	tok := c.csrf("/console/account")
	for _, r := range console.AdminRoutes() {
		path := "/console" + strings.NewReplacer(":vendor", "v-2", ":id", theirs).Replace(r[1])
		var form url.Values
		if r[0] == "POST" {
			form = url.Values{"csrf": {tok}, "type": {"marketplace"}, "email": {"x@y.test"}, "vendor": {"v-2"}, "role": {"vendor_analyst"}, "cpc": {"9"}, "cpm": {"9"}}
		}
		if got := c.do(r[0], path, form); got.status != http.StatusForbidden {
			t.Errorf("vendor user: %s %s answered %d, want 403", r[0], path, got.status)
		}
	}
	// Nothing those forms would have changed did change.
	if len(s.a.Accounts.Keys(s.mp.ID)) != 0 {
		t.Fatal("a vendor user created a key")
	}
	if m, _ := s.a.Accounts.Marketplace(s.mp.ID); m.ReserveCPCMicros != 0 {
		t.Fatal("a vendor user set the reserve")
	}
	if r := c.do("GET", "/console/campaigns/"+theirs, nil); r.status != http.StatusNotFound {
		t.Fatalf("another vendor's campaign: %d", r.status)
	}
	if r := c.do("GET", "/console/campaigns/"+mine, nil); r.status != 200 {
		t.Fatalf("its own campaign: %d", r.status)
	}
	r := c.do("GET", "/console/campaigns", nil)
	if r.status != 200 || !strings.Contains(r.body, "Campaign of v-1") || strings.Contains(r.body, "Campaign of v-2") {
		t.Fatalf("campaigns page: %d", r.status)
	}
	// The vendor's id comes from the session, never from the request.
	r = c.do("GET", "/console/performance?vendor=v-2&vendor_id=v-2", nil)
	if r.status != 200 || !strings.Contains(r.body, "(v-1)") || strings.Contains(r.body, "(v-2)") {
		t.Fatalf("performance page: %d", r.status)
	}
	// Disabling the user ends its session at once.
	u, _ := s.a.Users.Lookup(s.mp.ID, "analyst@one.test")
	if _, err := s.a.Users.SetDisabled(ctx, s.mp.ID, u.ID, true); err != nil {
		t.Fatal(err)
	}
	if r := c.do("GET", "/console/performance", nil); r.status != http.StatusSeeOther {
		t.Fatalf("a disabled user's session: %d", r.status)
	}
	if r := c.login("analyst@one.test", "vendor's own password"); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a disabled user's sign-in: %d", r.status)
	}
}

// TestKeys: a key is shown in the answer that creates it only; a key with
// an expiry stops working then; revoking one is audited.
func TestKeys(t *testing.T) {
	s := start(t)
	c := s.admin(t)
	tok := c.csrf("/console/keys")
	r := c.do("POST", "/console/keys", url.Values{"csrf": {tok}, "type": {"advanced"}, "name": {"ci"}})
	m := regexp.MustCompile(`value="(eca_[A-Za-z0-9]{40})"`).FindStringSubmatch(r.body)
	if r.status != http.StatusCreated || m == nil || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %q", r.status, r.header.Get("Cache-Control"))
	}
	if p, ok := s.a.Accounts.Authenticate(m[1]); !ok || p.Key.Type != accounts.KeyAdvanced || p.Key.Name != "ci" {
		t.Fatalf("the shown key does not authenticate: %+v", p.Key)
	}
	if page := c.do("GET", "/console/keys", nil); strings.Contains(page.body, m[1]) || !strings.Contains(page.body, m[1][:10]+"…") {
		t.Fatal("the key is shown again, or its prefix is not")
	}
	for _, bad := range []url.Values{{"type": {"root"}}, {"type": {"advanced"}, "expires": {"yesterday"}}, {"type": {"advanced"}, "expires": {"2001-01-01"}},
		{"type": {"advanced"}, "name": {strings.Repeat("n", 101)}}} {
		bad.Set("csrf", tok)
		if r := c.do("POST", "/console/keys", bad); r.status != http.StatusUnprocessableEntity {
			t.Errorf("create %v: %d, want 422", bad, r.status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp := time.Now().Add(1500 * time.Millisecond)
	secret, k, err := s.a.Accounts.CreateKeyWith(ctx, s.mp.ID, accounts.KeyMarketplace, accounts.KeyOptions{ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.a.Accounts.Authenticate(secret); !ok {
		t.Fatal("a key before its expiry")
	}
	time.Sleep(time.Until(k.ExpiresAt.Add(100 * time.Millisecond)))
	if _, ok := s.a.Accounts.Authenticate(secret); ok {
		t.Fatal("a key after its expiry")
	}
	p, _ := s.a.Accounts.Authenticate(m[1])
	if r := c.do("POST", "/console/keys/"+p.Key.ID+"/revoke", url.Values{"csrf": {tok}}); r.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", r.status)
	}
	if _, ok := s.a.Accounts.Authenticate(m[1]); ok {
		t.Fatal("a revoked key")
	}
	if r := c.do("POST", "/console/users/invite", url.Values{"csrf": {tok}, "email": {"new@vendor.test"}, "vendor": {"v-1"}, "role": {"vendor_analyst"}}); r.status != http.StatusSeeOther {
		t.Fatalf("invite: %d", r.status)
	}
	for _, bad := range []url.Values{{"email": {"not an address"}, "vendor": {"v-1"}, "role": {"vendor_analyst"}}, {"email": {"x@vendor.test"}, "vendor": {"v-404"}, "role": {"vendor_analyst"}},
		{"email": {"x@vendor.test"}, "vendor": {"v-1"}, "role": {"marketplace_admin"}}, {"email": {adminEmail}, "vendor": {"v-1"}, "role": {"vendor_analyst"}}} {
		bad.Set("csrf", tok)
		if r := c.do("POST", "/console/users/invite", bad); r.status != http.StatusUnprocessableEntity && r.status != http.StatusConflict {
			t.Errorf("invite %v: %d, want 422 or 409", bad, r.status)
		}
	}
	a := c.do("GET", "/console/audit", nil)
	for _, want := range []string{"key.create", "key.revoke", "invitation.create", adminEmail} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the audit log lacks %q", want)
		}
	}
}

func campaignInput(name string) campaigns.CampaignInput {
	var in campaigns.CampaignInput
	body := `{"name":` + strconv.Quote(name) + `,"type":"listings","chargeType":"CPC","dailyBudget":10,"startDate":"2024-01-01T00:00:00Z"}`
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		panic(err)
	}
	return in
}
