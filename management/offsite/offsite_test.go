package offsite_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/offsite"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/fakes"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestNormalize(t *testing.T) {
	cases := []struct{ in, ascii, unicode string }{
		{"example.com", "example.com", "example.com"},
		{"  Shop.Example.COM. ", "shop.example.com", "shop.example.com"},
		{"Bücher.example", "xn--bcher-kva.example", "bücher.example"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", "bücher.example"},
		{"例え.テスト", "xn--r8jz45g.xn--zckzah", "例え.テスト"},
		{"ＥＸＡＭＰＬＥ.com", "example.com", "example.com"},
		{"faß.de", "xn--fa-hia.de", "faß.de"},
		{"a-b.c-d.co.uk", "a-b.c-d.co.uk", "a-b.c-d.co.uk"},
	}
	for _, tc := range cases {
		got, msg := offsite.Normalize(tc.in)
		if msg != "" || got != tc.ascii {
			t.Errorf("%q: got %q %q, want %q", tc.in, got, msg, tc.ascii)
			continue
		}
		if u := (offsite.Domain{Domain: got}).Unicode(); u != tc.unicode {
			t.Errorf("%q: unicode %q, want %q", tc.in, u, tc.unicode)
		}
	}
	bad := []struct{ in, why string }{
		{"", "empty"},
		{"https://example.com", "scheme"},
		{"example.com/path", "path"},
		{"example.com?x=1", "path"},
		{"example.com:8080", "port"},
		{"user@example.com", "user"},
		{"1.2.3.4", "IP address"},
		{"[::1]", "IP address"},
		{"::1", "IP address"},
		{"localhost", "two labels"},
		{"example", "two labels"},
		{"exa mple.com", "spaces"},
		{"ex_ample.com", "valid host name"},
		{"-bad.com", "valid host name"},
		{"a..com", "empty labels"},
		{"example.123", "all digits"},
		{"xn--abc.com", "valid host name"},
		{strings.Repeat("a", 64) + ".com", "63"},
		{strings.Repeat("abcdefghi.", 26) + "com", "253"},
	}
	for _, tc := range bad {
		if got, msg := offsite.Normalize(tc.in); msg == "" || !strings.Contains(msg, tc.why) {
			t.Errorf("%q: got %q %q, want an error about %s", tc.in, got, msg, tc.why)
		}
	}
}

func TestPutGetDelete(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	var svc *offsite.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "off."}, func(l *statelog.Log) { svc = offsite.New(l, fakes.NewCatalog("mp/v", "other/w")) })
	ctx := t.Context()
	str := func(s string) *string { return &s }

	if _, _, err := svc.Put(ctx, "mp", "nope", str("example.com"), 0); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("unknown vendor: %v", err)
	}
	if _, _, err := svc.Put(ctx, "other", "v", str("example.com"), 0); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("vendor of another marketplace: %v", err)
	}
	if _, _, err := svc.Put(ctx, "mp", "v", nil, 0); err == nil {
		t.Fatal("missing domain accepted")
	}
	if _, _, err := svc.Get("mp", "v"); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("no domain yet: %v", err)
	}
	d, v, err := svc.Put(ctx, "mp", "v", str("Bücher.example"), 0)
	if err != nil || v != 1 || d.Domain != "xn--bcher-kva.example" {
		t.Fatalf("put: %v %d %+v", err, v, d)
	}
	// Same domain again: unchanged, no new version.
	if d2, v2, err := svc.Put(ctx, "mp", "v", str("xn--bcher-kva.example"), 0); err != nil || v2 != 1 || d2 != d {
		t.Fatalf("same again: %v %d", err, v2)
	}
	if _, _, err := svc.Put(ctx, "mp", "v", str("shop.example"), 5); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("if-match: %v", err)
	}
	d3, v3, err := svc.Put(ctx, "mp", "v", str("shop.example"), 1)
	if err != nil || v3 != 2 || !d3.CreatedAt.Equal(d.CreatedAt) {
		t.Fatalf("replace: %v %d %+v", err, v3, d3)
	}
	if err := svc.Delete(ctx, "mp", "v", 1); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("delete if-match: %v", err)
	}
	if err := svc.Delete(ctx, "mp", "v", 0); err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(ctx, "mp", "v", 0); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// Setting it again after a delete carries on from the deletion's version.
	if d, v, err := svc.Put(ctx, "mp", "v", str("example.org"), 0); err != nil || v != 4 || d.Domain != "example.org" {
		t.Fatalf("put after delete: %v %d %+v", err, v, d)
	}
}
