package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/vendorid"
)

// TestVendorIDs: every path and body that names a vendor, through the API.
// Where either id may be meant (the catalog's vendor read, campaigns,
// advertiser domains, invitations) a vendor is found by its catalog id and
// by its internal UUID, and what is stored and answered is the catalog id;
// billing's {external_vendor_id} takes the catalog id only, as the spec
// names it; a UUID of another marketplace's vendor or of no vendor is a 404.
// A catalog id shaped like a UUID keeps working as before.
func TestVendorIDs(t *testing.T) {
	s, _ := bwStart(t)
	A := s.AdvancedKey
	B := otherMarketplace(t, s)
	mp := s.Marketplace.ID
	// A catalog whose vendor ids are UUIDs already is common: one of them.
	const uuidShaped = "5b7f2c1e-0d4a-4e8b-9f3c-2a1d6e8b4c70"
	bwVendors(t, s, A, "v-1", "v-2", uuidShaped)
	bwVendors(t, s, B, "v-1")
	u1, u2, uU := vendorid.String(mp, "v-1"), vendorid.String(mp, "v-2"), vendorid.String(mp, uuidShaped)
	foreign := vendorid.String(mpOf(t, s, B), "v-1") // B's v-1
	nobody := vendorid.String(mp, "v-9")

	// Campaigns: created under either id, listed under either, the body's
	// vendorId either; the campaign shows the catalog id.
	var created []string
	for _, path := range []string{"v-1", u1, strings.ToUpper(u1)} {
		r := cpDo(t, s, "POST", cpVendor(path), A, `{"name":"c","type":"listings","dailyBudget":5,"vendorId":"`+u1+`"}`, nil)
		cpStatus(t, r, 201)
		if m := cpObj(t, r.Body); m["vendorId"] != "v-1" {
			t.Fatalf("campaign created under %s: vendorId %v", path, m["vendorId"])
		}
		created = append(created, cpID(t, r))
	}
	cpStatus(t, cpDo(t, s, "POST", cpVendor(uU), A, `{"name":"c","type":"listings","dailyBudget":5}`, nil), 201)
	cpStatus(t, cpDo(t, s, "POST", cpVendor(uuidShaped), A, `{"name":"c","type":"listings","dailyBudget":5,"vendorId":"`+uuidShaped+`"}`, nil), 201)
	for _, path := range []string{"v-1", u1} {
		if ids := cpPages(t, s, cpVendor(path), A, "campaigns", "id", 2); fmt.Sprint(ids) != fmt.Sprint(created) {
			t.Fatalf("campaigns of %s: %v, want %v", path, ids, created)
		}
	}
	if ids := cpPages(t, s, cpVendor(uuidShaped), A, "campaigns", "id", 10); len(ids) != 2 {
		t.Fatalf("campaigns of the UUID-shaped catalog id: %v", ids)
	}
	r := cpDo(t, s, "POST", cpVendor(u1), A, `{"name":"c","type":"listings","dailyBudget":5,"vendorId":"`+u2+`"}`, nil)
	expect422Typed(t, r, "body.vendorId:value_error")
	for _, id := range []string{foreign, nobody} {
		cp404(t, cpDo(t, s, "POST", cpVendor(id), A, `{"name":"c","type":"listings","dailyBudget":5}`, nil))
		cp404(t, cpDo(t, s, "GET", cpVendor(id), A, nil, nil))
	}

	// Advertiser domains: one record per vendor, whichever id names it.
	r = bwDo(t, s, "PUT", bwAdPath(u2), A, `{"domain": "shop.example.com"}`, nil)
	bwStatus(t, r, 200)
	for _, id := range []string{"v-2", u2} {
		r = bwDo(t, s, "GET", bwAdPath(id), A, nil, nil)
		bwStatus(t, r, 200)
		bwETag(t, r, "1")
		if m := bwObj(t, r.Body); m["vendorId"] != "v-2" || m["domain"] != "shop.example.com" {
			t.Fatalf("domain read through %s: %s", id, r.Body)
		}
	}
	for _, id := range []string{foreign, nobody} {
		bw404(t, bwDo(t, s, "PUT", bwAdPath(id), A, `{"domain": "x.example"}`, nil))
	}
	bwStatus(t, bwDo(t, s, "DELETE", bwAdPath(u2), A, nil, nil), 204)
	bw404(t, bwDo(t, s, "GET", bwAdPath("v-2"), A, nil, nil))

	// Invitations: an invite may name the vendor by its UUID; it is stored
	// (and listed, and filtered) by its catalog id.
	r = bwDo(t, s, "POST", bwInvPath, A, `{"invites": [{"vendorId": "`+u1+`", "vendorEmail": "a@example.com", "targetUserRole": "vendor_admin"},
		{"vendorId": "v-2", "vendorEmail": "b@example.com", "targetUserRole": "vendor_analyst"}]}`, nil)
	bwStatus(t, r, 201)
	var inv struct{ Invitations []struct{ VendorID string } }
	if err := json.Unmarshal(r.Body, &inv); err != nil || len(inv.Invitations) != 2 || inv.Invitations[0].VendorID != "v-1" {
		t.Fatalf("invitations %s", r.Body)
	}
	// The same vendor and e-mail twice, once by each id: a duplicate.
	r = bwDo(t, s, "POST", bwInvPath, A, `{"invites": [{"vendorId": "`+u1+`", "vendorEmail": "c@example.com", "targetUserRole": "vendor_admin"},
		{"vendorId": "v-1", "vendorEmail": "c@example.com", "targetUserRole": "vendor_admin"}]}`, nil)
	expect422Locs(t, r, "body.invites.1")
	for _, q := range []string{"v-1", u1} {
		r = bwDo(t, s, "GET", bwInvPath+"?vendor_id="+q, A, nil, nil)
		bwStatus(t, r, 200)
		var list struct{ Invitations []struct{ VendorID string } }
		if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Invitations) != 1 || list.Invitations[0].VendorID != "v-1" {
			t.Fatalf("invitations of %s: %s", q, r.Body)
		}
	}
	expect422Locs(t, bwDo(t, s, "POST", bwInvPath, A, `{"invites": [{"vendorId": "`+foreign+`", "vendorEmail": "a@example.com", "targetUserRole": "vendor_admin"}]}`, nil),
		"body.invites.0.vendorId")

	// Billing: {external_vendor_id} is the catalog id (the spec's name for
	// it); a UUID names no vendor there.
	r = bwDo(t, s, "POST", bwBcPath, A, `{"name": "Ann", "email": "ann@example.com"}`, nil)
	bwStatus(t, r, 201)
	contact := bwObj(t, r.Body)["id"].(string)
	bwStatus(t, bwDo(t, s, "PUT", bwBvPath("v-1")+"/"+contact, A, nil, nil), 200)
	bwStatus(t, bwDo(t, s, "PUT", bwBvPath(uuidShaped)+"/"+contact, A, nil, nil), 200)
	bw404(t, bwDo(t, s, "PUT", bwBvPath(u1)+"/"+contact, A, nil, nil))
	bw404(t, bwDo(t, s, "GET", bwBvPath(u1), A, nil, nil))
}

// mpOf is the marketplace of an advanced key.
func mpOf(t *testing.T, s *system, key string) string {
	t.Helper()
	r := bwDo(t, s, "GET", "/public/v1/marketplace", key, nil, nil)
	bwStatus(t, r, 200)
	return bwObj(t, r.Body)["id"].(string)
}
