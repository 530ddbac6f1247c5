package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/testkit/testenv"
)

const bwWhPath = "/public/v1/webhooks/webhooks"

// TestWebhooks: create (secret shown once), get, list (limit 1–100, default
// 50, cursor), update, delete, every 422/404/409, isolation, concurrent
// updates, rebuild from Kafka.
func TestWebhooks(t *testing.T) {
	s, cfg := bwStart(t)
	A := s.AdvancedKey
	B := otherMarketplace(t, s)
	mp := s.Marketplace.ID

	r := bwDo(t, s, "POST", bwWhPath, A, `{"url": "https://hooks.example.com/endcap", "eventTypes": ["export.completed", "campaign.updated"]}`, nil)
	bwStatus(t, r, 201)
	bwETag(t, r, "1")
	bwRateLimited(t, r)
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("creation response may be cached: %v", r.Header)
	}
	m := bwObj(t, r.Body)
	w1 := m["id"].(string)
	secret := m["secret"].(string)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if !strings.HasPrefix(secret, "whsec_") || err != nil || len(raw) != 32 {
		t.Fatalf("secret %q is not whsec_ + 32 bytes in standard base64", secret)
	}
	at := bwTime(t, m, "createdAt")
	sameJSON(t, r.Body, fmt.Sprintf(`{"id": %q, "marketplaceId": %q, "url": "https://hooks.example.com/endcap", "eventTypes": ["campaign.updated", "export.completed"],
		"secret": %q, "secretPrefix": %q, "status": "enabled", "disabledAt": null, "disabledReason": null, "failingSince": null, "createdAt": %q, "updatedAt": %q}`, w1, mp, secret, secret[:10], at, at))
	w1JSON := fmt.Sprintf(`{"id": %q, "marketplaceId": %q, "url": "https://hooks.example.com/endcap", "eventTypes": ["campaign.updated", "export.completed"],
		"secretPrefix": %q, "status": "enabled", "disabledAt": null, "disabledReason": null, "failingSince": null, "createdAt": %q, "updatedAt": %q}`, w1, mp, secret[:10], at, at)

	// Without eventTypes: every event type.
	// (http://localhost is refused where loopback is not allowed: below.)
	r = bwDo(t, s, "POST", bwWhPath, A, `{"url": "https://hooks.example.net/hook"}`, nil)
	bwStatus(t, r, 201)
	m = bwObj(t, r.Body)
	w2 := m["id"].(string)
	if fmt.Sprint(m["eventTypes"]) != "[budget.exhausted campaign.archived campaign.created campaign.updated export.completed export.failed privacy.deletion.completed scored_attribution.ready vendor.balance_low]" || m["secret"] == secret {
		t.Fatalf("second webhook: %s", r.Body)
	}
	var all = []string{w1, w2}
	for i := range 3 {
		r = bwDo(t, s, "POST", bwWhPath, A, fmt.Sprintf(`{"url": "https://example.com/h%d"}`, i), nil)
		bwStatus(t, r, 201)
		all = append(all, bwObj(t, r.Body)["id"].(string))
	}

	// 422s.
	expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, `{}`, nil), "body.url")
	expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, `{"url": 7}`, nil), "body.url")
	// Addresses deliveries may not reach, on create and on update.
	for _, u := range []string{"https://10.0.0.5/hook", "http://localhost:8080/hook", "https://[::1%25lo]:8443/hook", "https://[fe80::1%25eth0]/hook", "https://[::ffff:169.254.169.254]/"} {
		expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, fmt.Sprintf(`{"url": %q}`, u), nil), "body.url")
		expect422Locs(t, bwDo(t, s, "PATCH", bwWhPath+"/"+w1, A, fmt.Sprintf(`{"url": %q}`, u), nil), "body.url")
	}
	for _, u := range []string{"", "hooks.example.com", "/relative", "ftp://example.com", "http://example.com/hook", "https://u:p@example.com/",
		"https://example.com/#frag", "https://example.com:0/", "https://example.com/" + strings.Repeat("a", 2029)} {
		expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, map[string]any{"url": u}, nil), "body.url")
	}
	expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, `{"url": "https://example.com", "eventTypes": []}`, nil), "body.eventTypes")
	expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, `{"url": "https://example.com", "eventTypes": ["campaign.updated", "order.paid", "campaign.updated"]}`, nil),
		"body.eventTypes.1", "body.eventTypes.2")
	expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, `{"url": "ftp://x", "eventTypes": "campaign.updated"}`, nil), "body.eventTypes")

	// Get: no secret, only its prefix.
	r = bwDo(t, s, "GET", bwWhPath+"/"+w1, A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, r.Body, w1JSON)
	bw404(t, bwDo(t, s, "GET", bwWhPath+"/nope", A, nil, nil))

	// List: default 50, limits 1..100, pages.
	r = bwDo(t, s, "GET", bwWhPath, A, nil, nil)
	bwStatus(t, r, 200)
	l := bwObj(t, r.Body)
	if items := l["webhooks"].([]any); len(items) != 5 || l["hasMore"] != false || l["nextPage"] != nil {
		t.Fatalf("list: %s", r.Body)
	}
	if strings.Contains(string(r.Body), secret) || strings.Contains(string(r.Body), `"secret"`) {
		t.Fatalf("list shows a secret: %s", r.Body)
	}
	r = bwDo(t, s, "GET", bwWhPath+"?limit=1", A, nil, nil)
	first := bwObj(t, r.Body)
	b, _ := json.Marshal(first["webhooks"].([]any)[0])
	sameJSON(t, b, w1JSON)
	if ids := bwPages(t, s, bwWhPath, A, "webhooks", 2); fmt.Sprint(ids) != fmt.Sprint(all) {
		t.Fatalf("pages %v, want %v", ids, all)
	}
	if ids := bwPages(t, s, bwWhPath, A, "webhooks", 100); fmt.Sprint(ids) != fmt.Sprint(all) {
		t.Fatalf("one page %v, want %v", ids, all)
	}
	bwListQueryErrors(t, s, bwWhPath, A)

	// Update.
	bw409(t, bwDo(t, s, "PATCH", bwWhPath+"/"+w1, A, `{"url": "https://new.example.com"}`, map[string]string{"If-Match": `"9"`}))
	bw409(t, bwDo(t, s, "PATCH", bwWhPath+"/"+w1, A, `{"url": "https://new.example.com"}`, map[string]string{"If-Match": `garbage`}))
	expect422Locs(t, bwDo(t, s, "PATCH", bwWhPath+"/"+w1, A, `{"url": "http://new.example.com", "eventTypes": ["x"]}`, nil), "body.url", "body.eventTypes.0")
	bw404(t, bwDo(t, s, "PATCH", bwWhPath+"/nope", A, `{}`, nil))
	r = bwDo(t, s, "PATCH", bwWhPath+"/"+w1, A, `{"url": "https://new.example.com/h?x=1"}`, map[string]string{"If-Match": `"1"`})
	bwStatus(t, r, 200)
	bwETag(t, r, "2")
	m = bwObj(t, r.Body)
	up := bwTime(t, m, "updatedAt")
	w1JSON = fmt.Sprintf(`{"id": %q, "marketplaceId": %q, "url": "https://new.example.com/h?x=1", "eventTypes": ["campaign.updated", "export.completed"],
		"secretPrefix": %q, "status": "enabled", "disabledAt": null, "disabledReason": null, "failingSince": null, "createdAt": %q, "updatedAt": %q}`, w1, mp, secret[:10], at, up)
	sameJSON(t, r.Body, w1JSON)
	r = bwDo(t, s, "PATCH", bwWhPath+"/"+w1, A, `{"eventTypes": ["budget.exhausted"]}`, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "3")
	m = bwObj(t, r.Body)
	w1JSON = fmt.Sprintf(`{"id": %q, "marketplaceId": %q, "url": "https://new.example.com/h?x=1", "eventTypes": ["budget.exhausted"],
		"secretPrefix": %q, "status": "enabled", "disabledAt": null, "disabledReason": null, "failingSince": null, "createdAt": %q, "updatedAt": %q}`, w1, mp, secret[:10], at, bwTime(t, m, "updatedAt"))
	sameJSON(t, r.Body, w1JSON)

	// Concurrent updates: each is a 200 or a 409, and every 200 is one
	// version: no update is lost.
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = bwDo(t, s, "PATCH", bwWhPath+"/"+w2, A, fmt.Sprintf(`{"url": "https://race.example.com/%d"}`, i), nil).Status
		}()
	}
	wg.Wait()
	ok := 0
	for _, st := range statuses {
		switch st {
		case 200:
			ok++
		case 409:
		default:
			t.Fatalf("concurrent update answered %d", st)
		}
	}
	t.Logf("concurrent updates: %d of %d succeeded", ok, len(statuses))
	r = bwDo(t, s, "GET", bwWhPath+"/"+w2, A, nil, nil)
	if ok == 0 || r.Header.Get("ETag") != fmt.Sprintf(`"%d"`, 1+ok) {
		t.Fatalf("%d updates succeeded, ETag %s", ok, r.Header.Get("ETag"))
	}

	// Isolation.
	bw404(t, bwDo(t, s, "GET", bwWhPath+"/"+w1, B, nil, nil))
	bw404(t, bwDo(t, s, "PATCH", bwWhPath+"/"+w1, B, `{"url": "https://evil.example.com"}`, nil))
	bw404(t, bwDo(t, s, "DELETE", bwWhPath+"/"+w1, B, nil, nil))
	sameJSON(t, bwDo(t, s, "GET", bwWhPath, B, nil, nil).Body, `{"hasMore": false, "webhooks": [], "nextPage": null}`)
	r = bwDo(t, s, "GET", bwWhPath+"?limit=1", A, nil, nil)
	expect422Locs(t, bwDo(t, s, "GET", bwWhPath+"?next_page="+bwObj(t, r.Body)["nextPage"].(string), B, nil, nil), "query.next_page")
	r = bwDo(t, s, "POST", bwWhPath, B, `{"url": "https://b.example.com"}`, nil)
	bwStatus(t, r, 201)
	if m := bwObj(t, r.Body); m["marketplaceId"] == mp {
		t.Fatalf("B's webhook in A's marketplace: %s", r.Body)
	}
	wb := bwObj(t, r.Body)["id"].(string)
	bw404(t, bwDo(t, s, "GET", bwWhPath+"/"+wb, A, nil, nil))
	sameJSON(t, bwDo(t, s, "GET", bwWhPath+"/"+w1, A, nil, nil).Body, w1JSON)

	// Delete.
	bw409(t, bwDo(t, s, "DELETE", bwWhPath+"/"+w1, A, nil, map[string]string{"If-Match": `"1"`}))
	r = bwDo(t, s, "DELETE", bwWhPath+"/"+w1, A, nil, map[string]string{"If-Match": `"3"`})
	bwStatus(t, r, 204)
	if len(r.Body) != 0 {
		t.Fatalf("204 with a body: %q", r.Body)
	}
	bw404(t, bwDo(t, s, "GET", bwWhPath+"/"+w1, A, nil, nil))
	bw404(t, bwDo(t, s, "DELETE", bwWhPath+"/"+w1, A, nil, nil))
	all = all[1:]
	if ids := bwPages(t, s, bwWhPath, A, "webhooks", 3); fmt.Sprint(ids) != fmt.Sprint(all) {
		t.Fatalf("after delete %v, want %v", ids, all)
	}

	// Restart: the secret survives (it will sign deliveries) and stays hidden.
	s2 := startSystem(t, cfg)
	r = bwDo(t, s2, "GET", bwWhPath+"/"+w2, A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, fmt.Sprint(1+ok))
	bw404(t, bwDo(t, s2, "GET", bwWhPath+"/"+w1, A, nil, nil))
	if ids := bwPages(t, s2, bwWhPath, A, "webhooks", 2); fmt.Sprint(ids) != fmt.Sprint(all) {
		t.Fatalf("rebuilt %v, want %v", ids, all)
	}
	if ids := bwPages(t, s2, bwWhPath, B, "webhooks", 2); fmt.Sprint(ids) != fmt.Sprint([]string{wb}) {
		t.Fatalf("rebuilt B %v", ids)
	}
}

// TestWebhookSecretsStayInTheLog: a webhook's signing secrets are copied
// neither to ClickHouse (entity_state) nor to Redis (the kept answers of
// Idempotency-Key): after a create and two rotations with keys, no byte of
// any secret is in either. The replays still answer the first answers,
// byte for byte, with the secret read again from the log's view; a replay
// whose secret the webhook no longer has is a 409.
func TestWebhookSecretsStayInTheLog(t *testing.T) {
	s, _ := bwStart(t)
	mp := s.Marketplace.ID
	createBody := `{"url": "https://hooks.example.com/endcap", "eventTypes": ["export.completed"]}`
	ck := uuid.NewString()
	created := idPost(t, s, bwWhPath, ck, createBody)
	bwStatus(t, created, 201)
	w := bwObj(t, created.Body)
	id, secret0 := w["id"].(string), w["secret"].(string)
	rotatePath := bwWhPath + "/" + id + "/rotate-secret"
	rk1 := uuid.NewString()
	rot1 := idPost(t, s, rotatePath, rk1, `{"overlapSeconds": 3600}`)
	bwStatus(t, rot1, 200)
	secret1 := bwObj(t, rot1.Body)["secret"].(string)
	if secret1 == secret0 || secret1 == "" {
		t.Fatalf("rotation: %s", rot1.Body)
	}

	// Replays: the first answers again, secret included, byte for byte
	// (the create's secret is now the previous one, and still shown).
	for _, tc := range []struct {
		path, key, body string
		first           response
	}{{bwWhPath, ck, createBody, created}, {rotatePath, rk1, `{"overlapSeconds": 3600}`, rot1}} {
		again := idPost(t, s, tc.path, tc.key, tc.body)
		if again.Status != tc.first.Status || string(again.Body) != string(tc.first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay of %s: %d %s\nfirst: %s", tc.path, again.Status, again.Body, tc.first.Body)
		}
	}

	rk2 := uuid.NewString()
	rot2 := idPost(t, s, rotatePath, rk2, ``)
	bwStatus(t, rot2, 200)
	secret2 := bwObj(t, rot2.Body)["secret"].(string)
	secrets := []string{secret0, secret1, secret2}

	// The create's secret is gone now (two rotations): its replay is a 409,
	// the first rotation's still replays.
	again := idPost(t, s, bwWhPath, ck, createBody)
	if again.Status != 409 || bwObj(t, again.Body)["errCode"] != "idempotency_secret_replaced" || strings.Contains(string(again.Body), "whsec_") {
		t.Fatalf("replay of a create whose secret was rotated twice: %d %s", again.Status, again.Body)
	}
	if again := idPost(t, s, rotatePath, rk1, `{"overlapSeconds": 3600}`); again.Status != 200 || string(again.Body) != string(rot1.Body) {
		t.Fatalf("replay of the first rotation: %d %s", again.Status, again.Body)
	}

	// entity_state: every version of the webhook, without its secrets.
	deadline := time.Now().Add(30 * time.Second)
	for s.count(t, "SELECT count() FROM entity_state_raw WHERE type = 'webhook' AND marketplace_id = ? AND id = ? AND version = 3", mp, id) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the webhook's third version never reached entity_state_raw")
		}
		time.Sleep(100 * time.Millisecond)
	}
	rows := s.query(t, "SELECT state FROM entity_state_raw WHERE type = 'webhook' AND id = ?", id)
	if len(rows) < 3 {
		t.Fatalf("%d rows of the webhook", len(rows))
	}
	for _, r := range rows {
		if !strings.Contains(r[0], `"url":"https://hooks.example.com/endcap"`) {
			t.Fatalf("the state lost more than its secrets: %s", r[0])
		}
		for _, sec := range secrets {
			if leaks(r[0], sec) {
				t.Fatalf("entity_state holds a secret: %s", r[0])
			}
		}
	}

	// Redis: no key, no value.
	ctx := context.Background()
	rdb := s.App.Redis
	n := 0
	for _, k := range testenv.Keys(t, rdb, "*") {
		var vals []string
		switch typ, _ := rdb.Type(ctx, k).Result(); typ {
		case "string":
			v, _ := rdb.Get(ctx, k).Result()
			vals = append(vals, v)
		case "hash":
			m, _ := rdb.HGetAll(ctx, k).Result()
			for f, v := range m {
				vals = append(vals, f, v)
			}
		case "set":
			vals, _ = rdb.SMembers(ctx, k).Result()
		case "zset":
			vals, _ = rdb.ZRange(ctx, k, 0, -1).Result()
		case "list":
			vals, _ = rdb.LRange(ctx, k, 0, -1).Result()
		case "stream":
			xs, _ := rdb.XRange(ctx, k, "-", "+").Result()
			for _, x := range xs {
				vals = append(vals, fmt.Sprint(x.Values))
			}
		}
		vals = append(vals, k)
		for _, v := range vals {
			for _, sec := range secrets {
				if leaks(v, sec) {
					t.Fatalf("Redis key %s holds a webhook secret", k)
				}
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no Redis key at all: the scan saw nothing")
	}
}

// leaks says whether v holds the secret: whole, its base64 part, or the
// bytes of its key.
func leaks(v, secret string) bool {
	b64 := strings.TrimPrefix(secret, "whsec_")
	if strings.Contains(v, secret) || strings.Contains(v, b64) || strings.Contains(v, strings.ReplaceAll(b64, "/", `\/`)) {
		return true
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	return err == nil && len(key) > 0 && strings.Contains(v, string(key))
}

// TestWebhookCaps: the caps of a marketplace over HTTP: the webhooks it may
// have (422 at body), its test deliveries per hour (429 too_many_requests
// with Retry-After).
func TestWebhookCaps(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault = "5000/1s"
	cfg.WebhooksPerMarket = 2
	cfg.WebhookTestsPerHour = 1
	s := startSystem(t, cfg)
	A := s.AdvancedKey
	var id string
	for range 2 {
		r := bwDo(t, s, "POST", bwWhPath, A, `{"url": "https://hooks.example.com/endcap"}`, nil)
		bwStatus(t, r, 201)
		id = bwObj(t, r.Body)["id"].(string)
	}
	expect422Locs(t, bwDo(t, s, "POST", bwWhPath, A, `{"url": "https://hooks.example.com/endcap"}`, nil), "body")
	bwStatus(t, bwDo(t, s, "POST", bwWhPath+"/"+id+"/test", A, nil, nil), 202)
	r := bwDo(t, s, "POST", bwWhPath+"/"+id+"/test", A, nil, nil)
	if r.Status != 429 || bwObj(t, r.Body)["errCode"] != "too_many_requests" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("second test within the hour: %d %v %s", r.Status, r.Header, r.Body)
	}
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 3500 || ra > 3600 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
}
