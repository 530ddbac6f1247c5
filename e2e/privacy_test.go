package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/testkit/testenv"
)

const pvBase = "/public/v1/privacy-service/deletions"

var pvInstant = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)

// pvGolden records r with the deletion's id and every instant replaced by
// stand-ins of the same form.
func pvGolden(t *testing.T, name, id string, r response) {
	t.Helper()
	standIn := "00000000-0000-7000-8000-000000000001"
	r.Path = strings.ReplaceAll(r.Path, id, standIn)
	r.Body = pvInstant.ReplaceAll([]byte(strings.ReplaceAll(string(r.Body), id, standIn)), []byte("2026-03-01T09:00:00.000Z"))
	golden(t, name, r)
}

// TestPrivacyDeletions: the deletion routes' validation and keys, then a
// shopper's events erased through the whole system: those received before
// the request are gone, a later one and the other shoppers' stay.
func TestPrivacyDeletions(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	s := startSystem(t, cfg)
	A := s.AdvancedKey

	many := make([]string, privacy.MaxIDsPerRequest+1)
	for i := range many {
		many[i] = fmt.Sprint("u", i)
	}
	manyBody, _ := json.Marshal(map[string]any{"opaqueUserIds": many})
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"no body", ``, []string{"body:missing"}},
		{"no ids", `{}`, []string{"body.opaqueUserIds:missing"}},
		{"empty list", `{"opaqueUserIds": []}`, []string{"body.opaqueUserIds:too_short"}},
		{"too many", string(manyBody), []string{"body.opaqueUserIds:too_long"}},
		{"not a list", `{"opaqueUserIds": "user-1"}`, []string{"body.opaqueUserIds:type_error"}},
		{"not strings", `{"opaqueUserIds": ["user-1", 2]}`, []string{"body.opaqueUserIds:type_error"}},
		{"empty id", `{"opaqueUserIds": ["user-1", ""]}`, []string{"body.opaqueUserIds.1:too_short"}},
		{"long id", `{"opaqueUserIds": ["` + strings.Repeat("x", 91) + `"]}`, []string{"body.opaqueUserIds.0:too_long"}},
		{"not JSON", `{"opaqueUserIds": [`, []string{"body:json_invalid"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.request(t, "POST", pvBase, A, []byte(c.body), nil)
			expect422Typed(t, r, c.want...)
			if c.name == "empty list" {
				golden(t, "privacy_create_invalid.json", r)
			}
		})
	}
	valid := []byte(`{"opaqueUserIds": ["user-1"]}`)
	for _, c := range []struct {
		method, path, key string
		body              []byte
		want              int
	}{
		{"POST", pvBase, s.MarketplaceKey, valid, 403},
		{"GET", pvBase, s.MarketplaceKey, nil, 403},
		{"GET", pvBase + "/" + uuid.NewString(), s.MarketplaceKey, nil, 403},
		{"POST", pvBase, "", valid, 401},
		{"GET", pvBase + "/" + uuid.NewString(), A, nil, 404},
		{"GET", pvBase + "/not-a-uuid", A, nil, 404},
	} {
		if r := s.request(t, c.method, c.path, c.key, c.body, nil); r.Status != c.want {
			t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, r.Status, c.want, r.Body)
		}
	}

	// user-1's events, then the request, then another event of user-1.
	if r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, mixedBatch("b1", time.Now().Add(-time.Minute)), nil); r.Status != 200 {
		t.Fatalf("events: %d %s", r.Status, r.Body)
	}
	r := s.request(t, "POST", pvBase, A, []byte(`{"opaqueUserIds": ["user-1", "user-1", "user-9"]}`), nil)
	if r.Status != 202 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var created privacy.View
	if err := json.Unmarshal(r.Body, &created); err != nil {
		t.Fatal(err)
	}
	if created.Status != privacy.StatusPending || created.OpaqueUserIDCount != 2 || created.Removed != nil || strings.Contains(string(r.Body), "user-1") {
		t.Fatalf("created: %s", r.Body)
	}
	pvGolden(t, "privacy_create.json", created.DeletionID, r)
	later := fmt.Sprintf(`{"purchases": [{"id": "b2-pur-1", "occurredAt": %q, "opaqueUserId": "user-1", "items": [{"productId": "p-1", "unitPrice": 1, "quantity": 1}]}]}`, ts(time.Now()))
	if r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(later), nil); r.Status != 200 {
		t.Fatalf("later event: %d %s", r.Status, r.Body)
	}
	if st, b := s.do(t, "GET", pvBase+"/"+strings.ToUpper(created.DeletionID), A, nil); st != 200 || !strings.Contains(string(b), `"status":"pending"`) {
		t.Fatalf("get: %d %s", st, b)
	}
	if st, _ := s.do(t, "GET", pvBase+"/"+created.DeletionID, otherMarketplace(t, s), nil); st != 404 {
		t.Fatalf("another marketplace's key reads the request: %d", st)
	}

	// The job (run now, as endcap admin privacy run does) waits for the
	// projectors to fold what came before the request.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	testenv.Eventually(t, 60*time.Second, func() error {
		res, err := s.App.ApplyDeletions(ctx)
		if errors.Is(err, privacy.ErrBusy) || (err == nil && res.Completed == 0) {
			return testenv.Errorf("not applied yet: %+v %v", res, err)
		}
		if err != nil || res.Completed != 1 {
			t.Fatalf("run: %+v %v", res, err)
		}
		return nil
	})
	gr := s.request(t, "GET", pvBase+"/"+created.DeletionID, A, nil, nil)
	st, b := gr.Status, gr.Body
	var got privacy.View
	if err := json.Unmarshal(b, &got); err != nil || st != 200 {
		t.Fatalf("get after the run: %d %s", st, b)
	}
	// b1: an impression, a click and a purchase of user-1.
	if got.Status != privacy.StatusCompleted || got.Removed == nil || got.FinishedAt == nil ||
		got.Removed.ClickHouse["events_raw"] != 1 || got.Removed.ClickHouse["interactions_raw"] != 2 {
		t.Fatalf("completed: %s", b)
	}
	pvGolden(t, "privacy_get_completed.json", created.DeletionID, gr)
	if n := s.count(t, "SELECT toUInt64(count()) FROM events WHERE opaque_user_id = 'user-1' AND event_id LIKE 'b1-%'"); n != 0 {
		t.Errorf("%d events of user-1 before the request remain", n)
	}
	if n := s.count(t, "SELECT toUInt64(count()) FROM events WHERE event_id LIKE 'b1-%'"); n != 4 {
		t.Errorf("%d events of the first batch, want 4: user-1's purchase deleted, its impression and click kept without the id (reports count them)", n)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT toUInt64(count()) FROM events WHERE opaque_user_id = 'user-1' AND event_id = 'b2-pur-1'"); n != 1 {
			return testenv.Errorf("the later event: %d rows", n)
		}
		return nil
	})
	for _, u := range []string{"user-2", "user-3"} {
		if n := s.count(t, "SELECT toUInt64(count()) FROM events WHERE opaque_user_id = ? AND event_id LIKE 'b1-%'", u); n != 1 {
			t.Errorf("%s: %d events, want 1", u, n)
		}
	}
	st, b = s.do(t, "GET", pvBase+"?limit=1", A, nil)
	var list struct {
		Deletions []privacy.View `json:"deletions"`
		HasMore   bool           `json:"hasMore"`
	}
	if err := json.Unmarshal(b, &list); err != nil || st != 200 || len(list.Deletions) != 1 || list.Deletions[0].DeletionID != created.DeletionID || list.HasMore {
		t.Fatalf("list: %d %s", st, b)
	}
}
