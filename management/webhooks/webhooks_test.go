package webhooks_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/storage/statelog"
)

func open(t *testing.T) *webhooks.Service {
	t.Helper()
	_, brokers := testenv.Kafka(t)
	var svc *webhooks.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "wh."}, func(l *statelog.Log) { svc = webhooks.New(l) })
	return svc
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
