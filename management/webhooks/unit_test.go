package webhooks_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/endcap/endcap/management/webhooks"
)

func TestGuardCheck(t *testing.T) {
	cases := []struct {
		addr     string
		want     string // reason without the development setting ("" = allowed)
		loopback string // with AllowLoopback
	}{
		{"8.8.8.8", "", ""},
		{"2606:4700:4700::1111", "", ""},
		{"127.0.0.1", "loopback", ""},
		{"127.8.9.10", "loopback", ""},
		{"::1", "loopback", ""},
		{"::ffff:127.0.0.1", "loopback", ""},
		{"10.1.2.3", "private", "private"},
		{"172.16.0.1", "private", "private"},
		{"172.31.255.255", "private", "private"},
		{"172.32.0.1", "", ""},
		{"192.168.1.1", "private", "private"},
		{"::ffff:192.168.1.1", "private", "private"},
		{"169.254.169.254", "link-local (cloud metadata)", "link-local (cloud metadata)"},
		{"fe80::1", "link-local (cloud metadata)", "link-local (cloud metadata)"},
		{"fd00:ec2::254", "unique-local", "unique-local"},
		{"fc00::1", "unique-local", "unique-local"},
		{"100.64.0.1", "shared (CGNAT)", "shared (CGNAT)"},
		{"100.100.100.200", "shared (CGNAT)", "shared (CGNAT)"},
		{"168.63.129.16", "cloud metadata", "cloud metadata"},
		{"0.0.0.0", "unspecified", "unspecified"},
		{"::", "unspecified", "unspecified"},
		{"224.0.0.1", "multicast", "multicast"},
		{"ff02::1", "multicast", "multicast"},
		{"255.255.255.255", "reserved", "reserved"},
		{"198.18.0.1", "reserved", "reserved"},
		{"192.0.2.1", "documentation", "documentation"},
		{"64:ff9b::a00:1", "private (inside IPv6)", "private (inside IPv6)"},                                            // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", "", ""},                                                                                    // NAT64 of 8.8.8.8
		{"2002:a9fe:a9fe::1", "link-local (cloud metadata) (inside IPv6)", "link-local (cloud metadata) (inside IPv6)"}, // 6to4 of 169.254.169.254
		{"::127.0.0.1", "reserved", "reserved"},                                                                         // IPv4-compatible
		// An address with a zone is never allowed.
		{"::1%lo", "loopback (with a zone)", "scoped (with a zone)"},
		{"::1%1", "loopback (with a zone)", "scoped (with a zone)"},
		{"fe80::1%eth0", "link-local (cloud metadata) (with a zone)", "link-local (cloud metadata) (with a zone)"},
		{"fd00:ec2::254%1", "unique-local (with a zone)", "unique-local (with a zone)"},
		{"::ffff:127.0.0.1%lo", "loopback (with a zone)", "scoped (with a zone)"},
		{"::ffff:10.0.0.1%eth0", "private (with a zone)", "private (with a zone)"},
		{"2606:4700:4700::1111%eth0", "scoped (with a zone)", "scoped (with a zone)"},
	}
	strict, dev := &webhooks.Guard{}, &webhooks.Guard{AllowLoopback: true}
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		if got := strict.Check(a); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.addr, got, tc.want)
		}
		if got := dev.Check(a); got != tc.loopback {
			t.Errorf("%s with loopback allowed: %q, want %q", tc.addr, got, tc.loopback)
		}
	}
}

func TestSchedule(t *testing.T) {
	s := webhooks.Schedule{}
	want := []time.Duration{5 * time.Second, 20 * time.Second, 80 * time.Second, 320 * time.Second, 1280 * time.Second,
		5120 * time.Second, 20480 * time.Second, 8 * time.Hour, 8 * time.Hour}
	var total time.Duration
	for i, w := range want {
		if got := s.Nominal(i + 1); got != w {
			t.Errorf("delay after attempt %d: %s, want %s", i+1, got, w)
		}
		total += w
		d, ok := s.Delay(i + 1)
		if !ok || d < w*8/10 || d > w*12/10 {
			t.Errorf("delay after attempt %d: %s %v, want %s ± 20%%", i+1, d, ok, w)
		}
	}
	if _, ok := s.Delay(10); ok {
		t.Error("an 11th attempt")
	}
	if total < 23*time.Hour || total > 24*time.Hour {
		t.Errorf("the schedule spans %s, want about a day", total)
	}
}

// Signatures verify with the Standard Webhooks library: with the current
// secret, the previous one (both sent during an overlap), and a secret of
// the earlier format converted with StandardSecret.
func TestSignVerifiesWithLibrary(t *testing.T) {
	cur, _ := webhooks.NewSecret()
	prev, _ := webhooks.NewSecret()
	legacy := "whsec_" + base64.RawURLEncoding.EncodeToString([]byte("\xfb\xff\xfe0123456789abcdef0123456789abc"))
	if len(legacy) != 6+43 || !strings.ContainsAny(legacy[6:], "-_") {
		t.Fatalf("legacy secret %q is not of the earlier format", legacy)
	}
	keyOf := func(s string) []byte {
		k, err := webhooks.SecretKey(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	body := []byte(`{"type":"campaign.updated","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`)
	now := time.Now()
	h := http.Header{}
	h.Set("webhook-id", "msg_1")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", webhooks.Sign([][]byte{keyOf(cur), keyOf(prev), keyOf(legacy)}, "msg_1", now.Unix(), body))
	if n := len(strings.Fields(h.Get("webhook-signature"))); n != 3 {
		t.Fatalf("%d signatures", n)
	}
	for _, s := range []string{cur, prev, legacy} {
		std, err := webhooks.StandardSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		v, err := standardwebhooks.NewWebhook(std)
		if err != nil {
			t.Fatalf("%s: %v", std, err)
		}
		if err := v.Verify(body, h); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		if err := v.Verify(append(body, ' '), h); err == nil {
			t.Errorf("%s: a changed body verifies", s)
		}
	}
	if _, err := standardwebhooks.NewWebhook(legacy); err == nil {
		t.Log("the library reads the legacy format as it is")
	}
	if std, _ := webhooks.StandardSecret(cur); std != cur {
		t.Errorf("a new secret is already standard: %q became %q", cur, std)
	}
	for _, bad := range []string{"", "whsec_", "secret", "whsec_!!!"} {
		if _, err := webhooks.SecretKey(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDeliveryIDs(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a := webhooks.DeliveryID("e1", "w1", at)
	if a != webhooks.DeliveryID("e1", "w1", at) || a == webhooks.DeliveryID("e1", "w2", at) || a == webhooks.DeliveryID("e2", "w1", at) {
		t.Fatal("delivery ids are not a function of event and webhook")
	}
	if later := webhooks.DeliveryID("e0", "w0", at.Add(time.Millisecond)); later <= a {
		t.Fatalf("ids do not sort by event time: %s then %s", a, later)
	}
	if a[14] != '8' {
		t.Fatalf("%s is not a version 8 UUID", a)
	}
	if once, again := webhooks.EventID("x", "1"), webhooks.EventID("x", "1"); once != again || once == webhooks.EventID("x1") {
		t.Fatal("event ids")
	}
}

// A zoned address, as a literal or as what a name resolves to, is refused
// before any connection, even where loopback is allowed; the error names no
// address.
func TestGuardDialRefusesZones(t *testing.T) {
	var conns atomic.Int32
	listen := func(addr string) string {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return ""
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				c.Close()
			}
		}()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		return port
	}
	p4 := listen("127.0.0.1:0")
	p6 := listen("[::1]:0")
	if p6 == "" {
		p6 = p4
	}
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "zoned.example":
			return []netip.Addr{netip.MustParseAddr("::1%lo")}, nil
		case "mapped.example":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1%lo")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	addrs := []string{
		"[::1%lo]:" + p6, "[::1%1]:" + p6, "[::ffff:127.0.0.1%lo]:" + p4, "[fe80::1%lo]:" + p6, "[fd00:ec2::254%1]:" + p6,
		"zoned.example:" + p6, "mapped.example:" + p4,
	}
	for _, g := range []*webhooks.Guard{{Resolve: resolve}, {AllowLoopback: true, Resolve: resolve}} {
		for _, a := range addrs {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			c, err := g.DialContext(ctx, "tcp", a)
			cancel()
			if c != nil {
				c.Close()
			}
			var rf *webhooks.RefusedError
			if !errors.As(err, &rf) || err.Error() != webhooks.MsgRefused {
				t.Errorf("%s (loopback allowed %v): %v, want a refusal", a, g.AllowLoopback, err)
			}
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections reached the loopback listeners", n)
	}
}
