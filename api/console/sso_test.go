package console_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// ssoSys is a console with single sign-on through a real OpenID provider
// (zitadel's example provider, tools/oidcdev), the role claim its
// preferred_username, on two marketplaces made before the process starts
// (the role map names them).
type ssoSys struct {
	*sys
	idp          testenv.OIDCProvider
	north, south accounts.Marketplace
}

const ssoPassword = "the provider's password"

func startSSO(t *testing.T) *ssoSys {
	t.Helper()
	idp := testenv.OIDC(t, []testenv.OIDCUser{
		{ID: "u-admin", Username: "north-admin", Password: ssoPassword, Email: "Ada@sso.test", EmailVerified: true},
		{ID: "u-both", Username: "both", Password: ssoPassword, Email: "both@sso.test", EmailVerified: true},
		{ID: "u-unverified", Username: "unverified", Password: ssoPassword, Email: "unverified@sso.test", EmailVerified: false},
		{ID: "u-noemail", Username: "noemail", Password: ssoPassword, Email: "", EmailVerified: true},
		{ID: "u-nobody", Username: "nobody", Password: ssoPassword, Email: "nobody@sso.test", EmailVerified: true},
	})
	ss := &ssoSys{idp: idp}
	ss.sys = startWith(t, func(cfg *config.Config, brokers []string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var acc *accounts.Service
		testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: cfg.KafkaTopicPrefix, Accounts: true}, func(l *statelog.Log) { acc = accounts.New(l) })
		var err error
		if ss.north, err = acc.CreateMarketplace(ctx, "North", "EUR", "UTC"); err != nil {
			t.Fatal(err)
		}
		if ss.south, err = acc.CreateMarketplace(ctx, "South", "EUR", "UTC"); err != nil {
			t.Fatal(err)
		}
		cfg.OIDCIssuer, cfg.OIDCClientID, cfg.OIDCClientSecretFile = idp.Issuer, idp.ClientID, idp.SecretFile
		cfg.OIDCRoleClaim = "preferred_username"
		cfg.OIDCRoleMap = "north-admin=" + ss.north.ID + ":marketplace_admin," +
			"both=" + ss.north.ID + ":marketplace_admin,both=" + ss.south.ID + ":vendor_analyst:v-s," +
			"unverified=" + ss.north.ID + ":marketplace_admin,noemail=" + ss.north.ID + ":marketplace_admin"
	})
	return ss
}

// ssoFlow runs a sign-in at the provider: it starts it on the console
// (from path), signs in on the provider's form as username, and returns
// the console's callback path (with the code and state) without calling it.
func (c *client) ssoFlow(path, username string) string {
	c.t.Helper()
	r := c.do("GET", path, nil)
	if r.status != http.StatusSeeOther {
		c.t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	if _, ok := c.cookies["endcap_sso"]; !ok {
		c.t.Fatal("no state cookie")
	}
	// The provider: its own cookies, its redirects followed up to the console's callback.
	jar, _ := cookiejar.New(nil)
	var callback string
	idp := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), c.s.url+"/console/") {
			callback = req.URL.RequestURI()
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := idp.Get(r.header.Get("Location"))
	if err != nil {
		c.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="id" value="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		c.t.Fatalf("the provider's login page: %d %s", resp.StatusCode, body)
	}
	resp, err = idp.PostForm(resp.Request.URL.Scheme+"://"+resp.Request.URL.Host+"/login/username", url.Values{"id": {string(m[1])}, "username": {username}, "password": {ssoPassword}})
	if err != nil {
		c.t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if callback == "" {
		c.t.Fatalf("the provider did not send the browser back: %d %s", resp.StatusCode, body)
	}
	return callback
}

// TestSSOSignIn: single sign-on through a real OpenID provider: a first
// sign-in creates the user with the mapped role (no password), a later one
// updates a role the mapping changed; the callback refuses a wrong or
// missing state, a replayed callback, a code replayed with another state,
// an address missing or not verified, a user the map gives no role; an
// address mapped on two marketplaces chooses; a marketplace that signs in
// by single sign-on only refuses passwords (sign-in and change).
func TestSSOSignIn(t *testing.T) {
	s := startSSO(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The login page offers single sign-on.
	c := s.client(t)
	if r := c.do("GET", "/console/login", nil); !strings.Contains(r.body, `href="/console/sso/start`) {
		t.Fatal("no single sign-on on the login page")
	}
	cb := c.ssoFlow("/console/sso/start?next=%2Fconsole%2Fusers", "north-admin")
	saved := *c.cookies["endcap_sso"]
	r := c.do("GET", cb, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/users" {
		t.Fatalf("callback: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	u, ok := s.a.Users.Lookup(s.north.ID, "ada@sso.test")
	if !ok || u.Role != users.RoleAdmin || !u.SSO || u.PasswordHash != "" {
		t.Fatalf("the user made by the sign-in: %+v %v", u, ok)
	}
	if p := c.do("GET", "/console/users", nil); p.status != 200 || !strings.Contains(p.body, "North · Ada@sso.test") {
		t.Fatalf("the signed-in page: %d", p.status)
	}
	// The same callback again (its cookie put back): the state was used.
	c2 := s.client(t)
	c2.cookies["endcap_sso"] = &saved
	if r := c2.do("GET", cb, nil); r.status != http.StatusBadRequest || !strings.Contains(r.body, "expired or was completed already") {
		t.Fatalf("a replayed callback: %d", r.status)
	}
	// The code again, with a state of a new sign-in of this browser: the provider refuses it.
	code := mustQuery(t, cb, "code")
	cb2 := c2.ssoFlow("/console/sso/start", "north-admin")
	if r := c2.do("GET", "/console/sso/callback?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(mustQuery(t, cb2, "state")), nil); r.status != http.StatusBadRequest {
		t.Fatalf("a replayed code: %d %s", r.status, r.body)
	}
	// A state that is not the browser's (another browser's sign-in), and none.
	c3, c4 := s.client(t), s.client(t)
	cb3 := c3.ssoFlow("/console/sso/start", "north-admin")
	c4.ssoFlow("/console/sso/start", "north-admin")
	if r := c4.do("GET", cb3, nil); r.status != http.StatusBadRequest {
		t.Fatalf("another browser's callback: %d", r.status)
	}
	if r := c3.do("GET", "/console/sso/callback?code=x", nil); r.status != http.StatusBadRequest {
		t.Fatalf("a callback without state: %d", r.status)
	}
	if _, ok := c4.cookies["endcap_session"]; ok {
		t.Fatal("a refused callback opened a session")
	}
	// The provider's error.
	if r := c3.do("GET", "/console/sso/callback?error=access_denied&state=x", nil); r.status != http.StatusForbidden || !strings.Contains(r.body, "access_denied") {
		t.Fatalf("the provider's error: %d", r.status)
	}
	// Addresses missing or not verified, and a user with no role.
	for _, tc := range []struct {
		user, want string
	}{{"unverified", "verified address"}, {"noemail", "verified address"}, {"nobody", "no role in this console"}} {
		c := s.client(t)
		r := c.do("GET", c.ssoFlow("/console/sso/start", tc.user), nil)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d, want 403 %q", tc.user, r.status, tc.want)
		}
	}
	if _, ok := s.a.Users.Lookup(s.north.ID, "nobody@sso.test"); ok {
		t.Fatal("a user with no role was created")
	}

	// A role the mapping changed since: the user was a vendor analyst on North, the map says admin.
	if _, err := s.a.Users.ProvisionSSO(ctx, s.north.ID, "both@sso.test", users.RoleVendorAnalyst, "v-n"); err != nil {
		t.Fatal(err)
	}
	c = s.client(t)
	r = c.do("GET", c.ssoFlow("/console/sso/start", "both"), nil)
	ch := chooseField.FindStringSubmatch(r.body)
	if r.status != 200 || ch == nil || !strings.Contains(r.body, "North") || !strings.Contains(r.body, "South") {
		t.Fatalf("an address mapped on two marketplaces: %d %s", r.status, r.body)
	}
	if u, _ := s.a.Users.Lookup(s.north.ID, "both@sso.test"); u.Role != users.RoleAdmin || u.VendorID != "" || u.Epoch != 2 {
		t.Fatalf("the role was not updated: %+v", u)
	}
	if u, ok := s.a.Users.Lookup(s.south.ID, "both@sso.test"); !ok || u.Role != users.RoleVendorAnalyst || u.VendorID != "v-s" {
		t.Fatalf("the South account: %+v %v", u, ok)
	}
	if r := c.do("POST", "/console/login/choose", url.Values{"csrf": {csrfField.FindStringSubmatch(r.body)[1]}, "choice": {ch[1]}, "marketplace": {s.south.ID}}); r.status != http.StatusSeeOther {
		t.Fatalf("choose South: %d", r.status)
	}
	if p := c.do("GET", "/console/account", nil); !strings.Contains(p.body, "South · both@sso.test · vendor v-s") {
		t.Fatal("not signed in to South")
	}
	// A marketplace's link restricts the sign-in to it.
	c = s.client(t)
	if r := c.do("GET", c.ssoFlow("/console/sso/start?marketplace="+s.north.ID, "both"), nil); r.status != http.StatusSeeOther {
		t.Fatalf("North's link: %d %s", r.status, r.body)
	}

	// Single sign-on only: North's password user cannot use the password any more (sign-in nor change).
	const pw = "north's password user's password"
	if _, err := s.a.Users.CreateAdmin(ctx, s.north.ID, "pat@north.test", pw); err != nil {
		t.Fatal(err)
	}
	pc := s.client(t)
	if r := pc.login("pat@north.test", pw); r.status != http.StatusSeeOther {
		t.Fatalf("a password before single sign-on only: %d", r.status)
	}
	if _, err := s.a.Accounts.SetSSOOnly(ctx, s.north.ID, true); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if m, _ := s.a.Accounts.Marketplace(s.north.ID); !m.SSOOnly {
			return errors.New("not applied yet")
		}
		return nil
	})
	if r := pc.do("POST", "/console/account/password", url.Values{"csrf": {pc.csrf("/console/account")}, "current": {pw}, "password": {"a brand new password"}, "password2": {"a brand new password"}}); r.status != http.StatusConflict || !strings.Contains(r.body, "single sign-on only") {
		t.Fatalf("a password change on a single-sign-on-only marketplace: %d", r.status)
	}
	if r := s.client(t).login("pat@north.test", pw); r.status != http.StatusConflict || !strings.Contains(r.body, "single sign-on only") {
		t.Fatalf("a password on a single-sign-on-only marketplace: %d", r.status)
	}
	// A wrong password there says only that it is wrong.
	if r := s.client(t).login("pat@north.test", "not pat's password at all"); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a wrong password on a single-sign-on-only marketplace: %d", r.status)
	}
}

func mustQuery(t *testing.T, uri, key string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil || u.Query().Get(key) == "" {
		t.Fatalf("%s has no %s", uri, key)
	}
	return u.Query().Get(key)
}
