package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/masterkey"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

// tlsRedisConfig is a test's configuration on the TLS Redis r, as the ACL
// user endcap with its password in a file, and with the signing keys kept
// in Redis (wrapped with a master key of the test's) rather than configured.
func tlsRedisConfig(t *testing.T, r *testenv.TLSRedis, password string) config.Config {
	t.Helper()
	cfg := exConfig(t)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "redis-password")
	keyFile := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(masterkey.Generate()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.RedisAddr, cfg.RedisCluster, cfg.RedisDB = r.Addr, false, 0
	cfg.RedisTLS, cfg.RedisTLSCA = true, r.CA
	cfg.RedisUser, cfg.RedisPassword, cfg.RedisPasswordFile = "endcap", "", pwFile
	cfg.BidSigningKeys, cfg.CursorSecret, cfg.SecretKeyFile = "", "", keyFile
	return cfg
}

// TestRedisTLSACLUser runs the system, its Kafka a broker that requires TLS
// and SCRAM-SHA-512, on redis-server with TLS only (its
// certificate signed by an authority the test makes, ENDCAP_REDIS_TLS_CA)
// and a replica, as the ACL user of exactly the rule docs/operations/operations.md
// gives: catalog,
// auctions, events, their charges (held until the replica has them), the
// campaign's spend read back and checked against the charges, an export, the
// console's sign-in (a refused password, the throttle, a session, a page of
// the session, sign-out), an Idempotency-Key write answered twice, and the
// signing keys shared through Redis. Every command or key the rule does
// not allow is refused by Redis and recorded in its ACL LOG, which must be
// empty at the end: the rule is the least Endcap needs, proven by running.
func TestRedisTLSACLUser(t *testing.T) {
	const password = "endcap-acl-test-password"
	r := testenv.OwnTLSRedis(t, "admin-test-password", 1, testenv.DocumentedACLRule(t, password))
	cfg := tlsRedisConfig(t, r, password)
	cfg.RedisWaitReplicas = 1 // the charges wait for the replica (ROLE, WAIT)
	// and Kafka as a managed one is reached: over TLS, with SCRAM-SHA-512
	// (endcap kafka --sasl-user --tls-cert --tls-key).
	k, _ := ksBroker(t)
	cfg.KafkaBrokers, cfg.KafkaTLS, cfg.KafkaTLSCA = k.KafkaBrokers, k.KafkaTLS, k.KafkaTLSCA
	cfg.KafkaSASLMechanism, cfg.KafkaSASLUser, cfg.KafkaSASLPassword = k.KafkaSASLMechanism, k.KafkaSASLUser, k.KafkaSASLPassword
	aclScenario(t, r, cfg, password)
}

// TestRedisTLSACLUserCluster is TestRedisTLSACLUser on a Redis Cluster of
// three masters speaking TLS (ENDCAP_REDIS_CLUSTER): the same rule, on
// every node, lets the cluster client learn the slots (CLUSTER SLOTS) and
// the commands' keys (COMMAND).
func TestRedisTLSACLUserCluster(t *testing.T) {
	const password = "endcap-acl-test-password"
	r := testenv.OwnTLSRedisCluster(t, "admin-test-password", 3, testenv.DocumentedACLRule(t, password))
	cfg := tlsRedisConfig(t, r, password)
	cfg.RedisCluster, cfg.RedisWaitReplicas = true, 0 // no replicas
	aclScenario(t, r, cfg, password)
}

// aclScenario runs the system on r with cfg and fails on any refusal in
// r's ACL LOG.
func aclScenario(t *testing.T, r *testenv.TLSRedis, cfg config.Config, password string) {
	s := startSystem(t, cfg)
	key, mp := s.AdvancedKey, s.Marketplace.ID
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// Catalog, a campaign with a budget and its bid.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v1","name":"Vendor One"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, nil), 200)
	camp := auCampaign(t, s, "v1", `{"name":"TLS","type":"listings","chargeType":"CPC","dailyBudget":50,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, camp, "product", "p1", "1")

	// Auctions, then an impression and a click on each winner: the clicks
	// are charged (the charge script, WAIT, the claims).
	tokens := bcWinners(t, s, "p1", 3)
	at := ts(time.Now())
	var imps, clicks []string
	for i, tok := range tokens {
		imps = append(imps, fmt.Sprintf(`{"id":"imp-%d","occurredAt":%q,"opaqueUserId":"u-%d","resolvedBidId":%q}`, i, at, i, tok))
		clicks = append(clicks, fmt.Sprintf(`{"id":"clk-%d","occurredAt":%q,"opaqueUserId":"u-%d","resolvedBidId":%q}`, i, at, i, tok))
	}
	events := `{"impressions":[` + strings.Join(imps, ",") + `],"clicks":[` + strings.Join(clicks, ",") + `]}`
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	// The same events again: duplicates, not charged twice.
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM charges FINAL WHERE marketplace_id = ?", mp); n != 3 {
			return fmt.Errorf("%d of 3 charges", n)
		}
		return nil
	})
	// The campaign's spend, read from Redis by the campaign API.
	testenv.Eventually(t, 20*time.Second, func() error {
		r := cpDo(t, s, "GET", cpCampaign(camp), key, nil, nil)
		var c struct {
			Spend struct {
				Today     float64 `json:"today"`
				Available bool    `json:"available"`
			} `json:"spend"`
		}
		if err := json.Unmarshal(r.Body, &c); err != nil || r.Status != 200 {
			return fmt.Errorf("GET campaign: %d %s", r.Status, r.Body)
		}
		if !c.Spend.Available || c.Spend.Today <= 0 {
			return fmt.Errorf("campaign spend %+v", c.Spend)
		}
		return nil
	})

	// `endcap admin spend check` as the same user: the spend equals the
	// charges.
	if diffs, err := projections.ReconcileSpend(ctx, s.App.ClickHouse, s.App.Redis, mp, time.Now(), false); err != nil || len(diffs) != 0 {
		t.Errorf("spend check: %v %+v", err, diffs)
	}

	// An export (its quota and its worker's lock are in Redis).
	exCompleted(t, s, exAccepted(t, exCreate(t, s, key, exRequest())))

	// An Idempotency-Key write, and its retry answered from Redis.
	body := `{"name":"Keyed","type":"listings","chargeType":"CPC","dailyBudget":5,"startDate":"2020-01-01T00:00:00Z"}`
	hdr := map[string]string{"Idempotency-Key": "tls-acl-1"}
	first := s.request(t, "POST", cpVendor("v1"), key, []byte(body), hdr)
	cpStatus(t, first, 201)
	again := s.request(t, "POST", cpVendor("v1"), key, []byte(body), hdr)
	cpStatus(t, again, 201)
	if cpID(t, first) != cpID(t, again) {
		t.Errorf("the retried keyed write made another campaign: %s, %s", cpID(t, first), cpID(t, again))
	}

	// The console: a refused password (the throttle counts it), a
	// session, a page of it, sign-out.
	const email, pw = "admin@tls.test", "a long enough password"
	if _, err := s.App.Users.CreateAdmin(ctx, mp, email, pw); err != nil {
		t.Fatal(err)
	}
	con := &tlsConsole{t: t, url: s.URL, cookies: map[string]string{}}
	if st := con.login(email, "not the password at all"); st != http.StatusUnprocessableEntity {
		t.Errorf("sign-in with a wrong password: %d", st)
	}
	if st := con.login(email, pw); st != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", st)
	}
	if st, _ := con.do("GET", "/console/keys", nil); st != 200 {
		t.Errorf("a page of the session: %d", st)
	}
	if st := con.post("/console/logout", "/console/keys", nil); st != http.StatusSeeOther {
		t.Errorf("sign-out: %d", st)
	}

	entries, err := r.ACLLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("Redis refused the documented ACL user: %s", e)
	}
	// What the rule allows and this run did not call (INFO commandstats
	// counts the commands of scripts too): paths the scenario does not
	// take, for the reader of the log.
	var stats strings.Builder
	var mu sync.Mutex
	if err := redisstore.ForEachMaster(ctx, r.Admin, func(ctx context.Context, m *redis.Client) error {
		st, err := m.Info(ctx, "commandstats").Result()
		mu.Lock()
		stats.WriteString(st)
		mu.Unlock()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var uncalled []string
	for _, tok := range strings.Fields(testenv.DocumentedACLRule(t, password)) {
		if c, ok := strings.CutPrefix(tok, "+"); ok && !strings.Contains(stats.String(), "cmdstat_"+c+":calls=") {
			uncalled = append(uncalled, c)
		}
	}
	t.Logf("commands of the rule this run did not call: %v", uncalled)
	n, err := r.Admin.DBSize(ctx).Result()
	if err != nil || n == 0 {
		t.Errorf("keys in the TLS Redis: %d (%v): the system did not use it", n, err)
	}
}

// tlsConsole is a console client over HTTP: it keeps the cookies (Secure
// ones too) and sends each form with its token.
type tlsConsole struct {
	t       *testing.T
	url     string
	cookies map[string]string
}

var tlsCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *tlsConsole) do(method, path string, form url.Values) (int, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.url+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range c.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	cl := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck.Value
		}
	}
	return resp.StatusCode, string(b)
}

// post sends form with the token of the page at from.
func (c *tlsConsole) post(path, from string, form url.Values) int {
	c.t.Helper()
	_, page := c.do("GET", from, nil)
	m := tlsCSRF.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("GET %s: no csrf field", from)
	}
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", m[1])
	st, _ := c.do("POST", path, form)
	return st
}

func (c *tlsConsole) login(email, password string) int {
	return c.post("/console/login", "/console/login", url.Values{"email": {email}, "password": {password}})
}

// TestRedisStartRefused: a process whose Redis refuses its password, whose
// certificate is not trusted, ends at start within 10 s with an error that names the setting to mend, instead of
// retrying for ever.
func TestRedisStartRefused(t *testing.T) {
	const password = "endcap-acl-test-password"
	r := testenv.OwnTLSRedis(t, "admin-test-password", 0, testenv.DocumentedACLRule(t, password))
	for _, tc := range []struct {
		name  string
		tweak func(c *config.Config)
		want  string
	}{
		{"wrong password", func(c *config.Config) {
			_ = os.WriteFile(c.RedisPasswordFile, []byte("not-the-password\n"), 0o600)
		}, "ENDCAP_REDIS_PASSWORD"},
		{"wrong user", func(c *config.Config) { c.RedisUser = "nobody" }, "ENDCAP_REDIS_USER"},
		{"untrusted certificate", func(c *config.Config) { c.RedisTLSCA = r.OtherCA }, "ENDCAP_REDIS_TLS_CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tlsRedisConfig(t, r, password)
			tc.tweak(&cfg)
			began := time.Now()
			err := testapp.Fail(t, cfg, app.TargetAPI, 10*time.Second) // it ends by itself, within 10 s
			took := time.Since(began)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v; want an error naming %s", err, tc.want)
			}
			t.Logf("ended after %s: %v", took.Round(time.Millisecond), err)
		})
	}
}
