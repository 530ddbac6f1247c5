package loadgen

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSplitBatch(t *testing.T) {
	if got := splitBatch(50); got != [4]int{30, 13, 2, 5} {
		t.Errorf("splitBatch(50) = %v", got)
	}
	if got := splitBatch(1); got != [4]int{1, 0, 0, 0} {
		t.Errorf("splitBatch(1) = %v", got)
	}
	if got := splitBatch(200); got != [4]int{50, 50, 50, 50} {
		t.Errorf("splitBatch(200) = %v", got)
	}
	for n := 1; n <= maxBatchSize; n++ {
		got := splitBatch(n)
		sum := 0
		for i, c := range got {
			if c < 0 || c > maxPerArray {
				t.Fatalf("splitBatch(%d)[%d] = %d", n, i, c)
			}
			sum += c
		}
		if sum != n {
			t.Fatalf("splitBatch(%d) = %v, sum %d", n, got, sum)
		}
		if n <= 83 { // below the 50 cap on impressions the mix holds within one event per kind
			for i, c := range got {
				if d := float64(c) - mix[i]*float64(n); d < -1 || d > 1 {
					t.Fatalf("splitBatch(%d) = %v strays from the mix", n, got)
				}
			}
		}
	}
}

// Typed view of a body. Decoding with DisallowUnknownFields checks that items carry no other fields.
type (
	jEntity    struct{ Type, ID string }
	jPlacement struct {
		Path                     string
		Position, Page, PageSize int
	}
	jPage struct {
		Type   string `json:"type"`
		PageID string `json:"pageId"`
	}
	jInteraction struct {
		ID           string     `json:"id"`
		OccurredAt   string     `json:"occurredAt"`
		OpaqueUserID string     `json:"opaqueUserId"`
		Entity       *jEntity   `json:"entity"`
		Placement    jPlacement `json:"placement"`
		Page         *jPage     `json:"page"`
		DeviceType   string     `json:"deviceType"`
		Channel      string     `json:"channel"`
		ClickType    string     `json:"clickType"`
	}
	jItem struct {
		ProductID string   `json:"productId"`
		UnitPrice *float64 `json:"unitPrice"`
		Quantity  int      `json:"quantity"`
		VendorID  string   `json:"vendorId"`
	}
	jPurchase struct {
		ID           string  `json:"id"`
		OccurredAt   string  `json:"occurredAt"`
		OpaqueUserID string  `json:"opaqueUserId"`
		Items        []jItem `json:"items"`
	}
	jPageview struct {
		ID           string `json:"id"`
		OccurredAt   string `json:"occurredAt"`
		OpaqueUserID string `json:"opaqueUserId"`
		Page         *jPage `json:"page"`
	}
	jBody struct {
		Impressions []jInteraction `json:"impressions"`
		Clicks      []jInteraction `json:"clicks"`
		Purchases   []jPurchase    `json:"purchases"`
		Pageviews   []jPageview    `json:"pageviews"`
	}
)

var (
	reUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	reTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
)

// keySets are the exact keys of each kind of item, as in the wire-contract examples.
var keySets = map[string][]string{
	"impressions": {"id", "occurredAt", "opaqueUserId", "entity", "placement", "page", "deviceType", "channel"},
	"clicks":      {"id", "occurredAt", "opaqueUserId", "entity", "placement", "page", "deviceType", "channel", "clickType"},
	"purchases":   {"id", "occurredAt", "opaqueUserId", "items"},
	"pageviews":   {"id", "occurredAt", "opaqueUserId", "page"},
}

// checkBody decodes body and checks every item against the wire contract; it adds the ids to seen (and
// fails on a duplicate) and returns the per-kind counts.
func checkBody(t testing.TB, body []byte, seen map[string]bool, users, products int) [4]int {
	t.Helper()
	var generic map[string][]map[string]json.RawMessage
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	for kind, items := range generic {
		want, ok := keySets[kind]
		if !ok {
			t.Fatalf("unexpected key %q", kind)
		}
		if len(items) == 0 || len(items) > maxPerArray {
			t.Fatalf("%s has %d items", kind, len(items))
		}
		for _, it := range items {
			if len(it) != len(want) {
				t.Fatalf("%s item has keys %v, want %v", kind, keysOf(it), want)
			}
			for _, k := range want {
				if _, ok := it[k]; !ok {
					t.Fatalf("%s item lacks %q: %v", kind, k, keysOf(it))
				}
			}
		}
	}
	var b jBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("decode: %v", err)
	}
	head := func(kind, id, at, user string) {
		t.Helper()
		if !reUUID.MatchString(id) {
			t.Fatalf("%s id %q is not a UUID", kind, id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		if !reTime.MatchString(at) {
			t.Fatalf("%s occurredAt %q is not RFC 3339 UTC with milliseconds", kind, at)
		}
		if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(user, "u-"))
		if !strings.HasPrefix(user, "u-") || err != nil || n < 0 || n >= users {
			t.Fatalf("%s opaqueUserId %q", kind, user)
		}
	}
	product := func(id string) {
		t.Helper()
		n, err := strconv.Atoi(strings.TrimPrefix(id, "p-"))
		if !strings.HasPrefix(id, "p-") || err != nil || n < 0 || n >= products {
			t.Fatalf("product id %q", id)
		}
	}
	page := func(p *jPage) {
		t.Helper()
		switch {
		case p == nil, p.PageID == "":
			t.Fatalf("bad page %+v", p)
		case p.Type == "search", p.Type == "category", p.Type == "PDP", p.Type == "home":
		default:
			t.Fatalf("page type %q", p.Type)
		}
	}
	interactions := func(kind string, list []jInteraction) {
		t.Helper()
		for _, it := range list {
			head(kind, it.ID, it.OccurredAt, it.OpaqueUserID)
			if it.Entity == nil || it.Entity.Type != "product" {
				t.Fatalf("%s entity %+v", kind, it.Entity)
			}
			product(it.Entity.ID)
			pl := it.Placement
			if pl.Path == "" || pl.Path[0] != '/' || pl.Position < 1 || pl.Position > pl.PageSize || pl.Page < 1 || pl.PageSize != pageSize {
				t.Fatalf("%s placement %+v", kind, pl)
			}
			page(it.Page)
			if it.DeviceType != "mobile" && it.DeviceType != "desktop" || it.Channel != "onsite" {
				t.Fatalf("%s device %q channel %q", kind, it.DeviceType, it.Channel)
			}
			if kind == "clicks" && it.ClickType != "product" && it.ClickType != "add-to-cart" {
				t.Fatalf("clickType %q", it.ClickType)
			}
		}
	}
	interactions("impressions", b.Impressions)
	interactions("clicks", b.Clicks)
	for _, p := range b.Purchases {
		head("purchases", p.ID, p.OccurredAt, p.OpaqueUserID)
		if len(p.Items) == 0 {
			t.Fatal("purchase without items")
		}
		for _, it := range p.Items {
			product(it.ProductID)
			if it.UnitPrice == nil || *it.UnitPrice <= 0 || it.Quantity < 1 || !strings.HasPrefix(it.VendorID, "v-") {
				t.Fatalf("purchase item %+v", it)
			}
		}
	}
	for _, p := range b.Pageviews {
		head("pageviews", p.ID, p.OccurredAt, p.OpaqueUserID)
		page(p.Page)
	}
	return [4]int{len(b.Impressions), len(b.Clicks), len(b.Purchases), len(b.Pageviews)}
}

func keysOf(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestBuildBody(t *testing.T) {
	seen := map[string]bool{}
	now := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	var runA, runB [8]byte
	runA[0], runB[0] = 1, 2
	for bi, batch := range []int{50, 1, 7, 100, 200} {
		for worker := 0; worker < 3; worker++ {
			for _, run := range [][8]byte{runA, runB} {
				run[1] = byte(bi) // one builder per (run, worker), as in RunEvents
				b := newBodyBuilder(run, worker, 42, batch, 1000, 500)
				var buf []byte
				for i := 0; i < 20; i++ {
					buf = b.build(buf, now)
					got := checkBody(t, buf, seen, 1000, 500)
					if got != splitBatch(batch) {
						t.Fatalf("batch %d: counts %v, want %v", batch, got, splitBatch(batch))
					}
				}
			}
		}
	}
	// occurredAt is the given time in UTC, to the millisecond.
	b := newBodyBuilder(runA, 0, 1, 1, 10, 10)
	var body jBody
	if err := json.Unmarshal(b.build(nil, now), &body); err != nil {
		t.Fatal(err)
	}
	if got := body.Impressions[0].OccurredAt; got != "2026-11-21T09:00:00.123Z" {
		t.Errorf("occurredAt = %q", got)
	}
	if len(seen) != 2*3*20*(50+1+7+100+200) {
		t.Errorf("%d ids, want all distinct", len(seen))
	}
}

func TestBuildBodyDeterministicContent(t *testing.T) {
	var run [8]byte
	now := time.Unix(1_800_000_000, 0)
	a := newBodyBuilder(run, 3, 7, 50, 100, 100).build(nil, now)
	b := newBodyBuilder(run, 3, 7, 50, 100, 100).build(nil, now)
	if !bytes.Equal(a, b) {
		t.Error("same seed, worker and run id gave different bodies")
	}
}

func BenchmarkBuildBody(b *testing.B) {
	var run [8]byte
	bb := newBodyBuilder(run, 0, 1, defaultBatchSize, defaultUsers, defaultProducts)
	buf := make([]byte, 0, bb.sizeHint())
	now := time.Now()
	buf = bb.build(buf, now)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = bb.build(buf, now)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bb.events()), "ns/event")
}
