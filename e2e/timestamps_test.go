package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/testkit/testenv"
)

// goldenResponses lists the golden files of the repository that hold what
// Endcap writes (response bodies, payloads, records): every JSON file under
// a testdata directory but requests (*.request.json), the inputs of a
// *.golden.json beside them, fuzz corpora and package manifests.
func goldenResponses(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "fuzz") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".json") || !strings.Contains(filepath.ToSlash(path), "/testdata/") ||
			strings.HasSuffix(name, ".request.json") || name == "package.json" {
			return nil
		}
		if !strings.HasSuffix(name, ".golden.json") {
			if _, err := os.Stat(strings.TrimSuffix(path, ".json") + ".golden.json"); err == nil {
				return nil // the input of a golden file
			}
		}
		out = append(out, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldenTimestamps: every timestamp in every golden response file of the
// repository is written one way, as internal/timestamp writes it
// (2026-11-26T08:21:03.510Z): no other precision ("….51Z", nanoseconds, none),
// no offset, no other separator, whatever file or field it is in, messages
// included. In a golden exchange (e2e's golden files: {method, path, status,
// headers, body}) what Endcap wrote is checked, the headers and the body, not
// the request's path; only an answer's echo of what its request sent, as
// sent, is let be: of the exchange's path, or of the .request.json beside a
// .response.json. It runs on the files as they are; a golden file rewritten
// with -update with another form fails it.
func TestGoldenTimestamps(t *testing.T) {
	files := goldenResponses(t, "..")
	seen, exchanges := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		written, sent := b, []string(nil)
		if x, ok := goldenExchangeOf(b); ok {
			exchanges++
			written = slices.Clone(x.Body)
			for _, k := range slices.Sorted(maps.Keys(x.Headers)) {
				written = append(written, "\n"+k+": "+x.Headers[k]...)
			}
			sent = sentText(x.Path, nil)
		}
		// A response may echo what its request sent, as sent.
		if req, ok := strings.CutSuffix(f, ".response.json"); ok {
			if b, err := os.ReadFile(req + ".request.json"); err == nil {
				sent = append(sent, string(b))
			}
		}
		seen += timestamp.Count(written)
	next:
		for _, bad := range timestamp.Malformed(written) {
			for _, s := range sent {
				if strings.Contains(s, bad) {
					continue next
				}
			}
			t.Errorf("%s: timestamp %q is not in the form %s", f, bad, timestamp.Layout)
		}
	}
	// The walk must reach the golden files that hold timestamps: if it finds
	// none, it checks nothing.
	if len(files) < 100 || exchanges < 100 || seen < 30 {
		t.Fatalf("%d golden files (%d exchanges) with %d timestamps: the walk missed the golden files", len(files), exchanges, seen)
	}
	t.Logf("%d golden files (%d exchanges), %d timestamps", len(files), exchanges, seen)
}

// goldenExchangeOf reads b as a golden exchange, as golden writes it; ok is
// false for another kind of golden file.
func goldenExchangeOf(b []byte) (x goldenExchange, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil || x.Method == "" || x.Path == "" || x.Status == 0 {
		return goldenExchange{}, false
	}
	return x, true
}

// sentText is what a request sent, as the texts its answer may echo: the
// path with its query, also unescaped (and with "+" read as a space), and
// the body.
func sentText(path string, body []byte) []string {
	unescaped, _ := url.PathUnescape(path)
	out := []string{path, unescaped, strings.ReplaceAll(unescaped, "+", " ")}
	if len(body) > 0 {
		out = append(out, string(body))
	}
	return out
}

// checkTimestamps fails the test for each timestamp in a body that is not in
// the one form of internal/timestamp, unless it is one of sent's (the
// request's path and body): an error may echo a value as the caller wrote
// it.
func checkTimestamps(t testing.TB, what string, body []byte, sent ...string) {
	t.Helper()
next:
	for _, bad := range timestamp.Malformed(body) {
		for _, s := range sent {
			if strings.Contains(s, bad) {
				continue next
			}
		}
		t.Errorf("%s: timestamp %q is not in the form %s: %.300s", what, bad, timestamp.Layout, body)
	}
}

// wireNorm turns response bodies into golden files that do not change from
// run to run, without hiding their form: generated UUIDs become stand-in
// UUIDs (numbered in order of appearance), timestamps within 60 days of
// now become one stand-in timestamp (in the one form: a timestamp in
// another form is left as it is, and fails both checks), presigned URLs,
// secrets, ports and latencies fixed values; fixed replaces other strings
// (whole JSON strings).
type wireNorm struct {
	ids   map[string]string
	fixed map[string]string
	now   time.Time
	// localDay is the marketplace's day today: a campaign's spend.day,
	// which is the UTC yesterday of fixed in the hours the marketplace's
	// zone is behind UTC (it becomes today's stand-in).
	localDay string
}

var (
	wireUUID    = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	wireTime    = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z`)
	wireURL     = regexp.MustCompile(`"(url|fileUrl)":"[^"]*X-Amz-[^"]*"`)
	wireSecret  = regexp.MustCompile(`"(secret|secretPrefix)":"whsec_[^"]*"`)
	wirePort    = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	wireLatency = regexp.MustCompile(`"lastLatencyMs":\d+`)
)

func (n *wireNorm) apply(b []byte) []byte {
	if n.localDay != "" {
		b = bytes.ReplaceAll(b, []byte(`"day":"`+n.localDay+`"`), []byte(`"day":"`+n.fixed[exDay(0)]+`"`))
	}
	for k, v := range n.fixed { // whole strings only
		b = bytes.ReplaceAll(b, []byte(`"`+k+`"`), []byte(`"`+v+`"`))
	}
	b = wireURL.ReplaceAll(b, []byte(`"$1":"https://s3.example.com/endcap/object?X-Amz-Signature=…"`))
	b = wireSecret.ReplaceAll(b, []byte(`"$1":"whsec_…"`))
	b = wirePort.ReplaceAll(b, []byte(`127.0.0.1:8080`))
	b = wireLatency.ReplaceAll(b, []byte(`"lastLatencyMs":12`))
	b = wireUUID.ReplaceAllFunc(b, func(m []byte) []byte {
		u := strings.ToLower(string(m))
		s, ok := n.ids[u]
		if !ok {
			s = fmt.Sprintf("00000000-0000-4000-8000-%012d", len(n.ids)+1)
			n.ids[u] = s
		}
		return []byte(s)
	})
	return wireTime.ReplaceAllFunc(b, func(m []byte) []byte {
		at, err := time.Parse(timestamp.Layout, string(m))
		if d := at.Sub(n.now); err == nil && d > -60*24*time.Hour && d < 60*24*time.Hour {
			return []byte("2000-01-01T00:00:00.000Z")
		}
		return m
	})
}

// golden normalises the exchange r (its path, its body, then the headers
// golden keeps: Location as the body, a Retry-After of the quota, which
// counts down to midnight, as one value) and compares it with
// testdata/wire/<name>.json (golden checks its timestamps).
func (n *wireNorm) golden(t *testing.T, name string, r response) {
	t.Helper()
	checkTimestamps(t, name, r.Body)
	r.Path = string(n.apply([]byte(r.Path)))
	r.Body = n.apply(r.Body)
	r.Header = r.Header.Clone()
	if loc := r.Header.Get("Location"); loc != "" {
		r.Header.Set("Location", string(n.apply([]byte(loc))))
	}
	if ra := r.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err != nil || s < 1 || s > 86400 {
			t.Errorf("%s: Retry-After %q is not 1 to 86400 seconds", name, ra)
		}
		r.Header.Set("Retry-After", "3600")
	}
	golden(t, filepath.Join("wire", name+".json"), r)
}

// TestWireTimestamps: every kind of response body of /public/v1 that holds a
// timestamp (the marketplace, catalog vendor, billing contact and link,
// campaign and bid, invitation, advertiser domain, webhook, delivery and its
// payload, export accepted, completed and over quota), and the webhook
// payloads a receiver gets, write timestamps in the one form, also those
// that came in with an offset or nanoseconds. Each body is a golden file
// (testdata/wire), which TestGoldenTimestamps checks too.
func TestWireTimestamps(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.WebhookAllowLoopback = true
	cfg.ExportDailyQuota = 1
	s := startSystem(t, cfg)
	A := s.AdvancedKey
	rc := newHookReceiver(t)
	loc, err := time.LoadLocation(s.Marketplace.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	n := &wireNorm{ids: map[string]string{}, now: time.Now(), localDay: time.Now().In(loc).Format(time.DateOnly),
		fixed: map[string]string{exDay(-1): "2026-01-01", exDay(0): "2026-01-02"}}
	do := func(name, method, path string, body string, status int) response {
		t.Helper()
		r := bwDo(t, s, method, path, A, body, nil)
		bwStatus(t, r, status)
		n.golden(t, name, r)
		return r
	}

	do("marketplace", "GET", "/public/v1/marketplace", "", 200)
	r := do("webhook_created", "POST", bwWhPath, fmt.Sprintf(`{"url": %q, "eventTypes": ["campaign.created", "export.completed"]}`, rc.srv.URL+"/hooks"), 201)
	hook := bwObj(t, r.Body)["id"].(string)
	do("webhook", "GET", bwWhPath+"/"+hook, "", 200)

	do("vendors_upserted", "PUT", catVendors, `{"vendors": [{"id": "v-1", "name": "Alpha", "globalId": "G-1"}]}`, 200)
	do("vendor", "GET", catVendors+"/v-1", "", 200)

	r = do("billing_contact_created", "POST", bwBcPath, `{"name": "Ann", "email": "ann@example.com"}`, 201)
	contact := bwObj(t, r.Body)["id"].(string)
	do("billing_contact_linked", "PUT", bwBvPath("v-1")+"/"+contact, "", 200)

	// Dates sent with an offset and with nanoseconds come back in the one
	// form.
	r = do("campaign_created", "POST", cpVendor("v-1"), `{"name": "Spring", "type": "listings", "dailyBudget": 10,
		"startDate": "2020-01-01T01:00:00+01:00", "endDate": "2099-01-01T00:00:00.123456789Z"}`, 201)
	camp := cpID(t, r)
	if m := bwObj(t, r.Body); m["startDate"] != "2020-01-01T00:00:00.000Z" || m["endDate"] != "2099-01-01T00:00:00.123Z" {
		t.Fatalf("campaign dates %v %v", m["startDate"], m["endDate"])
	}
	do("bid_created", "POST", cpBids(camp), `{"targetType": "category", "target": "shoes", "bidAmount": 0.5}`, 201)

	do("invitations_created", "POST", bwInvPath, `{"invites": [{"vendorId": "v-1", "vendorEmail": "ann@example.com", "targetUserRole": "vendor_analyst"}]}`, 201)
	do("advertiser_domain", "PUT", bwAdPath("v-1"), `{"domain": "shop.example.com"}`, 200)

	// Exports: accepted, completed, and the quota's message (a time).
	r = do("export_accepted", "POST", exPath, `{"dataset": "monitoring_metrics", "dimensions": ["day_local"], "metrics": ["impressions"],
		"granularity": "day_local", "startDate": "`+exDay(-1)+`", "endDate": "`+exDay(0)+`"}`, 202)
	export := bwObj(t, r.Body)["exportId"].(string)
	exCompleted(t, s, export)
	do("export_completed", "GET", exPath+"/"+export, "", 200)
	// exportId is a UUID: in upper case it names the same export; in
	// another form (braces, URN), none.
	upper := bwDo(t, s, "GET", exPath+"/"+strings.ToUpper(export), A, nil, nil)
	bwStatus(t, upper, 200)
	if m := bwObj(t, upper.Body); m["exportId"] != export || m["status"] != "completed" {
		t.Fatalf("upper-case exportId: %s", upper.Body)
	}
	exExpectNotFound(t, s, A, "{"+export+"}")
	exExpectNotFound(t, s, A, "urn:uuid:"+export)
	do("export_quota_exceeded", "POST", exPath, `{"dataset": "monitoring_metrics", "dimensions": ["day_local"], "metrics": ["impressions"],
		"granularity": "day_local", "startDate": "`+exDay(0)+`", "endDate": "`+exDay(0)+`"}`, 429)

	// A test delivery: as created, and once delivered, with its payload.
	r = do("webhook_test_delivery", "POST", bwWhPath+"/"+hook+"/test", "", 202)
	delivery := bwObj(t, r.Body)["id"].(string)
	testenv.Eventually(t, 15*time.Second, func() error {
		if st := bwObj(t, bwDo(t, s, "GET", bwWhPath+"/"+hook+"/deliveries/"+delivery, A, nil, nil).Body)["status"]; st != "delivered" {
			return fmt.Errorf("test delivery %v", st)
		}
		return nil
	})
	do("webhook_delivery", "GET", bwWhPath+"/"+hook+"/deliveries/"+delivery, "", 200)

	// What the receiver got: the campaign, the export and the test.
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, typ := range []string{"campaign.created", "export.completed", "webhook.test"} {
			if len(rc.ofType(typ)) == 0 {
				return fmt.Errorf("no %s delivered", typ)
			}
		}
		return nil
	})
	// The event's timestamp, and the resource's: the campaign's start,
	// creation and update; the export's creation, start, completion and URL
	// expiry.
	for typ, want := range map[string]int{"campaign.created": 4, "export.completed": 5, "webhook.test": 1} {
		g := rc.ofType(typ)[0]
		if timestamp.Count(g.body) < want {
			t.Errorf("%s payload without its timestamps: %s", typ, g.body)
		}
		checkTimestamps(t, typ+" payload", g.body)
	}
}
