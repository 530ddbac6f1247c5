// Package offsite owns the advertiser domains of offsite advertising: one
// web domain per vendor (advertiser), used by external ad networks. Each is
// one entity ("advertiser_domain", keyed by the vendor id) on the entities
// log (storage/statelog).
//
// Domains are validated and normalised with IDNA (UTS #46, the Lookup
// profile of golang.org/x/net/idna): the A-label (ASCII, punycode) form is
// stored, and both forms are shown.
package offsite

import (
	"context"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/statelog"
)

const typeDomain = "advertiser_domain"

// Domain is a vendor's advertiser domain.
type Domain struct {
	VendorID  string    `json:"vendorId"`
	Domain    string    `json:"domain"` // A-label form, lower case, no trailing dot
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Unicode is the domain's display (U-label) form.
func (d Domain) Unicode() string {
	u, err := idna.Display.ToUnicode(d.Domain)
	if err != nil {
		return d.Domain
	}
	return u
}

// Service is the advertiser domains view and its operations.
type Service struct {
	items *statelog.Collection[Domain]
	cat   entityref.Catalog
	now   func() time.Time
}

// New registers the collection on log (before the log runs).
func New(log *statelog.Log, cat entityref.Catalog) *Service {
	return &Service{
		items: statelog.NewCollection[Domain](log, typeDomain),
		cat:   cat,
		now:   func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
	}
}

// vendor returns the catalog id of the vendor vendorID names (its catalog
// id or its internal UUID), or a not-found error. Domains are kept by
// catalog id.
func (s *Service) vendor(mp, vendorID string) (string, error) {
	v, ok := s.cat.ResolveVendor(mp, vendorID)
	if !ok {
		return "", validation.NotFoundf("vendor %s", vendorID)
	}
	return v.ID, nil
}

// Get returns a vendor's domain and its version; the vendor is named by its
// catalog id or its internal UUID. Unknown vendor, or no domain set: not
// found.
func (s *Service) Get(mp, vendorID string) (Domain, int64, error) {
	vendorID, err := s.vendor(mp, vendorID)
	if err != nil {
		return Domain{}, 0, err
	}
	d, v, ok := s.items.Get(mp, vendorID)
	if !ok {
		return Domain{}, 0, validation.NotFoundf("advertiser domain of vendor %s", vendorID)
	}
	return d, v, nil
}

// Put sets a vendor's domain (create or replace). ifMatch is the expected
// version, or 0 (then the version read is expected, so that of two racing
// writes one gets a conflict). Setting the domain it already has changes
// nothing (no new version).
func (s *Service) Put(ctx context.Context, mp, vendorID string, domain *string, ifMatch statelog.IfMatch) (Domain, int64, error) {
	vendorID, err := s.vendor(mp, vendorID)
	if err != nil {
		return Domain{}, 0, err
	}
	if domain == nil {
		return Domain{}, 0, validation.New(validation.Missing, "Field required", "body", "domain")
	}
	ascii, msg := Normalize(*domain)
	if msg != "" {
		return Domain{}, 0, validation.New(validation.ValueError, msg, "body", "domain")
	}
	old, cur, exists := s.items.Get(mp, vendorID)
	if !statelog.Matches(ifMatch, true, cur) {
		return Domain{}, 0, statelog.ErrConflict
	}
	expected := cur
	if !exists {
		// A domain that was deleted carries on from the version of its
		// deletion (the log's version of the key).
		expected = s.items.Log().Version(typeDomain, mp+"/"+vendorID)
	}
	now := s.now()
	d := Domain{VendorID: vendorID, Domain: ascii, CreatedAt: now, UpdatedAt: now}
	if exists {
		d.CreatedAt = old.CreatedAt
		if old.Domain == ascii {
			return old, cur, nil // unchanged: no new version
		}
	}
	v, err := s.items.Put(ctx, mp, vendorID, expected, d)
	if err != nil {
		return Domain{}, 0, err
	}
	return d, v, nil
}

// Delete removes a vendor's domain. ifMatch is the expected version, or 0.
func (s *Service) Delete(ctx context.Context, mp, vendorID string, ifMatch statelog.IfMatch) error {
	vendorID, err := s.vendor(mp, vendorID)
	if err != nil {
		return err
	}
	_, cur, err := s.Get(mp, vendorID)
	if err != nil {
		return err
	}
	if !statelog.Matches(ifMatch, true, cur) {
		return statelog.ErrConflict
	}
	return s.items.Delete(ctx, mp, vendorID, cur)
}

// Normalize validates a host name and returns its A-label form, or why it
// is not acceptable. It takes a bare registrable host name: no scheme, path,
// port, user, IP address or single label; a trailing dot is dropped.
func Normalize(in string) (string, string) {
	s := strings.TrimSpace(in)
	switch {
	case s == "":
		return "", "Domain must not be empty"
	case !utf8.ValidString(s):
		return "", "Domain is not valid UTF-8"
	case strings.Contains(s, "://"):
		return "", "Domain must be a bare host name like example.com, without a scheme (https://)"
	case strings.ContainsAny(s, "/?#"):
		return "", "Domain must be a bare host name like example.com, without a path, query or fragment"
	case strings.Contains(s, "@"):
		return "", "Domain must be a bare host name like example.com, without a user part"
	case strings.HasPrefix(s, "[") || net.ParseIP(s) != nil:
		return "", "Domain must be a host name, not an IP address"
	case strings.Contains(s, ":"):
		return "", "Domain must be a bare host name like example.com, without a port"
	case strings.ContainsAny(s, " \t\r\n"):
		return "", "Domain must not contain spaces"
	}
	s = strings.TrimSuffix(s, ".")
	ascii, err := idna.Lookup.ToASCII(s)
	if err != nil {
		return "", "Domain is not a valid host name: " + strings.TrimPrefix(err.Error(), "idna: ")
	}
	ascii = strings.ToLower(ascii)
	if net.ParseIP(ascii) != nil {
		return "", "Domain must be a host name, not an IP address"
	}
	if len(ascii) > 253 {
		return "", "Domain must have at most 253 characters in its ASCII (punycode) form"
	}
	labels := strings.Split(ascii, ".")
	if len(labels) < 2 {
		return "", "Domain must have at least two labels, like example.com"
	}
	for _, l := range labels {
		if l == "" {
			return "", "Domain must not contain empty labels (..)"
		}
		if len(l) > 63 {
			return "", "Each label of the domain must have at most 63 characters in its ASCII (punycode) form"
		}
	}
	if tld := labels[len(labels)-1]; strings.Trim(tld, "0123456789") == "" {
		return "", "The top-level label of the domain must not be all digits"
	}
	return ascii, ""
}
