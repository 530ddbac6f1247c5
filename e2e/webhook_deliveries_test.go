package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/endcap/endcap/api/openapi/openapitest"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/testkit/testenv"
)

// hookReceiver is a loopback endpoint that verifies every request with the
// Standard Webhooks library and keeps what it got.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	verify *standardwebhooks.Webhook
	got    []hookRequest
}

type hookRequest struct {
	id     string
	at     time.Time
	err    error
	header http.Header
	body   []byte // as received
	msg    struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := hookRequest{id: r.Header.Get("webhook-id"), at: time.Now(), header: r.Header.Clone(), body: body}
		h.mu.Lock()
		if h.verify != nil {
			g.err = h.verify.Verify(body, r.Header)
		}
		if err := json.Unmarshal(body, &g.msg); err != nil && g.err == nil {
			g.err = err
		}
		h.got = append(h.got, g)
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) ofType(typ string) []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookRequest
	for _, g := range h.got {
		if g.msg.Type == typ {
			out = append(out, g)
		}
	}
	return out
}

// TestWebhookDeliveries: through the public API and the whole system
// (target all): campaign and export events reach a subscribed receiver
// signed per Standard Webhooks, with the resource as the API returns it;
// the delivery log pages; retry and test send again; the latency from the
// change to the receiver while /v2/events takes a steady load.
func TestWebhookDeliveries(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault = "5000/1s"
	cfg.WebhookAllowLoopback = true
	cfg.WebhookRetryBase = 100 * time.Millisecond
	cfg.SpendReadTimeout = 10 * time.Second // the event's campaign is compared with the API's, spend included
	s := startSystem(t, cfg)
	A := s.AdvancedKey
	rc := newHookReceiver(t)

	r := bwDo(t, s, "POST", bwWhPath, A, fmt.Sprintf(`{"url": %q, "eventTypes": ["campaign.created", "campaign.updated", "export.completed"]}`, rc.srv.URL+"/hooks"), nil)
	bwStatus(t, r, 201)
	var wh struct{ ID, Secret string }
	decodeJSONBody(t, r.Body, &wh)
	v, err := standardwebhooks.NewWebhook(wh.Secret)
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.verify = v
	rc.mu.Unlock()
	// Another marketplace's webhook on the same receiver gets nothing of A's.
	B := otherMarketplace(t, s)
	bwStatus(t, bwDo(t, s, "POST", bwWhPath, B, fmt.Sprintf(`{"url": %q}`, rc.srv.URL+"/b"), nil), 201)

	bwVendors(t, s, A, "v1")
	r = bwDo(t, s, "POST", cpVendor("v1"), A, `{"name":"Hooked","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`, nil)
	bwStatus(t, r, 201)
	var camp struct{ ID string }
	decodeJSONBody(t, r.Body, &camp)
	created := r.Body
	testenv.Eventually(t, 15*time.Second, func() error {
		if n := len(rc.ofType("campaign.created")); n != 1 {
			return fmt.Errorf("%d campaign.created", n)
		}
		return nil
	})
	g := rc.ofType("campaign.created")[0]
	if g.err != nil {
		t.Fatalf("signature: %v", g.err)
	}
	// data is the campaign as the API returned it.
	sameJSON(t, g.msg.Data, string(created))

	// Steady load on /v2/events while the campaign changes: every change
	// reaches the receiver; the latency from the change (the event's
	// timestamp) to the receiver is measured.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var posted, failed int
	var lmu sync.Mutex
	for w := range 2 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				var items []string
				for i := range 20 {
					items = append(items, fmt.Sprintf(`{"id":"wl-%d-%d-%d","occurredAt":%q,"opaqueUserId":"u-%d","entity":{"type":"product","id":"P1"}}`, w, n, i, ts(time.Now()), i))
				}
				st, _ := s.do(t, "POST", "/v2/events", s.MarketplaceKey, []byte(`{"impressions":[`+strings.Join(items, ",")+`]}`))
				lmu.Lock()
				if st == 200 {
					posted += 20
				} else {
					failed++
				}
				lmu.Unlock()
			}
		})
	}
	const updates = 60
	loadStart := time.Now()
	for i := range updates {
		bwStatus(t, bwDo(t, s, "PATCH", cpBase+"/campaigns/"+camp.ID, A, fmt.Sprintf(`{"name":"Hooked %d"}`, i), nil), 200)
		time.Sleep(100 * time.Millisecond)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if n := len(rc.ofType("campaign.updated")); n < updates {
			return fmt.Errorf("%d of %d campaign.updated", n, updates)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	elapsed := time.Since(loadStart)
	ups := rc.ofType("campaign.updated")
	if len(ups) != updates {
		t.Fatalf("%d campaign.updated for %d changes", len(ups), updates)
	}
	var lat []time.Duration
	ids := map[string]bool{}
	for _, u := range ups {
		if u.err != nil {
			t.Fatalf("signature: %v", u.err)
		}
		ids[u.id] = true
		lat = append(lat, u.at.Sub(u.msg.Timestamp))
	}
	if len(ids) != updates {
		t.Fatalf("%d distinct webhook-ids for %d events", len(ids), updates)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p95, pmax := lat[len(lat)/2], lat[len(lat)*95/100], lat[len(lat)-1]
	t.Logf("event → receiver over %d campaign changes, while /v2/events took %d events (%.0f/s, %d failed requests): p50 %s, p95 %s, max %s",
		updates, posted, float64(posted)/elapsed.Seconds(), failed, p50.Round(time.Millisecond), p95.Round(time.Millisecond), pmax.Round(time.Millisecond))
	if p95 > 2*time.Second {
		t.Errorf("p95 from event to receiver %s, want under 2 s", p95)
	}
	if failed > 0 || posted == 0 {
		t.Errorf("load: %d events acknowledged, %d requests failed", posted, failed)
	}

	// An export: export.completed carries the export as GET answers it,
	// with its URL.
	day := time.Now().UTC().Format("2006-01-02")
	r = bwDo(t, s, "POST", "/public/v1/export-service/exports", A, `{"dataset":"monitoring_metrics","dimensions":["day_local","campaign_id"],"metrics":["impressions"],"granularity":"day_local","startDate":"`+day+`","endDate":"`+day+`","format":"csv"}`, nil)
	bwStatus(t, r, 202)
	var ex struct{ ExportID string }
	decodeJSONBody(t, r.Body, &ex)
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := len(rc.ofType("export.completed")); n != 1 {
			return fmt.Errorf("%d export.completed", n)
		}
		return nil
	})
	var exData struct {
		ExportID, Status, URL string
	}
	g = rc.ofType("export.completed")[0]
	if err := json.Unmarshal(g.msg.Data, &exData); err != nil || g.err != nil {
		t.Fatal(err, g.err)
	}
	if exData.ExportID != ex.ExportID || exData.Status != "completed" || !strings.HasPrefix(exData.URL, "http") {
		t.Fatalf("export.completed data %s", g.msg.Data)
	}
	if resp, err := http.Get(exData.URL); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the export's URL: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The delivery log: newest first, paged with a signed cursor.
	path := bwWhPath + "/" + wh.ID + "/deliveries"
	var all []string
	next := path + "?limit=25"
	for next != "" {
		r = bwDo(t, s, "GET", next, A, nil, nil)
		bwStatus(t, r, 200)
		var page struct {
			HasMore    bool `json:"hasMore"`
			NextPage   *string
			Deliveries []struct {
				ID, EventID, EventType, Status string
				Attempts                       int
				LastStatusCode                 *int
				LastLatencyMs                  *int64
				NextAttemptAt                  *string
			}
		}
		decodeJSONBody(t, r.Body, &page)
		for _, d := range page.Deliveries {
			if d.Status != "delivered" || d.Attempts != 1 || d.LastStatusCode == nil || *d.LastStatusCode != 204 || d.LastLatencyMs == nil || d.NextAttemptAt != nil {
				t.Fatalf("delivery %+v", d)
			}
			all = append(all, d.ID)
		}
		next = ""
		if page.HasMore {
			next = path + "?limit=25&next_page=" + *page.NextPage
		}
	}
	if len(all) != updates+2 || !slices.IsSortedFunc(all, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Fatalf("%d deliveries listed (want %d), newest first: %v", len(all), updates+2, all[:3])
	}
	// One delivery, with its payload; retried: sent again with the same
	// webhook-id.
	r = bwDo(t, s, "GET", path+"/"+all[0], A, nil, nil)
	bwStatus(t, r, 200)
	var one struct {
		EventID string
		Payload json.RawMessage
	}
	decodeJSONBody(t, r.Body, &one)
	if !strings.Contains(string(one.Payload), `"type":"export.completed"`) {
		t.Fatalf("delivery %s", r.Body)
	}
	bwStatus(t, bwDo(t, s, "POST", path+"/"+all[0]+"/retry", A, nil, nil), 202)
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(rc.ofType("export.completed")); n != 2 {
			return fmt.Errorf("%d export.completed after the retry", n)
		}
		return nil
	})
	if g := rc.ofType("export.completed"); g[1].id != g[0].id || g[1].id != one.EventID || g[1].err != nil {
		t.Fatalf("retry: webhook-id %q then %q (%v)", g[0].id, g[1].id, g[1].err)
	}
	// A test event.
	r = bwDo(t, s, "POST", bwWhPath+"/"+wh.ID+"/test", A, nil, nil)
	bwStatus(t, r, 202)
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(rc.ofType(webhooks.TypeTest)); n != 1 {
			return fmt.Errorf("%d test events", n)
		}
		return nil
	})
	// Errors: unknown delivery, another marketplace's webhook, a bad status.
	bwStatus(t, bwDo(t, s, "GET", path+"/00000000-0000-0000-0000-000000000000", A, nil, nil), 404)
	bwStatus(t, bwDo(t, s, "POST", path+"/00000000-0000-0000-0000-000000000000/retry", A, nil, nil), 404)
	bwStatus(t, bwDo(t, s, "GET", path, B, nil, nil), 404)
	expect422Locs(t, bwDo(t, s, "GET", path+"?status=nope", A, nil, nil), "query.status")
	expect422Locs(t, bwDo(t, s, "GET", path+"?next_page=forged", A, nil, nil), "query.next_page")
	// Disabled by hand: test and retry are refused with the documented code.
	bwStatus(t, bwDo(t, s, "PATCH", bwWhPath+"/"+wh.ID, A, `{"status": "disabled"}`, nil), 200)
	r = bwDo(t, s, "POST", bwWhPath+"/"+wh.ID+"/test", A, nil, nil)
	bwStatus(t, r, 409)
	if !strings.Contains(string(r.Body), `"errCode":"webhook_disabled"`) {
		t.Fatalf("test of a disabled webhook: %s", r.Body)
	}
	r = bwDo(t, s, "GET", bwWhPath+"/"+wh.ID, A, nil, nil)
	if !strings.Contains(string(r.Body), `"status":"disabled"`) || !strings.Contains(string(r.Body), `"disabledReason":"disabled through the API"`) {
		t.Fatalf("disabled webhook: %s", r.Body)
	}
	// Nothing went to B's webhook.
	if n := len(rc.ofType("campaign.created")) + len(rc.ofType("campaign.updated")); n != updates+1 {
		t.Fatalf("%d campaign events in all: another marketplace's webhook got some", n)
	}
	// Every request the receiver got is its event type's operation in the
	// document's webhooks: headers and body.
	val, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	got := slices.Clone(rc.got)
	rc.mu.Unlock()
	types := map[string]int{}
	sizes := map[string][2]int{} // per type, smallest and largest body
	for _, g := range got {
		types[g.msg.Type]++
		sz, n := sizes[g.msg.Type], len(g.body)
		if sz[0] == 0 || n < sz[0] {
			sz[0] = n
		}
		sz[1] = max(sz[1], n)
		sizes[g.msg.Type] = sz
		if err := val.ValidateWebhook(t.Context(), g.header, g.body); err != nil {
			t.Errorf("%s %s: %s", g.msg.Type, g.id, openapitest.Pretty(err))
		}
	}
	if len(types) != 4 {
		t.Errorf("event types checked against the document: %v", types)
	}
	t.Logf("bodies received, smallest and largest by type (bytes): %v", sizes)
}

func decodeJSONBody(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}
