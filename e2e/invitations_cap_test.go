package e2e

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/endcap/endcap/testkit/testenv"
)

// TestInvitationMailCap: with e-mail sending configured, a marketplace's
// invitations of a UTC day (one e-mail each) stop at
// ENDCAP_INVITATION_EMAILS_PER_DAY: the request that would pass it creates
// none of its invitations and is 429 too_many_requests with Retry-After
// (the seconds until the next UTC day) in the /public/v1 error shape.
func TestInvitationMailCap(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.SMTPAddr, cfg.SMTPTLS = "127.0.0.1:1", "none" // nothing listens: the sends fail and are retried, which is not what is tested
	cfg.InvitationMailsPerDay = 3
	s := startSystem(t, cfg)
	bwVendors(t, s, s.AdvancedKey, "v-1")
	const path = "/public/v1/invitation-service/invitations"
	invites := func(emails ...string) map[string]any {
		var in []map[string]string
		for _, e := range emails {
			in = append(in, map[string]string{"vendorId": "v-1", "vendorEmail": e, "targetUserRole": "vendor_analyst"})
		}
		return map[string]any{"invites": in}
	}
	if r := bwDo(t, s, "POST", path, s.AdvancedKey, invites("a@example.com", "b@example.com"), nil); r.Status != 201 {
		t.Fatalf("two invitations: %d %s", r.Status, r.Body)
	}
	r := bwDo(t, s, "POST", path, s.AdvancedKey, invites("c@example.com", "d@example.com"), nil)
	var body struct{ ErrCode, DocURL, Message string }
	retry, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if err := json.Unmarshal(r.Body, &body); err != nil || r.Status != 429 || body.ErrCode != "too_many_requests" || body.DocURL == "" ||
		retry < 1 || retry > 86400 {
		t.Fatalf("past the daily cap: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := bwDo(t, s, "POST", path, s.AdvancedKey, invites("c@example.com"), nil); r.Status != 201 {
		t.Fatalf("the third invitation: %d %s", r.Status, r.Body)
	}
	r = bwDo(t, s, "GET", path, s.AdvancedKey, nil, nil)
	var list struct {
		Invitations []struct{ VendorEmail string } `json:"invitations"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Invitations) != 3 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
}
