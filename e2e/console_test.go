package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// consoleTools returns playwright-core's folder and the browser, installed
// by deploy/local/install.sh --test; it skips (or fails, when the stack is
// required) without them.
func consoleTools(t *testing.T) (playwright, chromium string) {
	t.Helper()
	root, err := localstack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	playwright = filepath.Join(root, ".endcap", "playwright", "node_modules", "playwright-core")
	chromium = "/usr/bin/chromium"
	var missing []string
	if _, err := os.Stat(filepath.Join(playwright, "package.json")); err != nil {
		missing = append(missing, "playwright-core ("+playwright+")")
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	if len(missing) > 0 {
		msg := "not installed (run deploy/local/install.sh --test): " + strings.Join(missing, ", ")
		if os.Getenv("ENDCAP_TEST_REQUIRE_STACK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return playwright, chromium
}

// consoleMail starts a maildev of the test's own: its SMTP address and the
// URL of its REST API.
func consoleMail(t *testing.T) (smtp, web string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := localstack.Start(ctx, localstack.Options{Dir: t.TempDir(), Mail: true})
	if err != nil {
		if errors.Is(err, localstack.ErrMissingBinary) && os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Stop() })
	return st.MailSMTPAddr, st.MailWebURL
}

// consoleShots is where the screenshots go: .endcap/artifacts/console (or
// ENDCAP_TEST_ARTIFACTS/console).
func consoleShots(t *testing.T) string {
	t.Helper()
	return artifacts(t, "console")
}

// artifacts is a directory kept after the tests, for what a reader looks at
// afterwards: .endcap/artifacts/<sub> (or ENDCAP_TEST_ARTIFACTS/<sub>).
func artifacts(t *testing.T, sub string) string {
	t.Helper()
	base := os.Getenv("ENDCAP_TEST_ARTIFACTS")
	if base == "" {
		root, err := localstack.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		base = filepath.Join(root, ".endcap", "artifacts")
	}
	dir := filepath.Join(base, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// consoleTraffic gives a vendor's campaign an auction won, impressions,
// clicks and an attributed purchase, and returns the campaign id.
func consoleTraffic(t *testing.T, s *system, vendor, product, name string, clicks int) string {
	t.Helper()
	camp := auCampaign(t, s, vendor, fmt.Sprintf(`{"name":%q,"type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`, name))
	auBid(t, s, camp, "product", product, "0.40")
	var imps, clks []string
	for i := 0; i < clicks; i++ {
		res := auRun(t, s, "/v2/auctions", fmt.Sprintf(`{"auctions":[{"type":"listings","slots":1,"products":{"ids":[%q]}}]}`, product))
		if len(res) != 1 || len(res[0].Winners) != 1 {
			t.Fatalf("auction for %s: %+v", product, res)
		}
		bid := res[0].Winners[0].ResolvedBidID
		at := ts(time.Now()) // after the auction: an interaction before its auction is not charged
		u := fmt.Sprintf("u-%s-%d", vendor, i)
		imps = append(imps, fmt.Sprintf(`{"id":"imp-%s-%d","occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}`, vendor, i, at, u, bid))
		clks = append(clks, fmt.Sprintf(`{"id":"clk-%s-%d","occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}`, vendor, i, at, u, bid))
	}
	// After every auction and click: an auction after the purchase never earns it.
	time.Sleep(10 * time.Millisecond)
	buy := fmt.Sprintf(`{"id":"buy-%s","occurredAt":%q,"opaqueUserId":"u-%s-0","items":[{"productId":%q,"unitPrice":25,"quantity":2}]}`, vendor, ts(time.Now()), vendor, product)
	body := `{"impressions":[` + strings.Join(imps, ",") + `],"clicks":[` + strings.Join(clks, ",") + `],"purchases":[` + buy + `]}`
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(body), nil), 200)
	return camp
}

// TestConsoleBrowser drives the console in a real browser (playwright-core
// and Debian's chromium, headless; e2e/testdata/console/browser.mjs): the
// admin signs in, creates a marketplace key and sees it once, visits every
// page; invites a vendor's user, whose e-mail is read from maildev; the
// vendor's user sets a password and sees its own campaigns and charts
// only, and the server refuses it every operator page and the other
// vendor's data. Screenshots of every page are written to
// .endcap/artifacts/console.
func TestConsoleBrowser(t *testing.T) {
	testenv.Get(t)
	playwright, chromium := consoleTools(t)
	smtp, mailWeb := consoleMail(t)
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.SMTPAddr = smtp
	cfg.ConsoleSecureCookies = false
	cfg.WebhookAllowLoopback = true // the webhook's receiver is on loopback
	// Single sign-on through a real OpenID provider (zitadel's example provider, tools/oidcdev): its
	// user "sso-admin" is the admin of a marketplace of its own, made before the system starts (the
	// role map names it); "sso-stranger" has no role.
	const ssoEmail, ssoPassword = "sso-admin@console.test", "the provider's own password"
	idp := testenv.OIDC(t, []testenv.OIDCUser{
		{ID: "u1", Username: "sso-admin", Password: ssoPassword, Email: ssoEmail, EmailVerified: true},
		{ID: "u2", Username: "sso-stranger", Password: ssoPassword, Email: "stranger@console.test", EmailVerified: true},
	})
	var acc *accounts.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: cfg.KafkaTopicPrefix, Accounts: true}, func(l *statelog.Log) { acc = accounts.New(l) })
	pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
	partner, err := acc.CreateMarketplace(pctx, "Partner Market", "USD", "UTC")
	pcancel()
	if err != nil {
		t.Fatal(err)
	}
	cfg.OIDCIssuer, cfg.OIDCClientID, cfg.OIDCClientSecretFile = idp.Issuer, idp.ClientID, idp.SecretFile
	cfg.OIDCRoleClaim, cfg.OIDCRoleMap = "preferred_username", "sso-admin="+partner.ID+":marketplace_admin"
	// A marketplace where it is noon: the pages' today is the day of the
	// traffic and files below for the minutes the test runs, at any hour.
	s := ownMarketplace(t, startSystem(t, cfg), "Test Market", testenv.NoonZone(time.Now()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const adminEmail, adminPassword = "admin@console.test", "correct horse battery staple"
	if _, err := s.App.Users.CreateAdmin(ctx, s.Marketplace.ID, adminEmail, adminPassword); err != nil {
		t.Fatal(err)
	}
	// A reserve, so that the clicks cost what the charts can show.
	if _, err := s.App.Accounts.SetReserve(ctx, s.Marketplace.ID, 250_000, 0); err != nil {
		t.Fatal(err)
	}
	A := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", A,
		`{"vendors":[{"id":"v-alpha","name":"Alpha Shoes"},{"id":"v-beta","name":"Beta Boots"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", A, `{"products":[
		{"id":"p-alpha","name":"Alpha trail shoe","vendors":["v-alpha"],"price":25,"active":true},
		{"id":"p-beta","name":"Beta winter boot","vendors":["v-beta"],"price":25,"active":true}]}`, nil), 200)
	const ownClicks = 3
	own := consoleTraffic(t, s, "v-alpha", "p-alpha", "Alpha spring sale", ownClicks)
	other := consoleTraffic(t, s, "v-beta", "p-beta", "Beta secret launch", 2)
	// A campaign whose bid is below the reserve: ineligible (the campaign page and the overview say why).
	low := auCampaign(t, s, "v-alpha", `{"name":"Alpha clearance","type":"listings","chargeType":"CPC","dailyBudget":5,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, low, "product", "p-alpha", "0.10")
	// A webhook whose receiver answers 200: the console sends it a test event and sends it again.
	var hookMu sync.Mutex
	var hookTests int
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"webhook.test"`) {
			hookMu.Lock()
			hookTests++
			hookMu.Unlock()
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(receiver.Close)
	hr := cpDo(t, s, "POST", "/public/v1/webhooks/webhooks", A, fmt.Sprintf(`{"url":%q,"eventTypes":["campaign.updated"]}`, receiver.URL+"/hook"), nil)
	cpStatus(t, hr, 201)
	var hook struct{ ID string }
	if err := json.Unmarshal(hr.Body, &hook); err != nil || hook.ID == "" {
		t.Fatalf("webhook: %v %s", err, hr.Body)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := s.count(t, "SELECT uniqExact(event_id) FROM interactions_raw WHERE marketplace_id = ?", s.Marketplace.ID); n != 2*(ownClicks+2) {
			return fmt.Errorf("%d interactions, want %d", n, 2*(ownClicks+2))
		}
		if n := s.count(t, "SELECT count() FROM attributed_purchases_raw FINAL WHERE marketplace_id = ? AND attributed = 1", s.Marketplace.ID); n != 2 {
			return fmt.Errorf("%d attributed purchased items, want 2", n)
		}
		return nil
	})
	// The rollup the pages read, recomputed now rather than at its next run.
	job, err := rollups.New(rollups.Options{ClickHouse: s.App.ClickHouse, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC()
	if _, err := job.Refresh(ctx, []time.Time{today.AddDate(0, 0, -1), today, today.AddDate(0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	local := time.Now().In(s.Marketplace.Location())
	localDay := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	// Today's scored-attribution file and yesterday's (empty), made now (the schedule makes a day's once it
	// has ended; the files page lists the days before today).
	sf := scoredfiles.New(s.App.ClickHouse, s.App.S3, s.App.Redis, testenv.Logger(t))
	for _, d := range []time.Time{localDay, localDay.AddDate(0, 0, -1)} {
		if _, err := sf.Produce(ctx, scoredfiles.Marketplace{ID: s.Marketplace.ID, Location: s.Marketplace.Location()}, d); err != nil {
			t.Fatal(err)
		}
	}

	// A click of the own campaign refused as invalid: the refused charges pages list it.
	if err := s.App.ClickHouse.Exec(ctx, fmt.Sprintf(`INSERT INTO charges_raw (marketplace_id, interaction_id, timestamp, timestamp_ms, day_local,
		kind, event_id, currency_code, campaign_id, product_id, vendor_id, external_vendor_id, global_id, charge_type, price_micros, amount_micros,
		amount_sub_micros, auction_id, rank, auction_at, refused_reason)
		SELECT toUUID('%s'), toUUID('%s'), now(), toInt64(now()) * 1000, today(), 'click', 'refused-click', 'USD', '%s', 'p-alpha', 'v-alpha',
		'v-alpha', '', 'CPC', 400000, 0, 0, toUUID('%s'), 1, now(), 'invalid_too_fast'`, s.Marketplace.ID, uuid.NewString(), own, uuid.NewString())); err != nil {
		t.Fatal(err)
	}

	input := map[string]any{
		"url": s.URL, "playwright": playwright, "chromium": chromium, "mailWeb": mailWeb, "shots": consoleShots(t),
		"adminEmail": adminEmail, "adminPassword": adminPassword,
		"vendorEmail": "analyst@alpha.test", "vendorPassword": "alpha analyst password", "vendorId": "v-alpha", "otherVendorId": "v-beta",
		"ownCampaign": own, "otherCampaign": other, "ownCampaignName": "Alpha spring sale", "otherCampaignName": "Beta secret launch",
		"ownClicks": ownClicks, "today": localDay.Format(time.DateOnly), "yesterday": localDay.AddDate(0, 0, -1).Format(time.DateOnly),
		"vendorUUID": vendorid.String(s.Marketplace.ID, "v-alpha"), "from90": localDay.AddDate(0, 0, -89).Format(time.DateOnly),
		"lowCampaign": low, "lowCampaignName": "Alpha clearance", "webhook": hook.ID, "vendorName": "Alpha Shoes",
		"timezone": s.Marketplace.Timezone, "oidcIssuer": idp.Issuer, "ssoUser": "sso-admin", "ssoStranger": "sso-stranger", "ssoPassword": ssoPassword, "ssoEmail": ssoEmail,
	}
	arg, _ := json.Marshal(input)
	rctx, rcancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer rcancel()
	cmd := exec.CommandContext(rctx, "node", filepath.Join("testdata", "console", "browser.mjs"), string(arg))
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("browser test: %v\nstderr: %s\nstdout: %s", err, stderr.Bytes(), stdout.Bytes())
	}
	var out struct {
		Checks         []string `json:"checks"`
		MarketplaceKey string   `json:"marketplaceKey"`
		ChartMs90      float64  `json:"chartMs90"`
		InviteLink     string   `json:"inviteLink"`
		AdminFile      []byte   `json:"adminFile"`  // the day's scored-attribution file, as the admin downloaded it
		VendorFile     []byte   `json:"vendorFile"` // and as the vendor's user did
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		t.Fatalf("browser test output: %v\n%s", err, stdout.Bytes())
	}
	for _, c := range out.Checks {
		t.Log("✓ " + c)
	}
	t.Logf("browser test: %d checks in %s; 90-day charts drawn in %s ms; screenshots in %s", len(out.Checks),
		time.Since(start).Round(time.Millisecond), strconv.FormatFloat(out.ChartMs90, 'f', 1, 64), input["shots"])

	// The scored-attribution downloads: the admin's is the whole day, the vendor's its campaign's rows only.
	for _, f := range []struct {
		who     string
		data    []byte
		vendors []string
	}{{"admin", out.AdminFile, []string{"v-alpha", "v-beta"}}, {"vendor", out.VendorFile, []string{"v-alpha"}}} {
		pr := parquet.NewGenericReader[scoredfiles.Record](bytes.NewReader(f.data))
		recs := make([]scoredfiles.Record, 10)
		n, _ := pr.Read(recs)
		_ = pr.Close()
		var got []string
		for _, r := range recs[:n] {
			got = append(got, r.VendorID)
		}
		slices.Sort(got)
		if !slices.Equal(got, f.vendors) {
			t.Errorf("the %s's scored-attribution file: rows of %q, want %q", f.who, got, f.vendors)
		}
	}

	// The webhook's receiver got the test event the console sent, and again when it was sent again.
	testenv.Eventually(t, 30*time.Second, func() error {
		hookMu.Lock()
		defer hookMu.Unlock()
		if hookTests < 2 {
			return fmt.Errorf("the receiver got %d test events, want 2 (sent, then sent again)", hookTests)
		}
		return nil
	})

	// The top-up the browser sent twice with one request key credited once; the admin's credit limit.
	if bal, err := s.App.Balances.Get(ctx, s.Marketplace.ID, "v-alpha"); err != nil || bal.Credited != 25_000_000 || bal.CreditLimit != 10_000_000 {
		t.Fatalf("v-alpha's funds after the console's forms: %+v %v", bal, err)
	}

	// The key the browser was shown works on /v2.
	ev := fmt.Sprintf(`{"impressions":[{"id":"console-key","occurredAt":%q,"opaqueUserId":"u","entity":{"type":"product","id":"p-alpha"}}]}`, ts(time.Now()))
	if r := s.request(t, "POST", "/v2/events", out.MarketplaceKey, []byte(ev), nil); r.Status != 200 {
		t.Fatalf("the console's key on /v2/events: %d %s", r.Status, r.Body)
	}
	// The invitation reads accepted in the API, and its user is the vendor's.
	invs, _ := s.App.Invitations.List(s.Marketplace.ID, "v-alpha", "", 10)
	if len(invs) != 1 || invs[0].Status != invitations.StatusAccepted || invs[0].AcceptedAt == nil {
		t.Fatalf("invitations of v-alpha: %+v", invs)
	}
	u, ok := s.App.Users.Lookup(s.Marketplace.ID, "analyst@alpha.test")
	if !ok || u.VendorID != "v-alpha" || u.Role != "vendor_analyst" || u.MarketplaceID != s.Marketplace.ID {
		t.Fatalf("the vendor's user: %+v %v", u, ok)
	}
	// The single sign-on made its user, the partner marketplace's admin, without a password; the
	// stranger has none.
	if u, ok := s.App.Users.Lookup(partner.ID, ssoEmail); !ok || !u.SSO || u.Role != users.RoleAdmin || u.PasswordHash != "" {
		t.Fatalf("the single sign-on's user: %+v %v", u, ok)
	}
	if n := len(s.App.Users.Accounts("stranger@console.test")); n != 0 {
		t.Fatalf("the stranger has %d accounts", n)
	}
}
