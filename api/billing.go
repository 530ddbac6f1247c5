package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/billing"
)

// Billing contacts and their links to vendors
// (docs/reference/billing-webhooks-invitations-offsite.md).
//
//	POST   /billing-service/billing-contacts
//	GET    /billing-service/billing-contacts
//	GET    /billing-service/billing-contacts/{billing_contact_id}
//	PATCH  /billing-service/billing-contacts/{billing_contact_id}
//	GET    /billing-service/vendors/{external_vendor_id}/vendor-billing-contact
//	PUT    /billing-service/vendors/{external_vendor_id}/vendor-billing-contact/{billing_contact_id}
//	DELETE /billing-service/vendors/{external_vendor_id}/vendor-billing-contact/{billing_contact_id}

// Page sizes of the lists of this file and of invitations and webhooks.
const (
	bwDefaultLimit = 50
	bwMaxLimit     = 100
)

// BillingRoutes returns the billing route set.
func BillingRoutes(svc *billing.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &billingHandlers{svc: svc, p: p}
		r := g.Group("/billing-service", p.Limit("default"))
		r.POST("/billing-contacts", h.create)
		r.GET("/billing-contacts", h.list)
		r.GET("/billing-contacts/:billing_contact_id", h.get)
		r.PATCH("/billing-contacts/:billing_contact_id", h.update)
		r.GET("/vendors/:external_vendor_id/vendor-billing-contact", h.vendorContacts)
		r.PUT("/vendors/:external_vendor_id/vendor-billing-contact/:billing_contact_id", h.link)
		r.DELETE("/vendors/:external_vendor_id/vendor-billing-contact/:billing_contact_id", h.unlink)
	}
}

type billingHandlers struct {
	svc *billing.Service
	p   *Public
}

type billingAddressOut struct {
	Line1      *string `json:"line1"`
	Line2      *string `json:"line2"`
	City       *string `json:"city"`
	PostalCode *string `json:"postalCode"`
	Region     *string `json:"region"`
	Country    *string `json:"country"`
}

type billingContactOut struct {
	ID        string             `json:"id"`
	Name      string             `json:"name"`
	Email     string             `json:"email"`
	Company   *string            `json:"company"`
	TaxID     *string            `json:"taxId"`
	Address   *billingAddressOut `json:"address"`
	CreatedAt timestamp.Time     `json:"createdAt"`
	UpdatedAt timestamp.Time     `json:"updatedAt"`
}

func billingContactJSON(c billing.Contact) billingContactOut {
	out := billingContactOut{
		ID: c.ID, Name: c.Name, Email: c.Email, Company: bwOpt(c.Company), TaxID: bwOpt(c.TaxID),
		CreatedAt: timestamp.Of(c.CreatedAt), UpdatedAt: timestamp.Of(c.UpdatedAt),
	}
	if a := c.Address; a != nil {
		out.Address = &billingAddressOut{
			Line1: bwOpt(a.Line1), Line2: bwOpt(a.Line2), City: bwOpt(a.City),
			PostalCode: bwOpt(a.PostalCode), Region: bwOpt(a.Region), Country: bwOpt(a.Country),
		}
	}
	return out
}

func billingContactsJSON(cs []billing.Contact) []billingContactOut {
	out := make([]billingContactOut, len(cs))
	for i, c := range cs {
		out[i] = billingContactJSON(c)
	}
	return out
}

type billingContactList struct {
	HasMore         bool                `json:"hasMore"`
	BillingContacts []billingContactOut `json:"billingContacts"`
	NextPage        *string             `json:"nextPage"`
}

func (h *billingHandlers) create(c *gin.Context) {
	var in billing.ContactInput
	if !h.p.BindJSON(c, &in) {
		return
	}
	ct, v, err := h.svc.Create(c.Request.Context(), Marketplace(c).ID, in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusCreated, billingContactJSON(ct))
}

func (h *billingHandlers) get(c *gin.Context) {
	ct, v, err := h.svc.Get(Marketplace(c).ID, c.Param("billing_contact_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, billingContactJSON(ct))
}

func (h *billingHandlers) list(c *gin.Context) {
	after, limit, ok := h.p.PageQuery(c, "billing-contacts", "", bwDefaultLimit, bwMaxLimit)
	if !ok {
		return
	}
	cs, more := h.svc.List(Marketplace(c).ID, after, limit)
	var last string
	if len(cs) > 0 {
		last = cs[len(cs)-1].ID
	}
	c.JSON(http.StatusOK, billingContactList{HasMore: more, BillingContacts: billingContactsJSON(cs), NextPage: h.p.NextPage(c, "billing-contacts", "", last, more)})
}

func (h *billingHandlers) update(c *gin.Context) {
	var in billing.ContactPatch
	if !h.p.BindJSON(c, &in) {
		return
	}
	ct, v, err := h.svc.Update(c.Request.Context(), Marketplace(c).ID, c.Param("billing_contact_id"), ifMatch(c), in)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, billingContactJSON(ct))
}

func (h *billingHandlers) vendorContacts(c *gin.Context) {
	vendorID := c.Param("external_vendor_id")
	if !bwPathParams(c, "external_vendor_id") {
		return
	}
	after, limit, ok := h.p.PageQuery(c, "vendor-billing-contacts", vendorID, bwDefaultLimit, bwMaxLimit)
	if !ok {
		return
	}
	cs, more, err := h.svc.VendorContacts(Marketplace(c).ID, vendorID, after, limit)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	var last string
	if len(cs) > 0 {
		last = cs[len(cs)-1].ID
	}
	c.JSON(http.StatusOK, billingContactList{HasMore: more, BillingContacts: billingContactsJSON(cs), NextPage: h.p.NextPage(c, "vendor-billing-contacts", vendorID, last, more)})
}

type billingLinkOut struct {
	VendorID         string         `json:"vendorId"`
	BillingContactID string         `json:"billingContactId"`
	LinkedAt         timestamp.Time `json:"linkedAt"`
}

func (h *billingHandlers) link(c *gin.Context) {
	if !bwPathParams(c, "external_vendor_id", "billing_contact_id") {
		return
	}
	l, v, err := h.svc.LinkContact(c.Request.Context(), Marketplace(c).ID, c.Param("external_vendor_id"), c.Param("billing_contact_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, v)
	c.JSON(http.StatusOK, billingLinkOut{VendorID: l.VendorID, BillingContactID: l.ContactID, LinkedAt: timestamp.Of(l.LinkedAt)})
}

func (h *billingHandlers) unlink(c *gin.Context) {
	if !bwPathParams(c, "external_vendor_id", "billing_contact_id") {
		return
	}
	err := h.svc.UnlinkContact(c.Request.Context(), Marketplace(c).ID, c.Param("external_vendor_id"), c.Param("billing_contact_id"), ifMatch(c))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// Helpers shared by billing, invitations, webhooks and offsite.

func bwOpt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// bwPathParams answers 422 when a path parameter is empty.
func bwPathParams(c *gin.Context, names ...string) bool {
	var errs validation.Errors
	for _, n := range names {
		if strings.TrimSpace(c.Param(n)) == "" {
			errs.Add(validation.TooShort, "String should have at least 1 character", "path", n)
		}
	}
	if len(errs) > 0 {
		abort422(c, errs)
		return false
	}
	return true
}
