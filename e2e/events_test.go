package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func mixedBatch(prefix string, at time.Time) []byte {
	t := ts(at)
	return []byte(fmt.Sprintf(`{
	  "impressions": [
	    {"id": "%[1]s-imp-1", "occurredAt": %[2]q, "opaqueUserId": "user-1", "entity": {"type": "product", "id": "p-1"},
	     "placement": {"path": "/search?q=shoes", "position": 2, "page": 1, "pageSize": 20, "categoryIds": ["c-1", "c-2"], "searchQuery": "shoes"},
	     "page": {"type": "search", "pageId": "search", "value": "shoes"}, "deviceType": "mobile", "channel": "onsite",
	     "object": {"type": "listing", "clickType": "product"}, "someFutureField": 1},
	    {"id": "%[1]s-imp-2", "occurredAt": %[2]q, "opaqueUserId": "user-2", "entity": {"type": "vendor", "id": "v-9"},
	     "additionalAttribution": {"type": "product", "id": "p-3"}, "externalVendorId": "ext-v", "externalCampaignId": "ext-c"}
	  ],
	  "clicks": [
	    {"id": "%[1]s-clk-1", "occurredAt": %[2]q, "opaqueUserId": "user-1", "entity": {"type": "product", "id": "p-1"}, "clickType": "add_to_cart"}
	  ],
	  "purchases": [
	    {"id": "%[1]s-pur-1", "occurredAt": %[2]q, "opaqueUserId": "user-1", "deviceType": "desktop",
	     "items": [{"productId": "p-1", "unitPrice": 19.99, "quantity": 2, "vendorId": "v-1"}, {"productId": "p-2", "unitPrice": 0.000001}]}
	  ],
	  "pageviews": [
	    {"id": "%[1]s-pv-1", "occurredAt": %[2]q, "opaqueUserId": "user-3", "page": {"type": "cart", "pageId": "cart", "value": ["p-1", "p-2"]}}
	  ]
	}`, prefix, t))
}

// TestEventsFlowIntoClickHouse: a mixed batch is acknowledged with a JSON
// body and every event becomes exactly one row of `events`, however often the
// batch is posted.
func TestEventsFlowIntoClickHouse(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	s := startSystem(t, env.Config(t, brokers))
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	body := mixedBatch("flow", at)

	r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, body, nil)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	golden(t, "events_accepted.json", r)

	start := time.Now()
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM events"); n != 5 {
			return testenv.Errorf("%d rows in events, want 5", n)
		}
		return nil
	})
	t.Logf("all 5 events visible in ClickHouse %s after the 200", time.Since(start).Round(time.Millisecond))

	rows := s.query(t, `SELECT toString(marketplace_id), toString(kind), event_id, occurred_at_ms, opaque_user_id, entity_type, entity_id,
		additional_attribution_id, placement_path, placement_position, placement_page_size, placement_category_ids, placement_search_query,
		page_type, page_id, page_value, object_type, object_click_type, external_campaign_id, external_vendor_id, device_type, channel,
		click_type, items.product_id, items.unit_price_micros, items.quantity, items.vendor_id, countable
		FROM events ORDER BY event_id`)
	ms := fmt.Sprint(at.UnixMilli())
	mp := s.Marketplace.ID
	want := [][]string{
		{mp, "click", "flow-clk-1", ms, "user-1", "product", "p-1", "", "", "0", "0", "[]", "", "", "", "[]", "", "", "", "", "", "", "add_to_cart", "[]", "[]", "[]", "[]", "1"},
		{mp, "impression", "flow-imp-1", ms, "user-1", "product", "p-1", "", "/search?q=shoes", "2", "20", "[c-1 c-2]", "shoes", "search", "search", "[shoes]", "listing", "product", "", "", "mobile", "onsite", "", "[]", "[]", "[]", "[]", "1"},
		{mp, "impression", "flow-imp-2", ms, "user-2", "vendor", "v-9", "p-3", "", "0", "0", "[]", "", "", "", "[]", "", "", "ext-c", "ext-v", "", "", "", "[]", "[]", "[]", "[]", "1"},
		{mp, "purchase", "flow-pur-1", ms, "user-1", "", "", "", "", "0", "0", "[]", "", "", "", "[]", "", "", "", "", "desktop", "", "", "[p-1 p-2]", "[19990000 1]", "[2 1]", "[v-1 ]", "1"},
		{mp, "pageview", "flow-pv-1", ms, "user-3", "", "", "", "", "0", "0", "[]", "", "cart", "cart", "[p-1 p-2]", "", "", "", "", "", "", "", "[]", "[]", "[]", "[]", "1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d", len(rows), len(want))
	}
	got := map[string][]string{}
	for _, r := range rows {
		got[r[2]] = r
	}
	for _, w := range want {
		if g := got[w[2]]; strings.Join(g, "|") != strings.Join(w, "|") {
			t.Errorf("row %s:\n got %q\nwant %q", w[2], g, w)
		}
	}

	// The same batch again, twice, and concurrently: no new visible row, and
	// no second physical row either (the idempotency claim drops them).
	done := make(chan int, 3)
	for i := 0; i < 3; i++ {
		go func() { done <- s.request(t, "POST", "//v2/events", s.MarketplaceKey, body, nil).Status }()
	}
	for i := 0; i < 3; i++ {
		if st := <-done; st != 200 {
			t.Fatalf("retry status %d", st)
		}
	}
	sentinel := fmt.Sprintf(`{"pageviews":[{"id":"flow-sentinel","occurredAt":%q,"opaqueUserId":"u","page":{"type":"home","pageId":"h"}}]}`, ts(time.Now()))
	if st, b := s.do(t, "POST", "/v2/events", s.MarketplaceKey, []byte(sentinel)); st != 200 {
		t.Fatalf("sentinel %d %s", st, b)
	}
	waitFor(t, s, "flow-sentinel")
	if n := s.count(t, "SELECT count() FROM events"); n != 6 {
		t.Errorf("after retries: %d visible rows, want 6", n)
	}
	if n := s.count(t, physicalEvents); n != 6 {
		t.Errorf("after retries: %d physical rows, want 6", n)
	}
}

// physicalEvents counts the stored rows of `events`, before FINAL folds
// identical replays: events_raw's, and those of interactions_raw that are
// not also in events_raw (the impressions and clicks, migration 0007).
const physicalEvents = "SELECT (SELECT count() FROM events_raw) + (SELECT count() FROM interactions_raw WHERE in_events_raw = 0)"

func waitFor(t *testing.T, s *system, eventID string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		if s.count(t, "SELECT count() FROM events WHERE event_id = ?", eventID) != 1 {
			return testenv.Errorf("event %s not in ClickHouse yet", eventID)
		}
		return nil
	})
}

// TestEventsRejected: every invalid request gets its documented status and
// errCode, in the documented body, and nothing of it is stored.
func TestEventsRejected(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.MaxBodyBytes = 64 << 10
	s := startSystem(t, cfg)
	now := time.Now()

	item := func(id string, extra string) string {
		return fmt.Sprintf(`{"id":%q,"occurredAt":%q,"opaqueUserId":"u-1","entity":{"type":"product","id":"p"}%s}`, id, ts(now), extra)
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = item(fmt.Sprintf("rej-many-%d", i), "")
	}
	revokedKey := func() string {
		k, key, err := s.App.Accounts.CreateKey(t.Context(), s.Marketplace.ID, "marketplace")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.App.Accounts.RevokeKey(t.Context(), key.ID); err != nil {
			t.Fatal(err)
		}
		return k
	}()
	valid := `{"impressions":[` + item("rej-valid", "") + `]}`

	cases := []struct {
		name, key, path, body string
		status                int
		code                  string // errCode (v2) or error (auth)
	}{
		{"missing_key", "", "/v2/events", valid, 401, "invalid_api_key"},
		{"unknown_key", "ecm_0000000000000000000000000000000000000000", "/v2/events", valid, 401, "invalid_api_key"},
		{"revoked_key", revokedKey, "/v2/events", valid, 401, "invalid_api_key"},
		{"advanced_key_on_v2", s.AdvancedKey, "/v2/events", valid, 401, "invalid_api_key"},
		{"future_occurred_at", s.MarketplaceKey, "/v2/events", fmt.Sprintf(`{"clicks":[{"id":"rej-future","occurredAt":%q,"opaqueUserId":"u","entity":{"type":"product","id":"p"}}]}`, ts(now.Add(6*time.Minute))), 400, "invalid_event_time"},
		{"51_impressions", s.MarketplaceKey, "/v2/events", `{"impressions":[` + strings.Join(many, ",") + `]}`, 400, "bad_request"},
		{"opaque_user_id_91", s.MarketplaceKey, "/v2/events", fmt.Sprintf(`{"impressions":[%s,{"id":"rej-long","occurredAt":%q,"opaqueUserId":%q,"entity":{"type":"product","id":"p"}}]}`, item("rej-ok-before-long", ""), ts(now), strings.Repeat("u", 91)), 400, "invalid_opaque_user_id"},
		{"resolved_bid_and_external_campaign", s.MarketplaceKey, "/v2/events", `{"clicks":[` + item("rej-both", `,"resolvedBidId":"abc","externalCampaignId":"x"`) + `]}`, 400, "invalid_use_of_external_campaign_id"},
		{"purchase_without_items", s.MarketplaceKey, "/v2/events", fmt.Sprintf(`{"purchases":[{"id":"rej-noitems","occurredAt":%q,"opaqueUserId":"u","items":[]}]}`, ts(now)), 400, "no_purchase_items"},
		{"empty_body", s.MarketplaceKey, "/v2/events", ``, 400, "empty_request"},
		{"empty_object", s.MarketplaceKey, "/v2/events", `{}`, 400, "empty_request"},
		{"broken_json", s.MarketplaceKey, "/v2/events", `{"impressions":[{"id":"rej-broken",`, 400, "invalid_json"},
		{"wrong_type", s.MarketplaceKey, "/v2/events", fmt.Sprintf(`{"purchases":[{"id":"rej-type","occurredAt":%q,"opaqueUserId":"u","items":[{"productId":"p","unitPrice":"12"}]}]}`, ts(now)), 400, "bad_request"},
		{"body_too_large", s.MarketplaceKey, "/v2/events", `{"impressions":[` + item("rej-big", `,"placement":{"path":"`+strings.Repeat("x", 70<<10)+`"}`) + `]}`, 413, "request_too_large"},
		{"marketplace_key_on_public", s.MarketplaceKey, "/public/v1/marketplace", ``, 403, "wrong_key_type"},
		{"unknown_route", s.MarketplaceKey, "/v2/nothing-here", valid, 404, "resource_not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := "POST"
			if strings.HasPrefix(c.path, "/public") {
				method = "GET"
			}
			r := s.request(t, method, c.path, c.key, []byte(c.body), nil)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			var b struct {
				ErrCode, Error, Message string
			}
			if err := json.Unmarshal(r.Body, &b); err != nil {
				t.Fatalf("body is not JSON: %q", r.Body)
			}
			if b.ErrCode != c.code || (r.Status == 401 || r.Status == 403) && b.Error != c.code {
				t.Errorf("code %q/%q, want %q (%s)", b.ErrCode, b.Error, c.code, r.Body)
			}
			if b.Message == "" {
				t.Errorf("no message: %s", r.Body)
			}
			if !strings.Contains(c.name, "too_large") {
				r.Body = bytes.ReplaceAll(r.Body, []byte(s.Marketplace.ID), []byte("MARKETPLACE"))
				golden(t, "reject_"+c.name+".json", r)
			}
		})
	}

	// Nothing of any rejected request is stored: once an event posted after
	// all of them is in ClickHouse, none of theirs is.
	sentinel := fmt.Sprintf(`{"pageviews":[{"id":"rej-sentinel","occurredAt":%q,"opaqueUserId":"u","page":{"type":"home","pageId":"h"}}]}`, ts(time.Now()))
	if st, b := s.do(t, "POST", "/v2/events", s.MarketplaceKey, []byte(sentinel)); st != 200 {
		t.Fatalf("sentinel %d %s", st, b)
	}
	waitFor(t, s, "rej-sentinel")
	if n := s.count(t, physicalEvents); n != 1 {
		rows := s.query(t, "SELECT event_id FROM events_raw UNION ALL SELECT event_id FROM interactions_raw")
		t.Errorf("%d rows stored, want only the sentinel: %v", n, rows)
	}
}

// TestHTTPSurface: CORS preflight, path normalisation, JSON 404/405, the
// advanced-key route, health and metrics.
func TestHTTPSurface(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	s := startSystem(t, env.Config(t, brokers))

	pre := s.request(t, "OPTIONS", "/v2/events", "", nil, map[string]string{
		"Origin": "https://shop.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization,content-type,x-ua",
	})
	if pre.Status != 204 || pre.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(strings.ToLower(pre.Header.Get("Access-Control-Allow-Headers")), "x-ua") {
		t.Errorf("preflight: %d %v", pre.Status, pre.Header)
	}
	body := fmt.Sprintf(`{"pageviews":[{"id":"surf-%%d","occurredAt":%q,"opaqueUserId":"u","page":{"type":"home","pageId":"h"}}]}`, ts(time.Now()))
	for i, p := range []string{"/v2/events", "//v2/events", "/prefix/v2/events", "/a/b//v2/events/", "/v2//events"} {
		r := s.request(t, "POST", p, s.MarketplaceKey, []byte(fmt.Sprintf(body, i)), map[string]string{"Origin": "https://shop.example"})
		if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("POST %s: %d %s", p, r.Status, r.Body)
		}
	}
	if r := s.request(t, "GET", "/v2/events", s.MarketplaceKey, nil, nil); r.Status != 405 || !json.Valid(r.Body) {
		t.Errorf("GET /v2/events: %d %s", r.Status, r.Body)
	}
	if st, b := s.do(t, "GET", "/public/v1/marketplace", s.AdvancedKey, nil); st != 200 || !strings.Contains(string(b), s.Marketplace.ID) {
		t.Errorf("GET /public/v1/marketplace: %d %s", st, b)
	}
	if st, b := s.do(t, "GET", "/livez", "", nil); st != 200 || !json.Valid(b) {
		t.Errorf("livez %d %s", st, b)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		_, b := s.do(t, "GET", "/metrics", "", nil)
		for _, m := range []string{"endcap_http_requests_total", "endcap_kafka_produced_records_total", "endcap_clickhouse_insert_batches_total", "endcap_kafka_consumer_lag_records", "endcap_events_accepted_total"} {
			if !strings.Contains(string(b), m) {
				return testenv.Errorf("metric %s missing", m)
			}
		}
		return nil
	})
}

// TestBrokerDown: with Kafka gone, /v2/events answers 503 with a JSON body
// and Retry-After within two seconds, and /readyz reports it.
func TestBrokerDown(t *testing.T) {
	env := testenv.Get(t)
	cluster, brokers := testenv.Kafka(t)
	s := startSystem(t, env.Config(t, brokers))
	cluster.Close()

	body := fmt.Sprintf(`{"pageviews":[{"id":"down-1","occurredAt":%q,"opaqueUserId":"u","page":{"type":"home","pageId":"h"}}]}`, ts(time.Now()))
	start := time.Now()
	r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(body), nil)
	took := time.Since(start)
	if r.Status != 503 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if took > 2*time.Second {
		t.Errorf("503 took %s", took)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	golden(t, "events_unavailable.json", r)
	if st, b := s.do(t, "GET", "/readyz", "", nil); st != 503 || !strings.Contains(string(b), "kafka") {
		t.Errorf("readyz with Kafka down: %d %s", st, b)
	}
	// Auctions do not wait for Kafka: their records are dropped (and
	// counted), the answers keep coming at once.
	for i := range 50 {
		start := time.Now()
		r := s.request(t, "POST", "/v2/auctions", s.MarketplaceKey, []byte(`{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p-1"]}}]}`), nil)
		if r.Status != 201 || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("auction %d with Kafka down: %d after %s: %s", i, r.Status, time.Since(start), r.Body)
		}
	}
}

// TestEntityStateInClickHouse: entity changes reach the reporting copy, and
// API keys and console users (their hashes) never do.
func TestEntityStateInClickHouse(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	s := startSystem(t, env.Config(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.App.Users.CreateAdmin(audit.WithActor(ctx, audit.Actor{Kind: "cli"}), s.Marketplace.ID, "admin@state.test", "a long enough password"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		// The user's audit entry is copied (it was written after the marketplace's record).
		if n := s.count(t, "SELECT count() FROM entity_state_raw WHERE type = 'audit'"); n != 1 {
			return testenv.Errorf("%d audit rows, want 1", n)
		}
		rows := s.query(t, "SELECT type, id, visitParamExtractString(state, 'currency') FROM entity_state WHERE type = 'marketplace'")
		if len(rows) != 1 || rows[0][1] != s.Marketplace.ID || rows[0][2] != "USD" {
			return testenv.Errorf("marketplace copy: %v", rows)
		}
		return nil
	})
	if n := s.count(t, "SELECT count() FROM entity_state_raw WHERE type = 'apikey'"); n != 0 {
		t.Errorf("%d API key rows in ClickHouse", n)
	}
	if n := s.count(t, "SELECT count() FROM entity_state_raw WHERE type = 'user' OR position(state, 'argon2id') > 0"); n != 0 {
		t.Errorf("%d console user rows (or password hashes) in ClickHouse", n)
	}
}

// TestResolvedBidVerification: /v2/events accepts a resolvedBidId signed by
// this system for this marketplace and rejects forged, altered, foreign and
// malformed ones with invalid_resolved_bid_id naming the event.
func TestResolvedBidVerification(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	s := startSystem(t, env.Config(t, brokers))
	kr := s.App.BidKeys.Load()
	if kr == nil {
		t.Fatal("bid keys not loaded")
	}
	sign := func(mp string) string {
		c := bidtoken.Claims{MarketplaceID: uuid.MustParse(mp), AuctionID: uuid.Must(uuid.NewV7()), CampaignID: uuid.New(),
			AuctionTimeMs: time.Now().UnixMilli(), ChargeType: bidtoken.CPC, AdFormat: bidtoken.Listings, Rank: 1,
			PriceMicros: 1_230_000, WinnerType: bidtoken.WinnerProduct, WinnerID: "p-1", VendorID: "v-1"}
		tok, err := kr.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := sign(s.Marketplace.ID)
	other, err := s.App.Accounts.CreateMarketplace(t.Context(), "Other", "EUR", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	altered := []byte(good)
	altered[len(altered)/2] ^= 1
	if altered[len(altered)/2] == '_' || altered[len(altered)/2] == '-' {
		altered[len(altered)/2] = 'A'
	}
	forged, _ := bidtoken.NewKeyring(map[uint8][]byte{1: []byte("an attacker's key of 32 bytes!!!")}, 1)
	fc := bidtoken.Claims{MarketplaceID: uuid.MustParse(s.Marketplace.ID), AuctionID: uuid.Must(uuid.NewV7()), CampaignID: uuid.New(),
		AuctionTimeMs: time.Now().UnixMilli(), ChargeType: bidtoken.CPC, AdFormat: bidtoken.Listings, Rank: 1, PriceMicros: 1, WinnerType: bidtoken.WinnerProduct, WinnerID: "p", VendorID: "v"}
	forgedTok, _ := forged.Encode(fc)

	body := func(tok string) []byte {
		return []byte(fmt.Sprintf(`{"clicks":[{"id":"c-ok","occurredAt":%q,"opaqueUserId":"u","entity":{"type":"product","id":"p-1"}},{"id":"c-%d","occurredAt":%q,"opaqueUserId":"u","resolvedBidId":%q}]}`,
			ts(time.Now()), time.Now().UnixNano(), ts(time.Now()), tok))
	}
	if r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, body(good), nil); r.Status != 200 {
		t.Fatalf("valid token: %d %s", r.Status, r.Body)
	}
	for name, tok := range map[string]string{
		"altered": string(altered), "forged": forgedTok, "foreign marketplace": sign(other.ID),
		"malformed": "not-a-token", "padded": good + "==", "truncated": good[:len(good)-3],
	} {
		r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, body(tok), nil)
		var b v2Error
		_ = json.Unmarshal(r.Body, &b)
		if r.Status != 400 || b.ErrCode != "invalid_resolved_bid_id" || !strings.HasPrefix(b.Message, "clicks[1].resolvedBidId") {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
}

type v2Error struct{ ErrCode, DocURL, Message string }

// TestClaimsOfThePreviousVersion: after an upgrade to hashed claim keys (the
// format record says when it happened) and then to the claim store, an event
// id claimed by a previous version under its whole key in Redis is still a
// duplicate; another id is folded.
func TestClaimsOfThePreviousVersion(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	defer rdb.Close()
	ctx := t.Context()
	// The Redis of these tests is shared: record an upgrade now for this
	// system's start, and put back what was recorded before.
	// The upgrade to the claim store (ec:claim:store) happens now too, so
	// that the claims the previous versions kept in Redis are read for a
	// window (docs/design/projector.md, Upgrading to the claim store).
	for _, marker := range []string{"ec:claim:format", "ec:claim:store"} {
		prev, err := rdb.Get(ctx, marker).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if prev == "" {
				rdb.Del(context.Background(), marker)
			} else {
				rdb.Set(context.Background(), marker, prev, 0)
			}
		})
		if err := rdb.Set(ctx, marker, time.Now().UnixMilli(), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s := startSystem(t, cfg)
	mp := s.Marketplace.ID
	// The previous version claimed "old-1" for a record of its own.
	if err := rdb.Set(ctx, "ec:claim:ev:"+mp+":pageview:old-1", "2:40", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	at := ts(time.Now())
	body := fmt.Sprintf(`{"pageviews":[{"id":"old-1","occurredAt":%q,"opaqueUserId":"u","page":{"type":"home","pageId":"h"}},
		{"id":"new-1","occurredAt":%q,"opaqueUserId":"u","page":{"type":"home","pageId":"h"}}]}`, at, at)
	if r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(body), nil); r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM events WHERE event_id = 'new-1'"); n != 1 {
			return testenv.Errorf("%d rows of new-1, want 1", n)
		}
		return nil
	})
	if n := s.count(t, "SELECT count() FROM events WHERE event_id = 'old-1'"); n != 0 {
		t.Errorf("%d rows of old-1, claimed by the previous version: want 0 (a duplicate)", n)
	}
	// Claims are no longer written to Redis: the previous version's is the only one.
	if n := len(rdb.Keys(ctx, "ec:claim:ev:"+mp+":*").Val()); n != 1 {
		t.Errorf("%d whole-key claims of the marketplace, want the previous version's 1", n)
	}
}
