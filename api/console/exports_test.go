package console_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/testkit/testenv"
)

// exportWorkers runs export workers beside the api process until the test
// ends (no recomputation of the rollup first: the test writes its rows).
func (s *sys) exportWorkers(t *testing.T) {
	// The bucket, as an exporter creates it (an api process does not).
	bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer bcancel()
	if err := s.a.S3.EnsureBucket(bctx); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.a.Exports.RunWorkers(ctx, exports.WorkerOptions{Brokers: s.brokers, Workers: 1}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("export workers did not stop")
		}
	})
}

// rollup writes a day's rollup row of a vendor's campaign.
func (s *sys) rollup(t *testing.T, day, vendor, campaign string, imps, clicks int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.a.ClickHouse.Exec(ctx, fmt.Sprintf(`INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored, vendor_id, campaign_id,
		impressions, clicks) SELECT toUUID('%s'), toDate('%s'), 'EUR', 1, '%s', '%s', %d, %d`, s.mp.ID, day, vendor, campaign, imps, clicks)); err != nil {
		t.Fatal(err)
	}
}

var exportRow = regexp.MustCompile(`data-export="([0-9a-f-]{36})" data-status="([a-z]+)"`)

// exportIDs lists the exports a page shows, newest first, with their
// statuses.
func exportIDs(body string) (ids []string, statuses map[string]string) {
	statuses = map[string]string{}
	for _, m := range exportRow.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
		statuses[m[1]] = m[2]
	}
	return ids, statuses
}

// requestExport posts the export form and returns the new export's id.
func (c *client) requestExport(form url.Values) string {
	c.t.Helper()
	before, _ := exportIDs(c.do("GET", "/console/exports", nil).body)
	form.Set("csrf", c.csrf("/console/exports"))
	r := c.do("POST", "/console/exports", form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/exports?done=export" {
		c.t.Fatalf("request an export: %d %s", r.status, errorOf(r.body))
	}
	after, _ := exportIDs(c.do("GET", "/console/exports", nil).body)
	for _, id := range after {
		if !slices.Contains(before, id) {
			return id
		}
	}
	c.t.Fatalf("the new export is not listed: %q", after)
	return ""
}

// waitCompleted waits until the list shows the export completed.
func (c *client) waitCompleted(id string) {
	c.t.Helper()
	testenv.Eventually(c.t, 60*time.Second, func() error {
		r := c.do("GET", "/console/exports", nil)
		_, st := exportIDs(r.body)
		if st[id] != "completed" {
			return fmt.Errorf("export %s is %q", id, st[id])
		}
		if strings.Contains(r.body, "data-refresh") {
			return fmt.Errorf("the list still refreshes")
		}
		return nil
	})
}

var errorText = regexp.MustCompile(`(?s)<p class="error" role="alert">(.*?)</p>`)

func errorOf(body string) string {
	if m := errorText.FindStringSubmatch(body); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

func exportForm(start, end string) url.Values {
	return url.Values{"dataset": {"monitoring_metrics"}, "granularity": {"day_local"}, "startDate": {start}, "endDate": {end},
		"format": {"csv"}, "dimensions": {"vendor_id", "campaign_id"}, "metrics": {"impressions", "clicks"}}
}

// The exports page: the request form's rules are the export service's
// (each refusal is a message on the form, nothing is created), the list
// pages and filters like the API's, downloads are streamed after the
// session's scope is checked: a vendor user requests and downloads its own
// vendor's exports only (its files hold its rows only), and any other
// export is not found to it.
func TestExports(t *testing.T) {
	s := startAtNoon(t) // the exports made below are of the list's today while the test runs
	s.exportWorkers(t)
	today := time.Now().In(s.mp.Location())
	day := today.AddDate(0, 0, -1).Format(time.DateOnly)
	s.rollup(t, day, "v-1", "c-1", 10, 1)
	s.rollup(t, day, "v-2", "c-2", 20, 2)

	admin := s.client(t)
	admin.login(adminEmail, adminPassword)
	one := s.vendorUser(t, "v-1", "analyst@one.test")
	two := s.vendorUser(t, "v-2", "analyst@two.test")

	page := admin.do("GET", "/console/exports", nil)
	if page.status != 200 || !strings.Contains(page.body, `name="dimensions" value="vendor_id"`) || !strings.Contains(page.body, "No export") {
		t.Fatalf("exports page: %d", page.status)
	}
	tok := admin.csrf("/console/exports")
	for _, tc := range []struct {
		name   string
		change func(url.Values)
		status int
		want   string
	}{
		{"no dimension", func(f url.Values) { f.Del("dimensions") }, 422, "Dimensions: dimensions must hold 1 to 27 dimensions"},
		{"no metric", func(f url.Values) { f.Del("metrics") }, 422, "Metrics: metrics must hold 1 to 19 metrics"},
		{"unknown metric", func(f url.Values) { f.Add("metrics", "fun") }, 422, `"fun" is not a metric`},
		{"twice", func(f url.Values) { f.Add("dimensions", "vendor_id") }, 422, "each value may appear once"},
		{"not a date", func(f url.Values) { f.Set("startDate", "yesterday") }, 422, "First day: startDate must be a date YYYY-MM-DD"},
		{"end before start", func(f url.Values) { f.Set("endDate", "2020-01-01"); f.Set("startDate", day) }, 422, "Last day: endDate must be on or after startDate"},
		{"too long", func(f url.Values) { f.Set("startDate", today.AddDate(0, 0, -40).Format(time.DateOnly)) }, 422, "at most 31"},
		{"format", func(f url.Values) { f.Set("format", "xlsx") }, 422, `format must be`},
		{"dataset", func(f url.Values) { f.Set("dataset", "secrets") }, 422, "dataset must be"},
		{"granularity", func(f url.Values) { f.Set("granularity", "hour") }, 422, "granularity must be one of"},
		{"several problems", func(f url.Values) { f.Del("metrics"); f.Set("format", "xlsx") }, 422, "Metrics: metrics must hold 1 to 19 metrics; it holds 0; Format: format must be"},
		{"no token", func(f url.Values) { f.Del("csrf") }, 403, "The form expired"},
		{"another session's token", func(f url.Values) { f.Set("csrf", one.csrf("/console/exports")) }, 403, "The form expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := exportForm(day, day)
			f.Set("csrf", tok)
			tc.change(f)
			r := admin.do("POST", "/console/exports", f)
			if r.status != tc.status || !strings.Contains(errorOf(r.body), tc.want) {
				t.Fatalf("%d %q, want %d %q", r.status, errorOf(r.body), tc.status, tc.want)
			}
			if tc.status == 422 && !strings.Contains(r.body, `name="startDate" type="date" value="`+f.Get("startDate")+`"`) {
				t.Error("the form does not keep what was sent")
			}
		})
	}
	if ids, _ := exportIDs(admin.do("GET", "/console/exports", nil).body); len(ids) != 0 {
		t.Fatalf("refused forms created exports %q", ids)
	}

	// The marketplace's export, the vendors' own ones.
	mpExport := admin.requestExport(exportForm(day, day))
	// The vendor is the session's: a vendor field in the form is ignored.
	tampered := exportForm(day, day)
	tampered.Set("vendor", "v-2")
	tampered.Set("vendorId", "v-2")
	oneExport := one.requestExport(tampered)
	pq := exportForm(day, day)
	pq.Set("format", "parquet")
	twoExport := two.requestExport(pq)
	for _, c := range []*client{admin, one, two} {
		c.waitCompleted(map[*client]string{admin: mpExport, one: oneExport, two: twoExport}[c])
	}
	// Each list: the admin sees every export, a vendor user its own.
	for _, tc := range []struct {
		who  string
		c    *client
		want []string
	}{{"admin", admin, []string{twoExport, oneExport, mpExport}}, {"v-1", one, []string{oneExport}}, {"v-2", two, []string{twoExport}}} {
		if ids, _ := exportIDs(tc.c.do("GET", "/console/exports", nil).body); !slices.Equal(ids, tc.want) {
			t.Errorf("%s's list %q, want %q", tc.who, ids, tc.want)
		}
	}

	csv := func(b string) string { return strings.ReplaceAll(b, "\r\n", "\n") }
	for _, tc := range []struct {
		name   string
		c      *client
		id     string
		status int
		body   string // the CSV, when 200
	}{
		{"admin, the marketplace's", admin, mpExport, 200, "vendor_id,campaign_id,impressions,clicks\nv-1,c-1,10,1\nv-2,c-2,20,2\n"},
		{"admin, a vendor's", admin, oneExport, 200, "vendor_id,campaign_id,impressions,clicks\nv-1,c-1,10,1\n"},
		{"vendor, its own", one, oneExport, 200, "vendor_id,campaign_id,impressions,clicks\nv-1,c-1,10,1\n"},
		{"vendor, another vendor's", one, twoExport, 404, ""},
		{"vendor, the other way", two, oneExport, 404, ""},
		{"vendor, the marketplace's", one, mpExport, 404, ""},
		{"vendor, upper case", two, strings.ToUpper(oneExport), 404, ""},
		{"unknown id", admin, uuid.NewString(), 404, ""},
		{"not an id", one, "../keys", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.do("GET", "/console/exports/"+tc.id+"/download", nil)
			if r.status != tc.status {
				t.Fatalf("%d, want %d", r.status, tc.status)
			}
			if tc.status != 200 {
				if strings.Contains(r.body, "c-1") || strings.Contains(r.body, "c-2") {
					t.Error("a refusal holds rows")
				}
				return
			}
			if got := csv(r.body); got != tc.body {
				t.Errorf("file %q, want %q", got, tc.body)
			}
			if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename=endcap-export-`+tc.id+`.csv` {
				t.Errorf("Content-Disposition %q", cd)
			}
			if r.header.Get("Content-Type") != "text/csv; charset=utf-8" || r.header.Get("Cache-Control") != "no-store" || r.header.Get("Content-Length") == "" {
				t.Errorf("headers %v", r.header)
			}
		})
	}
	r := two.do("GET", "/console/exports/"+twoExport+"/download", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/vnd.apache.parquet" {
		t.Fatalf("parquet download: %d %v", r.status, r.header)
	}
	_, rows, err := exports.ReadFile(exports.FormatParquet, []byte(r.body))
	if err != nil || len(rows) != 1 || rows[0][0] != "v-2" {
		t.Errorf("v-2's parquet rows %q %v", rows, err)
	}

	// Pages and filters.
	p1 := admin.do("GET", "/console/exports?limit=2", nil)
	ids, _ := exportIDs(p1.body)
	next := regexp.MustCompile(`href="(/console/exports\?[^"]*next_page=[^"]+)"`).FindStringSubmatch(p1.body)
	if !slices.Equal(ids, []string{twoExport, oneExport}) || next == nil {
		t.Fatalf("first page %q, next %v", ids, next)
	}
	p2 := admin.do("GET", strings.ReplaceAll(next[1], "&amp;", "&"), nil)
	if ids, _ := exportIDs(p2.body); p2.status != 200 || !slices.Equal(ids, []string{mpExport}) || strings.Contains(p2.body, "Older exports") {
		t.Errorf("second page %d %q", p2.status, ids)
	}
	cursor, _ := url.ParseQuery(strings.SplitN(strings.ReplaceAll(next[1], "&amp;", "&"), "?", 2)[1])
	for _, tc := range []struct {
		name   string
		c      *client
		query  string
		status int
		want   []string
		msg    string
	}{
		{"completed", admin, "status=completed", 200, []string{twoExport, oneExport, mpExport}, ""},
		{"failed", admin, "status=failed", 200, nil, ""},
		{"today", admin, "from=" + today.Format(time.DateOnly) + "&to=" + today.Format(time.DateOnly), 200, []string{twoExport, oneExport, mpExport}, ""},
		{"before", admin, "to=" + today.AddDate(0, 0, -1).Format(time.DateOnly), 200, nil, ""},
		{"not a status", admin, "status=done", 422, nil, "Status: status must be one of"},
		{"not a date", admin, "from=26/11/2026", 422, nil, "The first day must be a date"},
		{"to before from", admin, "from=2026-11-20&to=2026-11-10", 422, nil, "The last day must not be before the first day"},
		{"altered cursor", admin, "limit=2&next_page=" + url.QueryEscape(cursor.Get("next_page")+"x"), 422, nil, "This page's link is not valid"},
		{"another list's cursor", one, "limit=2&next_page=" + url.QueryEscape(cursor.Get("next_page")), 422, nil, "This page's link is not valid"},
		{"vendor, completed", one, "status=completed", 200, []string{oneExport}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.do("GET", "/console/exports?"+tc.query, nil)
			ids, _ := exportIDs(r.body)
			if r.status != tc.status || !slices.Equal(ids, tc.want) || !strings.Contains(errorOf(r.body), tc.msg) {
				t.Fatalf("%d %q %q, want %d %q %q", r.status, ids, errorOf(r.body), tc.status, tc.want, tc.msg)
			}
		})
	}
	// A vendor's quota is its own (10 a day): v-2's eleventh export of the day is refused on the form, and the
	// marketplace's requests still go through.
	for i := 0; i < 9; i++ {
		two.requestExport(exportForm(day, day))
	}
	f := exportForm(day, day)
	f.Set("csrf", two.csrf("/console/exports"))
	if r := two.do("POST", "/console/exports", f); r.status != http.StatusTooManyRequests || !strings.Contains(errorOf(r.body), "This vendor has requested its exports of the day") {
		t.Errorf("v-2's eleventh export: %d %q", r.status, errorOf(r.body))
	}
	admin.requestExport(exportForm(day, day))
}

// The request form offers each dataset's own granularities and columns:
// monitoring_metrics' by default, balance_ledger's a link away; a form of
// balance_ledger as the page shows it is accepted, and one refused is shown
// again with balance_ledger's columns and what was sent.
func TestExportFormPerDataset(t *testing.T) {
	s := start(t)
	admin := s.client(t)
	admin.login(adminEmail, adminPassword)
	checked := regexp.MustCompile(`name="(dimensions|metrics|granularity|dataset)" value="([a-z_]+)"( checked)?`)
	// form lists the form's columns (name=value, a * when checked).
	form := func(body string) []string {
		var out []string
		for _, m := range checked.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1]+"="+m[2]+map[bool]string{true: "*"}[m[3] != ""])
		}
		return out
	}
	columns := func(ds *exports.Dataset, on ...string) []string {
		out := []string{"dataset=" + ds.Name}
		for _, d := range ds.Dimensions {
			out = append(out, "dimensions="+d.Name+map[bool]string{true: "*"}[slices.Contains(on, d.Name)])
		}
		for _, m := range ds.Metrics {
			out = append(out, "metrics="+m.Name+map[bool]string{true: "*"}[slices.Contains(on, m.Name)])
		}
		return out
	}
	mm, _ := exports.DatasetByName(exports.DatasetMonitoringMetrics)
	bl, _ := exports.DatasetByName(exports.DatasetBalanceLedger)
	for _, tc := range []struct {
		path string
		want []string
		gran string
	}{
		{"/console/exports", columns(mm, "day_local", "campaign_id", "impressions", "clicks", "ad_spend", "total_purchase_amount"), "day_local"},
		{"/console/exports?request=monitoring_metrics", columns(mm, "day_local", "campaign_id", "impressions", "clicks", "ad_spend", "total_purchase_amount"), "day_local"},
		{"/console/exports?request=balance_ledger", columns(bl, "occurred_at", "vendor_id", "kind", "campaign_id", "amount"), "movement"},
		{"/console/exports?request=secrets", columns(mm, "day_local", "campaign_id", "impressions", "clicks", "ad_spend", "total_purchase_amount"), "day_local"},
	} {
		r := admin.do("GET", tc.path, nil)
		if got := form(r.body); r.status != 200 || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %d, form %q, want %q", tc.path, r.status, got, tc.want)
		}
		if !strings.Contains(r.body, `<option value="`+tc.gran+`" selected>`) {
			t.Errorf("%s: granularity %s not chosen", tc.path, tc.gran)
		}
	}
	page := admin.do("GET", "/console/exports", nil).body
	if !strings.Contains(page, `href="/console/exports?request=balance_ledger#request"`) {
		t.Fatal("no link to balance_ledger's form")
	}
	day := time.Now().In(s.mp.Location()).Format(time.DateOnly)
	ledger := url.Values{"dataset": {"balance_ledger"}, "granularity": {"movement"}, "startDate": {day}, "endDate": {day}, "format": {"csv"},
		"dimensions": {"occurred_at", "vendor_id", "kind", "campaign_id"}, "metrics": {"amount"}}
	bad := maps.Clone(ledger)
	bad["metrics"] = []string{"amount", "ctr"}
	bad.Set("csrf", admin.csrf("/console/exports"))
	r := admin.do("POST", "/console/exports", bad)
	if r.status != 422 || !strings.Contains(errorOf(r.body), `"ctr" is not a metric of dataset balance_ledger`) ||
		!slices.Equal(form(r.body), columns(bl, "occurred_at", "vendor_id", "kind", "campaign_id", "amount")) {
		t.Errorf("a refused balance_ledger form: %d %q, form %q", r.status, errorOf(r.body), form(r.body))
	}
	id := admin.requestExport(ledger)
	if r := admin.do("GET", "/console/exports?dataset=balance_ledger", nil); !strings.Contains(r.body, `data-export="`+id+`"`) {
		t.Errorf("the balance_ledger export %s is not listed under its dataset", id)
	}
}

// The scored-attribution files: an admin downloads a day's stored file as
// it is, a vendor user the rows credited to its own vendor's campaigns.
func TestFiles(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	today := time.Now().In(s.mp.Location())
	day := time.Date(today.Year(), today.Month(), today.Day()-2, 0, 0, 0, 0, time.UTC)
	// A stored file with rows of both vendors (v-2's item bought through
	// v-1's campaign is v-1's row).
	var recs []scoredfiles.Record
	for i, v := range []string{"v-1", "v-2", "v-1", "v-22", "v-2"} {
		recs = append(recs, scoredfiles.Record{MarketplaceID: s.mp.ID, PurchaseEventID: fmt.Sprintf("pur-%d", i), ItemIndex: int32(i),
			VendorID: v, ItemVendorID: "v-2", CampaignID: "c-" + v, AmountMicros: int64(i+1) * 1_000_000, Amount: fmt.Sprint(i + 1)})
	}
	// The bucket is the exporter's, which writes the files: this API
	// process does not create it.
	if err := s.a.S3.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	up, err := s.a.S3.NewUpload(ctx, scoredfiles.Key(s.mp.ID, day), "application/vnd.apache.parquet", map[string]string{"final": "false", "produced-at": "2026-03-08T08:00:02.512Z"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[scoredfiles.Record](up)
	if _, err := w.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Complete(); err != nil {
		t.Fatal(err)
	}
	// The day before: an object that is not a Parquet file.
	bad, err := s.a.S3.NewUpload(ctx, scoredfiles.Key(s.mp.ID, day.AddDate(0, 0, -1)), "application/vnd.apache.parquet", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Write([]byte("not a parquet file")); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Complete(); err != nil {
		t.Fatal(err)
	}
	admin := s.client(t)
	admin.login(adminEmail, adminPassword)
	one := s.vendorUser(t, "v-1", "analyst@one.test")
	two := s.vendorUser(t, "v-2", "analyst@two.test")
	path := "/console/files/" + day.Format(time.DateOnly) + "/download"
	badPath := "/console/files/" + day.AddDate(0, 0, -1).Format(time.DateOnly) + "/download"
	// Stored as it is for the admin; for a vendor, a page saying so rather than a broken download.
	if r := admin.do("GET", badPath, nil); r.status != 200 || r.body != "not a parquet file" {
		t.Errorf("the admin's download of an unreadable file: %d %q", r.status, r.body)
	}
	if r := one.do("GET", badPath, nil); r.status != http.StatusServiceUnavailable || r.header.Get("Content-Disposition") != "" ||
		!strings.Contains(r.header.Get("Content-Type"), "text/html") {
		t.Errorf("a vendor's download of an unreadable file: %d %v", r.status, r.header)
	}
	for _, c := range []*client{admin, one} {
		r := c.do("GET", "/console/files", nil)
		if r.status != 200 || !strings.Contains(r.body, `href="`+path+`"`) || !strings.Contains(r.body, "Not produced yet") {
			t.Fatalf("files page: %d", r.status)
		}
	}
	for _, tc := range []struct {
		name   string
		c      *client
		path   string
		status int
		want   []string // purchase event ids
	}{
		{"admin, the whole file", admin, path, 200, []string{"pur-0", "pur-1", "pur-2", "pur-3", "pur-4"}},
		{"v-1, its rows", one, path, 200, []string{"pur-0", "pur-2"}},
		{"v-2, its rows", two, path, 200, []string{"pur-1", "pur-4"}},
		{"a day without a file", one, "/console/files/" + today.Format(time.DateOnly) + "/download", 404, nil},
		{"not a day", two, "/console/files/2026-02-30/download", 404, nil},
		{"not a day either", admin, "/console/files/..%2Fkeys/download", 404, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.do("GET", tc.path, nil)
			if r.status != tc.status {
				t.Fatalf("%d, want %d", r.status, tc.status)
			}
			if tc.status != 200 {
				return
			}
			if !strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment; filename=scored-attribution-"+day.Format(time.DateOnly)) {
				t.Errorf("Content-Disposition %q", r.header.Get("Content-Disposition"))
			}
			pr := parquet.NewGenericReader[scoredfiles.Record](bytes.NewReader([]byte(r.body)))
			defer pr.Close()
			got := make([]scoredfiles.Record, 10)
			n, _ := pr.Read(got)
			var ids []string
			for _, rec := range got[:n] {
				ids = append(ids, rec.PurchaseEventID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("rows %q, want %q", ids, tc.want)
			}
		})
	}
}

var requestKeyInput = regexp.MustCompile(`name="requestKey" value="([^"]*)"`)

// The export form carries a request key: submitting the same form twice,
// one after the other or at once, makes one export; the same key with other
// values, or a key that is not one the console makes, is a new export.
func TestExportFormSubmittedTwice(t *testing.T) {
	s := start(t)
	admin := s.client(t)
	admin.login(adminEmail, adminPassword)
	day := time.Now().In(s.mp.Location()).AddDate(0, 0, -1).Format(time.DateOnly)

	listed := func() []string {
		ids, _ := exportIDs(admin.do("GET", "/console/exports", nil).body)
		return ids
	}
	// form renders the page and returns its form's values with f's.
	form := func(f url.Values) url.Values {
		m := requestKeyInput.FindStringSubmatch(admin.do("GET", "/console/exports", nil).body)
		if m == nil || m[1] == "" {
			t.Fatal("the export form has no request key")
		}
		f.Set("requestKey", m[1])
		f.Set("csrf", admin.csrf("/console/exports"))
		return f
	}
	post := func(c *client, f url.Values) int {
		r := c.do("POST", "/console/exports", f)
		if r.status != http.StatusSeeOther {
			t.Errorf("submit: %d %s", r.status, errorOf(r.body))
		}
		return r.status
	}
	wantNew := func(before []string, n int, what string) []string {
		t.Helper()
		after := listed()
		if got := len(after) - len(before); got != n {
			t.Fatalf("%s: %d new exports, want %d", what, got, n)
		}
		return after
	}

	before := listed()
	f := form(exportForm(day, day))
	post(admin, f)
	post(admin, f)
	before = wantNew(before, 1, "the same form twice")

	// Other values with the same key (the form edited after going back).
	g := exportForm(day, day)
	g.Set("format", "parquet")
	g.Set("requestKey", f.Get("requestKey"))
	g.Set("csrf", f.Get("csrf"))
	post(admin, g)
	before = wantNew(before, 1, "the same key with other values")

	// Keys the console does not make: each submission its own export.
	for _, k := range []string{"", "not-a-key", uuid.NewString(), "0190163d-8694-739b-aea5-966c26f8ad91" /* a UUIDv7 of 2024 */} {
		h := exportForm(day, day)
		h.Set("requestKey", k)
		h.Set("csrf", f.Get("csrf"))
		post(admin, h)
		post(admin, h)
		before = wantNew(before, 2, fmt.Sprintf("key %q twice", k))
	}

	// A double click: the same form at once, from the same session.
	f = form(exportForm(day, day))
	var wg sync.WaitGroup
	statuses, bodies := make([]int, 2), make([]string, 2)
	for i := range statuses {
		c := &client{t: t, s: s, cookies: maps.Clone(admin.cookies)}
		wg.Go(func() {
			r := c.do("POST", "/console/exports", f)
			statuses[i], bodies[i] = r.status, r.body
		})
	}
	wg.Wait()
	for i, st := range statuses {
		// The second may find the first still writing: it asks to
		// submit again, and creates nothing.
		if st != http.StatusSeeOther && (st != http.StatusServiceUnavailable || !strings.Contains(bodies[i], "submit the form again")) {
			t.Errorf("a double click: %v (%.300s)", statuses, bodies[i])
		}
	}
	wantNew(before, 1, "a double click")
}
