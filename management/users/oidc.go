package users

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/redis/go-redis/v9"
	"golang.org/x/oauth2"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/management/audit"
)

// Single sign-on with OpenID Connect: the console is a relying party of one
// provider (authorization code flow, PKCE S256, state and nonce). The
// provider's ID token is verified (issuer, audience, expiry, signature by
// the provider's JWKS); its e-mail address, verified, names the user, and
// a claim (groups, say) maps to the user's role on a marketplace by the
// rules of RoleMap. A user signing in for the first time is created; a
// later sign-in updates its role when the mapping changed.

// RoleRule maps one value of the role claim to a role on a marketplace.
type RoleRule struct {
	Value         string
	MarketplaceID string
	Role          Role
	VendorID      string // vendor roles only
}

// ParseRoleMap reads ENDCAP_OIDC_ROLE_MAP:
// <claim value>=<marketplace id>:<role>[:<vendor id>], comma-separated.
// The role is marketplace_admin, vendor_admin or vendor_analyst (a vendor
// role names its vendor). Of the rules that match a user's claim values,
// the first one of each marketplace gives its role there.
func ParseRoleMap(s string) ([]RoleRule, error) {
	var out []RoleRule
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		value, target, ok := strings.Cut(item, "=")
		parts := strings.Split(target, ":")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		if !ok || strings.TrimSpace(value) == "" || len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("role map %q: want <claim value>=<marketplace id>:<role>[:<vendor id>]", item)
		}
		r := RoleRule{Value: strings.TrimSpace(value), MarketplaceID: parts[0], Role: Role(parts[1])}
		if len(parts) == 3 {
			r.VendorID = parts[2]
		}
		switch {
		case r.Role == RoleAdmin && r.VendorID != "":
			return nil, fmt.Errorf("role map %q: a marketplace admin has no vendor", item)
		case r.Role.IsVendor() && r.VendorID == "":
			return nil, fmt.Errorf("role map %q: %s needs a vendor id (<value>=<marketplace>:%s:<vendor id>)", item, r.Role, r.Role)
		case r.Role != RoleAdmin && !r.Role.IsVendor():
			return nil, fmt.Errorf("role map %q: role %q is not %s, %s or %s", item, r.Role, RoleAdmin, RoleVendorAdmin, RoleVendorAnalyst)
		}
		out = append(out, r)
	}
	return out, nil
}

// SSOConfig configures single sign-on.
type SSOConfig struct {
	Issuer, ClientID, ClientSecret string
	// RedirectURL is the console's callback (<console>/sso/callback),
	// registered at the provider; SetRedirectURL sets it later when the
	// console's URL is known only once the API listens.
	RedirectURL string
	Scopes      []string // "openid" is added when missing
	RoleClaim   string
	Rules       []RoleRule
	// Timeout bounds each request to the provider (0: 10 s).
	Timeout time.Duration
	// Marketplace says whether a marketplace exists: a rule of one that
	// does not is skipped.
	Marketplace func(id string) bool
}

// SSO is the relying party.
type SSO struct {
	cfg    SSOConfig
	rdb    redis.UniversalClient
	users  *Service
	client *http.Client

	mu       sync.Mutex
	redirect string
	provider *oidc.Provider // discovered on first use, then kept
}

// SSO errors: each is a page of its own in the console.
var (
	ErrSSOState      = errkind.New(errkind.Invalid, "this single sign-on has expired or was completed already: start again")
	ErrSSOProvider   = errkind.New(errkind.Unavailable, "the identity provider did not answer; try again in a moment")
	ErrSSORefused    = errkind.New(errkind.Forbidden, "the identity provider did not sign you in: start again")
	ErrSSONoEmail    = errkind.New(errkind.Forbidden, "the identity provider gave no e-mail address, or one it has not verified: the console needs a verified address")
	ErrSSOUnmapped   = errkind.New(errkind.Forbidden, "your account at the identity provider has no role in this console: ask your administrator to give you one")
	ErrSSODisabled   = errkind.New(errkind.Forbidden, "your console user is disabled: ask the marketplace's administrator")
	errSSONotStarted = errors.New("users: single sign-on is not configured")
)

// StateTTL is how long a started sign-in waits for the provider's answer.
const StateTTL = 10 * time.Minute

// NewSSO returns the relying party; it reaches the provider at its first
// sign-in (discovery), not here.
func NewSSO(cfg SSOConfig, rdb redis.UniversalClient, users *Service) (*SSO, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errSSONotStarted
	}
	if u, err := url.Parse(cfg.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("single sign-on: the issuer %q is not an http(s) URL", cfg.Issuer)
	}
	if len(cfg.Rules) == 0 {
		return nil, errors.New("single sign-on: the role map (ENDCAP_OIDC_ROLE_MAP) is empty: nobody could sign in")
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "groups"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if !slices.Contains(cfg.Scopes, oidc.ScopeOpenID) {
		cfg.Scopes = append([]string{oidc.ScopeOpenID}, cfg.Scopes...)
	}
	return &SSO{cfg: cfg, rdb: rdb, users: users, client: &http.Client{Timeout: cfg.Timeout}, redirect: cfg.RedirectURL}, nil
}

// SetRedirectURL sets the callback URL when the configuration did not.
func (s *SSO) SetRedirectURL(u string) {
	s.mu.Lock()
	if s.cfg.RedirectURL == "" {
		s.redirect = u
	}
	s.mu.Unlock()
}

func (s *SSO) ctx(ctx context.Context) context.Context { return oidc.ClientContext(ctx, s.client) }

// discover returns the provider, fetching its discovery document once.
func (s *SSO) discover(ctx context.Context) (*oidc.Provider, *oauth2.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider == nil {
		dctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		p, err := oidc.NewProvider(s.ctx(dctx), s.cfg.Issuer)
		if err != nil {
			return nil, nil, errors.Join(ErrSSOProvider, err)
		}
		s.provider = p
	}
	return s.provider, &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: s.provider.Endpoint(),
		RedirectURL: s.redirect, Scopes: s.cfg.Scopes}, nil
}

// pending is a started sign-in, kept in Redis under the SHA-256 of its
// state until the provider sends the browser back (once).
type pending struct {
	Nonce       string `json:"n"`
	Verifier    string `json:"v"`
	Next        string `json:"x,omitempty"`
	Marketplace string `json:"m,omitempty"`
}

func stateKey(state string) string {
	sum := sha256.Sum256([]byte(state))
	return "ec:console:oidc:" + hex.EncodeToString(sum[:])
}

// Start begins a sign-in: it returns the provider's authorization URL and
// the state, which the browser keeps in a cookie so that the callback can
// be completed by the browser that started it only. next is where the
// browser goes afterwards; marketplace, when not empty, restricts the
// sign-in to that marketplace.
func (s *SSO) Start(ctx context.Context, next, marketplace string) (string, string, error) {
	_, oc, err := s.discover(ctx)
	if err != nil {
		return "", "", err
	}
	state, p := RandomToken(), pending{Nonce: RandomToken(), Verifier: oauth2.GenerateVerifier(), Next: next, Marketplace: marketplace}
	b, _ := json.Marshal(p)
	if err := s.rdb.Set(ctx, stateKey(state), b, StateTTL).Err(); err != nil {
		return "", "", errors.Join(ErrUnavailable, err)
	}
	return oc.AuthCodeURL(state, oidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier)), state, nil
}

// SSOResult is a completed sign-in.
type SSOResult struct {
	Users []User // the accounts it opens (one per marketplace mapped)
	Next  string
	Email string
}

// Finish completes a sign-in from the provider's callback: state (the
// query's) must be the browser's (cookieState) and a pending sign-in's,
// which it ends; the code is exchanged (with the PKCE verifier) for an ID
// token, verified, whose nonce must be the sign-in's; the verified e-mail
// address and the role claim's values give the accounts, created or
// updated.
func (s *SSO) Finish(ctx context.Context, state, cookieState, code string) (SSOResult, error) {
	if state == "" || len(state) > 100 || cookieState != state {
		return SSOResult{}, ErrSSOState
	}
	b, err := s.rdb.GetDel(ctx, stateKey(state)).Bytes()
	if errors.Is(err, redis.Nil) {
		return SSOResult{}, ErrSSOState
	}
	if err != nil {
		return SSOResult{}, errors.Join(ErrUnavailable, err)
	}
	var p pending
	if json.Unmarshal(b, &p) != nil {
		return SSOResult{}, ErrSSOState
	}
	if code == "" {
		return SSOResult{}, ErrSSORefused
	}
	provider, oc, err := s.discover(ctx)
	if err != nil {
		return SSOResult{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	tok, err := oc.Exchange(s.ctx(tctx), code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return SSOResult{}, errors.Join(ErrSSORefused, err) // a code replayed, expired or not this client's
		}
		return SSOResult{}, errors.Join(ErrSSOProvider, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return SSOResult{}, errors.Join(ErrSSORefused, errors.New("no id_token in the token response"))
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: s.cfg.ClientID}).Verify(s.ctx(tctx), raw)
	if err != nil {
		return SSOResult{}, errors.Join(ErrSSORefused, err)
	}
	if idt.Nonce != p.Nonce {
		return SSOResult{}, errors.Join(ErrSSORefused, errors.New("the ID token's nonce is not the sign-in's"))
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return SSOResult{}, errors.Join(ErrSSORefused, err)
	}
	// Providers that put only the subject in the ID token give the rest at
	// the userinfo endpoint (for the same subject).
	if claims["email"] == nil || claims["email_verified"] == nil || claims[s.cfg.RoleClaim] == nil {
		if provider.UserInfoEndpoint() != "" {
			ui, err := provider.UserInfo(s.ctx(tctx), oauth2.StaticTokenSource(tok))
			if err != nil {
				return SSOResult{}, errors.Join(ErrSSOProvider, err)
			}
			extra := map[string]any{}
			if ui.Subject != idt.Subject || ui.Claims(&extra) != nil {
				return SSOResult{}, errors.Join(ErrSSORefused, errors.New("the userinfo is not the ID token's subject"))
			}
			for k, v := range extra {
				if _, ok := claims[k]; !ok {
					claims[k] = v
				}
			}
		}
	}
	email, _ := claims["email"].(string)
	email = strings.TrimSpace(email)
	if email == "" || CheckEmail(email) != nil || !claimTrue(claims["email_verified"]) {
		return SSOResult{}, ErrSSONoEmail
	}
	grants := s.grants(claimValues(claims[s.cfg.RoleClaim]), p.Marketplace)
	if len(grants) == 0 {
		return SSOResult{}, ErrSSOUnmapped
	}
	res := SSOResult{Next: p.Next, Email: email}
	actx := audit.WithActor(ctx, audit.Actor{Kind: "user", ID: "sso", Name: email})
	for _, g := range grants {
		u, err := s.users.ProvisionSSO(actx, g.MarketplaceID, email, g.Role, g.VendorID)
		if err != nil {
			return SSOResult{}, err
		}
		if u.Active() {
			res.Users = append(res.Users, u)
		}
	}
	if len(res.Users) == 0 {
		return SSOResult{}, ErrSSODisabled
	}
	return res, nil
}

// grants are the rules that apply to a user's claim values: the first of
// each marketplace (of marketplace only, when not empty) that exists.
func (s *SSO) grants(values []string, marketplace string) []RoleRule {
	var out []RoleRule
	seen := map[string]bool{}
	for _, r := range s.cfg.Rules {
		if seen[r.MarketplaceID] || !slices.Contains(values, r.Value) || (marketplace != "" && r.MarketplaceID != marketplace) {
			continue
		}
		if s.cfg.Marketplace != nil && !s.cfg.Marketplace(r.MarketplaceID) {
			continue
		}
		seen[r.MarketplaceID] = true
		out = append(out, r)
	}
	return out
}

// claimTrue reads a boolean claim (some providers send "true").
func claimTrue(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}

// claimValues reads a claim as a list of strings (a string is one).
func claimValues(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
