// Package invitations owns the invitations of vendors' people as users of
// the platform. Each invitation is one entity ("invitation") on the entities
// log (storage/statelog); a request's invitations are written as one batch,
// so a request is stored whole or not at all.
package invitations

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/statelog"
)

const typeInvitation = "invitation"

// Limits and defaults.
const (
	MaxPerRequest = 500
	// TTL is how long an invitation can be accepted.
	TTL = 7 * 24 * time.Hour
)

// Roles a vendor's user can be invited with.
const (
	RoleVendorAdmin   = "vendor_admin"
	RoleVendorAnalyst = "vendor_analyst"
)

// Roles lists the valid targetUserRole values.
var Roles = []string{RoleVendorAdmin, RoleVendorAnalyst}

// Statuses. Pending and accepted are stored; expired is what a pending
// invitation past its expiry reads as.
const (
	StatusPending  = "pending"
	StatusAccepted = "accepted"
	StatusExpired  = "expired"
)

// Invitation is one stored invitation.
type Invitation struct {
	ID             string    `json:"id"`
	VendorID       string    `json:"vendorId"`
	VendorEmail    string    `json:"vendorEmail"`
	TargetUserRole string    `json:"targetUserRole"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
	// AcceptedAt is when the invited person set a password (accepted only).
	AcceptedAt *time.Time `json:"acceptedAt,omitempty"`
}

// StatusAt is the invitation's status as seen at now.
func (i Invitation) StatusAt(now time.Time) string {
	if i.Status == StatusPending && !now.Before(i.ExpiresAt) {
		return StatusExpired
	}
	return i.Status
}

// Invite is one entry of a request.
type Invite struct {
	VendorID       *string `json:"vendorId"`
	VendorEmail    *string `json:"vendorEmail"`
	TargetUserRole *string `json:"targetUserRole"`
}

// Service is the invitations view and its operations.
type Service struct {
	items *statelog.Collection[Invitation]
	cat   entityref.Catalog
	now   func() time.Time
	cap   *mailCap // nil: invitation e-mails are not counted
}

// New registers the invitations collection on log (before the log runs).
func New(log *statelog.Log, cat entityref.Catalog) *Service {
	return &Service{
		items: statelog.NewCollection[Invitation](log, typeInvitation),
		cat:   cat,
		now:   func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
	}
}

// Now is the service's clock (for reading statuses).
func (s *Service) Now() time.Time { return s.now() }

// Create validates every invite and stores them all, or none. invites is
// nil when the field was absent (or null). The retry of a request with an
// idempotency key gets the invitations its first attempt created (and
// writes those still missing).
func (s *Service) Create(ctx context.Context, mp string, list *[]Invite) ([]Invitation, error) {
	var errs validation.Errors
	var invites []Invite
	if list != nil {
		invites = *list
	}
	switch {
	case list == nil:
		errs.Add(validation.Missing, "Field required", "body", "invites")
	case len(invites) == 0:
		errs.Add(validation.TooShort, "List should have at least 1 item after validation, not 0", "body", "invites")
	case len(invites) > MaxPerRequest:
		errs.Add(validation.TooLong, "List should have at most 500 items after validation, not "+strconv.Itoa(len(invites)), "body", "invites")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	now := s.now()
	keyed := false
	out := make([]Invitation, len(invites))
	seen := map[[2]string]int{}
	for i, in := range invites {
		inv := Invitation{Status: StatusPending, CreatedAt: now, ExpiresAt: now.Add(TTL)}
		if in.VendorID == nil || *in.VendorID == "" {
			errs.Add(validation.Missing, "Field required", "body", "invites", i, "vendorId")
		} else {
			inv.VendorID = *in.VendorID
			if utf8.RuneCountInString(inv.VendorID) > 255 {
				errs.Add(validation.TooLong, "String should have at most 255 characters", "body", "invites", i, "vendorId")
			} else if v, ok := s.cat.ResolveVendor(mp, inv.VendorID); !ok {
				errs.Add(validation.NotFound, "vendor "+inv.VendorID+" does not exist in the catalog", "body", "invites", i, "vendorId")
			} else {
				inv.VendorID = v.ID // the catalog id, also when the invite named the vendor's UUID
			}
		}
		if in.VendorEmail == nil || strings.TrimSpace(*in.VendorEmail) == "" {
			errs.Add(validation.Missing, "Field required", "body", "invites", i, "vendorEmail")
		} else {
			inv.VendorEmail = strings.TrimSpace(*in.VendorEmail)
			if !validEmail(inv.VendorEmail) {
				errs.Add(validation.ValueError, "value is not a valid email address", "body", "invites", i, "vendorEmail")
			}
		}
		if in.TargetUserRole == nil || *in.TargetUserRole == "" {
			errs.Add(validation.Missing, "Field required", "body", "invites", i, "targetUserRole")
		} else {
			inv.TargetUserRole = *in.TargetUserRole
			if !validRole(inv.TargetUserRole) {
				errs.Add("enum", "Input should be 'vendor_admin' or 'vendor_analyst'", "body", "invites", i, "targetUserRole")
			}
		}
		if inv.VendorID != "" && inv.VendorEmail != "" {
			k := [2]string{inv.VendorID, strings.ToLower(inv.VendorEmail)}
			if j, dup := seen[k]; dup {
				errs.Add(validation.ValueError, "duplicate invite: the same vendorId and vendorEmail as invites["+strconv.Itoa(j)+"]", "body", "invites", i)
			} else {
				seen[k] = i
			}
		}
		id, ok, err := idempotency.NewID(ctx, i)
		if err != nil {
			return nil, err
		}
		keyed = ok
		inv.ID = id
		out[i] = inv
	}
	// The invitations an earlier attempt of the same request created.
	created := func() int {
		n := 0
		for i := range out {
			if inv, _, ok := s.items.Get(mp, out[i].ID); ok {
				out[i] = inv
				n++
			}
		}
		return n
	}
	if keyed && created() == len(out) {
		return out, nil
	}
	if len(errs) > 0 {
		return nil, errs
	}
	ws := make([]statelog.Write[Invitation], 0, len(out))
	for _, inv := range out {
		if _, _, ok := s.items.Get(mp, inv.ID); !ok {
			ws = append(ws, statelog.Write[Invitation]{ID: inv.ID, Expected: 0, Value: inv})
		}
	}
	if s.cap != nil && len(ws) > 0 {
		if err := s.cap.take(ctx, mp, len(ws), now); err != nil {
			return nil, err
		}
	}
	if err := s.items.PutMany(ctx, mp, ws); err != nil {
		if s.cap != nil && len(ws) > 0 && errors.Is(err, statelog.ErrConflict) { // nothing written (an unconfirmed write stays counted)
			s.cap.giveBack(ctx, mp, len(ws), now)
		}
		if keyed && errors.Is(err, statelog.ErrConflict) {
			if created() == len(out) {
				return out, nil
			}
			return nil, fmt.Errorf("%w: an earlier attempt of this request is still being written (%v)", statelog.ErrInFlight, err)
		}
		return nil, err
	}
	return out, nil
}

// Get returns one invitation and its version.
func (s *Service) Get(mp, id string) (Invitation, int64, error) {
	inv, v, ok := s.items.Get(mp, id)
	if !ok {
		return Invitation{}, 0, validation.NotFoundf("invitation %s", id)
	}
	return inv, v, nil
}

// List returns a page of invitations in id (creation) order, optionally only
// those of one vendor (named by its catalog id or its internal UUID).
func (s *Service) List(mp, vendorID, after string, limit int) ([]Invitation, bool) {
	var keep func(string, Invitation) bool
	if vendorID != "" {
		if v, ok := s.cat.ResolveVendor(mp, vendorID); ok {
			vendorID = v.ID
		}
		keep = func(_ string, inv Invitation) bool { return inv.VendorID == vendorID }
	}
	_, vals, more := s.items.Page(mp, after, limit, keep)
	return vals, more
}

// Newest returns up to limit invitations of a marketplace, newest first
// (ids are time-ordered), and whether more exist.
func (s *Service) Newest(mp string, limit int) ([]Invitation, bool) {
	_, vals, more := s.items.PageDesc(mp, "", limit, nil)
	return vals, more
}

// ErrNotPending means the invitation was accepted already or has expired.
var ErrNotPending = errkind.New(errkind.Conflict, "this invitation was accepted already or has expired")

// Accept marks a pending invitation accepted, once: of two concurrent
// acceptances exactly one succeeds (the other gets ErrNotPending or a
// conflict).
func (s *Service) Accept(ctx context.Context, mp, id string) (Invitation, error) {
	inv, v, ok := s.items.Get(mp, id)
	if !ok {
		return Invitation{}, validation.NotFoundf("invitation %s", id)
	}
	now := s.now()
	if inv.StatusAt(now) != StatusPending {
		return Invitation{}, ErrNotPending
	}
	inv.Status, inv.AcceptedAt = StatusAccepted, &now
	if _, err := s.items.Put(ctx, mp, id, v, inv); err != nil {
		return Invitation{}, err
	}
	return inv, nil
}

// Pending is a pending invitation and its marketplace.
type Pending struct {
	MarketplaceID string
	Invitation
}

// PendingAt returns every invitation of every marketplace still pending at
// now (not accepted, not expired).
func (s *Service) PendingAt(now time.Time) []Pending {
	var out []Pending
	for _, mp := range s.items.Marketplaces() {
		s.items.Each(mp, func(_ string, inv Invitation) bool {
			if inv.StatusAt(now) == StatusPending {
				out = append(out, Pending{MarketplaceID: mp, Invitation: inv})
			}
			return true
		})
	}
	return out
}

// Listen registers fn, called for every applied invitation change (under
// the collection's lock: keep it quick). Call it before the log runs.
func (s *Service) Listen(fn func(mp, id string)) {
	s.items.Listen(func(mp, id string, _, _ *Invitation) { fn(mp, id) })
}

func validRole(r string) bool {
	i := sort.SearchStrings(Roles, r)
	return i < len(Roles) && Roles[i] == r
}

func validEmail(addr string) bool {
	if len(addr) > 254 {
		return false
	}
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr || a.Name != "" {
		return false
	}
	_, domain, _ := strings.Cut(addr, "@")
	return strings.Contains(domain, ".") && !strings.HasPrefix(domain, "[")
}
