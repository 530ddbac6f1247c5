package ingest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/jsontext"
)

// benchBody is a realistic full batch of 50 events: 20 impressions with
// entity, placement and page, 10 clicks, 10 purchases with 2 items each and
// 10 pageviews, with UUID ids and millisecond UTC times as the JS SDK sends.
func benchBody() []byte {
	ts := func(i int) string {
		return time.UnixMilli(testNow).Add(-time.Duration(i) * 1700 * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	id := func(k, i int) string { return fmt.Sprintf("0190a1b2-%04x-7c3d-8e4f-%012x", k, i*7919) }
	user := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	bid := "ChAGkFv7wN1xqYcXmW9p1rTnEhABkFv7wN2Iy8Zl0dZQ3GgaEAGQW_vA3XGpxsNc8p3-V2sgBSIKCgE4EAE"
	var sb strings.Builder
	sb.WriteString(`{"impressions":[`)
	for i := range 20 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q,`+
			`"entity":{"type":"product","id":"p_%05d"},"placement":{"path":"/search?q=running+shoes","position":%d,"page":1,"pageSize":24,"searchQuery":"running shoes"},`+
			`"page":{"type":"search","pageId":"/search","value":"running shoes"},"deviceType":"mobile","channel":"onsite"}`,
			id(1, i), ts(i), user, bid, i, i+1)
	}
	sb.WriteString(`],"clicks":[`)
	for i := range 10 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q,"placement":{"path":"/search?q=running+shoes","position":%d},"clickType":"product","deviceType":"mobile"}`,
			id(2, i), ts(i), user, bid, i+1)
	}
	sb.WriteString(`],"purchases":[`)
	for i := range 10 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"items":[{"productId":"p_%05d","unitPrice":19.99,"quantity":2,"vendorId":"v_17"},{"productId":"p_%05d","unitPrice":4.5}],"deviceType":"mobile","channel":"onsite"}`,
			id(3, i), ts(i), user, i, i+100)
	}
	sb.WriteString(`],"pageviews":[`)
	for i := range 10 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"page":{"type":"PDP","pageId":"p_%05d"},"deviceType":"mobile","channel":"onsite"}`,
			id(4, i), ts(i), user, i)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

func BenchmarkParseRequest(b *testing.B) {
	body := benchBody()
	if evs, err := ParseRequest(body, testMarketplace, testNow); err != nil || len(evs) != 50 {
		b.Fatalf("%d events, %v", len(evs), err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(body, testMarketplace, testNow); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50, "ns/event")
}

// BenchmarkParseRequestReject measures a batch whose last event is invalid
// (the whole batch is walked, then rejected).
func BenchmarkParseRequestReject(b *testing.B) {
	body := benchBody()
	body = []byte(strings.Replace(string(body), `"unitPrice":4.5}],"deviceType":"mobile","channel":"onsite"}],"pageviews"`,
		`"unitPrice":0}],"deviceType":"mobile","channel":"onsite"}],"pageviews"`, 1))
	if _, err := ParseRequest(body, testMarketplace, testNow); err == nil {
		b.Fatal("accepted")
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ParseRequest(body, testMarketplace, testNow)
	}
}

// BenchmarkJSONValid is the floor set by the syntax check alone.
func BenchmarkJSONValid(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		json.Valid(body)
	}
}

// BenchmarkValidJSON is the syntax check ParseRequest uses (it also records
// where every array and object ends).
func BenchmarkValidJSON(b *testing.B) {
	body := benchBody()
	var s jsontext.Scanner
	s.Valid(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s.Valid(body)
	}
}

// BenchmarkParseRequestUnicode is BenchmarkParseRequest with non-ASCII
// text in the ids, search queries and page values (accented and CJK
// product ids, a Japanese query), which the UTF-8 check reads rune by rune.
func BenchmarkParseRequestUnicode(b *testing.B) {
	s := string(benchBody())
	s = strings.ReplaceAll(s, `"p_0`, `"prödukt-日本_0`)
	s = strings.ReplaceAll(s, "running shoes", "ランニングシューズ für Läufer")
	s = strings.ReplaceAll(s, "running+shoes", "%E3%83%A9")
	body := []byte(s)
	if evs, err := ParseRequest(body, testMarketplace, testNow); err != nil || len(evs) != 50 {
		b.Fatalf("%d events, %v", len(evs), err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(body, testMarketplace, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
