package api

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/telemetry"
)

// readSpy is a request body that records whether anything read it.
type readSpy struct {
	io.Reader
	read atomic.Bool
}

func (r *readSpy) Read(p []byte) (int, error) { r.read.Store(true); return r.Reader.Read(p) }

// TestAdmission: with its bound of requests in flight, the next request is
// answered 503 with Retry-After and the /v2 error body at once, its body
// unread and its handler not called, while those in flight go on; once one
// finishes, a request is admitted again. A bound of 0 admits everything.
func TestAdmission(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, tc := range []struct {
		name  string
		limit int
		held  int // requests held in the handler before the probe
		shed  bool
	}{
		{"below the bound", 3, 2, false},
		{"at the bound", 2, 2, true},
		{"no bound", 0, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdmission("events", tc.limit)
			d := &Deps{RetryAfter: 2 * time.Second}
			release := make(chan struct{})
			var entered sync.WaitGroup
			var calls atomic.Int32
			r := gin.New()
			r.POST("/v2/events", a.handler(d), func(c *gin.Context) {
				if calls.Add(1) <= int32(tc.held) {
					entered.Done()
					<-release
				}
				_, _ = io.Copy(io.Discard, c.Request.Body)
				c.Status(200)
			})
			var wg sync.WaitGroup
			entered.Add(tc.held)
			for range tc.held {
				wg.Go(func() {
					w := httptest.NewRecorder()
					r.ServeHTTP(w, httptest.NewRequest("POST", "/v2/events", strings.NewReader("{}")))
					if w.Code != 200 {
						t.Errorf("held request: %d", w.Code)
					}
				})
			}
			entered.Wait()
			if tc.limit > 0 && a.inFlight() != tc.held {
				t.Fatalf("in flight: %d, want %d", a.inFlight(), tc.held)
			}
			before := testutil.ToFloat64(telemetry.AdmissionShed.WithLabelValues("events"))
			body := &readSpy{Reader: strings.NewReader(`{"impressions":[]}`)}
			w := httptest.NewRecorder()
			began := time.Now()
			r.ServeHTTP(w, httptest.NewRequest("POST", "/v2/events", body))
			took := time.Since(began)
			shedCount := testutil.ToFloat64(telemetry.AdmissionShed.WithLabelValues("events")) - before
			if tc.shed {
				var e v2Error
				if w.Code != 503 || w.Header().Get("Retry-After") != "2" || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.ErrCode != "service_unavailable" || !strings.Contains(e.Message, "limit of 2 events requests") {
					t.Errorf("shed: %d, Retry-After %q, %s", w.Code, w.Header().Get("Retry-After"), w.Body)
				}
				if body.read.Load() || calls.Load() != int32(tc.held) {
					t.Errorf("shed request read (%v) or handled (%d calls)", body.read.Load(), calls.Load())
				}
				if took > time.Second {
					t.Errorf("shed after %v, not at once", took)
				}
				if shedCount != 1 {
					t.Errorf("shed counter moved by %v, want 1", shedCount)
				}
			} else if w.Code != 200 || shedCount != 0 {
				t.Errorf("admitted: %d, shed counter +%v", w.Code, shedCount)
			}
			close(release)
			wg.Wait()
			if a.inFlight() != 0 {
				t.Errorf("slots still held after the requests: %d", a.inFlight())
			}
			// Room again: admitted.
			w = httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest("POST", "/v2/events", strings.NewReader("{}")))
			if w.Code != 200 {
				t.Errorf("after the release: %d", w.Code)
			}
		})
	}
}

// TestForeground: the requests admitted count as in flight at the gate of
// the process's background work while their handlers run, a shed request
// not at all, and none once they answered.
func TestForeground(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	g := priority.NewGate(time.Hour)
	a := newAdmission("events", 2)
	d := &Deps{RetryAfter: time.Second}
	release := make(chan struct{})
	var entered sync.WaitGroup
	var busy atomic.Int64
	r := gin.New()
	r.POST("/v2/events", a.handler(d), foreground(g), func(c *gin.Context) {
		busy.Store(g.Busy())
		entered.Done()
		<-release
		c.Status(200)
	})
	entered.Add(2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v2/events", strings.NewReader("{}")))
		})
	}
	entered.Wait()
	if got := g.Busy(); got != 2 {
		t.Fatalf("%d requests in flight at the gate, want 2", got)
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("POST", "/v2/events", strings.NewReader("{}")))
	if w.Code != 503 || g.Busy() != 2 {
		t.Fatalf("the shed request: status %d, %d in flight at the gate (want 503, 2)", w.Code, g.Busy())
	}
	close(release)
	wg.Wait()
	if got := g.Busy(); got != 0 {
		t.Fatalf("%d requests in flight at the gate after they answered", got)
	}
	if busy.Load() < 1 {
		t.Fatalf("a handler saw %d requests in flight", busy.Load())
	}
}
