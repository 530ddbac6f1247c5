package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

// An exporter killed with SIGKILL in the middle of an export leaves no
// object at the export's key; after the restart the job is taken again and
// the file is written whole, once.
func TestExportKilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack as a subprocess")
	}
	testenv.Get(t)
	d := &scStack{devStack: *newDevStack(t)}
	d.start()
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(d.cli("admin", "marketplace", "create", "--name", "Kill", "--currency", "EUR", "--timezone", "UTC"), &m); err != nil {
		t.Fatal(err)
	}
	var k struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(d.cli("admin", "key", "create", "--marketplace", m.ID, "--type", "advanced"), &k); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if st, b := d.call("GET", "/public/v1/export-service/datasets", k.Key, ""); st != 200 {
			return fmt.Errorf("datasets: %d %s", st, b)
		}
		return nil
	})

	// A day 60 days back, once the rollup job has computed it after it
	// became final (the full refresh at start does): it is never recomputed
	// again, so rows written into rollup_daily directly stay.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	conn, err := clickhouse.Open(clickhouse.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.ch), Database: "endcap", User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	day := time.Now().UTC().AddDate(0, 0, -60).Format(time.DateOnly)
	testenv.Eventually(t, 60*time.Second, func() error {
		var n uint64
		if err := conn.QueryRow(ctx, `SELECT count() FROM rollup_days WHERE day_local = toDate(?)`, day).Scan(&n); err != nil || n == 0 {
			return fmt.Errorf("rollup day %s not computed yet (%v)", day, err)
		}
		return nil
	})
	const n = 1_500_000
	if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored, campaign_id, entity_id,
		impressions, clicks, ad_spent_clicks_micros)
		SELECT toUUID('%s'), toDate('%s'), 'EUR', 1, concat('campaign-', toString(number %% 5000)), concat('product-', toString(number)),
		number %% 97, number %% 7, (number %% 7) * 123457 FROM system.numbers LIMIT %d`, m.ID, day, n)); err != nil {
		t.Fatal(err)
	}

	body := fmt.Sprintf(`{"dataset":"monitoring_metrics","dimensions":["campaign_id","entity_id"],"metrics":["impressions","clicks","ad_spend","ctr","cpc"],
		"granularity":"day_local","startDate":%q,"endDate":%q}`, day, day)
	var created struct {
		ExportID string `json:"exportId"`
	}
	if err := json.Unmarshal(d.must("POST", "/public/v1/export-service/exports", k.Key, body, 202), &created); err != nil {
		t.Fatal(err)
	}
	status := func() exports.View {
		var v exports.View
		if err := json.Unmarshal(d.must("GET", "/public/v1/export-service/exports/"+created.ExportID, k.Key, "", 200), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if v := status(); v.Status != exports.StatusRunning {
			return fmt.Errorf("export is %s", v.Status)
		}
		return nil
	})
	time.Sleep(time.Second) // into the query and the upload
	if v := status(); v.Status != exports.StatusRunning {
		t.Fatalf("the export ended before the kill (%s): make it bigger", v.Status)
	}
	d.kill()

	s3 := s3store.Open(s3store.Options{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", d.s3), Region: "us-east-1", Bucket: "endcap",
		AccessKey: "endcap", SecretKey: "endcap-dev-secret"})
	key := exports.ObjectKey(m.ID, &exports.Export{ID: created.ExportID, Request: exports.Request{Format: exports.FormatCSV}})
	d.start()
	if _, ok, err := s3.Head(ctx, key); err != nil || ok {
		t.Fatalf("after the kill: object present %v (%v), want none", ok, err)
	}
	restarted := time.Now()
	var v exports.View
	testenv.Eventually(t, 150*time.Second, func() error {
		if v = status(); v.Status != exports.StatusCompleted {
			return fmt.Errorf("export is %s", v.Status)
		}
		return nil
	})
	t.Logf("completed %s after the restart", time.Since(restarted).Round(time.Millisecond))
	st, data := sfDownload(t, v.URL)
	if st != 200 || *v.RowCount != n || int64(len(data)) != *v.SizeBytes {
		t.Fatalf("file: status %d, %d bytes, record %+v", st, len(data), v)
	}
	if lines := bytes.Count(data, []byte("\n")); lines != n+1 {
		t.Fatalf("file has %d lines, want %d rows and a header", lines, n)
	}
}
