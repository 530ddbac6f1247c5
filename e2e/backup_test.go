package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/endcap/endcap/testkit/chdb"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestBackupRestore makes a day of a marketplace (catalog, a CPC campaign,
// auctions, impressions, clicks charged, a purchase, a console
// administrator, an export), backs it up to file:// and to s3:// (and once
// more to file://, which copies no partition again), restores the s3://
// backup into another, empty system (its own Kafka, ClickHouse database,
// Redis and bucket), and compares the management GET answers, the vendor
// charges and the export's file byte for byte. The keys and the console
// sign-in work after the restore; a client's retry of a click acknowledged
// before the backup is not folded again, and another click on a winner
// charged before the backup is not charged.
func TestBackupRestore(t *testing.T) {
	env := testenv.Get(t)
	_, brokersA := testenv.Kafka(t)
	cfgA := env.Config(t, brokersA)
	cfgA.RedisAddr, cfgA.RedisCluster = testenv.OwnRedis(t).Addr, false
	cfgA.RateLimitDefault, cfgA.RateLimitCatalog = "5000/1s", "5000/1s"
	a := startSystem(t, cfgA)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	chA := testenv.ClickHouse(t, ctx, cfgA)
	mp, A, M := a.Marketplace.ID, a.AdvancedKey, a.MarketplaceKey

	// A day of the marketplace.
	cpStatus(t, cpDo(t, a, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", A,
		`{"vendors":[{"id":"v-alpha","name":"Alpha Shoes"}]}`, nil), 200)
	cpStatus(t, cpDo(t, a, "PUT", "/public/v1/catalog-search-service/catalogs/products", A,
		`{"products":[{"id":"p-alpha","name":"Alpha trail shoe","vendors":["v-alpha"],"price":25,"active":true}]}`, nil), 200)
	camp := auCampaign(t, a, "v-alpha", `{"name":"Spring","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, a, camp, "product", "p-alpha", "0.40")
	bids := bcWinners(t, a, "p-alpha", 3)
	at := ts(time.Now())
	var imps, clicks []string
	for i, bid := range bids {
		imps = append(imps, fmt.Sprintf(`{"id":"imp-%d","occurredAt":%q,"opaqueUserId":"u-1","resolvedBidId":%q}`, i, at, bid))
		clicks = append(clicks, fmt.Sprintf(`{"id":"clk-%d","occurredAt":%q,"opaqueUserId":"u-1","resolvedBidId":%q}`, i, at, bid))
	}
	buy := fmt.Sprintf(`{"id":"buy-1","occurredAt":%q,"opaqueUserId":"u-1","items":[{"productId":"p-alpha","unitPrice":25,"quantity":2}]}`, ts(time.Now().Add(time.Second)))
	day := `{"impressions":[` + strings.Join(imps, ",") + `],"clicks":[` + strings.Join(clicks, ",") + `],"purchases":[` + buy + `]}`
	cpStatus(t, a.request(t, "POST", "/v2/events", M, []byte(day), nil), 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := a.count(t, "SELECT count() FROM charges WHERE marketplace_id = ?", mp); n != 3 {
			return fmt.Errorf("%d charges", n)
		}
		if n := a.count(t, "SELECT count() FROM events WHERE marketplace_id = ?", mp); n != 7 {
			return fmt.Errorf("%d events", n)
		}
		return nil
	})
	const adminEmail, adminPassword = "admin@backup.test", "a long enough password for the console"
	if _, err := a.App.Users.CreateAdmin(ctx, mp, adminEmail, adminPassword); err != nil {
		t.Fatal(err)
	}
	export := exAccepted(t, exCreate(t, a, A, exRequest()))
	exportFile := func(s *system) []byte {
		v := exCompleted(t, s, export)
		st, _, b := exDownload(t, v.URL)
		if st != http.StatusOK || len(b) == 0 {
			t.Fatalf("export %s: status %d, %d bytes", export, st, len(b))
		}
		return b
	}
	fileA := exportFile(a)
	clickAt := a.query(t, "SELECT toString(received_at_ms), toString(kafka_offset) FROM events WHERE marketplace_id = ? AND event_id = 'clk-0'", mp)

	// The answers to compare.
	today := time.Now().UTC()
	charges := "/public/v1/billing-service/vendor-charges?start_date=" + today.Format(time.DateOnly) + "T00:00:00Z&end_date=" +
		today.Add(24*time.Hour).Format(time.DateOnly) + "T00:00:00Z&include_refused=true"
	paths := []string{
		"/public/v1/marketplace",
		"/public/v1/catalog-search-service/catalogs/vendors",
		"/public/v1/catalog-search-service/catalogs/vendors/v-alpha",
		"/public/v1/catalog-search-service/catalogs/products/p-alpha",
		"/public/v1/catalog-search-service/catalogs/categories",
		"/public/v1/campaign-service/campaigns",
		"/public/v1/campaign-service/vendors/v-alpha/campaigns",
		"/public/v1/campaign-service/campaigns/" + camp,
		"/public/v1/campaign-service/campaigns/" + camp + "/bids",
		"/public/v1/billing-service/billing-contacts",
		"/public/v1/export-service/exports",
		"/public/v1/export-service/exports/" + export,
		"/public/v1/webhooks/webhooks",
		"/public/v1/segment-service/segments",
		"/public/v1/invitation-service/invitations",
		charges,
	}
	answers := func(s *system) map[string]string {
		out := map[string]string{}
		for _, p := range paths {
			r := s.request(t, "GET", p, A, nil, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", p, r.Status, r.Body)
			}
			out[p] = withoutPresigned(t, r.Body)
		}
		return out
	}
	before := answers(a)
	a.stop()

	// Backups: every partition made one part (no merge moves it later), to
	// file://, to s3://, and to file:// again, which copies no partition.
	for _, table := range []string{"events_raw", "interactions_raw", "charges_raw", "auctions_raw", "auction_winners_raw", "entity_state_raw",
		"attribution_touches_raw", "attribution_purchases_raw", "attributed_purchases_raw", "rollup_daily", "rollup_days"} {
		if err := chA.Exec(ctx, "OPTIMIZE TABLE "+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	log := testenv.Logger(t)
	dir := "file://" + t.TempDir()
	first, err := app.CreateBackup(ctx, cfgA, dir, app.BackupOptions{Timeout: 30 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	bucket := strings.Replace(cfgA.S3Bucket, "endcap-test-", "endcap-backup-", 1)
	if err := s3store.Open(s3store.Options{Endpoint: cfgA.S3Endpoint, Region: cfgA.S3Region, Bucket: bucket,
		AccessKey: cfgA.S3AccessKey, SecretKey: cfgA.S3SecretKey}).EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	inS3 := "s3://" + bucket + "/backups/one"
	if _, err := app.CreateBackup(ctx, cfgA, inS3, app.BackupOptions{Timeout: 30 * time.Second}, log); err != nil {
		t.Fatal(err)
	}
	again, err := app.CreateBackup(ctx, cfgA, dir, app.BackupOptions{Timeout: 30 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	rows, partitions := uint64(0), 0
	for ti, tb := range again.ClickHouse.Tables {
		for pi, p := range tb.Partitions {
			rows += p.Rows
			partitions++
			if !p.Reused || p.File != first.ClickHouse.Tables[ti].Partitions[pi].File {
				t.Errorf("table %s partition %s copied again though unchanged: %+v", tb.Name, p.ID, p)
			}
		}
	}
	if partitions == 0 || rows == 0 || again.Reused == 0 || len(again.S3.Objects) == 0 {
		t.Fatalf("second backup: %d partitions, %d rows, %d bytes reused, %d objects", partitions, rows, again.Reused, len(again.S3.Objects))
	}

	// Another system, empty, restored from S3.
	_, brokersB := testenv.Kafka(t)
	cfgB := env.Config(t, brokersB)
	// The restore writes B's rows through ClickHouse's HTTP interface, which
	// the chDB replay (ENDCAP_TEST_CHDB=1) does not record: replayed alone,
	// B's later statements would run on tables without those rows (a rollup
	// day computed empty there, full here). A's statements are still replayed.
	chdb.SkipCheck(cfgB.ClickHouseDatabase)
	cfgB.RedisAddr, cfgB.RedisCluster = testenv.OwnRedis(t).Addr, false
	cfgB.RateLimitDefault, cfgB.RateLimitCatalog = cfgA.RateLimitDefault, cfgA.RateLimitCatalog
	// What an operator keeps beside the backup: the signing keys of the
	// resolvedBidIds and cursors (here configured; or the master key that
	// unwraps those the backup copied from Redis).
	cfgB.BidSigningKeys, cfgB.CursorSecret = cfgA.BidSigningKeys, cfgA.CursorSecret
	rep, err := app.RestoreBackup(ctx, cfgB, inS3, app.RestoreOptions{Timeout: 30 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != rows || rep.Claims != 7 || rep.Markers != 3 || rep.SpendFixed == 0 {
		t.Fatalf("restore: %+v (want %d rows, 7 claims, 3 markers, spend set)", rep, rows)
	}
	if _, err := app.RestoreBackup(ctx, cfgB, dir, app.RestoreOptions{Timeout: 30 * time.Second}, log); !errors.Is(err, app.ErrTargetNotEmpty) {
		t.Fatalf("a restore into the restored system: %v, want ErrTargetNotEmpty", err)
	}
	b := startEmptySystem(t, cfgB)
	b.Marketplace, b.AdvancedKey, b.MarketplaceKey = a.Marketplace, A, M // the keys made before the backup
	after := answers(b)
	for _, p := range paths {
		if before[p] != after[p] {
			t.Errorf("GET %s after the restore:\n%s\nbefore:\n%s", p, after[p], before[p])
		}
	}
	if fileB := exportFile(b); string(fileB) != string(fileA) {
		t.Errorf("the export's file after the restore (%d bytes) is not the one before (%d bytes)", len(fileB), len(fileA))
	}
	// The keys and the console sign-in.
	if len(auRun(t, b, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p-alpha"]}}]}`)) != 1 {
		t.Error("an auction with the marketplace key after the restore")
	}
	c := &tlsConsole{t: t, url: b.URL, cookies: map[string]string{}}
	if st := c.login(adminEmail, adminPassword); st != http.StatusSeeOther {
		t.Errorf("console sign-in after the restore: status %d", st)
	}

	// A client retries its first click (acknowledged before the backup), and
	// another click comes for the same winner: neither is charged, and the
	// retry is not folded again.
	retry := `{"clicks":[` + clicks[0] + `,` + fmt.Sprintf(`{"id":"clk-again","occurredAt":%q,"opaqueUserId":"u-1","resolvedBidId":%q}`, ts(time.Now()), bids[0]) + `]}`
	cpStatus(t, b.request(t, "POST", "/v2/events", M, []byte(retry), nil), 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := b.count(t, "SELECT count() FROM events WHERE marketplace_id = ? AND event_id = 'clk-again'", mp); n != 1 {
			return fmt.Errorf("clk-again not folded yet")
		}
		return nil
	})
	if n := b.count(t, "SELECT count() FROM charges WHERE marketplace_id = ?", mp); n != 3 {
		t.Errorf("%d charges after the retry and the second click, want 3", n)
	}
	if got := b.query(t, "SELECT toString(received_at_ms), toString(kafka_offset) FROM events WHERE marketplace_id = ? AND event_id = 'clk-0'", mp); fmt.Sprint(got) != fmt.Sprint(clickAt) {
		t.Errorf("the retried click was folded again: %v, before the backup %v", got, clickAt)
	}
	if got := b.query(t, "SELECT refused_reason, toString(charged) FROM interactions WHERE marketplace_id = ? AND event_id = 'clk-again'", mp); fmt.Sprint(got) != "[[duplicate 0]]" {
		t.Errorf("the second click on a winner charged before the backup: %v, want not charged (duplicate)", got)
	}
	if r := b.request(t, "GET", "/public/v1/campaign-service/campaigns/"+camp, A, nil, nil); withoutPresigned(t, r.Body) != before["/public/v1/campaign-service/campaigns/"+camp] {
		t.Errorf("the campaign after the retry: %s", r.Body)
	}
}

// withoutPresigned is a JSON body without the fields a presigned URL makes
// differ from one answer to the next (url, urlExpiresAt), re-encoded.
func withoutPresigned(t *testing.T, body []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if u, ok := x["url"].(string); ok {
				if _, err := url.Parse(u); err == nil && strings.Contains(u, "X-Amz-Signature") {
					delete(x, "url")
					delete(x, "urlExpiresAt")
				}
			}
			for _, y := range x {
				strip(y)
			}
		case []any:
			for _, y := range x {
				strip(y)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}
