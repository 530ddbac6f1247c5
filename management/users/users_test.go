package users

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/invitations"
)

func TestPasswordHash(t *testing.T) {
	ctx := context.Background()
	h, err := HashPassword(ctx, "correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q", h)
	}
	h2, _ := HashPassword(ctx, "correct horse battery staple")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, tc := range []struct {
		p    string
		want bool
	}{{"correct horse battery staple", true}, {"correct horse battery stapl", false}, {"", false}, {"Correct horse battery staple", false}} {
		ok, err := VerifyPassword(ctx, tc.p, h)
		if err != nil || ok != tc.want {
			t.Errorf("verify %q: %v %v, want %v", tc.p, ok, err, tc.want)
		}
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=1,t=1,p=1$AA$AA", "$argon2id$v=19$m=99999999,t=2,p=1$AA$AA", "$argon2id$v=18$m=19456,t=2,p=1$AA$AA", strings.Replace(h, "$", "", 1)} {
		if ok, err := VerifyPassword(ctx, "x", bad); err == nil || ok {
			t.Errorf("verify against %q: %v %v, want an error", bad, ok, err)
		}
	}
	// A cancelled context waits for no hashing slot once they are all taken.
	for i := 0; i < cap(hashing); i++ {
		hashing <- struct{}{}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := HashPassword(cctx, "whatever password"); err != ErrBusy {
		t.Errorf("hash with no slot: %v, want ErrBusy", err)
	}
	// Nor does a request with a long deadline wait long: a busy process
	// says so within hashSlotWait.
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	defer lcancel()
	start := time.Now()
	if _, err := VerifyPassword(lctx, "whatever password", h); err != ErrBusy || time.Since(start) > time.Second {
		t.Errorf("verify with no slot and 5 s to go: %v after %s, want ErrBusy within a second", err, time.Since(start))
	}
	for i := 0; i < cap(hashing); i++ {
		<-hashing
	}
}

func TestCheckPassword(t *testing.T) {
	for _, tc := range []struct {
		p, email string
		ok       bool
	}{
		{"twelve chars", "", true},
		{"eleven char", "", false},
		{strings.Repeat("é", 12), "", true},
		{strings.Repeat("a", 256), "", true},
		{strings.Repeat("a", 257), "", false},
		{"me@example.com", "me@example.com", false},
		{" ME@example.com", "me@example.com", false},
		{"\xff\xfe not text at all", "", false},
	} {
		if err := CheckPassword(tc.p, tc.email); (err == nil) != tc.ok {
			t.Errorf("CheckPassword(%q): %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

func TestIDOf(t *testing.T) {
	if IDOf("m1", "Me@Example.com") != IDOf("m1", " me@example.com ") || IDOf("m1", "a@b.c") == IDOf("m1", "a@b.d") || len(IDOf("m1", "a@b.c")) != 32 {
		t.Fatal("IDOf: case and spaces are not the address, and different addresses differ")
	}
	// One address, one id per marketplace, none the legacy id of the address alone.
	if IDOf("m1", "a@b.c") == IDOf("m2", "a@b.c") || IDOf("m1", "a@b.c") == LegacyIDOf("a@b.c") || LegacyIDOf("A@b.c ") != LegacyIDOf("a@b.c") {
		t.Fatal("IDOf: the marketplace is not part of the id")
	}
}

func TestLinks(t *testing.T) {
	inv := invitations.Invitation{ID: "inv-1", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	l := NewLinks("https://ads.example.com/console/")
	if l.Verify("mp", inv, "x") {
		t.Fatal("verified without a key")
	}
	l.SetKey([]byte("k1"))
	u := l.URL("mp", inv)
	prefix := "https://ads.example.com/console/invite/mp/inv-1/"
	if !strings.HasPrefix(u, prefix) {
		t.Fatalf("URL %q", u)
	}
	sig := strings.TrimPrefix(u, prefix)
	if !l.Verify("mp", inv, sig) {
		t.Fatal("its own link does not verify")
	}
	again := inv
	again.CreatedAt = again.CreatedAt.Add(time.Nanosecond) // an invitation made again has a link of its own
	other := inv
	other.ID = "inv-2"
	for name, ok := range map[string]bool{
		"other marketplace": l.Verify("mp2", inv, sig), "other invitation": l.Verify("mp", other, sig),
		"re-created": l.Verify("mp", again, sig), "truncated": l.Verify("mp", inv, sig[:len(sig)-1]), "empty": l.Verify("mp", inv, ""),
	} {
		if ok {
			t.Errorf("%s: verified", name)
		}
	}
	l.SetKey([]byte("k2"))
	if l.Verify("mp", inv, sig) {
		t.Fatal("verified with another key")
	}
}

func TestCompose(t *testing.T) {
	b := string(compose("Endcap <no-reply@x.test>", Message{To: "a@b.test", Subject: "Invitation à Café", Body: "line 1\n.\nline 3"}, time.Unix(0, 0)))
	for _, want := range []string{"From: Endcap <no-reply@x.test>\r\n", "To: a@b.test\r\n", "Subject: =?utf-8?q?Invitation_=C3=A0_Caf=C3=A9?=\r\n",
		"Content-Type: text/plain; charset=utf-8\r\n", "\r\n\r\nline 1\r\n.\r\nline 3\r\n"} {
		if !strings.Contains(b, want) {
			t.Errorf("message lacks %q:\n%s", want, b)
		}
	}
}

func TestSMTPCheck(t *testing.T) {
	ok := SMTP{Addr: "smtp.example.com:587", From: "Endcap <no-reply@example.com>", TLS: TLSStartTLS}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SMTP{{Addr: "smtp.example.com", From: ok.From, TLS: TLSNone}, {Addr: ok.Addr, From: "not an address", TLS: TLSNone}, {Addr: ok.Addr, From: ok.From, TLS: "ssl"}} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestParseRoleMap(t *testing.T) {
	got, err := ParseRoleMap(" ops = mp-1:marketplace_admin , sellers-a=mp-1:vendor_analyst:v-a,sellers-a=mp-2:vendor_admin:v-b,")
	want := []RoleRule{{"ops", "mp-1", RoleAdmin, ""}, {"sellers-a", "mp-1", RoleVendorAnalyst, "v-a"}, {"sellers-a", "mp-2", RoleVendorAdmin, "v-b"}}
	if err != nil || len(got) != len(want) {
		t.Fatalf("ParseRoleMap: %+v %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"ops", "ops=mp-1", "=mp-1:marketplace_admin", "ops=:marketplace_admin", "ops=mp-1:root", "ops=mp-1:vendor_analyst",
		"ops=mp-1:marketplace_admin:v-a", "ops=mp-1:vendor_admin:v-a:x"} {
		if _, err := ParseRoleMap(bad); err == nil {
			t.Errorf("ParseRoleMap(%q): no error", bad)
		}
	}
	s := &SSO{cfg: SSOConfig{Rules: want, Marketplace: func(id string) bool { return id != "mp-gone" }}}
	for _, tc := range []struct {
		claim any
		mp    string
		want  int
	}{{"ops", "", 1}, {[]any{"sellers-a", "ops"}, "", 2}, {[]any{"sellers-a", 3}, "mp-2", 1}, {"nobody", "", 0}, {nil, "", 0}, {[]any{"ops"}, "mp-2", 0}} {
		g := s.grants(claimValues(tc.claim), tc.mp)
		if len(g) != tc.want {
			t.Errorf("grants of %v on %q: %+v, want %d", tc.claim, tc.mp, g, tc.want)
		}
	}
	// Of two rules of one marketplace, the first.
	if g := s.grants([]string{"sellers-a", "ops"}, "mp-1"); len(g) != 1 || g[0].Role != RoleAdmin {
		t.Errorf("first rule of mp-1: %+v", g)
	}
	for _, v := range []any{true, "true"} {
		if !claimTrue(v) {
			t.Errorf("claimTrue(%v)", v)
		}
	}
	for _, v := range []any{false, "false", nil, 1, "yes"} {
		if claimTrue(v) {
			t.Errorf("claimTrue(%v)", v)
		}
	}
}

func TestNewSSOChecksItsSettings(t *testing.T) {
	rules := []RoleRule{{"ops", "mp-1", RoleAdmin, ""}}
	for _, tc := range []struct {
		name string
		cfg  SSOConfig
		ok   bool
	}{
		{"complete", SSOConfig{Issuer: "https://sso.example.com/realms/r", ClientID: "c", Rules: rules}, true},
		{"no role map", SSOConfig{Issuer: "https://sso.example.com", ClientID: "c"}, false},
		{"no client id", SSOConfig{Issuer: "https://sso.example.com", Rules: rules}, false},
		{"not a URL", SSOConfig{Issuer: "sso.example.com", ClientID: "c", Rules: rules}, false},
	} {
		s, err := NewSSO(tc.cfg, nil, nil)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err == nil && (s.cfg.RoleClaim != "groups" || s.cfg.Scopes[0] != "openid" || s.cfg.Timeout != 10*time.Second) {
			t.Errorf("%s: defaults %+v", tc.name, s.cfg)
		}
	}
}
