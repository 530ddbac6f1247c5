package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/api/console"
	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/statelog"
)

// sys is an api process with a marketplace, an admin and two vendors.
type sys struct {
	a       *app.App
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
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.ConsoleSecureCookies = true
	if change != nil {
		change(&cfg, brokers)
	}
	a, err := app.New(cfg, app.TargetAPI, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Error("the process did not stop")
			}
		})
	})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := a.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	s := &sys{a: a, url: "http://" + addr.String(), brokers: brokers}
	if s.mp, err = a.Accounts.CreateMarketplace(wctx, "Handlers", "EUR", "Europe/Paris"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Users.CreateAdmin(wctx, s.mp.ID, adminEmail, adminPassword); err != nil {
		t.Fatal(err)
	}
	name := func(s string) *string { return &s }
	if _, err := a.Catalog.UpsertVendors(wctx, s.mp.ID, []catalog.VendorInput{{ID: name("v-1"), Name: name("One")}, {ID: name("v-2"), Name: name("Two")}}, true, statelog.AnyVersion); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		r, err := http.Get(s.url + "/readyz")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return testenv.Errorf("readyz %d", r.StatusCode)
		}
		return nil
	})
	return s
}

// client is a browser: its cookies, whatever their Secure flag (the test
// server is plain http).
type client struct {
	t       *testing.T
	s       *sys
	cookies map[string]*http.Cookie
	origin  string
}

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
	req, err := http.NewRequest(method, c.s.url+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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
	if _, ok := c.cookies["endcap_session"]; ok {
		t.Fatal("a refused sign-in set a session")
	}
	r = c.login(adminEmail, adminPassword)
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
	ck := c.cookies["endcap_session"]
	if ck == nil || !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/console" {
		t.Fatalf("session cookie %+v", ck)
	}
	if r := c.do("GET", "/console/no-such-page", nil); r.status != http.StatusNotFound || !strings.Contains(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("an unknown console page: %d %s", r.status, r.header.Get("Content-Type"))
	}
	r = c.do("GET", "/console/keys", nil)
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'self'") || r.header.Get("X-Frame-Options") != "DENY" {
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
	c.cookies["endcap_session"] = &old
	if r := c.do("GET", "/console/keys", nil); r.status != http.StatusSeeOther {
		t.Fatalf("the old session after logout: %d", r.status)
	}
}

func TestSignInThrottled(t *testing.T) {
	s := start(t)
	c := s.client(t)
	for i := 0; i < users.DefaultPerEmail.Burst; i++ {
		if r := c.login(adminEmail, "not the password"); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("attempt %d: %d", i, r.status)
		}
	}
	// Over the limit, even the right password waits.
	if r := c.login(adminEmail, adminPassword); r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "too many sign-in attempts") {
		t.Fatalf("attempt over the limit: %d", r.status)
	}
	// Another address is not held back by this one's attempts.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.a.Users.CreateAdmin(ctx, s.mp.ID, "second@handlers.test", adminPassword); err != nil {
		t.Fatal(err)
	}
	if r := c.login("second@handlers.test", adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("another address: %d", r.status)
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
	c := s.client(t)
	if r := c.login(adminEmail, adminPassword); r.status != http.StatusSeeOther {
		t.Fatal(r.status)
	}
	page := c.do("GET", "/console/users", nil)
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
	var mine, theirs string
	for _, v := range []string{"v-1", "v-2"} {
		c, _, err := s.a.Campaigns.CreateCampaign(ctx, s.mp.ID, v, campaignInput("Campaign of "+v))
		if err != nil {
			t.Fatal(err)
		}
		if v == "v-1" {
			mine = c.ID
		} else {
			theirs = c.ID
		}
	}
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
	c := s.client(t)
	c.login(adminEmail, adminPassword)
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
