package webhooks_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

func open(t *testing.T) *webhooks.Service {
	t.Helper()
	_, brokers := testenv.Kafka(t)
	var svc *webhooks.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "wh."}, func(l *statelog.Log) { svc = webhooks.New(l) })
	svc.Guard = &webhooks.Guard{AllowLoopback: true, Resolve: testResolve}
	return svc
}

// testResolve answers the names of the tests without DNS.
func testResolve(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	switch host {
	case "example.com", "example.org":
		return addrs("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"), nil
	case "localhost":
		return addrs("127.0.0.1", "::1"), nil
	case "internal.example":
		return addrs("10.0.0.7", "fd00::7"), nil
	case "metadata.example":
		return addrs("::ffff:169.254.169.254"), nil
	case "zoned.example":
		return addrs("fe80::1%eth0", "::1%lo"), nil
	case "mixed.example":
		return addrs("10.0.0.7", "93.184.215.14"), nil
	case "slow.example":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func str(s string) *string { return &s }

func render(err error) string {
	v, _ := validation.As(err)
	var out []string
	for _, f := range v {
		out = append(out, strings.Trim(fmt.Sprint(f.Loc), "[]")+":"+f.Type)
	}
	return strings.Join(out, ",")
}

func TestValidation(t *testing.T) {
	svc := open(t)
	ctx := context.Background()
	types := func(ts ...string) *[]string { return &ts }
	cases := []struct {
		name string
		in   webhooks.Input
		want string
	}{
		{"missing url", webhooks.Input{}, "body url:missing"},
		{"empty url", webhooks.Input{URL: str(" ")}, "body url:value_error"},
		{"relative", webhooks.Input{URL: str("/hooks")}, "body url:value_error"},
		{"no scheme", webhooks.Input{URL: str("example.com/hooks")}, "body url:value_error"},
		{"ftp", webhooks.Input{URL: str("ftp://example.com/hooks")}, "body url:value_error"},
		{"http remote", webhooks.Input{URL: str("http://example.com/hooks")}, "body url:value_error"},
		{"credentials", webhooks.Input{URL: str("https://user:pw@example.com/hooks")}, "body url:value_error"},
		{"user only", webhooks.Input{URL: str("https://user@example.com/hooks")}, "body url:value_error"},
		{"fragment", webhooks.Input{URL: str("https://example.com/hooks#x")}, "body url:value_error"},
		{"bad port", webhooks.Input{URL: str("https://example.com:99999/hooks")}, "body url:value_error"},
		{"no host", webhooks.Input{URL: str("https:///hooks")}, "body url:value_error"},
		{"too long", webhooks.Input{URL: str("https://example.com/" + strings.Repeat("a", 2029))}, "body url:value_error"},
		{"empty types", webhooks.Input{URL: str("https://example.com"), EventTypes: types()}, "body eventTypes:too_short"},
		{"unknown type", webhooks.Input{URL: str("https://example.com"), EventTypes: types("campaign.updated", "nope")}, "body eventTypes 1:enum"},
		{"duplicate type", webhooks.Input{URL: str("https://example.com"), EventTypes: types("campaign.updated", "campaign.updated")}, "body eventTypes 1:value_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := svc.Create(ctx, "mp", tc.in); render(err) != tc.want {
				t.Fatalf("got %q (%v), want %q", render(err), err, tc.want)
			}
		})
	}
	for _, ok := range []string{"https://example.com", "https://example.com:8443/a/b?x=1", "http://localhost:8080/hook", "http://127.0.0.1/hook", "http://[::1]:9000/", "https://example.com/" + strings.Repeat("a", 2028)} {
		if _, _, err := svc.Create(ctx, "mp", webhooks.Input{URL: str(ok)}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestLifecycle(t *testing.T) {
	svc := open(t)
	ctx := context.Background()
	w, v, err := svc.Create(ctx, "mp", webhooks.Input{URL: str("https://example.com/hook")})
	if err != nil || v != 1 {
		t.Fatal(err, v)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, "whsec_"))
	if !strings.HasPrefix(w.Secret, "whsec_") || err != nil || len(raw) != 32 {
		t.Fatalf("secret %q", w.Secret)
	}
	if w.SecretHint() != w.Secret[:10] || len(w.EventTypes) != len(webhooks.EventTypes) {
		t.Fatalf("hint %q types %v", w.SecretHint(), w.EventTypes)
	}
	w2, _, _ := svc.Create(ctx, "mp", webhooks.Input{URL: str("https://example.com/hook")})
	if w2.Secret == w.Secret {
		t.Fatal("secrets repeat")
	}
	if _, _, err := svc.Update(ctx, "mp", w.ID, 3, webhooks.Input{URL: str("https://example.org")}); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("if-match: %v", err)
	}
	u, v, err := svc.Update(ctx, "mp", w.ID, 1, webhooks.Input{EventTypes: &[]string{"export.failed", "budget.exhausted"}})
	if err != nil || v != 2 || u.URL != w.URL || u.Secret != w.Secret || fmt.Sprint(u.EventTypes) != "[budget.exhausted export.failed]" {
		t.Fatalf("update: %v %d %+v", err, v, u)
	}
	if _, _, err := svc.Update(ctx, "other", w.ID, 0, webhooks.Input{}); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("other marketplace update: %v", err)
	}
	if err := svc.Delete(ctx, "other", w.ID, 0); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("other marketplace delete: %v", err)
	}
	if err := svc.Delete(ctx, "mp", w.ID, 1); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("delete if-match: %v", err)
	}
	if err := svc.Delete(ctx, "mp", w.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Get("mp", w.ID); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if ws, more := svc.List("mp", "", 10); len(ws) != 1 || more || ws[0].ID != w2.ID {
		t.Fatalf("list: %v %v", ws, more)
	}
}

// A URL whose host is an address deliveries may not reach, or a name that
// resolves only to such addresses, is refused when it is registered
// (created or updated), with a message that names no resolved address; a
// name that does not resolve is accepted (the check at each connection
// stays the guard).
func TestRegistrationRefusesInternalHosts(t *testing.T) {
	svc := open(t)
	svc.MaxPerMarketplace = 1000
	ctx := context.Background()
	strict := &webhooks.Guard{Resolve: testResolve}
	dev := &webhooks.Guard{AllowLoopback: true, Resolve: testResolve}
	cases := []struct {
		url         string
		strict, dev bool // accepted
	}{
		{"https://example.com/hook", true, true},
		{"https://93.184.215.14/hook", true, true},
		{"https://[2606:4700:4700::1111]/hook", true, true},
		{"https://10.0.0.5/hook", false, false},
		{"https://192.168.1.1:8443/hook", false, false},
		{"https://169.254.169.254/latest/meta-data", false, false},
		{"https://100.64.0.1/hook", false, false},
		{"https://[fd00:ec2::254]/hook", false, false},
		{"https://[::ffff:10.0.0.5]/hook", false, false},
		{"https://[::ffff:127.0.0.1]/hook", false, true},
		{"https://[64:ff9b::a00:1]/hook", false, false},
		{"http://127.0.0.1:8080/hook", false, true},
		{"http://[::1]:9000/", false, true},
		{"http://localhost:8080/hook", false, true},
		// Zones, in every form a URL takes them.
		{"https://[::1%25lo]:8443/hook", false, false},
		{"https://[::1%25eth0]/hook", false, false},
		{"https://[fe80::1%25eth0]/hook", false, false},
		{"https://[fe80::1%251]/hook", false, false},
		{"https://[fd00:ec2::254%251]/hook", false, false},
		{"https://[2606:4700:4700::1111%25eth0]/hook", false, false},
		{"https://[::ffff:127.0.0.1%25lo]/hook", false, false},
		{"https://[fe80::1%eth0]/hook", false, false}, // not escaped: not a valid URL
		// Names.
		{"https://internal.example/hook", false, false},
		{"https://metadata.example/hook", false, false},
		{"https://zoned.example/hook", false, false},
		{"https://mixed.example/hook", true, true},
		{"https://unknown.example/hook", true, true},
		{"https://slow.example/hook", true, true},
	}
	for _, tc := range cases {
		for _, g := range []struct {
			name  string
			guard *webhooks.Guard
			ok    bool
		}{{"strict", strict, tc.strict}, {"loopback allowed", dev, tc.dev}} {
			svc.Guard = g.guard
			start := time.Now()
			_, _, err := svc.Create(ctx, "mp", webhooks.Input{URL: str(tc.url)})
			if took := time.Since(start); took > webhooks.RegistrationTimeout+time.Second {
				t.Errorf("%s (%s): took %s", tc.url, g.name, took)
			}
			if g.ok {
				if err != nil {
					t.Errorf("%s (%s): %v", tc.url, g.name, err)
				}
				continue
			}
			if render(err) != "body url:value_error" {
				t.Errorf("%s (%s): %q (%v), want a refusal", tc.url, g.name, render(err), err)
				continue
			}
			if msg := err.Error(); strings.Contains(tc.url, ".example") && (strings.Contains(msg, "10.0.0.7") || strings.Contains(msg, "169.254") || strings.Contains(msg, "fe80")) {
				t.Errorf("%s (%s): the message names a resolved address: %s", tc.url, g.name, msg)
			}
		}
	}
	// An update to such a URL is refused too, and changes nothing.
	svc.Guard = strict
	w, v, err := svc.Create(ctx, "mp", webhooks.Input{URL: str("https://example.com/hook")})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://10.0.0.5/hook", "https://[::1%25lo]/hook", "https://internal.example/hook"} {
		if _, _, err := svc.Update(ctx, "mp", w.ID, statelog.IfMatch(v), webhooks.Input{URL: str(u)}); render(err) != "body url:value_error" {
			t.Errorf("update to %s: %q (%v)", u, render(err), err)
		}
	}
	if got, gv, _ := svc.Get("mp", w.ID); got.URL != "https://example.com/hook" || gv != v {
		t.Fatalf("after refused updates: %s v%d", got.URL, gv)
	}
}

// A marketplace has at most MaxPerMarketplace webhooks: the next create is a
// 422 at body, until one is deleted; other marketplaces are not concerned.
func TestWebhooksPerMarketplace(t *testing.T) {
	svc := open(t)
	svc.MaxPerMarketplace = 3
	ctx := context.Background()
	var ids []string
	for range 3 {
		w, _, err := svc.Create(ctx, "mp", webhooks.Input{URL: str("https://example.com/hook")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	_, _, err := svc.Create(ctx, "mp", webhooks.Input{URL: str("https://example.com/hook")})
	if render(err) != "body:value_error" || !strings.Contains(err.Error(), "at most 3 webhooks") {
		t.Fatalf("the fourth: %q %v", render(err), err)
	}
	if _, _, err := svc.Create(ctx, "other", webhooks.Input{URL: str("https://example.com/hook")}); err != nil {
		t.Fatalf("another marketplace: %v", err)
	}
	if err := svc.Delete(ctx, "mp", ids[0], 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Create(ctx, "mp", webhooks.Input{URL: str("https://example.com/hook")}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}
