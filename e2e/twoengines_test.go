package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/clickhouse/chrecord"
	"github.com/endcap/endcap/testkit/chdb"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestTwoEngines runs a marketplace's day through the whole system on the
// local stack's ClickHouse (18.16) while recording every statement the code
// sends (storage/clickhouse/chrecord): migrations; auctions, impressions,
// clicks and purchases through the projectors (batch inserts with their
// rows); charges and attribution; the rollup job and an export's refresh
// (INSERT … SELECT, REPLACE/DROP PARTITION); CSV and Parquet exports;
// vendor charges; a scored-attribution file; and the test's own reads. The
// recording is then replayed in order on ClickHouse 26 (chDB) over the same
// data, and every statement must be accepted by both engines and every
// query must return the same rows (testkit/chdb.Compare says what is
// normalised). No statement is listed here: a new query of the code paths
// the scenario drives is covered as soon as it is written.
func TestTwoEngines(t *testing.T) {
	env := testenv.Get(t)
	engine := chdb.ForTest(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.ExportMaxStaleness = 0 // every export recomputes its days
	rec := chrecord.Record(cfg.ClickHouseDatabase, chrecord.Options{Results: true})
	defer rec.Close()
	s := startSystem(t, cfg)
	key, mp := s.AdvancedKey, s.Marketplace.ID

	// A catalog, a CPC and a CPM campaign.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v1","name":"Vendor One","globalId":"G-1"},{"id":"v2","name":"Vendor Two"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"p1","name":"P1","vendors":["v1"],"active":true,"price":19.99},
		{"id":"p2","name":"P2","vendors":["v2"],"active":true,"price":5}]}`, nil), 200)
	cpc := auCampaign(t, s, "v1", `{"name":"Clicks","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, cpc, "product", "p1", "0.03")
	cpm := auCampaign(t, s, "v2", `{"name":"Views","type":"listings","chargeType":"CPM","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, cpm, "product", "p2", "2")

	// Auctions, then their impressions and clicks, and purchases: one
	// attributed to a click, one of a product nobody advertised. The events
	// occur a second after the auctions at least: a purchase is never
	// credited to an auction after it (docs/design/attribution.md), and a token
	// carries its auction's time to the second.
	var winners [][]auWinner
	for range 3 {
		res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p1","p2"]}}]}`)
		if len(res) != 1 || len(res[0].Winners) != 2 {
			t.Fatalf("auction: %+v", res)
		}
		winners = append(winners, res[0].Winners)
	}
	time.Sleep(1100 * time.Millisecond)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var imps, clicks []string
	for i, ws := range winners {
		for _, w := range ws {
			at := ts(now.Add(-time.Duration(3-i) * 100 * time.Millisecond))
			imps = append(imps, fmt.Sprintf(`{"id":"te-imp-%d-%s","occurredAt":%q,"opaqueUserId":"u-%d","resolvedBidId":%q}`, i, w.ID, at, i, w.ResolvedBidID))
			clicks = append(clicks, fmt.Sprintf(`{"id":"te-clk-%d-%s","occurredAt":%q,"opaqueUserId":"u-%d","resolvedBidId":%q}`, i, w.ID, at, i, w.ResolvedBidID))
		}
	}
	events := fmt.Sprintf(`{"impressions":[%s],"clicks":[%s],"purchases":[
		{"id":"te-pur-1","occurredAt":%q,"opaqueUserId":"u-0","items":[{"productId":"p1","unitPrice":19.990001,"quantity":3,"vendorId":"v1"},{"productId":"other","unitPrice":5}]},
		{"id":"te-pur-2","occurredAt":%q,"opaqueUserId":"u-none","items":[{"productId":"p9","unitPrice":1.5,"quantity":1}]}]}`,
		strings.Join(imps, ","), strings.Join(clicks, ","), ts(now), ts(now))
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM charges WHERE marketplace_id = ?", mp); n != 6 {
			return fmt.Errorf("%d charges, want 6", n)
		}
		if n := s.count(t, "SELECT count() FROM attributed_purchases WHERE marketplace_id = ?", mp); n == 0 {
			return fmt.Errorf("no attributed purchase yet")
		}
		return nil
	})

	// Vendor charges of the hour around the events.
	loc := s.Marketplace.Location()
	b, _ := vcGet(t, s, key, vcQuery(now.Add(-time.Hour).In(loc).Format(time.RFC3339), now.Add(time.Hour).In(loc).Format(time.RFC3339), "limit", "4"))
	if len(b.Data) != 4 || !b.HasMore {
		t.Fatalf("vendor charges: %+v", b)
	}
	vcGet(t, s, key, vcQuery(now.Add(-time.Hour).In(loc).Format(time.RFC3339), now.Add(time.Hour).In(loc).Format(time.RFC3339), "limit", "4", "next_page", *b.NextPage))

	// Exports over a window with empty days, in CSV and in Parquet: each
	// recomputes the rollup days of its window first.
	csvID := exAccepted(t, exCreate(t, s, key, exWith("dimensions", []string{"day_local", "campaign_id", "vendor_id"},
		"metrics", exSpecMetrics, "startDate", exDay(-3), "endDate", exDay(1))))
	if v := exCompleted(t, s, csvID); *v.RowCount != 2 {
		t.Fatalf("csv export: %d rows, want 2", *v.RowCount)
	}
	pqID := exAccepted(t, exCreate(t, s, key, exWith("dimensions", exSpecDimensions, "metrics", append(slices.Clone(exSpecMetrics[:19-len(exExtensionMetrics)]), exExtensionMetrics...),
		"format", "parquet", "startDate", exDay(-30), "endDate", exDay(0))))
	if st, _, _ := exDownload(t, exCompleted(t, s, pqID).URL); st != http.StatusOK {
		t.Fatalf("parquet export download: %d", st)
	}

	// The day's scored-attribution file.
	l := now.In(loc)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sf := scoredfiles.New(s.App.ClickHouse, s.App.S3, s.App.Redis, testenv.Logger(t))
	if _, err := sf.Produce(ctx, scoredfiles.Marketplace{ID: mp, Location: loc}, time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if files, r := sfList(t, s, key, l.Format(time.DateOnly)); len(files) != 1 {
		t.Fatalf("scored-attribution files: %s", r.Body)
	}

	s.stop() // no statement after this one
	stmts := rec.Statements()
	checkCoverage(t, stmts)
	rctx, rcancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer rcancel()
	rep := chdb.Replay(rctx, engine, cfg.ClickHouseDatabase, rec.TimeZone(), stmts)
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	t.Logf("statements recorded: %v", summarize(stmts))
	t.Logf("ClickHouse %s: %d statements replayed (%v), %d queries' rows compared, %d mismatches, in %s",
		engine.Version(), rep.Statements, rep.ByKind, rep.Compared, len(rep.Mismatches), rep.Took.Round(time.Millisecond))

	// Both engines hold the same data in the end: the rows the batch
	// inserts loaded, and what the statements derived from them.
	rec.Stop()
	conn, err := clickhouse.Open(clickhouse.Options{Addr: cfg.ClickHouseAddr, Database: cfg.ClickHouseDatabase, User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	diffs, n, rows, err := chdb.CompareTables(rctx, engine, conn, cfg.ClickHouseDatabase)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
	if n < 10 || rows == 0 {
		t.Errorf("%d tables, %d rows compared", n, rows)
	}
	t.Logf("%d tables, %d rows compared", n, rows)
}

// checkCoverage fails when the recording lacks a kind of statement the
// scenario is there to drive: a scenario that stopped reaching a code path
// would otherwise pass by replaying less.
func checkCoverage(t *testing.T, stmts []chrecord.Statement) {
	t.Helper()
	want := map[string]*regexp.Regexp{
		"a migration":                        regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS`),
		"a projector's batch insert":         regexp.MustCompile(`^INSERT INTO interactions_raw \(`),
		"the auctions' batch insert":         regexp.MustCompile(`^INSERT INTO auction`),
		"an attribution write":               regexp.MustCompile(`(?s)^INSERT INTO attribut`),
		"the rollup's INSERT … SELECT":       regexp.MustCompile(`(?s)^INSERT INTO rollup_stage_\w+ .*SELECT`),
		"the rollup's swap":                  regexp.MustCompile(`^ALTER TABLE rollup_daily (REPLACE|DROP) PARTITION`),
		"an export's read of the rollup":     regexp.MustCompile(`(?s)^SELECT .*\bFROM rollup_daily\b`),
		"a vendor-charges read":              regexp.MustCompile(`(?s)^SELECT .*\bFROM charges\b`),
		"a read of the attributed purchases": regexp.MustCompile(`(?s)^SELECT .*\bFROM attributed_purchases\b`),
	}
	seen := map[string]int{}
	for _, s := range stmts {
		q := strings.TrimSpace(s.SQL)
		for name, re := range want {
			if re.MatchString(q) {
				seen[name]++
			}
		}
	}
	for name := range want {
		if seen[name] == 0 {
			t.Errorf("the recording has no statement of %s", name)
		}
	}
}

var (
	leadingWords = regexp.MustCompile(`^(\w+(?:\s+\w+)?)`)
	fromTable    = regexp.MustCompile(`(?i)\b(?:FROM|INTO|TABLE|VIEW)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?([\w.]+)`)
	stageName    = regexp.MustCompile(`rollup_stage_\w+`)
)

// summarize counts the statements by their first words and first table
// (for the test's log).
func summarize(stmts []chrecord.Statement) map[string]int {
	out := map[string]int{}
	for _, s := range stmts {
		q := strings.TrimSpace(s.SQL)
		k := strings.ToUpper(leadingWords.FindString(q))
		if m := fromTable.FindStringSubmatch(q); m != nil {
			k += " " + stageName.ReplaceAllString(m[1], "rollup_stage_*")
		}
		out[k]++
	}
	return out
}
