// Package users owns the people who sign in to the console: a marketplace's
// administrators and the users of its vendors, who become users by accepting
// an invitation (management/invitations). Users are entities ("user") on the
// accounts log (storage/statelog), held in memory by every API process, and
// never copied to ClickHouse. Passwords are stored as argon2id hashes.
// Sessions (sessions.go) and the sign-in throttle (throttle.go) live in
// Redis; invitation links are signed (links.go) and mailed (mail.go).
package users

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/storage/statelog"
)

// Role is what a user may do.
type Role string

// Roles. A marketplace admin runs the whole marketplace in the console;
// vendor users (either role an invitation names) read their own vendor's
// campaigns and reports, nothing else.
const (
	RoleAdmin         Role = "marketplace_admin"
	RoleVendorAdmin   Role = invitations.RoleVendorAdmin
	RoleVendorAnalyst Role = invitations.RoleVendorAnalyst
)

// IsVendor says whether the role is scoped to one vendor.
func (r Role) IsVendor() bool { return r == RoleVendorAdmin || r == RoleVendorAnalyst }

// User is one person who can sign in.
type User struct {
	ID            string    `json:"id"`
	Email         string    `json:"email"`
	MarketplaceID string    `json:"marketplaceId"`
	Role          Role      `json:"role"`
	VendorID      string    `json:"vendorId,omitempty"` // vendor roles only
	PasswordHash  string    `json:"passwordHash"`
	CreatedAt     time.Time `json:"createdAt"`
	// InvitationID is the invitation the user accepted (vendor users).
	InvitationID string     `json:"invitationId,omitempty"`
	DisabledAt   *time.Time `json:"disabledAt,omitempty"`
	// Epoch grows with every password change, every disable and every
	// change of role: a session opened at an older epoch is over.
	Epoch int64 `json:"epoch"`
	// SSO: the user was created by a single sign-on (sso.go); it has no
	// password until it sets one.
	SSO bool `json:"sso,omitempty"`
}

// Active says whether the user may sign in.
func (u User) Active() bool { return u.DisabledAt == nil }

const typeUser = "user"

// Errors.
var (
	ErrInvalid     error = errkind.Invalid
	ErrNotFound          = errkind.New(errkind.NotFound, "no such user")
	ErrEmailTaken        = errkind.New(errkind.Conflict, "a user with this e-mail address exists already")
	ErrBadPassword       = errkind.New(errkind.Invalid, "wrong e-mail address or password")
	// ErrLoading: the users are still being read (the process is
	// starting); no password is checked meanwhile.
	ErrLoading = errkind.New(errkind.Unavailable, "the console is starting; retry in a moment")
)

// Service is the view of the users and their operations.
type Service struct {
	log  *statelog.Log
	invs *invitations.Service // nil: invitations cannot be accepted here
	now  func() time.Time

	mu   sync.RWMutex
	byID map[string]*User
	// byEmail finds the accounts of an address: its lower-cased form →
	// marketplace → user id (ids of either derivation, IDOf or LegacyIDOf).
	byEmail map[string]map[string]string
}

// New registers the users on log (the accounts log) before it runs. invs,
// when not nil, is where invitations are accepted.
func New(log *statelog.Log, invs *invitations.Service) *Service {
	s := &Service{log: log, invs: invs, now: time.Now, byID: map[string]*User{}, byEmail: map[string]map[string]string{}}
	log.Register(typeUser, s.apply)
	return s
}

// Ready says whether every user in the log has been loaded.
func (s *Service) Ready() bool { return s.log.Ready() }

func (s *Service) apply(r statelog.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[r.ID]; ok {
		s.unindex(old, r.ID)
	}
	if r.Deleted {
		delete(s.byID, r.ID)
		return
	}
	var u User
	if err := decode(r.State, &u); err != nil {
		return
	}
	s.byID[r.ID] = &u
	k := emailKey(u.Email)
	if s.byEmail[k] == nil {
		s.byEmail[k] = map[string]string{}
	}
	s.byEmail[k][u.MarketplaceID] = r.ID
}

func (s *Service) unindex(u *User, id string) {
	k := emailKey(u.Email)
	if m := s.byEmail[k]; m != nil && m[u.MarketplaceID] == id {
		delete(m, u.MarketplaceID)
		if len(m) == 0 {
			delete(s.byEmail, k)
		}
	}
}

func emailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// IDOf is the id of a new user of marketplace mp with an e-mail address:
// derived from both (the address case-insensitive), so that an address has
// at most one account on each marketplace (the log's expected version 0 on
// the id refuses a second) and may have one on several.
func IDOf(mp, email string) string {
	sum := sha256.Sum256([]byte("endcap-user\x00" + mp + "\x00" + emailKey(email)))
	return hex.EncodeToString(sum[:16])
}

// LegacyIDOf is the id older users were given, derived from the address
// alone. Their records keep it: the index by address finds them as it
// finds the others, and their sessions name it.
func LegacyIDOf(email string) string {
	sum := sha256.Sum256([]byte("endcap-user\x00" + emailKey(email)))
	return hex.EncodeToString(sum[:16])
}

// Get returns a user by id.
func (s *Service) Get(id string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.byID[id]
	if !ok {
		return User{}, false
	}
	return *u, true
}

// Lookup returns the user of marketplace mp with an e-mail address
// (case-insensitive), whichever way its id was derived.
func (s *Service) Lookup(mp, email string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.byEmail[emailKey(email)][mp]
	if !ok {
		return User{}, false
	}
	u, ok := s.byID[id]
	if !ok {
		return User{}, false
	}
	return *u, true
}

// Accounts returns the users of an e-mail address on every marketplace,
// by marketplace id. Only sign-in and the operator's CLI may ask this: a
// marketplace's pages ask Lookup with their own marketplace.
func (s *Service) Accounts(email string) []User {
	s.mu.RLock()
	var out []User
	for _, id := range s.byEmail[emailKey(email)] {
		if u, ok := s.byID[id]; ok {
			out = append(out, *u)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].MarketplaceID < out[j].MarketplaceID })
	return out
}

// List returns the users of a marketplace by e-mail address.
func (s *Service) List(mp string) []User {
	s.mu.RLock()
	var out []User
	for _, u := range s.byID {
		if u.MarketplaceID == mp {
			out = append(out, *u)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Email < out[j].Email })
	return out
}

// MaxEmail is the longest e-mail address.
const MaxEmail = 254

// CheckEmail validates an e-mail address (a bare address, no display name).
func CheckEmail(addr string) error {
	if addr == "" || len(addr) > MaxEmail {
		return fmt.Errorf("%w: an e-mail address is 1 to %d characters", ErrInvalid, MaxEmail)
	}
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr || a.Name != "" {
		return fmt.Errorf("%w: %q is not an e-mail address", ErrInvalid, addr)
	}
	return nil
}

// CreateAdmin creates a marketplace administrator with a password.
func (s *Service) CreateAdmin(ctx context.Context, mp, email, password string) (User, error) {
	email = strings.TrimSpace(email)
	if err := CheckEmail(email); err != nil {
		return User{}, err
	}
	u := User{ID: IDOf(mp, email), Email: email, MarketplaceID: mp, Role: RoleAdmin, CreatedAt: s.now().UTC().Truncate(time.Second), Epoch: 1}
	return s.create(ctx, u, password, "user.create", "marketplace admin "+email)
}

func (s *Service) create(ctx context.Context, u User, password, action, detail string) (User, error) {
	if err := CheckPassword(password, u.Email); err != nil {
		return User{}, err
	}
	h, err := HashPassword(ctx, password)
	if err != nil {
		return User{}, err
	}
	u.PasswordHash = h
	return s.insert(ctx, u, action, detail)
}

// insert writes a new user: ErrEmailTaken when its marketplace has a user
// with the address already (a legacy id is found by the index, a new one
// by the log's expected version).
func (s *Service) insert(ctx context.Context, u User, action, detail string) (User, error) {
	if _, ok := s.Lookup(u.MarketplaceID, u.Email); ok {
		return User{}, ErrEmailTaken
	}
	if err := s.write(ctx, u, 0, action, detail); err != nil {
		if errkind.KindOf(err) == errkind.Conflict {
			return User{}, ErrEmailTaken
		}
		return User{}, err
	}
	return u, nil
}

// write appends a user's new state expecting version expected, with its
// audit entry when ctx carries an actor.
func (s *Service) write(ctx context.Context, u User, expected int64, action, detail string) error {
	changes := []statelog.Change{{Type: typeUser, ID: u.ID, Expected: expected, State: u}}
	if c, ok := audit.Change(ctx, u.MarketplaceID, action, u.ID, detail, s.now()); ok {
		changes = append(changes, c)
	}
	_, err := s.log.AppendBatch(ctx, changes)
	return err
}

// MaxSignInAccounts bounds the accounts (one argon2 hash each) a sign-in
// without a marketplace checks the password against; an address with more
// signs in with its marketplace's link (?marketplace=).
const MaxSignInAccounts = 8

// Authenticate checks an e-mail address and password against the address's
// account on marketplace mp, or, with mp empty, on every marketplace (at
// most MaxSignInAccounts), and returns the active accounts it matches, by
// marketplace id. It takes as long for an unknown address as for a wrong
// password; an account with no password (single sign-on) matches none.
func (s *Service) Authenticate(ctx context.Context, mp, email, password string) ([]User, error) {
	if !s.Ready() {
		return nil, ErrLoading
	}
	var accts []User
	if mp != "" {
		if u, ok := s.Lookup(mp, email); ok {
			accts = append(accts, u)
		}
	} else {
		accts = s.Accounts(email)
		if len(accts) > MaxSignInAccounts {
			accts = accts[:MaxSignInAccounts]
		}
	}
	var matched []User
	for i := 0; i < max(1, len(accts)); i++ {
		hash, u := dummyHash(), User{}
		if i < len(accts) {
			if u = accts[i]; u.PasswordHash != "" {
				hash = u.PasswordHash
			}
		}
		match, err := VerifyPassword(ctx, password, hash)
		if err != nil {
			return nil, err
		}
		if match && u.ID != "" && u.PasswordHash != "" && u.Active() {
			matched = append(matched, u)
		}
	}
	if len(matched) == 0 {
		return nil, ErrBadPassword
	}
	return matched, nil
}

// CheckCurrentPassword says whether password is the password of user id
// (ErrBadPassword when not).
func (s *Service) CheckCurrentPassword(ctx context.Context, id, password string) error {
	u, ok := s.Get(id)
	if !ok {
		return ErrNotFound
	}
	got, err := s.Authenticate(ctx, u.MarketplaceID, u.Email, password)
	if err != nil {
		return err
	}
	if len(got) != 1 || got[0].ID != id {
		return ErrBadPassword
	}
	return nil
}

// ProvisionSSO makes the account of an address on marketplace mp what a
// single sign-on maps it to: created (without a password) the first time,
// its role and vendor updated, and its sessions ended, when the mapping
// changed since. A disabled user stays disabled.
func (s *Service) ProvisionSSO(ctx context.Context, mp, email string, role Role, vendorID string) (User, error) {
	for attempt := 0; ; attempt++ {
		u, ok := s.Lookup(mp, email)
		if !ok {
			n := User{ID: IDOf(mp, email), Email: email, MarketplaceID: mp, Role: role, VendorID: vendorID, SSO: true,
				CreatedAt: s.now().UTC().Truncate(time.Second), Epoch: 1}
			created, err := s.insert(ctx, n, "user.create", fmt.Sprintf("%s by single sign-on", role))
			if errors.Is(err, ErrEmailTaken) && attempt == 0 {
				continue // created meanwhile by another sign-in: update it
			}
			return created, err
		}
		if u.Role == role && u.VendorID == vendorID {
			return u, nil
		}
		detail := fmt.Sprintf("role %s → %s by single sign-on", u.Role, role)
		u.Role, u.VendorID = role, vendorID
		u.Epoch++
		err := s.write(ctx, u, s.log.Version(typeUser, u.ID), "user.role", detail)
		if errkind.KindOf(err) == errkind.Conflict && attempt == 0 {
			continue
		}
		return u, err
	}
}

// SetPassword changes a user's password and ends its other sessions.
func (s *Service) SetPassword(ctx context.Context, id, password string) (User, error) {
	u, ok := s.Get(id)
	if !ok {
		return User{}, ErrNotFound
	}
	if err := CheckPassword(password, u.Email); err != nil {
		return User{}, err
	}
	h, err := HashPassword(ctx, password)
	if err != nil {
		return User{}, err
	}
	u.PasswordHash = h
	u.Epoch++
	if err := s.write(ctx, u, s.log.Version(typeUser, u.ID), "user.password", u.Email); err != nil {
		return User{}, err
	}
	return u, nil
}

// SetDisabled disables (ending its sessions) or enables a user of mp.
func (s *Service) SetDisabled(ctx context.Context, mp, id string, disabled bool) (User, error) {
	u, ok := s.Get(id)
	if !ok || u.MarketplaceID != mp {
		return User{}, ErrNotFound
	}
	if disabled == !u.Active() {
		return u, nil
	}
	action := "user.enable"
	if disabled {
		now := s.now().UTC().Truncate(time.Second)
		u.DisabledAt = &now
		action = "user.disable"
	} else {
		u.DisabledAt = nil
	}
	u.Epoch++
	if err := s.write(ctx, u, s.log.Version(typeUser, u.ID), action, u.Email); err != nil {
		return User{}, err
	}
	return u, nil
}

// ErrInvitationTaken means the invitation's address has an account already.
var ErrInvitationTaken = errkind.New(errkind.Conflict, "this e-mail address has an account already: sign in with it")

// Accept turns a pending invitation of mp into a user with a password. The
// link's signature is checked by the caller (Links.Verify). The user is
// created first and the invitation marked accepted after: a failure between
// the two leaves the invitation pending, and accepting it again finds the
// user (ErrInvitationTaken); it never creates two.
func (s *Service) Accept(ctx context.Context, mp, invitationID, password string) (User, error) {
	if s.invs == nil {
		return User{}, errkind.New(errkind.Unavailable, "invitations cannot be accepted here")
	}
	inv, _, err := s.invs.Get(mp, invitationID)
	if err != nil {
		return User{}, err
	}
	if inv.StatusAt(s.invs.Now()) != invitations.StatusPending {
		return User{}, invitations.ErrNotPending
	}
	u := User{ID: IDOf(mp, inv.VendorEmail), Email: inv.VendorEmail, MarketplaceID: mp, Role: Role(inv.TargetUserRole),
		VendorID: inv.VendorID, InvitationID: inv.ID, CreatedAt: s.now().UTC().Truncate(time.Second), Epoch: 1}
	if !u.Role.IsVendor() {
		return User{}, fmt.Errorf("%w: the invitation's role %q is not a vendor role", ErrInvalid, inv.TargetUserRole)
	}
	if _, ok := s.Lookup(mp, u.Email); ok {
		return User{}, ErrInvitationTaken
	}
	// The accepting person is the actor of their own account's creation.
	ctx = audit.WithActor(ctx, audit.Actor{Kind: "user", ID: u.ID, Name: u.Email})
	created, err := s.create(ctx, u, password, "invitation.accept", fmt.Sprintf("%s of vendor %s (invitation %s)", u.Role, u.VendorID, inv.ID))
	if err != nil {
		if err == ErrEmailTaken {
			return User{}, ErrInvitationTaken
		}
		return User{}, err
	}
	if _, err := s.invs.Accept(ctx, mp, inv.ID); err != nil {
		return User{}, err
	}
	return created, nil
}

// MaxPassword and MinPassword bound a password's length (characters).
const (
	MinPassword = 12
	MaxPassword = 256
)

// CheckPassword validates a new password.
func CheckPassword(p, email string) error {
	n := utf8.RuneCountInString(p)
	switch {
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: a password must be text", ErrInvalid)
	case n < MinPassword:
		return fmt.Errorf("%w: a password has at least %d characters", ErrInvalid, MinPassword)
	case n > MaxPassword:
		return fmt.Errorf("%w: a password has at most %d characters", ErrInvalid, MaxPassword)
	case email != "" && strings.EqualFold(strings.TrimSpace(p), strings.TrimSpace(email)):
		return fmt.Errorf("%w: a password cannot be the e-mail address", ErrInvalid)
	}
	return nil
}
