package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/statelog"
)

var chooseField = regexp.MustCompile(`name="choice" value="([^"]+)"`)

// TestSameAddressTwoMarketplaces: one e-mail address is the admin of
// marketplace A and, by an invitation of marketplace B, a vendor user of B.
// A's invite form says nothing of B's users; each account signs in with
// its own password and sees its own marketplace only; with one password
// for both, the sign-in asks which marketplace, listing those two only,
// and the choice is used once; a per-marketplace link signs in to its own;
// a user recorded under the legacy id (the address alone) still signs in.
func TestSameAddressTwoMarketplaces(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := s.a.Accounts.CreateMarketplace(ctx, "Bazaar", "EUR", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.a.Accounts.CreateMarketplace(ctx, "Carts", "EUR", "UTC"); err != nil { // a marketplace the address has no account on
		t.Fatal(err)
	}
	name := func(s string) *string { return &s }
	if _, err := s.a.Catalog.UpsertVendors(ctx, b.ID, []catalog.VendorInput{{ID: name("v-b"), Name: name("Bee")}}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	const bossEmail, bossPassword = "boss@bazaar.test", "the boss of bazaar's password"
	if _, err := s.a.Users.CreateAdmin(ctx, b.ID, bossEmail, bossPassword); err != nil {
		t.Fatal(err)
	}

	// A's admin invites B's admin's address: A learns nothing (the same answer as for an unknown address).
	a := s.client(t)
	if r := a.login(adminEmail, adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("A's admin: %d", r.status)
	}
	tok := a.csrf("/console/users")
	for _, email := range []string{bossEmail, "nobody@bazaar.test"} {
		r := a.do("POST", "/console/users/invite", url.Values{"csrf": {tok}, "email": {email}, "vendor": {"v-1"}, "role": {"vendor_analyst"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/users?done=invited" {
			t.Fatalf("A invites %s: %d %s", email, r.status, r.body)
		}
	}

	// B's admin invites A's admin's address as a vendor user of B.
	boss := s.client(t)
	if r := boss.login(bossEmail, bossPassword); r.status != http.StatusSeeOther {
		t.Fatalf("B's admin: %d %s", r.status, r.body)
	}
	r := boss.do("POST", "/console/users/invite", url.Values{"csrf": {boss.csrf("/console/users")}, "email": {adminEmail}, "vendor": {"v-b"}, "role": {"vendor_analyst"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("B invites A's admin's address: %d %s", r.status, r.body)
	}
	m := regexp.MustCompile(`value="http://[^/]+(/console/invite/` + regexp.QuoteMeta(b.ID) + `/[^"]+)"`).FindStringSubmatch(boss.do("GET", "/console/users", nil).body)
	if m == nil {
		t.Fatal("no invitation link on B's users page")
	}
	const vendorPassword = "the vendor user's password"
	v := s.client(t)
	// The invitation's page links to the sign-in of its marketplace, the address prefilled.
	if p := v.do("GET", m[1], nil); !strings.Contains(p.body, `href="/console/login?marketplace=`+b.ID+`&amp;email=`+url.QueryEscape(adminEmail)+`"`) {
		t.Fatalf("the invitation page has no sign-in link of its marketplace:\n%s", p.body)
	}
	if r := v.do("POST", m[1], url.Values{"csrf": {v.csrf(m[1])}, "password": {vendorPassword}, "password2": {vendorPassword}}); r.status != http.StatusSeeOther {
		t.Fatalf("accept B's invitation: %d %s", r.status, r.body)
	}
	vu, ok := s.a.Users.Lookup(b.ID, adminEmail)
	au, _ := s.a.Users.Lookup(s.mp.ID, adminEmail)
	if !ok || vu.ID == au.ID || vu.Role != users.RoleVendorAnalyst || vu.VendorID != "v-b" || au.Role != users.RoleAdmin {
		t.Fatalf("the address's accounts: %+v %+v", au, vu)
	}

	// Each password signs in to its own account, which sees its own marketplace only.
	who := func(c *client) string {
		t.Helper()
		r := c.do("GET", "/console/account", nil)
		w := regexp.MustCompile(`<span class="who">([^<]+)</span>`).FindStringSubmatch(r.body)
		if r.status != 200 || w == nil {
			t.Fatalf("account page: %d", r.status)
		}
		return w[1]
	}
	c := s.client(t)
	if r := c.login(adminEmail, adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("the admin password: %d %s", r.status, r.body)
	}
	if w := who(c); !strings.HasPrefix(w, "Handlers ·") || strings.Contains(w, "vendor") {
		t.Fatalf("signed in with the admin password as %q", w)
	}
	if r := c.do("GET", "/console/keys", nil); r.status != 200 {
		t.Fatalf("A's admin page: %d", r.status)
	}
	c = s.client(t)
	if r := c.login(adminEmail, vendorPassword); r.status != http.StatusSeeOther {
		t.Fatalf("the vendor password: %d %s", r.status, r.body)
	}
	if w := who(c); !strings.HasPrefix(w, "Bazaar ·") || !strings.Contains(w, "vendor v-b") {
		t.Fatalf("signed in with the vendor password as %q", w)
	}
	if r := c.do("GET", "/console/keys", nil); r.status != http.StatusForbidden {
		t.Fatalf("B's vendor user on an admin page: %d", r.status)
	}

	// One password for both accounts: the sign-in asks which, listing the two marketplaces only.
	if _, err := s.a.Users.SetPassword(ctx, vu.ID, adminPassword); err != nil {
		t.Fatal(err)
	}
	c = s.client(t)
	r = c.login(adminEmail, adminPassword)
	ch := chooseField.FindStringSubmatch(r.body)
	if r.status != 200 || ch == nil || !strings.Contains(r.body, `value="`+s.mp.ID+`"`) || !strings.Contains(r.body, `value="`+b.ID+`"`) || strings.Contains(r.body, "Carts") {
		t.Fatalf("a password of two accounts: %d %s", r.status, r.body)
	}
	if _, ok := c.cookies["endcap_session"]; ok {
		t.Fatal("a session before the choice")
	}
	ctok := csrfField.FindStringSubmatch(r.body)[1]
	if r := c.do("POST", "/console/login/choose", url.Values{"csrf": {ctok}, "choice": {ch[1]}, "marketplace": {b.ID}}); r.status != http.StatusSeeOther {
		t.Fatalf("choose B: %d %s", r.status, r.body)
	}
	if w := who(c); !strings.HasPrefix(w, "Bazaar ·") {
		t.Fatalf("chose B, signed in as %q", w)
	}
	c2 := s.client(t)
	if r := c2.do("POST", "/console/login/choose", url.Values{"csrf": {c2.csrf("/console/login")}, "choice": {ch[1]}, "marketplace": {s.mp.ID}}); r.status != http.StatusGone {
		t.Fatalf("the choice again: %d", r.status)
	}
	// A choice of a marketplace that was not offered.
	r = c2.login(adminEmail, adminPassword)
	ch = chooseField.FindStringSubmatch(r.body)
	carts := s.a.Accounts.Marketplaces()
	var cartsID string
	for _, m := range carts {
		if m.Name == "Carts" {
			cartsID = m.ID
		}
	}
	if r := c2.do("POST", "/console/login/choose", url.Values{"csrf": {csrfField.FindStringSubmatch(r.body)[1]}, "choice": {ch[1]}, "marketplace": {cartsID}}); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a marketplace not offered: %d", r.status)
	}
	// The per-marketplace link signs in to its marketplace's account at once.
	c3 := s.client(t)
	path := "/console/login?marketplace=" + url.QueryEscape(s.mp.ID)
	if p := c3.do("GET", path, nil); !strings.Contains(p.body, `name="marketplace" value="`+s.mp.ID+`"`) {
		t.Fatal("the link does not prefill the marketplace")
	}
	if r := c3.do("POST", "/console/login", url.Values{"csrf": {c3.csrf(path)}, "email": {adminEmail}, "password": {adminPassword}, "marketplace": {s.mp.ID}}); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in by A's link: %d %s", r.status, r.body)
	}
	if w := who(c3); !strings.HasPrefix(w, "Handlers ·") {
		t.Fatalf("signed in by A's link as %q", w)
	}
	// The password of B's boss on A's link: wrong, as for any other.
	if r := c3.do("POST", "/console/login", url.Values{"csrf": {c3.csrf(path)}, "email": {bossEmail}, "password": {bossPassword}, "marketplace": {s.mp.ID}}); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("B's admin on A's link: %d", r.status)
	}

	// A user recorded under the legacy id signs in.
	hash, err := users.HashPassword(ctx, "the legacy user's password")
	if err != nil {
		t.Fatal(err)
	}
	old := users.User{ID: users.LegacyIDOf("old@handlers.test"), Email: "old@handlers.test", MarketplaceID: s.mp.ID, Role: users.RoleAdmin,
		PasswordHash: hash, CreatedAt: time.Now().UTC().Truncate(time.Second), Epoch: 1}
	if _, err := s.a.StateLog.AppendBatch(ctx, []statelog.Change{{Type: "user", ID: old.ID, Expected: 0, State: old}}); err != nil {
		t.Fatal(err)
	}
	c4 := s.client(t)
	if r := c4.login("Old@handlers.test", "the legacy user's password"); r.status != http.StatusSeeOther {
		t.Fatalf("the legacy user: %d %s", r.status, r.body)
	}
	if w := who(c4); !strings.HasPrefix(w, "Handlers · old@handlers.test") {
		t.Fatalf("the legacy user as %q", w)
	}
}
