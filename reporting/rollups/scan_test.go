package rollups_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/endcap/endcap/storage/clickhouse"
)

// TestExportScan compares an export-like query over 31 days (per campaign
// and day: impressions, clicks, charged clicks, spend) read from the rollup
// and from the raw FINAL view: same answer, far fewer rows read. Rows read
// come from the server's progress packets (no EXPLAIN on 18.16).
// ENDCAP_TEST_ROWS sets the number of raw rows (default 200,000).
func TestExportScan(t *testing.T) {
	ctx, conn := db(t)
	n := testRows(200_000)
	genInteractions(t, ctx, conn, n, "toString(number)")
	replay := `INSERT INTO interactions_raw SELECT * FROM interactions_raw WHERE cityHash64(event_id) % 20 = 0`
	if err := conn.Exec(ctx, replay); err != nil {
		t.Fatal(err)
	}

	lo := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	hi := lo.AddDate(0, 0, 30) // 31 days inclusive
	j := job(t, conn)
	began := time.Now()
	st, err := j.Refresh(ctx, dayRangeOf(lo, hi))
	if err != nil {
		t.Fatal(err)
	}
	refresh := time.Since(began)

	rollupQ := `SELECT campaign_id, day_local, sum(impressions), sum(clicks), sum(charged_clicks),
		sum(ad_spent_clicks_micros) + sum(ad_spent_impressions_micros) + toInt64(intDiv(sum(ad_spent_impressions_sub_micros) + sum(ad_spent_clicks_sub_micros), 1000))
		FROM rollup_daily WHERE marketplace_id = toUUID(?) AND day_local >= toDate(?) AND day_local <= toDate(?)
		GROUP BY campaign_id, day_local ORDER BY campaign_id, day_local`
	rawQ := `SELECT campaign_id, day_local, countIf(kind = 'impression'), countIf(kind = 'click'),
		countIf(kind = 'click' AND charged = 1),
		sum(amount_micros) + toInt64(intDiv(sum(toUInt64(amount_sub_micros)), 1000))
		FROM (SELECT campaign_id, day_local, kind, charged, amount_micros, amount_sub_micros FROM interactions_raw FINAL
		      WHERE marketplace_id = toUUID(?) AND occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?))
		WHERE day_local >= toDate(?) AND day_local <= toDate(?)
		GROUP BY campaign_id, day_local ORDER BY campaign_id, day_local`
	from, to := lo.Add(-24*time.Hour).Unix(), hi.Add(48*time.Hour).Unix()
	l, h := lo.Format(time.DateOnly), hi.Format(time.DateOnly)
	rollupRes, rollupRead, rollupTook := measure(t, ctx, conn, rollupQ, mpA, l, h)
	rawRes, rawRead, rawTook := measure(t, ctx, conn, rawQ, mpA, from, to, l, h)

	if len(rawRes) != 50*31 {
		t.Fatalf("raw query: %d groups, want %d", len(rawRes), 50*31)
	}
	if len(rollupRes) != len(rawRes) {
		t.Fatalf("rollup %d groups, raw %d", len(rollupRes), len(rawRes))
	}
	for i := range rawRes {
		if rollupRes[i] != rawRes[i] {
			t.Fatalf("group %d: rollup %+v, raw %+v", i, rollupRes[i], rawRes[i])
		}
	}
	var rawRows, rollupRows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM interactions_raw").Scan(&rawRows); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM rollup_daily").Scan(&rollupRows); err != nil {
		t.Fatal(err)
	}
	t.Logf("raw table %d rows (80 days, 5 %% replayed), rollup %d rows (31 days); refresh of 31 days %s (%d rows)",
		rawRows, rollupRows, refresh.Round(time.Millisecond), st.Rows)
	t.Logf("export query over 31 days: rollup read %d rows in %s; raw FINAL read %d rows in %s (%.1fx fewer rows)",
		rollupRead, rollupTook.Round(time.Millisecond), rawRead, rawTook.Round(time.Millisecond),
		float64(rawRead)/float64(max(rollupRead, 1)))
	// The rollup query reads only the window's partitions; how many fewer
	// rows than raw depends on the traffic per grain tuple (docs/design/rollups.md).
	if rollupRead == 0 || rollupRead > rollupRows || rollupRead >= rawRead {
		t.Errorf("rollup read %d rows (table %d), raw %d", rollupRead, rollupRows, rawRead)
	}
}

// testRows is ENDCAP_TEST_ROWS when it is a positive number, else def.
func testRows(def int) int {
	if v, err := strconv.Atoi(os.Getenv("ENDCAP_TEST_ROWS")); err == nil && v > 0 {
		return v
	}
	return def
}

// genInteractions inserts n events over 80 days (2026-08-20 .. 2026-11-07)
// of one marketplace: 50 campaigns of 10 products each, 3 devices, 10 pages,
// 20 % clicks (CPC, charged), the rest CPM impressions (charged). idExpr
// makes each event id from number (its rank in time) and h (a hash of it).
func genInteractions(t testing.TB, ctx context.Context, conn clickhouse.Conn, n int, idExpr string) {
	t.Helper()
	start := time.Date(2026, 8, 20, 0, 0, 0, 0, time.UTC)
	gen := `INSERT INTO interactions_raw (marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at,
		day_local, currency_code, sponsored, rank, ad_format, charge_type, campaign_id, vendor_id, entity_type, entity_id,
		device_type, page_id, charged, amount_micros, amount_sub_micros)
	SELECT toUUID(?), if(h % 5 = 0, 'click', 'impression'), ` + idExpr + `, at, toInt64(at) * 1000, at, toDate(at),
		'EUR', 1, 1, 'listings', if(h % 5 = 0, 'CPC', 'CPM'), concat('C', toString(c)), concat('V', toString(c % 20)),
		'product', concat('P', toString(c * 10 + intDiv(h, 7) % 10)), ['mobile', 'desktop', 'app'][intDiv(h, 70) % 3 + 1],
		concat('page', toString(intDiv(h, 210) % 10)), 1, if(h % 5 = 0, 150000, 1), if(h % 5 = 0, 0, 200)
	FROM (SELECT number, cityHash64(number) AS h, h % 50 AS c,
	             toDateTime(?) + toUInt32(intDiv(number * 80 * 86400, ?)) AS at
	      FROM system.numbers LIMIT ?)`
	if err := conn.Exec(ctx, gen, mpA, start.Unix(), n, n); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRecentRefresh is the rollup job's recent run: 4 local days
// recomputed while the raw table holds 80 days (default 2,000,000 events,
// ENDCAP_TEST_ROWS to change) with event ids in random order, as real ids
// are, merged into one part per month. ms/refresh is the figure.
func BenchmarkRecentRefresh(b *testing.B) {
	ctx, conn := db(b)
	genInteractions(b, ctx, conn, testRows(2_000_000), "toString(h)")
	if err := conn.Exec(ctx, "OPTIMIZE TABLE interactions_raw FINAL"); err != nil {
		b.Fatal(err)
	}
	j := job(b, conn)
	lo := time.Date(2026, 10, 22, 0, 0, 0, 0, time.UTC)
	b.ResetTimer()
	for range b.N {
		if _, err := j.Refresh(ctx, dayRangeOf(lo, lo.AddDate(0, 0, 3))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/refresh")
}

type group struct {
	campaign              string
	day                   time.Time
	imps, clicks, charged uint64
	spend                 int64
}

// measure runs q and returns its rows and the rows the server read.
func measure(t *testing.T, ctx context.Context, conn clickhouse.Conn, q string, args ...any) ([]group, uint64, time.Duration) {
	t.Helper()
	var read atomic.Uint64
	qctx := chgo.Context(ctx, chgo.WithProgress(func(p *chgo.Progress) { read.Add(p.Rows) }))
	began := time.Now()
	rows, err := conn.Query(qctx, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []group
	for rows.Next() {
		var g group
		if err := rows.Scan(&g.campaign, &g.day, &g.imps, &g.clicks, &g.charged, &g.spend); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, read.Load(), time.Since(began)
}

func dayRangeOf(lo, hi time.Time) []time.Time {
	var out []time.Time
	for d := lo; !d.After(hi); d = d.AddDate(0, 0, 1) {
		out = append(out, d)
	}
	return out
}
