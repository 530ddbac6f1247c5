package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/testkit/testenv"
)

// Deadlines of /public/v1 writes and Idempotency-Key (docs/reference/management-api.md).

// idStart starts a system with a short write deadline and no rate limits in
// the way; it returns the kfake cluster too.
func idStart(t *testing.T, tweak func(*config.Config)) (*system, *kfake.Cluster) {
	t.Helper()
	env := testenv.Get(t)
	cluster, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.PublicWriteTimeout = 2 * time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	return startSystem(t, cfg), cluster
}

// idPost sends a POST with an Idempotency-Key (none when key is "").
func idPost(t *testing.T, s *system, path, key, body string) response {
	t.Helper()
	var hdr map[string]string
	if key != "" {
		hdr = map[string]string{"Idempotency-Key": key}
	}
	return s.request(t, "POST", path, s.AdvancedKey, []byte(body), hdr)
}

// timed runs a request and checks that it answered within d.
func timed(t *testing.T, what string, d time.Duration, fn func() response) response {
	t.Helper()
	start := time.Now()
	r := fn()
	if took := time.Since(start); took > d {
		t.Errorf("%s answered %d after %s, want at most %s", what, r.Status, took.Round(time.Millisecond), d)
	}
	return r
}

// unavailable checks a 503 with Retry-After whose message says the write may
// or may not have been applied.
func unavailable(t *testing.T, what string, r response) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d %s (Retry-After %q), want 503 with Retry-After", what, r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(r.Body), "may or may not") {
		t.Fatalf("%s: the 503 does not say the write may have been applied: %s", what, r.Body)
	}
}

// retryUntil sends a request until it gets want (retrying on 503 and 409),
// at most for d.
func retryUntil(t *testing.T, what string, want int, d time.Duration, fn func() response) response {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := fn()
		switch {
		case r.Status == want:
			return r
		case (r.Status == 503 || r.Status == 409) && time.Now().Before(deadline):
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
	}
}

// exportsOf counts the distinct exports of the marketplace that reached
// the reporting copy of the entities log, and its quota units: the
// distinct exports counted on today or yesterday (UTC), so that a test
// across midnight UTC reads the units it made before it too.
func exportsOf(t *testing.T, s *system) (records uint64, units int64) {
	t.Helper()
	records = s.count(t, "SELECT uniqExact(id) FROM entity_state_raw WHERE type = 'export' AND marketplace_id = ?", s.Marketplace.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, ids := time.Now().UTC(), map[string]bool{}
	for _, day := range []time.Time{now.AddDate(0, 0, -1), now} {
		// One key at a time: the days' keys are in different slots of a cluster.
		m, err := s.App.Redis.SMembers(ctx, "ec:exports:quota-ids:"+s.Marketplace.ID+":"+day.Format(time.DateOnly)).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range m {
			ids[id] = true
		}
	}
	return records, int64(len(ids))
}

func idExportBody() string {
	b, _ := json.Marshal(exRequest())
	return string(b)
}

// TestWritesOnAHungBroker: with a broker that holds every produce request,
// writes answer 503 with Retry-After within the write deadline; once the
// broker answers, the writes given up are applied, whole, and a client that
// retried its POSTs with their Idempotency-Key until they succeeded ends
// with exactly one export (one unit of the quota) and one campaign.
func TestWritesOnAHungBroker(t *testing.T) {
	s, cluster := idStart(t, nil)
	limit := s.Cfg.PublicWriteTimeout + time.Second
	key := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v-1","name":"Vendor 1"}]}`, nil), 200)

	release := testenv.HangProduce(t, cluster)
	time.AfterFunc(2*time.Minute, release) // whatever happens, the test ends

	r := timed(t, "PUT vendors", limit, func() response {
		return cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
			`{"vendors":[{"id":"v-2","name":"Vendor 2"},{"id":"v-3","name":"Vendor 3"}]}`, nil)
	})
	unavailable(t, "PUT vendors", r)

	exportKey, campaignKey := "export-"+uuid.NewString(), "campaign-"+uuid.NewString()
	campaign := `{"name":"Hung","type":"banners","totalBudget":5}`
	r = timed(t, "POST exports", limit, func() response { return idPost(t, s, exPath, exportKey, idExportBody()) })
	if code, _ := exError(t, r, 503); code != "service_unavailable" || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "may or may not") {
		t.Fatalf("POST exports: %s", r.Body)
	}
	r = timed(t, "POST campaigns", limit, func() response { return idPost(t, s, cpVendor("v-1"), campaignKey, campaign) })
	unavailable(t, "POST campaigns", r)
	// A retry while the broker still hangs is 503 too (the first attempt's
	// record may still land: it does not write a second one).
	r = timed(t, "retried POST exports", limit, func() response { return idPost(t, s, exPath, exportKey, idExportBody()) })
	exError(t, r, 503)
	// Without a key nothing changes either: a 503.
	unavailable(t, "POST campaigns without a key", timed(t, "POST campaigns without a key", limit, func() response {
		return idPost(t, s, cpVendor("v-1"), "", `{"name":"No key","type":"banners","totalBudget":5}`)
	}))

	// The broker comes back while the client keeps retrying.
	time.AfterFunc(3*time.Second, release)
	ex := retryUntil(t, "retried POST exports", http.StatusAccepted, time.Minute, func() response {
		return idPost(t, s, exPath, exportKey, idExportBody())
	})
	exportID := exAccepted(t, ex)
	camp := retryUntil(t, "retried POST campaigns", http.StatusCreated, time.Minute, func() response {
		return idPost(t, s, cpVendor("v-1"), campaignKey, campaign)
	})
	campaignID := cpID(t, camp)

	// Applied whole once the broker answered: both vendors.
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, v := range []string{"v-2", "v-3"} {
			if r := cpDo(t, s, "GET", "/public/v1/catalog-search-service/catalogs/vendors/"+v, key, nil, nil); r.Status != 200 {
				return fmt.Errorf("vendor %s: %d", v, r.Status)
			}
		}
		return nil
	})
	// One export, one quota unit; the export runs.
	testenv.Eventually(t, 30*time.Second, func() error {
		if n, units := exportsOf(t, s); n != 1 || units != 1 {
			return fmt.Errorf("%d exports, %d quota units, want 1 and 1", n, units)
		}
		return nil
	})
	testenv.Eventually(t, 60*time.Second, func() error {
		r := s.request(t, "GET", exPath+"/"+exportID, key, nil, nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"status":"completed"`) {
			return fmt.Errorf("export: %d %s", r.Status, r.Body)
		}
		return nil
	})
	// One campaign of that name.
	r = cpDo(t, s, "GET", cpVendor("v-1"), key, nil, nil)
	var list struct {
		Campaigns []struct{ ID, Name string }
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range list.Campaigns {
		if c.Name == "Hung" {
			n++
			if c.ID != campaignID {
				t.Fatalf("campaign %s, the retry answered %s", c.ID, campaignID)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d campaigns named Hung: %s", n, r.Body)
	}
	// The next retries replay the result.
	for _, r := range []response{idPost(t, s, exPath, exportKey, idExportBody()), idPost(t, s, cpVendor("v-1"), campaignKey, campaign)} {
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("not replayed: %d %s", r.Status, r.Body)
		}
	}
}

// TestIdempotencyKeys: the same key and request get the first answer again,
// with Idempotent-Replayed; another request with the key is 422; concurrent
// requests with one key create one resource; invalid keys are 422; every
// creating POST derives its ids from the key; without a key nothing changes.
func TestIdempotencyKeys(t *testing.T) {
	s, _ := idStart(t, func(c *config.Config) { c.ExportDailyQuota = 10 })
	key := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v-1","name":"Vendor 1"},{"id":"v-2","name":"Vendor 2"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[{"id":"p-1","name":"P1","vendors":["v-1"],"active":true}]}`, nil), 200)

	t.Run("export replayed", func(t *testing.T) {
		k := uuid.NewString()
		first := idPost(t, s, exPath, k, idExportBody())
		id := exAccepted(t, first)
		for range 3 {
			r := idPost(t, s, exPath, k, idExportBody())
			if r.Status != 202 || string(r.Body) != string(first.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay: %d %s %v", r.Status, r.Body, r.Header)
			}
		}
		code, details := exError(t, idPost(t, s, exPath, k, strings.Replace(idExportBody(), `"clicks"`, `"ctr"`, 1)), 422)
		if code != "idempotency_key_reused" || len(details) != 0 {
			t.Fatalf("another body: %s %v", code, details)
		}
		if r := s.request(t, "GET", exPath+"/"+id, key, nil, nil); r.Status != 200 {
			t.Fatalf("export: %d", r.Status)
		}
		testenv.Eventually(t, 20*time.Second, func() error {
			if n, units := exportsOf(t, s); n != 1 || units != 1 {
				return fmt.Errorf("%d exports, %d units", n, units)
			}
			return nil
		})
	})

	t.Run("concurrent requests with one key", func(t *testing.T) {
		k := uuid.NewString()
		var wg sync.WaitGroup
		rs := make([]response, 6)
		for i := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs[i] = idPost(t, s, cpVendor("v-1"), k, `{"name":"Concurrent","type":"banners","totalBudget":5}`)
			}()
		}
		wg.Wait()
		ids := map[string]bool{}
		for _, r := range rs {
			switch r.Status {
			case 201:
				ids[cpID(t, r)] = true
			case 409:
				if !strings.Contains(string(r.Body), `"errCode":"idempotency_key_in_progress"`) || r.Header.Get("Retry-After") == "" {
					t.Fatalf("409 %s", r.Body)
				}
			default:
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		}
		if len(ids) != 1 {
			t.Fatalf("%d campaigns created", len(ids))
		}
		r := cpDo(t, s, "GET", cpVendor("v-1"), key, nil, nil)
		if n := strings.Count(string(r.Body), `"name":"Concurrent"`); n != 1 {
			t.Fatalf("%d campaigns named Concurrent", n)
		}
	})

	t.Run("invalid keys", func(t *testing.T) {
		for k, typ := range map[string]string{"": "too_short", strings.Repeat("x", 256): "too_long", "ключ": "value_error"} {
			r := s.request(t, "POST", cpVendor("v-1"), key, []byte(`{"name":"Bad key","type":"banners","totalBudget":5}`), map[string]string{"Idempotency-Key": k})
			expect422Typed(t, r, "header.Idempotency-Key:"+typ)
			r = s.request(t, "POST", exPath, key, []byte(idExportBody()), map[string]string{"Idempotency-Key": k})
			if code, details := exError(t, r, 422); code != "invalid_request" || len(details) != 1 || details[0].Field != "Idempotency-Key" {
				t.Fatalf("export with key %q: %s", k, r.Body)
			}
		}
		if r := cpDo(t, s, "GET", cpVendor("v-1"), key, nil, nil); strings.Contains(string(r.Body), "Bad key") {
			t.Fatal("a request with an invalid key ran")
		}
	})

	t.Run("every creating POST", func(t *testing.T) {
		camp := cpID(t, idPost(t, s, cpVendor("v-1"), uuid.NewString(), `{"name":"Bids","type":"listings","dailyBudget":5}`))
		cases := []struct{ name, path, body, idField string }{
			{"campaign", cpVendor("v-2"), `{"name":"Keyed","type":"banners","totalBudget":5}`, "id"},
			{"bid", cpBids(camp), `{"targetType":"product","target":"p-1","bidAmount":0.5}`, "id"},
			{"billing contact", "/public/v1/billing-service/billing-contacts", `{"name":"Ann","email":"ann@example.com"}`, "id"},
			{"webhook", "/public/v1/webhooks/webhooks", `{"url":"https://hooks.example.com/x","eventTypes":["export.completed"]}`, "secret"},
			{"invitations", "/public/v1/invitation-service/invitations", `{"invites":[{"vendorId":"v-1","vendorEmail":"a@example.com","targetUserRole":"vendor_admin"},{"vendorId":"v-2","vendorEmail":"b@example.com","targetUserRole":"vendor_analyst"}]}`, "invitations"},
		}
		for _, tc := range cases {
			k := uuid.NewString()
			first := idPost(t, s, tc.path, k, tc.body)
			if first.Status != 201 {
				t.Fatalf("%s: %d %s", tc.name, first.Status, first.Body)
			}
			again := idPost(t, s, tc.path, k, tc.body)
			if again.Status != 201 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("%s replay: %d %s", tc.name, again.Status, again.Body)
			}
			var m map[string]any
			_ = json.Unmarshal(first.Body, &m)
			if m[tc.idField] == nil {
				t.Fatalf("%s: no %s in %s", tc.name, tc.idField, first.Body)
			}
		}
		// One bid on p-1 (a second bid on the target would be a 422).
		r := cpDo(t, s, "GET", cpBids(camp), key, nil, nil)
		if n := strings.Count(string(r.Body), `"target":"p-1"`); n != 1 {
			t.Fatalf("%d bids on p-1: %s", n, r.Body)
		}
	})

	t.Run("without a key", func(t *testing.T) {
		_, units0 := exportsOf(t, s)
		a := exAccepted(t, idPost(t, s, exPath, "", idExportBody()))
		b := exAccepted(t, idPost(t, s, exPath, "", idExportBody()))
		if a == b {
			t.Fatal("two requests without a key made one export")
		}
		if _, units := exportsOf(t, s); units != units0+2 {
			t.Fatalf("%d units, want %d", units, units0+2)
		}
	})
}

// TestIdempotencyKeyRedisFrozen: when Redis stops answering, a POST with an
// Idempotency-Key is 503 within a second or so (idempotency cannot be
// promised) and does not run.
func TestIdempotencyKeyRedisFrozen(t *testing.T) {
	env := testenv.Get(t)
	proxy := newFreezableProxy(t, env.RedisAddr)
	s, _ := idStart(t, func(c *config.Config) { c.RedisAddr = proxy.addr })
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", s.AdvancedKey, `{"vendors":[{"id":"v-1","name":"Vendor 1"}]}`, nil), 200)

	proxy.freeze()
	limit := 1500 * time.Millisecond
	r := timed(t, "POST with a key, Redis frozen", limit, func() response {
		return idPost(t, s, cpVendor("v-1"), uuid.NewString(), `{"name":"Frozen","type":"banners","totalBudget":5}`)
	})
	if r.Status != 503 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "Idempotency-Key cannot be checked") {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	r = timed(t, "export with a key, Redis frozen", limit, func() response { return idPost(t, s, exPath, uuid.NewString(), idExportBody()) })
	if code, _ := exError(t, r, 503); code != "service_unavailable" {
		t.Fatalf("export: %s", r.Body)
	}
	proxy.thaw()
	if r := cpDo(t, s, "GET", cpVendor("v-1"), s.AdvancedKey, nil, nil); strings.Contains(string(r.Body), "Frozen") {
		t.Fatal("the request ran")
	}
}

// freezableProxy forwards TCP connections to a server; frozen, it stops
// forwarding (connections stay open, nothing answers), as a server stopped
// with SIGSTOP.
type freezableProxy struct {
	addr string
	mu   sync.Mutex
	gate chan struct{} // closed while thawed
}

func newFreezableProxy(t *testing.T, upstream string) *freezableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezableProxy{addr: ln.Addr().String(), gate: make(chan struct{})}
	close(p.gate)
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		p.thaw()
		_ = ln.Close()
		cmu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		cmu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, u)
			cmu.Unlock()
			go p.pipe(c, u)
			go p.pipe(u, c)
		}
	}()
	return p
}

func (p *freezableProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *freezableProxy) freeze() {
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
}

func (p *freezableProxy) thaw() {
	p.mu.Lock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
	p.mu.Unlock()
}
