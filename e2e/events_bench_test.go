package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/testkit/testenv"
)

// BenchmarkEventsHandler measures POST /v2/events over HTTP (loopback) on
// an in-process system: a batch of 50 impressions parsed, produced to Kafka
// (kfake, in-process) and acknowledged, per operation. It is how a change
// of the request path (middleware, producer hooks) is compared with its
// base: alternate runs of both and compare medians.
//
//	ENDCAP_TEST_REQUIRE_STACK=1 go test ./e2e -run x -bench EventsHandler -benchtime 2000x -count 5
func BenchmarkEventsHandler(b *testing.B) {
	env := testenv.Get(b)
	_, brokers := testenv.Kafka(b)
	s := startSystem(b, env.Config(b, brokers))
	var items []string
	at := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	for i := range 50 {
		items = append(items, fmt.Sprintf(`{"id":"bench-%d","occurredAt":%q,"opaqueUserId":"u-%d","entity":{"type":"product","id":"P%d"}}`, i, at, i, i))
	}
	body := []byte(`{"impressions":[` + strings.Join(items, ",") + `]}`)
	cl := &http.Client{Timeout: 10 * time.Second}
	post := func() {
		req, _ := http.NewRequest("POST", s.URL+"/v2/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.MarketplaceKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("POST /v2/events: %d", resp.StatusCode)
		}
	}
	for range 50 { // warm the connection and the producer
		post()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		post()
	}
}
