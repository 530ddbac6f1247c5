package users

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/management/invitations"
)

// fakeSMTP is a plain SMTP server on loopback that takes every message
// (no STARTTLS: allowed on loopback) and records the commands it got.
func fakeSMTP(t *testing.T) (addr string, commands func() []string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				r := bufio.NewReader(c)
				say := func(s string) { _, _ = c.Write([]byte(s + "\r\n")) }
				say("220 fake")
				data := false
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					line = strings.TrimRight(line, "\r\n")
					if data {
						if line == "." {
							data = false
							say("250 queued")
						}
						continue
					}
					cmd := strings.ToUpper(strings.Fields(line + " x")[0])
					mu.Lock()
					got = append(got, cmd)
					mu.Unlock()
					switch cmd {
					case "EHLO":
						say("250-fake")
						say("250 8BITMIME")
					case "DATA":
						data = true
						say("354 go on")
					case "QUIT":
						say("221 bye")
						return
					default:
						say("250 ok")
					}
				}
			}()
		}
	}()
	return l.Addr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

// Probe connects, says EHLO and quits, within its deadline; Send, on the
// same session set-up, still delivers.
func TestSMTPProbe(t *testing.T) {
	addr, commands := fakeSMTP(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()
	cases := []struct {
		name string
		smtp SMTP
		ok   bool
	}{
		{"plain on loopback", SMTP{Addr: addr, From: "a@example.com", TLS: TLSStartTLS, Timeout: 2 * time.Second}, true},
		{"TLS from the start against a plain server", SMTP{Addr: addr, From: "a@example.com", TLS: TLSImplicit, Timeout: 2 * time.Second}, false},
		{"nothing listening", SMTP{Addr: closedAddr, From: "a@example.com", TLS: TLSNone, Timeout: 2 * time.Second}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			err := c.smtp.Probe(t.Context())
			if (err == nil) != c.ok {
				t.Fatalf("probe: %v, want success %v", err, c.ok)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	if got := strings.Join(commands(), " "); !strings.HasPrefix(got, "EHLO QUIT") {
		t.Errorf("commands %q, want EHLO QUIT first", got)
	}
	s := cases[0].smtp
	if err := s.Send(t.Context(), Message{To: "b@example.com", Subject: "s", Body: "b"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(commands(), " "); !strings.Contains(got, "EHLO MAIL RCPT DATA QUIT") {
		t.Errorf("commands %q", got)
	}
}

// TestInviteMessage: the invitation e-mail names the vendor by its name (its
// id beside) and the marketplace, and says when the link expires in the
// marketplace's zone, named.
func TestInviteMessage(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLinks("https://ads.example.com/console")
	l.SetKey([]byte("a key of the test, long enough"))
	vendor, email := "v-alpha", "analyst@alpha.test"
	p := invitations.Pending{MarketplaceID: "mp-1", Invitation: invitations.Invitation{ID: "inv-1", VendorID: vendor, VendorEmail: email,
		ExpiresAt: time.Date(2026, 3, 8, 9, 30, 0, 0, time.UTC)}}
	for _, tc := range []struct {
		name   string
		m      InviteMailer
		vendor string
		until  string
	}{
		{"names", InviteMailer{Links: l, MarketplaceName: func(string) string { return "Shop" },
			VendorName: func(mp, v string) string { return map[string]string{"mp-1/v-alpha": "Alpha Shoes"}[mp+"/"+v] },
			Location:   func(string) *time.Location { return paris }},
			"of Alpha Shoes (v-alpha) on Shop.", "until 2026-03-08 10:30 CET (Europe/Paris)."},
		{"no names", InviteMailer{Links: l}, "of v-alpha on mp-1.", "until 2026-03-08 09:30 UTC (UTC)."},
	} {
		msg := tc.m.message(p)
		if msg.To != email || !strings.Contains(msg.Body, tc.vendor) || !strings.Contains(msg.Body, tc.until) ||
			!strings.Contains(msg.Body, "https://ads.example.com/console/invite/mp-1/inv-1/") {
			t.Errorf("%s: %+v", tc.name, msg)
		}
	}
}
