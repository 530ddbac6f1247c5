package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventIDs are the ids of a body's events, in order.
func eventIDs(body []byte) ([]string, error) {
	var b map[string][]struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	var ids []string
	for _, kind := range []string{"impressions", "clicks", "purchases", "pageviews"} {
		for _, it := range b[kind] {
			ids = append(ids, it.ID)
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("no events")
	}
	return ids, nil
}

// The event ids of a request share its key (lastRequestKey), the id less its last two hex digits, which
// are the event's index in the request; the keys of a worker's requests count up; an id prefix replaces
// the start of the run-random part and leaves the ids UUID-shaped.
func TestRequestKeys(t *testing.T) {
	var run [8]byte
	run[0] = 0xff
	for _, tc := range []struct {
		prefix     string
		batch      int
		wantPrefix string
	}{
		{"", 50, "ff"},
		{"0", 7, "0f"},
		{"abc123", 200, "abc123"},
		{"deadbeef", 1, "deadbeef-"},
	} {
		b := newBodyBuilder(run, 5, 1, tc.batch, 100, 100)
		if tc.prefix != "" {
			b.setIDPrefix(tc.prefix)
		}
		if b.lastRequestKey() != "" {
			t.Fatalf("a key before the first build: %q", b.lastRequestKey())
		}
		var keys []string
		for req := 0; req < 3; req++ {
			ids, err := eventIDs(b.build(nil, time.Now()))
			key := b.lastRequestKey()
			if err != nil || len(ids) != tc.batch || len(key) != requestKeyLen {
				t.Fatalf("prefix %q batch %d: %d ids (%v), key %q", tc.prefix, tc.batch, len(ids), err, key)
			}
			if !strings.HasSuffix(key, fmt.Sprintf("-8005-%010x", req)) {
				t.Errorf("request %d of worker 5: key %q", req, key)
			}
			for i, id := range ids {
				if !reUUID.MatchString(id) || !strings.HasPrefix(id, tc.wantPrefix) || id[:requestKeyLen] != key {
					t.Fatalf("prefix %q: id %q of request key %q", tc.prefix, id, key)
				}
				if n, err := strconv.ParseUint(id[requestKeyLen:], 16, 8); err != nil || int(n) != i {
					t.Fatalf("id %q is event %d of its request", id, i)
				}
			}
			keys = append(keys, key)
		}
		if !slices.IsSorted(keys) || len(slices.Compact(keys)) != 3 {
			t.Errorf("keys %v do not count up", keys)
		}
	}
}

// A server that sheds two requests in three at once (503, by the request number in the ids) and answers
// the third after 30 ms: Report.Failures holds exactly the keys it shed, and the 2xx percentiles are the
// slow answers' while the percentiles of all requests are the 503s'. Both with every sample kept and with
// the histograms (a worker's samples overflowed).
func TestRunFailuresAndOKLatency(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxSamples int
	}{
		{"exact", 5_000_000},
		{"histogram", 16}, // 4 per worker
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(n int) { maxLatencySamples = n }(maxLatencySamples)
			maxLatencySamples = tc.maxSamples
			var mu sync.Mutex
			shed, answered := map[string]bool{}, map[string]bool{}
			var bad string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return // cut off by the end of the run
				}
				ids, err := eventIDs(body)
				mu.Lock()
				if err != nil || len(ids[0]) < requestKeyLen {
					bad = fmt.Sprintf("body %v: %.100s", err, body)
					mu.Unlock()
					return
				}
				key := ids[0][:requestKeyLen]
				req, _ := strconv.ParseUint(key[len(key)-10:], 16, 64)
				for _, id := range ids {
					if !strings.HasPrefix(id, key) || !strings.HasPrefix(id, "0a1") {
						bad = "id " + id + " of request " + key
					}
				}
				if req%3 != 0 {
					shed[key] = true
					mu.Unlock()
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				answered[key] = true
				mu.Unlock()
				time.Sleep(30 * time.Millisecond)
				io.WriteString(w, `{}`)
			}))
			defer srv.Close()
			cfg := quick(srv.URL)
			cfg.BatchSize, cfg.IDPrefix, cfg.RecordFailures = 10, "0a1", true
			rep, _ := mustRun(t, cfg)
			mu.Lock()
			defer mu.Unlock()
			if bad != "" {
				t.Fatal(bad)
			}
			if rep.OK == 0 || rep.Statuses[503] < rep.OK || rep.OK > int64(len(answered)) {
				t.Fatalf("statuses %v", rep.Statuses)
			}
			got := map[string]int{}
			for _, f := range rep.Failures {
				if _, dup := got[f.Key]; dup || len(f.Key) != requestKeyLen {
					t.Fatalf("failure %+v twice or malformed", f)
				}
				got[f.Key] = f.Status
				switch f.Status {
				case 503:
					if !shed[f.Key] {
						t.Errorf("%s reported 503, the server did not shed it", f.Key)
					}
				case StatusUnanswered: // cut off by the end of the run, wherever it was
				default:
					t.Errorf("failure %+v", f)
				}
			}
			for k := range shed {
				if _, ok := got[k]; !ok {
					t.Errorf("the server shed %s; not among the failures", k)
				}
			}
			if rep.OKP50 < 30*time.Millisecond || rep.OKP99 < rep.OKP50 || rep.OKP99 > rep.Max {
				t.Errorf("2xx p50 %v p99 %v (max %v)", rep.OKP50, rep.OKP99, rep.Max)
			}
			if rep.P50 >= 30*time.Millisecond {
				t.Errorf("p50 of all requests %v: not the 503s'", rep.P50)
			}
			if exact := tc.maxSamples > 1000; rep.LatencyExact != exact {
				t.Errorf("exact %v", rep.LatencyExact)
			}
			b, _ := json.Marshal(rep)
			var back Report
			if err := json.Unmarshal(b, &back); err != nil || back.OKP50 != rep.OKP50 || back.OKP99 == 0 {
				t.Errorf("JSON round trip: %v, %s", err, b)
			}
			if !strings.Contains(rep.String(), "2xx alone p50") {
				t.Errorf("String() lacks the 2xx latency:\n%s", rep)
			}
		})
	}
}

// Without RecordFailures nothing is kept.
func TestRunNoFailuresRecorded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	cfg := quick(srv.URL)
	cfg.Duration = 200 * time.Millisecond
	rep, _ := mustRun(t, cfg)
	if rep.Failed == 0 || rep.Failures != nil || rep.OKP50 != 0 {
		t.Errorf("failed %d, failures %d, 2xx p50 %v", rep.Failed, len(rep.Failures), rep.OKP50)
	}
}

func TestIDPrefixErrors(t *testing.T) {
	for _, p := range []string{"ABC", "123456789", "xyz", "ab-c"} {
		if _, err := RunEvents(t.Context(), EventsConfig{URL: "http://x", IDPrefix: p}); err == nil {
			t.Errorf("id prefix %q: no error", p)
		}
	}
}

func TestWriteFailures(t *testing.T) {
	var b bytes.Buffer
	err := WriteFailures(&b, []Failure{{"k1", 503}, {"k2", 0}, {"k3", StatusUnanswered}})
	if want := "k1\t503\nk2\t0\nk3\t-1\n"; err != nil || b.String() != want {
		t.Errorf("%q, %v; want %q", b.String(), err, want)
	}
}
