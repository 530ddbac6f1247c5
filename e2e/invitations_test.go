package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

const bwInvPath = "/public/v1/invitation-service/invitations"

// TestInvitations: 1–500 invites per request, stored whole or not at all,
// each missing vendor named, read back by list (pages, vendor filter) and by
// id, isolated per marketplace, rebuilt from Kafka.
func TestInvitations(t *testing.T) {
	s, cfg := bwStart(t)
	A := s.AdvancedKey
	B := otherMarketplace(t, s)
	bwVendors(t, s, A, "v-1", "v-2")
	bwVendors(t, s, B, "v-b")

	r := bwDo(t, s, "POST", bwInvPath, A, `{"invites": [
		{"vendorId": "v-1", "vendorEmail": "ann@example.com", "targetUserRole": "vendor_analyst"},
		{"vendorId": "v-2", "vendorEmail": " bob@example.org ", "targetUserRole": "vendor_admin"},
		{"vendorId": "v-1", "vendorEmail": "cid@example.net", "targetUserRole": "vendor_admin", "unknownField": 1}]}`, nil)
	bwStatus(t, r, 201)
	bwRateLimited(t, r)
	var created struct {
		Invitations []map[string]any `json:"invitations"`
	}
	if err := json.Unmarshal(r.Body, &created); err != nil || len(created.Invitations) != 3 || len(bwObj(t, r.Body)) != 1 {
		t.Fatalf("created: %s", r.Body)
	}
	var ids []string
	var itemJSON []string
	for i, inv := range created.Invitations {
		at := bwTime(t, inv, "createdAt")
		exp := bwTimeFormat(t, inv, "expiresAt")
		ct, _ := time.Parse(time.RFC3339, at)
		et, _ := time.Parse(time.RFC3339, exp)
		if et.Sub(ct) != 7*24*time.Hour {
			t.Fatalf("expiresAt %s is not createdAt %s + 7 days", exp, at)
		}
		want := []struct{ v, e, r string }{{"v-1", "ann@example.com", "vendor_analyst"}, {"v-2", "bob@example.org", "vendor_admin"}, {"v-1", "cid@example.net", "vendor_admin"}}[i]
		j := fmt.Sprintf(`{"id": %q, "vendorId": %q, "vendorEmail": %q, "targetUserRole": %q, "status": "pending", "createdAt": %q, "expiresAt": %q}`,
			inv["id"], want.v, want.e, want.r, at, exp)
		b, _ := json.Marshal(inv)
		sameJSON(t, b, j)
		ids = append(ids, inv["id"].(string))
		itemJSON = append(itemJSON, j)
	}

	// 422s: nothing of a rejected request is stored.
	expect422Locs(t, bwDo(t, s, "POST", bwInvPath, A, `{}`, nil), "body.invites")
	expect422Locs(t, bwDo(t, s, "POST", bwInvPath, A, `{"invites": null}`, nil), "body.invites")
	expect422Locs(t, bwDo(t, s, "POST", bwInvPath, A, `{"invites": []}`, nil), "body.invites")
	expect422Locs(t, bwDo(t, s, "POST", bwInvPath, A, `{"invites": {}}`, nil), "body.invites")
	var many []string
	for i := range 501 {
		many = append(many, fmt.Sprintf(`{"vendorId": "v-1", "vendorEmail": "u%d@example.com", "targetUserRole": "vendor_analyst"}`, i))
	}
	expect422Locs(t, bwDo(t, s, "POST", bwInvPath, A, `{"invites": [`+strings.Join(many, ",")+`]}`, nil), "body.invites")
	r = bwDo(t, s, "POST", bwInvPath, A, `{"invites": [
		{"vendorId": "v-1", "vendorEmail": "ok@example.com", "targetUserRole": "vendor_analyst"},
		{"vendorId": "v-404", "vendorEmail": "x@example.com", "targetUserRole": "vendor_analyst"},
		{"vendorId": "v-b", "vendorEmail": "y@example.com", "targetUserRole": "vendor_analyst"},
		{},
		{"vendorId": "v-1", "vendorEmail": "not-an-email", "targetUserRole": "owner"},
		{"vendorId": "v-1", "vendorEmail": "OK@example.com", "targetUserRole": "vendor_admin"}]}`, nil)
	expect422Locs(t, r, "body.invites.1.vendorId", "body.invites.2.vendorId", "body.invites.3.vendorId", "body.invites.3.vendorEmail",
		"body.invites.3.targetUserRole", "body.invites.4.vendorEmail", "body.invites.4.targetUserRole", "body.invites.5")
	for _, missing := range []string{"v-404", "v-b"} {
		if !strings.Contains(string(r.Body), "vendor "+missing+" does not exist") {
			t.Fatalf("422 does not name vendor %s: %s", missing, r.Body)
		}
	}

	// Exactly 500 is fine.
	many = many[:500]
	r = bwDo(t, s, "POST", bwInvPath, A, `{"invites": [`+strings.Join(many, ",")+`]}`, nil)
	bwStatus(t, r, 201)
	if err := json.Unmarshal(r.Body, &created); err != nil || len(created.Invitations) != 500 {
		t.Fatalf("500 invites: %d", len(created.Invitations))
	}

	// Read back.
	all := bwPages(t, s, bwInvPath, A, "invitations", 100)
	if len(all) != 503 || fmt.Sprint(all[:3]) != fmt.Sprint(ids) {
		t.Fatalf("listed %d invitations, first %v, want %v", len(all), all[:min(3, len(all))], ids)
	}
	r = bwDo(t, s, "GET", bwInvPath+"?vendor_id=v-2", A, nil, nil)
	bwStatus(t, r, 200)
	sameJSON(t, r.Body, `{"hasMore": false, "invitations": [`+itemJSON[1]+`], "nextPage": null}`)
	if got := bwPages(t, s, bwInvPath+"?vendor_id=v-1", A, "invitations", 50); len(got) != 502 {
		t.Fatalf("v-1 has %d invitations, want 502", len(got))
	}
	r = bwDo(t, s, "GET", bwInvPath+"?limit=2&vendor_id=v-1", A, nil, nil)
	cur := bwObj(t, r.Body)["nextPage"].(string)
	expect422Locs(t, bwDo(t, s, "GET", bwInvPath+"?vendor_id=v-2&next_page="+cur, A, nil, nil), "query.next_page")
	bwListQueryErrors(t, s, bwInvPath, A)
	r = bwDo(t, s, "GET", bwInvPath+"/"+ids[0], A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, r.Body, itemJSON[0])
	bw404(t, bwDo(t, s, "GET", bwInvPath+"/nope", A, nil, nil))

	// Isolation.
	bw404(t, bwDo(t, s, "GET", bwInvPath+"/"+ids[0], B, nil, nil))
	sameJSON(t, bwDo(t, s, "GET", bwInvPath, B, nil, nil).Body, `{"hasMore": false, "invitations": [], "nextPage": null}`)
	sameJSON(t, bwDo(t, s, "GET", bwInvPath+"?vendor_id=v-1", B, nil, nil).Body, `{"hasMore": false, "invitations": [], "nextPage": null}`)
	expect422Locs(t, bwDo(t, s, "GET", bwInvPath+"?limit=2&vendor_id=v-1&next_page="+cur, B, nil, nil), "query.next_page")
	expect422Locs(t, bwDo(t, s, "POST", bwInvPath, B, `{"invites": [{"vendorId": "v-1", "vendorEmail": "a@example.com", "targetUserRole": "vendor_admin"}]}`, nil), "body.invites.0.vendorId")
	r = bwDo(t, s, "POST", bwInvPath, B, `{"invites": [{"vendorId": "v-b", "vendorEmail": "a@example.com", "targetUserRole": "vendor_admin"}]}`, nil)
	bwStatus(t, r, 201)
	if got := bwPages(t, s, bwInvPath, A, "invitations", 100); len(got) != 503 {
		t.Fatalf("B's invitation shows in A's list: %d", len(got))
	}

	// Restart.
	s2 := startSystem(t, cfg)
	r = bwDo(t, s2, "GET", bwInvPath+"/"+ids[1], A, nil, nil)
	bwStatus(t, r, 200)
	sameJSON(t, r.Body, itemJSON[1])
	if got := bwPages(t, s2, bwInvPath, A, "invitations", 100); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("rebuilt list differs: %d vs %d", len(got), len(all))
	}
	if got := bwPages(t, s2, bwInvPath, B, "invitations", 100); len(got) != 1 {
		t.Fatalf("rebuilt B list: %v", got)
	}
}
