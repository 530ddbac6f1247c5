// Package billing owns billing contacts and their links to vendors.
//
// Both are event-sourced on the entities log (storage/statelog): a contact
// is one entity ("billing_contact", keyed by its id), and every link between
// a contact and a vendor is one entity of its own ("billing_link", keyed by
// "<contact id>/<vendor id>"). Unlinking deletes the link, never the
// contact: campaigns that use a contact keep it (they only read it), and the
// contact stays linked to its other vendors.
package billing

import (
	"context"
	"errors"
	"net/mail"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/text/language"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/statelog"
)

const (
	typeContact = "billing_contact"
	typeLink    = "billing_link"

	maxText   = 255
	maxEmail  = 254
	maxTaxID  = 64
	maxPostal = 32
)

// Address is a postal address; every field is optional.
type Address struct {
	Line1      string `json:"line1,omitempty"`
	Line2      string `json:"line2,omitempty"`
	City       string `json:"city,omitempty"`
	PostalCode string `json:"postalCode,omitempty"`
	Region     string `json:"region,omitempty"`
	Country    string `json:"country,omitempty"` // ISO 3166-1 alpha-2, upper case
}

func (a Address) empty() bool { return a == Address{} }

// Contact is a billing contact of a marketplace.
type Contact struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	Company   string    `json:"company,omitempty"`
	TaxID     string    `json:"taxId,omitempty"`
	Address   *Address  `json:"address,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Link is the link of a contact to a vendor.
type Link struct {
	ContactID string    `json:"contactId"`
	VendorID  string    `json:"vendorId"`
	LinkedAt  time.Time `json:"linkedAt"`
}

func linkID(contactID, vendorID string) string { return contactID + "/" + vendorID }

// Service is the billing view and its operations.
type Service struct {
	contacts *statelog.Collection[Contact]
	links    *statelog.Collection[Link]
	cat      entityref.Catalog
	now      func() time.Time

	mu       sync.RWMutex
	byVendor map[string]map[string]map[string]struct{} // marketplace -> vendor -> contact ids
}

// New registers the billing collections on log (call before the log runs).
func New(log *statelog.Log, cat entityref.Catalog) *Service {
	s := &Service{
		contacts: statelog.NewCollection[Contact](log, typeContact),
		links:    statelog.NewCollection[Link](log, typeLink),
		cat:      cat,
		now:      func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
		byVendor: map[string]map[string]map[string]struct{}{},
	}
	s.links.OnChange = s.indexLink
	return s
}

func (s *Service) indexLink(mp, _ string, old, nw *Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != nil {
		if vs := s.byVendor[mp][old.VendorID]; vs != nil {
			delete(vs, old.ContactID)
			if len(vs) == 0 {
				delete(s.byVendor[mp], old.VendorID)
			}
		}
	}
	if nw != nil {
		m := s.byVendor[mp]
		if m == nil {
			m = map[string]map[string]struct{}{}
			s.byVendor[mp] = m
		}
		vs := m[nw.VendorID]
		if vs == nil {
			vs = map[string]struct{}{}
			m[nw.VendorID] = vs
		}
		vs[nw.ContactID] = struct{}{}
	}
}

// ContactInput is the body of a create. Update uses ContactPatch.
type ContactInput struct {
	Name    string   `json:"name"`
	Email   string   `json:"email"`
	Company string   `json:"company"`
	TaxID   string   `json:"taxId"`
	Address *Address `json:"address"`
}

// ContactPatch is a partial update: a nil field is left as it is; an
// optional field set to "" (or address set to {}) is cleared.
type ContactPatch struct {
	Name    *string  `json:"name"`
	Email   *string  `json:"email"`
	Company *string  `json:"company"`
	TaxID   *string  `json:"taxId"`
	Address *Address `json:"address"`
}

// Create stores a new contact with a generated id. The retry of a request
// with an idempotency key gets the contact its first attempt created.
func (s *Service) Create(ctx context.Context, mp string, in ContactInput) (Contact, int64, error) {
	id, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Contact{}, 0, err
	}
	if keyed {
		if c, v, ok := s.contacts.Get(mp, id); ok {
			return c, v, nil
		}
	}
	c := Contact{Name: in.Name, Email: in.Email, Company: in.Company, TaxID: in.TaxID, Address: in.Address}
	if err := normalize(&c, true, true); err != nil {
		return Contact{}, 0, err
	}
	c.ID = id
	c.CreatedAt = s.now()
	c.UpdatedAt = c.CreatedAt
	v, err := s.contacts.Put(ctx, mp, c.ID, 0, c)
	if keyed && errors.Is(err, statelog.ErrConflict) {
		return idempotency.Existing(err, func() (Contact, int64, bool) { return s.contacts.Get(mp, id) })
	}
	if err != nil {
		return Contact{}, 0, err
	}
	return c, v, nil
}

// Get returns a contact and its version.
func (s *Service) Get(mp, id string) (Contact, int64, error) {
	c, v, ok := s.contacts.Get(mp, id)
	if !ok {
		return Contact{}, 0, validation.NotFoundf("billing contact %s", id)
	}
	return c, v, nil
}

// List returns a page of the marketplace's contacts in id (creation) order.
func (s *Service) List(mp, after string, limit int) ([]Contact, bool) {
	_, vals, more := s.contacts.Page(mp, after, limit, nil)
	return vals, more
}

// Update applies a patch. ifMatch is the version the caller expects (0 when
// it gave none: the version read is used, so a concurrent write conflicts).
func (s *Service) Update(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, p ContactPatch) (Contact, int64, error) {
	c, cur, ok := s.contacts.Get(mp, id)
	if !ok {
		return Contact{}, 0, validation.NotFoundf("billing contact %s", id)
	}
	if !statelog.Matches(ifMatch, true, cur) {
		return Contact{}, 0, statelog.ErrConflict
	}
	if p.Name != nil {
		c.Name = *p.Name
	}
	if p.Email != nil {
		c.Email = *p.Email
	}
	if p.Company != nil {
		c.Company = *p.Company
	}
	if p.TaxID != nil {
		c.TaxID = *p.TaxID
	}
	if p.Address != nil {
		c.Address = p.Address
	}
	if err := normalize(&c, p.Name != nil, p.Email != nil); err != nil {
		return Contact{}, 0, err
	}
	c.UpdatedAt = s.now()
	v, err := s.contacts.Put(ctx, mp, id, cur, c)
	if err != nil {
		return Contact{}, 0, err
	}
	return c, v, nil
}

// normalize trims and validates a contact in place. checkName / checkEmail
// say whether those fields were given (an update may leave them out).
func normalize(c *Contact, checkName, checkEmail bool) error {
	var errs validation.Errors
	c.Name = strings.TrimSpace(c.Name)
	c.Email = strings.TrimSpace(c.Email)
	c.Company = strings.TrimSpace(c.Company)
	c.TaxID = strings.TrimSpace(c.TaxID)
	if checkName {
		switch n := utf8.RuneCountInString(c.Name); {
		case n == 0:
			errs.Add(validation.Missing, "Field required", "body", "name")
		case n > maxText:
			errs.Add(validation.TooLong, "String should have at most 255 characters", "body", "name")
		}
	}
	if checkEmail {
		if msg := checkEmailAddress(c.Email); msg != "" {
			typ := validation.ValueError
			if c.Email == "" {
				typ = validation.Missing
			}
			errs.Add(typ, msg, "body", "email")
		}
	}
	if utf8.RuneCountInString(c.Company) > maxText {
		errs.Add(validation.TooLong, "String should have at most 255 characters", "body", "company")
	}
	if utf8.RuneCountInString(c.TaxID) > maxTaxID {
		errs.Add(validation.TooLong, "String should have at most 64 characters", "body", "taxId")
	}
	if a := c.Address; a != nil {
		a.Line1 = strings.TrimSpace(a.Line1)
		a.Line2 = strings.TrimSpace(a.Line2)
		a.City = strings.TrimSpace(a.City)
		a.PostalCode = strings.TrimSpace(a.PostalCode)
		a.Region = strings.TrimSpace(a.Region)
		a.Country = strings.ToUpper(strings.TrimSpace(a.Country))
		for _, f := range []struct {
			name string
			v    string
			max  int
		}{{"line1", a.Line1, maxText}, {"line2", a.Line2, maxText}, {"city", a.City, maxText}, {"postalCode", a.PostalCode, maxPostal}, {"region", a.Region, maxText}} {
			if utf8.RuneCountInString(f.v) > f.max {
				errs.Add(validation.TooLong, "String should have at most "+strconv.Itoa(f.max)+" characters", "body", "address", f.name)
			}
		}
		if a.Country != "" && !isCountry(a.Country) {
			errs.Add(validation.ValueError, "Value should be an ISO 3166-1 alpha-2 country code (e.g. US, DE)", "body", "address", "country")
		}
		if a.empty() {
			c.Address = nil
		}
	}
	return errs.Err()
}

func isCountry(code string) bool {
	if len(code) != 2 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z' {
		return false
	}
	r, err := language.ParseRegion(code)
	return err == nil && r.IsCountry() && r.String() == code
}

// checkEmailAddress returns why addr is not a plain e-mail address, or "".
func checkEmailAddress(addr string) string {
	if addr == "" {
		return "Field required"
	}
	if len(addr) > maxEmail {
		return "value is not a valid email address: it has more than 254 characters"
	}
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr || a.Name != "" {
		return "value is not a valid email address"
	}
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || local == "" || !strings.Contains(domain, ".") || strings.HasPrefix(domain, "[") {
		return "value is not a valid email address: the domain must be a host name with a dot"
	}
	return ""
}

func (s *Service) vendor(mp, vendorID string) error {
	if _, ok := s.cat.Vendor(mp, vendorID); !ok {
		return validation.NotFoundf("vendor %s", vendorID)
	}
	return nil
}

// LinkContact links a contact to a vendor. It is idempotent: linking an
// already linked contact returns the existing link. Unknown vendor or
// contact: not found.
func (s *Service) LinkContact(ctx context.Context, mp, vendorID, contactID string) (Link, int64, error) {
	if err := s.vendor(mp, vendorID); err != nil {
		return Link{}, 0, err
	}
	if _, _, ok := s.contacts.Get(mp, contactID); !ok {
		return Link{}, 0, validation.NotFoundf("billing contact %s", contactID)
	}
	id := linkID(contactID, vendorID)
	if l, v, ok := s.links.Get(mp, id); ok {
		return l, v, nil
	}
	l := Link{ContactID: contactID, VendorID: vendorID, LinkedAt: s.now()}
	// A link that existed before carries on from the version of its
	// deletion (the log's version of the key).
	v, err := s.links.Put(ctx, mp, id, s.links.Log().Version(typeLink, mp+"/"+id), l)
	if errors.Is(err, statelog.ErrConflict) {
		// A concurrent identical link won: answer with it.
		if l2, v2, ok := s.links.Get(mp, id); ok {
			return l2, v2, nil
		}
	}
	if err != nil {
		return Link{}, 0, err
	}
	return l, v, nil
}

// UnlinkContact removes the link between a contact and a vendor (rule 1).
// The contact is not deleted and keeps its other links (rule 3); campaigns
// that use it are not touched (rule 2). An unknown vendor or an unknown
// contact is not found (rule 4); a contact that exists but is not linked to
// the vendor is a no-op (so a retried unlink succeeds). ifMatch, when not 0,
// must be the link's version.
func (s *Service) UnlinkContact(ctx context.Context, mp, vendorID, contactID string, ifMatch statelog.IfMatch) error {
	if err := s.vendor(mp, vendorID); err != nil {
		return err
	}
	if _, _, ok := s.contacts.Get(mp, contactID); !ok {
		return validation.NotFoundf("billing contact %s", contactID)
	}
	id := linkID(contactID, vendorID)
	_, cur, ok := s.links.Get(mp, id)
	if !statelog.Matches(ifMatch, true, cur) {
		return statelog.ErrConflict
	}
	if !ok {
		return nil
	}
	err := s.links.Delete(ctx, mp, id, cur)
	if errors.Is(err, statelog.ErrConflict) && ifMatch == 0 {
		if _, _, still := s.links.Get(mp, id); !still {
			return nil // a concurrent unlink did it
		}
	}
	return err
}

// VendorContacts returns a page of the contacts linked to a vendor, in
// contact id order after `after`. Unknown vendor: not found.
func (s *Service) VendorContacts(mp, vendorID, after string, limit int) ([]Contact, bool, error) {
	if err := s.vendor(mp, vendorID); err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	ids := make([]string, 0, len(s.byVendor[mp][vendorID]))
	for id := range s.byVendor[mp][vendorID] {
		if id > after {
			ids = append(ids, id)
		}
	}
	s.mu.RUnlock()
	sort.Strings(ids)
	out := make([]Contact, 0, min(limit, len(ids)))
	for i, id := range ids {
		if len(out) == limit {
			return out, i < len(ids), nil
		}
		if c, _, ok := s.contacts.Get(mp, id); ok {
			out = append(out, c)
		}
	}
	return out, false, nil
}

// Contact reports whether a contact exists in the marketplace and whether
// it is linked to the vendor (entityref.Billing).
func (s *Service) Contact(mp, contactID, vendorID string) (exists, linked bool) {
	if _, _, ok := s.contacts.Get(mp, contactID); !ok {
		return false, false
	}
	_, _, linked = s.links.Get(mp, linkID(contactID, vendorID))
	return true, linked
}
