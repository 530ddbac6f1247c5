package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/testkit/testenv"
)

// otlpSpan is a span as an OTLP receiver got it.
type otlpSpan struct {
	Service, Name     string
	Trace, ID, Parent string
	Links             []string // trace/span of each link
	Attrs             map[string]string
	StatusError       bool
	Start, End        time.Time
}

// otlpReceiver is an in-process OTLP/HTTP traces receiver: it decodes each
// ExportTraceServiceRequest (protobuf) it is sent.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []otlpSpan
	bad   []string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != "POST" || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			r.fail(fmt.Sprintf("%s %s %s", req.Method, req.URL.Path, req.Header.Get("Content-Type")))
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				r.fail(err.Error())
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var msg coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil {
			r.fail(err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *otlpReceiver) fail(msg string) {
	r.mu.Lock()
	r.bad = append(r.bad, msg)
	r.mu.Unlock()
}

func (r *otlpReceiver) add(msg *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := otlpSpan{Service: service, Name: s.Name, Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId),
					Parent: hex.EncodeToString(s.ParentSpanId), Attrs: map[string]string{},
					StatusError: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Start:       time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano))}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, hex.EncodeToString(l.TraceId)+"/"+hex.EncodeToString(l.SpanId))
				}
				for _, a := range s.Attributes {
					v := a.GetValue()
					switch {
					case v.GetStringValue() != "":
						sp.Attrs[a.Key] = v.GetStringValue()
					default:
						sp.Attrs[a.Key] = fmt.Sprint(v.GetIntValue())
					}
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

// find returns the spans for which match is true.
func (r *otlpReceiver) find(match func(otlpSpan) bool) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

// TestTraces: with ENDCAP_OTEL_ENDPOINT set, an operator follows one click
// from its request to its ClickHouse rows and its charge: the request's
// span continues the client's traceparent, the record it produced has a
// publish span in that trace (and the trace context in its headers), and
// the events fold's batch span links to it, with the inserts of
// interactions_raw (where a click is stored) and charges_raw and the charge
// in Redis as its children.
// An export's job runs in the trace of the request that asked for it.
func TestTraces(t *testing.T) {
	rec := startOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // ms: spans are sent at once
	s, _ := cpStartWith(t, func(c *config.Config) {
		c.OTelEndpoint = rec.URL
		c.OTelSampleRatio = 1
	})
	key := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v1","name":"V1"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, nil), 200)
	c := auCampaign(t, s, "v1", `{"name":"Traced","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, c, "product", "p1", "1")
	var tok string
	testenv.Eventually(t, 30*time.Second, func() error {
		res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}}]}`)
		if len(res) != 1 || len(res[0].Winners) != 1 {
			return fmt.Errorf("no winner yet: %+v", res)
		}
		tok = res[0].Winners[0].ResolvedBidID
		return nil
	})

	// The click, in the client's trace.
	const clickTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	hdr := map[string]string{"traceparent": "00-" + clickTrace + "-00f067aa0ba902b7-01"}
	body := fmt.Sprintf(`{"clicks":[{"id":"traced-click","occurredAt":%q,"opaqueUserId":"u1","resolvedBidId":%q}]}`, ts(time.Now()), tok)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(body), hdr), 200)

	var req, pub, batch otlpSpan
	testenv.Eventually(t, 60*time.Second, func() error {
		reqs := rec.find(func(x otlpSpan) bool { return x.Trace == clickTrace && x.Name == "POST /v2/events" })
		if len(reqs) != 1 {
			return fmt.Errorf("request spans in the click's trace: %d", len(reqs))
		}
		req = reqs[0]
		pubs := rec.find(func(x otlpSpan) bool {
			return x.Trace == clickTrace && x.Parent == req.ID && strings.HasSuffix(x.Name, " publish")
		})
		if len(pubs) != 1 {
			return fmt.Errorf("publish spans under the request: %d", len(pubs))
		}
		pub = pubs[0]
		batches := rec.find(func(x otlpSpan) bool {
			return x.Name == "endcap-projector-events batch" && strings.Contains(strings.Join(x.Links, ","), clickTrace+"/"+pub.ID)
		})
		if len(batches) != 1 {
			return fmt.Errorf("events fold batches linked to the click's record: %d", len(batches))
		}
		batch = batches[0]
		for _, name := range []string{"clickhouse insert interactions_raw", "clickhouse insert charges_raw", "charges apply"} {
			if n := len(rec.find(func(x otlpSpan) bool { return x.Trace == batch.Trace && x.Parent == batch.ID && x.Name == name })); n != 1 {
				var under []string
				for _, x := range rec.find(func(x otlpSpan) bool { return x.Trace == batch.Trace }) {
					under = append(under, x.Name+" parent "+x.Parent)
				}
				return fmt.Errorf("%q spans under the batch %s: %d; its trace: %v", name, batch.ID, n, under)
			}
		}
		return nil
	})
	if req.Service != "endcap-all" || req.Attrs["http.route"] != "/v2/events" || req.Attrs["http.response.status_code"] != "200" || req.Parent != "00f067aa0ba902b7" {
		t.Errorf("request span: %+v", req)
	}
	if batch.Trace == clickTrace || batch.StatusError {
		t.Errorf("batch span: %+v", batch)
	}
	ins := rec.find(func(x otlpSpan) bool { return x.Parent == batch.ID && x.Name == "clickhouse insert charges_raw" })[0]
	if ins.Attrs["endcap.clickhouse.table"] != "charges_raw" || ins.Attrs["endcap.rows"] != "1" {
		t.Errorf("charges insert span: %+v", ins)
	}
	// The charge is in ClickHouse (what the spans say happened did).
	if n := s.count(t, "SELECT count() FROM charges WHERE marketplace_id = ? AND event_id = 'traced-click'", s.Marketplace.ID); n != 1 {
		t.Errorf("charges of the traced click: %d", n)
	}

	// An export's job belongs to the trace of its request.
	const exportTrace = "0af7651916cd43dd8448eb211c80319c"
	day := time.Now().UTC().Format("2006-01-02")
	r := s.request(t, "POST", "/public/v1/export-service/exports", key, []byte(`{"dataset":"monitoring_metrics","dimensions":["day_local","campaign_id"],`+
		`"metrics":["impressions","clicks"],"granularity":"day_local","startDate":"`+day+`","endDate":"`+day+`","format":"csv"}`),
		map[string]string{"traceparent": "00-" + exportTrace + "-b7ad6b7169203331-01"})
	cpStatus(t, r, 202)
	testenv.Eventually(t, 60*time.Second, func() error {
		jobs := rec.find(func(x otlpSpan) bool { return x.Trace == exportTrace && x.Name == "export job" })
		if len(jobs) != 1 {
			return fmt.Errorf("export job spans in the request's trace: %d", len(jobs))
		}
		if n := len(rec.find(func(x otlpSpan) bool { return x.Parent == jobs[0].ID && x.Name == "export attempt" })); n != 1 {
			return fmt.Errorf("export attempts under the job: %d", n)
		}
		return nil
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bad) > 0 {
		t.Errorf("the receiver refused: %v", rec.bad)
	}
}
