package loadgen

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// quick is a short test configuration: no warmup, few workers.
func quick(url string) EventsConfig {
	return EventsConfig{URL: url, APIKey: "TSE_test", Duration: 700 * time.Millisecond, Warmup: -1, Concurrency: 4, Seed: 1}
}

func mustRun(t *testing.T, cfg EventsConfig) (Report, time.Duration) {
	t.Helper()
	start := time.Now()
	rep, err := RunEvents(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	t.Logf("wall %v\n%s", wall, rep)
	return rep, wall
}

func checkLatencies(t *testing.T, rep Report) {
	t.Helper()
	if !(0 < rep.P50 && rep.P50 <= rep.P90 && rep.P90 <= rep.P99 && rep.P99 <= rep.P999 && rep.P999 <= rep.Max) {
		t.Errorf("latencies not ordered: p50 %v p90 %v p99 %v p999 %v max %v", rep.P50, rep.P90, rep.P99, rep.P999, rep.Max)
	}
}

func TestRunAgainstBare(t *testing.T) {
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	cfg := quick(srv.URL)
	rep, wall := mustRun(t, cfg)
	if rep.Requests == 0 || rep.OK != rep.Requests || rep.Failed != 0 {
		t.Fatalf("requests %d ok %d failed %d", rep.Requests, rep.OK, rep.Failed)
	}
	if rep.Events != rep.Requests*50 {
		t.Errorf("events %d, want %d", rep.Events, rep.Requests*50)
	}
	if rep.Statuses[200] != rep.Requests || len(rep.Statuses) != 1 {
		t.Errorf("statuses %v", rep.Statuses)
	}
	if rep.Elapsed != 700*time.Millisecond || rep.Stopped != "duration" {
		t.Errorf("elapsed %v stopped %q", rep.Elapsed, rep.Stopped)
	}
	if wall > 1500*time.Millisecond {
		t.Errorf("run took %v", wall)
	}
	if !rep.LatencyExact || rep.FirstError != "" || rep.WarmupRequests != 0 {
		t.Errorf("exact %v first error %q warmup %d", rep.LatencyExact, rep.FirstError, rep.WarmupRequests)
	}
	if rep.bufDrops > int64(cfg.Concurrency) { // only requests cut off at the end may leave a buffer behind
		t.Errorf("%d body buffers dropped", rep.bufDrops)
	}
	if rep.EventsOKAll < rep.Events || rep.EventsSentAll < rep.EventsOKAll {
		t.Errorf("whole-run events sent %d ok %d, measured %d", rep.EventsSentAll, rep.EventsOKAll, rep.Events)
	}
	checkLatencies(t, rep)
}

// Every body that reaches the server is a valid batch with ids unique across the run, and the headers
// are those of an SDK client.
func TestRunBodiesReachServer(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var bodies, readErrors int
	var bad string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		mu.Lock()
		switch {
		case err != nil:
			readErrors++ // a request cut off by the end of the run
		case r.Method != http.MethodPost || r.URL.Path != "/v2/events":
			bad = r.Method + " " + r.URL.Path
		case r.Header.Get("Authorization") != "Bearer TSE_test" || r.Header.Get("Content-Type") != "application/json":
			bad = "headers " + r.Header.Get("Authorization") + " " + r.Header.Get("Content-Type")
		default:
			if got := checkBody(t, body, seen, 300, 200); got != splitBatch(20) {
				bad = "counts"
			}
			bodies++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer srv.Close()
	cfg := quick(srv.URL + "/") // a trailing slash must not give //v2/events
	cfg.BatchSize, cfg.Users, cfg.Products, cfg.Duration = 20, 300, 200, 400*time.Millisecond
	rep, _ := mustRun(t, cfg)
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Fatal(bad)
	}
	if int64(readErrors) > rep.Abandoned {
		t.Errorf("%d bodies cut short, only %d requests abandoned", readErrors, rep.Abandoned)
	}
	if bodies == 0 || int64(bodies) < rep.Requests || rep.Events != rep.Requests*20 {
		t.Errorf("server saw %d bodies, report %d requests %d events", bodies, rep.Requests, rep.Events)
	}
	if len(seen) != bodies*20 {
		t.Errorf("%d distinct ids in %d bodies", len(seen), bodies)
	}
}

func TestRun503(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"errCode":"service_unavailable"}`)
	}))
	defer srv.Close()
	rep, _ := mustRun(t, quick(srv.URL))
	if rep.Requests == 0 || rep.Failed != rep.Requests || rep.OK != 0 || rep.Events != 0 {
		t.Fatalf("requests %d ok %d failed %d events %d", rep.Requests, rep.OK, rep.Failed, rep.Events)
	}
	if rep.Statuses[503] != rep.Requests {
		t.Errorf("statuses %v", rep.Statuses)
	}
	if !strings.Contains(rep.FirstError, "503") || !strings.Contains(rep.FirstError, "service_unavailable") {
		t.Errorf("first error %q", rep.FirstError)
	}
	checkLatencies(t, rep)
}

// A server that drops the connection in the middle of the request: transport errors, and the run still
// ends on time.
func TestRunConnectionClosed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var part [100]byte
		io.ReadFull(r.Body, part[:]) // some of the body, then hang up
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // reset, not a clean close
		}
		conn.Close()
	}))
	defer srv.Close()
	rep, wall := mustRun(t, quick(srv.URL))
	if rep.Requests == 0 || rep.Statuses[0] != rep.Requests || rep.Failed != rep.Requests || rep.OK != 0 {
		t.Fatalf("requests %d statuses %v failed %d", rep.Requests, rep.Statuses, rep.Failed)
	}
	if rep.FirstError == "" {
		t.Error("no first error")
	}
	if wall > 1500*time.Millisecond || rep.Elapsed != 700*time.Millisecond {
		t.Errorf("wall %v elapsed %v", wall, rep.Elapsed)
	}
}

// A server that never answers: requests in flight at the end are abandoned and the run stops on time,
// though the per-request timeout is longer than the run.
func TestRunHangingServerStopsOnTime(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := quick(srv.URL)
	cfg.Duration = 400 * time.Millisecond
	rep, wall := mustRun(t, cfg)
	if wall > time.Second {
		t.Errorf("run took %v", wall)
	}
	if rep.Requests != 0 || rep.Abandoned != int64(cfg.Concurrency) || rep.Elapsed != cfg.Duration {
		t.Errorf("requests %d abandoned %d elapsed %v", rep.Requests, rep.Abandoned, rep.Elapsed)
	}
	if rep.EventsSentAll != int64(cfg.Concurrency)*50 || rep.EventsOKAll != 0 {
		t.Errorf("events sent %d ok %d", rep.EventsSentAll, rep.EventsOKAll)
	}
}

func TestRunPerRequestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices when the client hangs up
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}))
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Timeout = 100 * time.Millisecond
	cfg.Concurrency = 2
	rep, _ := mustRun(t, cfg)
	if rep.Requests < 8 || rep.Statuses[0] != rep.Requests {
		t.Fatalf("requests %d statuses %v", rep.Requests, rep.Statuses)
	}
	if rep.P50 < 100*time.Millisecond || rep.P50 > 300*time.Millisecond {
		t.Errorf("p50 %v, want about the timeout", rep.P50)
	}
	if !strings.Contains(rep.FirstError, "deadline") {
		t.Errorf("first error %q", rep.FirstError)
	}
}

func TestRunMaxRequests(t *testing.T) {
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Duration = 10 * time.Second
	cfg.MaxRequests = 37
	rep, wall := mustRun(t, cfg)
	if rep.Requests != 37 || rep.OK != 37 || rep.Events != 37*50 || rep.Stopped != "max_requests" {
		t.Fatalf("requests %d ok %d events %d stopped %q", rep.Requests, rep.OK, rep.Events, rep.Stopped)
	}
	if wall > 2*time.Second || rep.Elapsed <= 0 || rep.Elapsed > wall {
		t.Errorf("wall %v elapsed %v", wall, rep.Elapsed)
	}
	if rep.RequestsPerSec <= 0 {
		t.Errorf("rate %v", rep.RequestsPerSec)
	}
}

func TestRunWarmup(t *testing.T) {
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Warmup, cfg.Duration = 300*time.Millisecond, 500*time.Millisecond
	rep, wall := mustRun(t, cfg)
	if rep.WarmupRequests == 0 || rep.Requests == 0 || rep.Elapsed != 500*time.Millisecond {
		t.Errorf("warmup %d requests %d elapsed %v", rep.WarmupRequests, rep.Requests, rep.Elapsed)
	}
	if wall < 800*time.Millisecond || wall > 1500*time.Millisecond {
		t.Errorf("wall %v", wall)
	}
	if want := (rep.Requests + rep.WarmupRequests) * 50; rep.EventsOKAll < want {
		t.Errorf("events ok (all) %d < %d", rep.EventsOKAll, want)
	}
}

func TestRunCancel(t *testing.T) {
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Duration = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep, err := RunEvents(ctx, cfg)
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != "canceled" || wall > time.Second || rep.Requests == 0 {
		t.Errorf("stopped %q wall %v requests %d", rep.Stopped, wall, rep.Requests)
	}
	if rep.Elapsed < 250*time.Millisecond || rep.Elapsed > wall {
		t.Errorf("elapsed %v (wall %v)", rep.Elapsed, wall)
	}
}

func TestRunOpenLoopRate(t *testing.T) {
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Rate, cfg.Duration = 200, time.Second
	rep, _ := mustRun(t, cfg)
	if rep.Requests < 180 || rep.Requests > 201 || rep.OK != rep.Requests {
		t.Errorf("requests %d ok %d at 200/s for 1s", rep.Requests, rep.OK)
	}
	if rep.Unsent != 0 || rep.TargetRate != 200 {
		t.Errorf("unsent %d target %v", rep.Unsent, rep.TargetRate)
	}
	checkLatencies(t, rep)
}

// In open loop a server slower than the target rate shows latencies that grow with the backlog, measured
// from the due time, not the ~20 ms service time a closed loop would see.
func TestRunOpenLoopCoordinatedOmission(t *testing.T) {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock() // one at a time, 20 ms each: 50 requests/s at most
		time.Sleep(20 * time.Millisecond)
		mu.Unlock()
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Rate, cfg.Duration, cfg.Concurrency = 100, time.Second, 2
	rep, wall := mustRun(t, cfg)
	if rep.Requests < 30 || rep.Requests > 60 {
		t.Errorf("requests %d", rep.Requests)
	}
	if rep.P99 < 250*time.Millisecond {
		t.Errorf("p99 %v: latency not measured from the due time", rep.P99)
	}
	if rep.Unsent < 30 {
		t.Errorf("unsent %d", rep.Unsent)
	}
	if wall > 1500*time.Millisecond {
		t.Errorf("wall %v", wall)
	}
}

func TestRunHistogramFallback(t *testing.T) {
	defer func(n int) { maxLatencySamples = n }(maxLatencySamples)
	maxLatencySamples = 40 // 10 per worker
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Duration = 300 * time.Millisecond
	rep, _ := mustRun(t, cfg)
	if rep.Requests <= 40 || rep.LatencyExact {
		t.Fatalf("requests %d exact %v", rep.Requests, rep.LatencyExact)
	}
	checkLatencies(t, rep)
}

func TestRunConfigErrors(t *testing.T) {
	for _, cfg := range []EventsConfig{
		{},
		{URL: "ftp://x"},
		{URL: "127.0.0.1:8080"},
		{URL: "http://x", BatchSize: 201},
		{URL: "http://x", Concurrency: -1},
		{URL: "http://x", Concurrency: 5000},
		{URL: "http://x", Rate: -1},
	} {
		if _, err := RunEvents(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestRunRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := quick("http://" + addr)
	cfg.Duration = 200 * time.Millisecond
	rep, wall := mustRun(t, cfg)
	if rep.Requests == 0 || rep.Statuses[0] != rep.Requests || wall > time.Second {
		t.Errorf("requests %d statuses %v wall %v", rep.Requests, rep.Statuses, wall)
	}
}

func TestReportJSON(t *testing.T) {
	rep := Report{
		Requests: 10, OK: 9, Failed: 1, Statuses: map[int]int64{200: 9, 0: 1}, Events: 450,
		Elapsed: 2 * time.Second, EventsPerSec: 225, RequestsPerSec: 5,
		P50: 1500 * time.Microsecond, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond,
		P999: 4 * time.Millisecond, Max: 5 * time.Millisecond, Mean: 1600 * time.Microsecond,
		LatencyExact: true, FirstError: "EOF", Stopped: "duration", Concurrency: 32, BatchSize: 50,
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"requests": 10.0, "ok": 9.0, "failed": 1.0, "events": 450.0, "elapsed_ms": 2000.0, "p50_ms": 1.5,
		"p90_ms": 2.0, "p99_ms": 3.0, "p999_ms": 4.0, "max_ms": 5.0, "events_per_sec": 225.0,
		"requests_per_sec": 5.0, "first_error": "EOF", "stopped": "duration", "latency_exact": true,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v (%s)", k, m[k], want, b)
		}
	}
	if st, _ := m["statuses"].(map[string]any); st["200"] != 9.0 || st["0"] != 1.0 {
		t.Errorf("statuses %v", m["statuses"])
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.P50 != rep.P50 || back.Statuses[0] != 1 || back.Elapsed != rep.Elapsed || back.FirstError != "EOF" {
		t.Errorf("round trip: %+v", back)
	}
	s := rep.String()
	for _, want := range []string{"closed loop", "225 events/s", "p50 1.500ms", "transport-error=1", "first error: EOF"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}

// The timeline puts a stall in the seconds it happened: a server that holds every request for 60 ms
// during the second second of an open-loop run shows slow requests there and nowhere else.
func TestRunTimelineLocatesAStall(t *testing.T) {
	var start time.Time
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		once.Do(func() { start = time.Now() })
		if since := time.Since(start); since >= 1100*time.Millisecond && since < 1900*time.Millisecond {
			time.Sleep(60 * time.Millisecond)
		}
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Rate, cfg.Duration, cfg.Concurrency, cfg.SlowAfter = 200, 3*time.Second, 24, 30*time.Millisecond
	rep, _ := mustRun(t, cfg)
	if len(rep.Timeline) != 3 {
		t.Fatalf("timeline %+v, want 3 seconds", rep.Timeline)
	}
	var total int64
	for _, s := range rep.Timeline {
		total += s.Requests
	}
	if total != rep.Requests {
		t.Errorf("timeline counts %d requests, the report %d", total, rep.Requests)
	}
	if s := rep.Timeline[1]; s.Slow < s.Requests/2 || s.Max < 60*time.Millisecond {
		t.Errorf("second 1 %+v: the stall is not there", s)
	}
	for _, i := range []int{0, 2} {
		if s := rep.Timeline[i]; s.Slow > s.Requests/4 {
			t.Errorf("second %d %+v: slow outside the stall", i, s)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.MeasureStart.Equal(rep.MeasureStart) || time.Since(rep.MeasureStart) > time.Minute {
		t.Errorf("measure start %v, back %v", rep.MeasureStart, back.MeasureStart)
	}
	if len(back.Timeline) != 3 || back.Timeline[1] != roundedSecond(rep.Timeline[1]) {
		t.Errorf("JSON round trip: %+v, want %+v (%s)", back.Timeline, rep.Timeline, b)
	}
}

// roundedSecond is s as its JSON keeps it (Max through milliseconds).
func roundedSecond(s Second) Second { s.Max = fromMS(ms(s.Max)); return s }
