package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/api/console"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/reporting/performance"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/reporting/vendorcharges"
)

// buildConsole builds the web console of an api process (docs/guide/console.md):
// its users on the accounts log, sessions and the sign-in throttle in
// Redis, the invitation e-mails when SMTP is configured.
func (a *App) buildConsole(deps *api.Deps) error {
	a.Users = users.New(a.StateLog, a.Invitations)
	a.KeyUsage = accounts.NewUsage(a.Redis, 30*time.Second, a.log)
	a.links = users.NewLinks(a.cfg.ConsoleURL)
	a.sampler = console.NewSampler(nil)
	mail := a.cfg.SMTPAddr != ""
	if mail {
		smtp := users.SMTP{Addr: a.cfg.SMTPAddr, User: a.cfg.SMTPUser, Password: a.cfg.SMTPPassword, From: a.cfg.SMTPFrom, TLS: a.cfg.SMTPTLS}
		if err := smtp.Check(); err != nil {
			return err
		}
		a.mailer = &users.InviteMailer{Invitations: a.Invitations, Links: a.links, SMTP: smtp, Redis: a.Redis, Log: a.log,
			MarketplaceName: func(mp string) string { m, _ := a.Accounts.Marketplace(mp); return m.Name },
			VendorName:      func(mp, vendor string) string { v, _ := a.Catalog.Vendor(mp, vendor); return v.Name },
			Location: func(mp string) *time.Location {
				if m, ok := a.Accounts.Marketplace(mp); ok {
					return m.Location()
				}
				return nil
			}}
		a.mailer.Register()
	}
	sso, err := a.buildSSO()
	if err != nil {
		return err
	}
	cons, err := console.New(console.Options{
		SSO:      sso,
		Accounts: a.Accounts, KeyUsage: a.KeyUsage, Users: a.Users,
		Sessions: users.NewSessions(a.Redis, a.cfg.ConsoleSessionIdle, 0), Throttle: users.NewThrottle(a.Redis, a.cfg.KafkaTopicPrefix),
		Links: a.links, Audit: a.Audit, Catalog: a.Catalog, Campaigns: a.Campaigns, Invitations: a.Invitations,
		Webhooks: a.Webhooks, Deliveries: a.WebhookDeliveries, Performance: performance.New(a.ClickHouse),
		ScoredFiles: scoredfiles.New(a.ClickHouse, a.S3, a.Redis, a.log).WithURLLifetime(a.cfg.ReportURLLifetime),
		Exports:     a.Exports, Balances: a.Balances, Charges: vendorcharges.New(a.ClickHouse), Cursors: a.Cursors, Auctions: deps.Auctions, ExplainMaxCandidates: deps.ExplainMaxCandidates,
		Health: a.sampler, MailEnabled: mail, SecureCookies: a.cfg.ConsoleSecureCookies, Log: a.log,
		Downloads: users.NewSlots(a.Redis, a.cfg.KafkaTopicPrefix, a.cfg.ConsoleDownloads, console.DownloadHold),
	})
	if err != nil {
		return err
	}
	deps.Console, deps.ConsoleNotFound = cons.Install, cons.NotFound
	deps.KeyUsage = a.KeyUsage.Touch
	return nil
}

// runConsole runs the console's workers: the keys' last uses, the health
// sampler and the invitation e-mails.
func (a *App) runConsole(run func(string, func(context.Context) error)) {
	if a.KeyUsage == nil {
		return
	}
	run("api key usage", a.KeyUsage.Run)
	run("console health sampler", a.sampler.Run)
	if a.mailer != nil {
		run("invitation e-mails", func(ctx context.Context) error {
			if err := a.WaitReady(ctx); err != nil {
				return err
			}
			return a.mailer.Run(ctx)
		})
	}
}

// setConsoleURL makes the console's URL of the links from the API's
// address when ENDCAP_CONSOLE_URL does not give it.
func (a *App) setConsoleURL(addr net.Addr) {
	if a.links == nil || a.cfg.ConsoleURL != "" {
		return
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	a.links.SetBase("http://" + net.JoinHostPort(host, port) + "/console")
	if a.sso != nil {
		a.sso.SetRedirectURL("http://" + net.JoinHostPort(host, port) + "/console/sso/callback")
	}
}

// buildSSO builds the console's single sign-on when ENDCAP_OIDC_ISSUER is
// set (nil otherwise): its client secret read from its file, its role map
// checked now.
func (a *App) buildSSO() (*users.SSO, error) {
	c := a.cfg
	if c.OIDCIssuer == "" {
		return nil, nil
	}
	if c.OIDCClientID == "" {
		return nil, errors.New("ENDCAP_OIDC_ISSUER is set without ENDCAP_OIDC_CLIENT_ID")
	}
	var secret string
	if c.OIDCClientSecretFile != "" {
		b, err := os.ReadFile(c.OIDCClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("ENDCAP_OIDC_CLIENT_SECRET_FILE: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if secret = strings.TrimSpace(line); secret == "" {
			return nil, fmt.Errorf("ENDCAP_OIDC_CLIENT_SECRET_FILE %s: the first line is empty", c.OIDCClientSecretFile)
		}
	}
	rules, err := users.ParseRoleMap(c.OIDCRoleMap)
	if err != nil {
		return nil, fmt.Errorf("ENDCAP_OIDC_ROLE_MAP: %w", err)
	}
	redirect := c.OIDCRedirectURL
	if redirect == "" && c.ConsoleURL != "" {
		redirect = c.ConsoleURL + "/sso/callback"
	}
	var scopes []string
	for _, sc := range strings.Split(c.OIDCScopes, ",") {
		if sc = strings.TrimSpace(sc); sc != "" {
			scopes = append(scopes, sc)
		}
	}
	sso, err := users.NewSSO(users.SSOConfig{Issuer: c.OIDCIssuer, ClientID: c.OIDCClientID, ClientSecret: secret, RedirectURL: redirect,
		Scopes: scopes, RoleClaim: c.OIDCRoleClaim, Rules: rules,
		Marketplace: func(id string) bool { _, ok := a.Accounts.Marketplace(id); return ok }}, a.Redis, a.Users)
	if err != nil {
		return nil, err
	}
	a.sso = sso
	return sso, nil
}

// loadLinkKey derives the key that signs invitation links from the list
// cursor key (configured, or shared through Redis), so that every api
// process signs them alike with no secret of its own.
func (a *App) loadLinkKey(ctx context.Context) error {
	if a.links == nil {
		return nil
	}
	key := []byte(a.cfg.CursorSecret)
	if len(key) == 0 {
		var err error
		if key, err = a.sharedSecret(ctx, cursorKeyName, "list cursor"); err != nil {
			return err
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("endcap console invitation links"))
	a.links.SetKey(m.Sum(nil))
	return nil
}
