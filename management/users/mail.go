package users

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/management/invitations"
)

// SMTP is how mail is sent.
type SMTP struct {
	Addr     string // host:port
	User     string // empty: no authentication
	Password string
	From     string // "Name <address>" or an address
	// TLS: "starttls" (upgrade; required unless the server is on loopback),
	// "tls" (TLS from the start, port 465) or "none" (a local relay only).
	TLS     string
	Timeout time.Duration
}

// TLS modes of SMTP.
const (
	TLSStartTLS = "starttls"
	TLSImplicit = "tls"
	TLSNone     = "none"
)

// Check validates the settings.
func (c SMTP) Check() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("smtp address %q: want host:port", c.Addr)
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		return fmt.Errorf("smtp from %q: %v", c.From, err)
	}
	switch c.TLS {
	case TLSStartTLS, TLSImplicit, TLSNone:
	default:
		return fmt.Errorf("smtp tls %q: want starttls, tls or none", c.TLS)
	}
	return nil
}

// Message is a plain-text e-mail.
type Message struct {
	To      string
	Subject string
	Body    string
}

// Send delivers m, within ctx's deadline and c.Timeout.
func (c SMTP) Send(ctx context.Context, m Message) error {
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	from, err := mail.ParseAddress(c.From)
	if err != nil {
		return err
	}
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Mail(from.Address); err != nil {
		return err
	}
	if err := cl.Rcpt(to.Address); err != nil {
		return err
	}
	w, err := cl.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(compose(c.From, m, time.Now())); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return cl.Quit()
}

// Probe connects, says EHLO, upgrades to TLS as configured and
// authenticates, within ctx's deadline and c.Timeout, and quits: that mail
// can be sent (endcap config check).
func (c SMTP) Probe(ctx context.Context) error {
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.Quit()
}

// dial opens a session with the server, TLS and authentication done, the
// connection's deadline ctx's.
func (c SMTP) dial(ctx context.Context) (*smtp.Client, error) {
	host, _, _ := net.SplitHostPort(c.Addr)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	tlsCfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if c.TLS == TLSImplicit {
		conn = tls.Client(conn, tlsCfg)
	}
	cl, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := cl.Hello("localhost"); err != nil {
		_ = cl.Close()
		return nil, err
	}
	if c.TLS == TLSStartTLS {
		if ok, _ := cl.Extension("STARTTLS"); ok {
			if err := cl.StartTLS(tlsCfg); err != nil {
				_ = cl.Close()
				return nil, err
			}
		} else if !isLoopback(host) {
			_ = cl.Close()
			return nil, fmt.Errorf("smtp server %s does not offer STARTTLS (set ENDCAP_SMTP_TLS=tls or none)", c.Addr)
		}
	}
	if c.User != "" {
		// PlainAuth refuses to send the password unencrypted, but to loopback.
		if err := cl.Auth(smtp.PlainAuth("", c.User, c.Password, host)); err != nil {
			_ = cl.Close()
			return nil, err
		}
	}
	return cl, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// compose writes the message with CRLF line ends and an encoded subject.
func compose(from string, m Message, now time.Time) []byte {
	var b strings.Builder
	hdr := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	hdr("From", from)
	hdr("To", m.To)
	hdr("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	hdr("Date", now.UTC().Format(time.RFC1123Z))
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", "text/plain; charset=utf-8")
	hdr("Content-Transfer-Encoding", "8bit")
	b.WriteString("\r\n")
	// The client's data writer dot-stuffs the lines.
	for _, line := range strings.Split(strings.ReplaceAll(m.Body, "\r\n", "\n"), "\n") {
		b.WriteString(line + "\r\n")
	}
	return []byte(b.String())
}

// InviteMailer sends each pending invitation its e-mail once: a Redis claim
// per invitation lets one process of all those that run it send it. A send
// that fails is retried a minute later, until the invitation expires.
type InviteMailer struct {
	Invitations *invitations.Service
	Links       *Links
	SMTP        SMTP
	Redis       redis.UniversalClient
	// MarketplaceName names a marketplace in the e-mail; VendorName a
	// vendor of a marketplace (its catalog name; "" or nil: its id alone);
	// Location is a marketplace's time zone, in which the e-mail says when
	// the link expires (nil: UTC).
	MarketplaceName func(mp string) string
	VendorName      func(mp, vendor string) string
	Location        func(mp string) *time.Location
	Log             *slog.Logger
	// Every is the sweep interval (default 30 s); a new invitation wakes
	// the mailer at once.
	Every time.Duration

	wake chan struct{}
	// later: invitations this process need not look at before a time (sent
	// by it, or claimed by another process), so that a sweep asks Redis only
	// about the new and the due ones.
	later map[string]time.Time
}

// Register listens for new invitations; call it before the log runs.
func (m *InviteMailer) Register() {
	m.wake = make(chan struct{}, 1)
	m.Invitations.Listen(func(string, string) {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	})
}

// retryAfter is how long a failed send waits.
const retryAfter = time.Minute

// Run sends until ctx ends.
func (m *InviteMailer) Run(ctx context.Context) error {
	if m.Every <= 0 {
		m.Every = 30 * time.Second
	}
	if m.wake == nil {
		m.wake = make(chan struct{}, 1)
	}
	t := time.NewTicker(m.Every)
	defer t.Stop()
	for {
		if m.Links.Ready() {
			m.sweep(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.wake:
		case <-t.C:
		}
	}
}

func (m *InviteMailer) sweep(ctx context.Context) {
	now := time.Now()
	if m.later == nil {
		m.later = map[string]time.Time{}
	}
	for id, t := range m.later {
		if !now.Before(t) {
			delete(m.later, id)
		}
	}
	for _, p := range m.Invitations.PendingAt(now) {
		if ctx.Err() != nil {
			return
		}
		key := "ec:console:invite-mail:" + p.MarketplaceID + ":" + p.ID
		if _, ok := m.later[key]; ok {
			continue
		}
		ttl := p.ExpiresAt.Sub(now) + time.Hour
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := m.Redis.SetNX(cctx, key, now.Unix(), ttl).Result()
		cancel()
		if err != nil {
			m.Log.Warn("invitation e-mail: redis", "err", err)
			return
		}
		if !ok {
			// Sent, being sent, or waiting for its retry: look again in a
			// minute (its sender may fail it).
			m.later[key] = now.Add(retryAfter)
			continue
		}
		if err := m.send(ctx, p); err != nil {
			m.Log.Warn("invitation e-mail not sent; retrying in a minute", "marketplace", p.MarketplaceID, "invitation", p.ID, "err", err)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = m.Redis.Expire(rctx, key, retryAfter).Err()
			cancel()
			m.later[key] = now.Add(retryAfter)
			continue
		}
		m.later[key] = p.ExpiresAt
		m.Log.Info("invitation e-mail sent", "marketplace", p.MarketplaceID, "invitation", p.ID)
	}
}

func (m *InviteMailer) send(ctx context.Context, p invitations.Pending) error {
	return m.SMTP.Send(ctx, m.message(p))
}

// message is the invitation's e-mail: the marketplace and the vendor by
// name (the vendor's id beside), the link, and when it expires in the
// marketplace's zone, named.
func (m *InviteMailer) message(p invitations.Pending) Message {
	name := p.MarketplaceID
	if m.MarketplaceName != nil {
		if n := m.MarketplaceName(p.MarketplaceID); n != "" {
			name = n
		}
	}
	vendor := p.VendorID
	if m.VendorName != nil {
		if n := m.VendorName(p.MarketplaceID, p.VendorID); n != "" && n != p.VendorID {
			vendor = n + " (" + p.VendorID + ")"
		}
	}
	loc := time.UTC
	if m.Location != nil {
		if l := m.Location(p.MarketplaceID); l != nil {
			loc = l
		}
	}
	link := m.Links.URL(p.MarketplaceID, p.Invitation)
	body := fmt.Sprintf(`Hello,

You are invited to see the advertising reports of %s on %s.

Open this link to choose a password and sign in:

%s

The link works once, until %s (%s). If you did not expect this e-mail, ignore it.
`, vendor, name, link, p.ExpiresAt.In(loc).Format("2006-01-02 15:04 MST"), loc.String())
	return Message{To: p.VendorEmail, Subject: "Your invitation to " + name, Body: body}
}
