package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// writesEngine serves /public/v1 like New does (a principal of marketplace
// X-Marketplace, then Public.Writes) with the routes install adds.
func writesEngine(p *Public, install func(g *gin.RouterGroup)) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.ContextWithFallback = true
	pub := r.Group("/public/v1", func(c *gin.Context) {
		c.Set(principalKey, accounts.Principal{Key: accounts.APIKey{ID: "k"}, Marketplace: accounts.Marketplace{ID: c.GetHeader("X-Marketplace")}})
	}, p.Writes())
	install(pub)
	return r
}

func serve(r http.Handler, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

func errCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var b v2Error
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.DocURL == "" {
		t.Fatalf("not an error body: %d %s", w.Code, w.Body)
	}
	return b.ErrCode
}

// TestWriteDeadline: a write's context ends WriteTimeout after its body was
// read, and a write that waits on it answers 503 with Retry-After; reads
// are not bounded, the time spent waiting for the client's body does not
// count, and a client that goes away does not end a write.
func TestWriteDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := &Public{RetryAfter: 2 * time.Second, Log: quietLog, WriteTimeout: timeout, MaxBodyBytes: 1 << 20}
	var readErr atomic.Value
	r := writesEngine(p, func(g *gin.RouterGroup) {
		wait := func(c *gin.Context) {
			if _, err := io.ReadAll(c.Request.Body); err != nil {
				readErr.Store(err)
			}
			<-c.Request.Context().Done() // a write waiting on a hung broker
			p.Fail(c, fmt.Errorf("%w: %w", statelog.ErrInFlight, context.Cause(c.Request.Context())))
		}
		g.PUT("/wait", wait)
		g.POST("/wait", wait)
		g.DELETE("/wait", wait)
		g.PATCH("/ignore-body", func(c *gin.Context) { // never reads its body
			<-c.Request.Context().Done()
			p.Fail(c, c.Request.Context().Err())
		})
		g.GET("/read", func(c *gin.Context) {
			select {
			case <-c.Request.Context().Done():
				c.Status(http.StatusGatewayTimeout)
			case <-time.After(2 * timeout):
				c.Status(http.StatusOK)
			}
		})
		g.POST("/quick", func(c *gin.Context) {
			time.Sleep(timeout / 2) // the client has gone by now
			if err := c.Request.Context().Err(); err != nil {
				c.Status(http.StatusInternalServerError)
				return
			}
			c.Status(http.StatusNoContent)
		})
	})
	within := func(name string, start time.Time, want time.Duration) {
		t.Helper()
		// The upper bound is loose: a loaded two-core machine delays goroutines by
		// hundreds of milliseconds, and the failures this test is after are a write
		// with no deadline (it waits for ever) or one that counts the body's time.
		if took := time.Since(start); took < want-20*time.Millisecond || took > want+700*time.Millisecond {
			t.Errorf("%s answered after %s, want about %s", name, took.Round(time.Millisecond), want)
		}
	}
	for _, m := range []string{"PUT", "POST", "DELETE"} {
		start := time.Now()
		w := serve(r, httptest.NewRequest(m, "/public/v1/wait", strings.NewReader(`{"a":1}`)))
		within(m, start, timeout)
		if w.Code != 503 || errCode(t, w) != "service_unavailable" || w.Header().Get("Retry-After") != "2" {
			t.Fatalf("%s: %d %s %v", m, w.Code, w.Body, w.Header())
		}
		if !strings.Contains(w.Body.String(), "may or may not have been applied") {
			t.Fatalf("%s: message %s", m, w.Body)
		}
	}
	start := time.Now()
	if w := serve(r, httptest.NewRequest("PATCH", "/public/v1/ignore-body", strings.NewReader(`{"a":1}`))); w.Code != 503 {
		t.Fatalf("handler ignoring its body: %d", w.Code)
	}
	within("PATCH ignoring its body", start, timeout)
	if w := serve(r, httptest.NewRequest("GET", "/public/v1/read", nil)); w.Code != 200 {
		t.Fatalf("a read was bounded: %d", w.Code)
	}

	// A body that takes 3 timeouts to arrive: the deadline runs from its end.
	// It is measured from the body's end, not the request's start, so that the
	// sleeps' delays on a loaded machine do not add up.
	pr, pw := io.Pipe()
	bodyEnd := make(chan time.Time, 1)
	go func() {
		for range 6 {
			_, _ = pw.Write([]byte(`{"a":1}`))
			time.Sleep(timeout / 2)
		}
		bodyEnd <- time.Now()
		_ = pw.Close()
	}()
	w := serve(r, httptest.NewRequest("PUT", "/public/v1/wait", pr))
	if w.Code != 503 || readErr.Load() != nil {
		t.Fatalf("slow body: %d %v", w.Code, readErr.Load())
	}
	within("slow body", <-bodyEnd, timeout)

	// The client goes away: the write goes on.
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("POST", "/public/v1/quick", nil).WithContext(ctx)
	cancel()
	if w := serve(r, req); w.Code != http.StatusNoContent {
		t.Fatalf("write of a client that went away: %d", w.Code)
	}
}

// things is a handler creating "things" with idempotency.NewID, counting its
// runs; /public/v1/export-service/things is the same with the exports error
// shape.
type things struct {
	mu      sync.Mutex
	runs    int
	ids     map[string]int
	gate    chan struct{} // when not nil, a run waits for it
	status  int           // answer status (201 by default)
	bigBody bool
}

func (h *things) create(c *gin.Context) {
	body, _ := io.ReadAll(c.Request.Body)
	id, keyed, err := idempotency.NewID(c.Request.Context(), 0)
	if err != nil {
		c.Status(500)
		return
	}
	h.mu.Lock()
	h.runs++
	h.ids[id]++
	gate, status, big := h.gate, h.status, h.bigBody
	h.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if status == 0 {
		status = http.StatusCreated
	}
	c.Header("Location", "/things/"+id)
	c.Header("X-RateLimit-Remaining", "7")
	out := gin.H{"id": id, "keyed": keyed, "echo": string(body)}
	if big {
		out["pad"] = strings.Repeat("x", idempotency.MaxResultBytes)
	}
	c.JSON(status, out)
}

func (h *things) set(f func(h *things)) {
	h.mu.Lock()
	f(h)
	h.mu.Unlock()
}

func (h *things) count() (runs, ids int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs, len(h.ids)
}

func idemRequest(path, mp, key, body string) *http.Request {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("X-Marketplace", mp)
	if key != "\x00" {
		req.Header.Set("Idempotency-Key", key)
	}
	return req
}

func TestIdempotencyKey(t *testing.T) {
	env := testenv.Get(t)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr, Cluster: env.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	p := &Public{RetryAfter: time.Second, Log: quietLog, WriteTimeout: 2 * time.Second, MaxBodyBytes: 1 << 10,
		Idempotency: idempotency.NewStore(rdb, 5*time.Second)}
	h := &things{ids: map[string]int{}}
	r := writesEngine(p, func(g *gin.RouterGroup) {
		g.POST("/things", h.create)
		g.POST("/export-service/things", h.create)
		g.POST("/things/:id/upload", h.create)
	})
	p.withoutIdempotencyKey("/public/v1/things/:id/upload")
	p.setErrorStyle("/public/v1/export-service/", errorStyle{
		abort: func(c *gin.Context, status int, code, msg string) {
			c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": msg}})
		},
		invalidHeader: func(c *gin.Context, header, _, msg string) {
			c.AbortWithStatusJSON(422, gin.H{"error": gin.H{"code": "invalid_request", "message": msg, "field": header}})
		},
	})
	mp := uuid.NewString()
	key := "order-" + uuid.NewString()

	first := serve(r, idemRequest("/public/v1/things", mp, key, `{"name": "a", "n": 1}`))
	if first.Code != 201 || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	var made struct {
		ID    string `json:"id"`
		Keyed bool   `json:"keyed"`
	}
	_ = json.Unmarshal(first.Body.Bytes(), &made)
	if u, err := uuid.Parse(made.ID); err != nil || u.Version() != 7 || !made.Keyed {
		t.Fatalf("id %q (keyed %v) is not a derived UUIDv7", made.ID, made.Keyed)
	}

	t.Run("same request replayed", func(t *testing.T) {
		// The same JSON value, spelled otherwise, is the same request.
		for _, body := range []string{`{"name": "a", "n": 1}`, `{"n":1,"name":"\u0061"}`} {
			w := serve(r, idemRequest("/public/v1/things", mp, key, body))
			if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || !bytes.Equal(w.Body.Bytes(), first.Body.Bytes()) {
				t.Fatalf("replay: %d %s %v", w.Code, w.Body, w.Header())
			}
			if w.Header().Get("Location") != first.Header().Get("Location") || w.Header().Get("Content-Type") != first.Header().Get("Content-Type") {
				t.Fatalf("replayed headers %v, first %v", w.Header(), first.Header())
			}
			if w.Header().Get("X-RateLimit-Remaining") != "" {
				t.Fatal("a rate-limit header of the moment was replayed")
			}
		}
		if runs, ids := h.count(); runs != 1 || ids != 1 {
			t.Fatalf("%d runs, %d ids", runs, ids)
		}
	})

	t.Run("another request with the key", func(t *testing.T) {
		for _, req := range []*http.Request{
			idemRequest("/public/v1/things", mp, key, `{"name": "b", "n": 1}`),
			idemRequest("/public/v1/things?x=1", mp, key, `{"name": "a", "n": 1}`),
		} {
			w := serve(r, req)
			if w.Code != 422 || errCode(t, w) != "idempotency_key_reused" {
				t.Fatalf("%s: %d %s", req.URL, w.Code, w.Body)
			}
		}
		// Exports answer in their own shape.
		w := serve(r, idemRequest("/public/v1/export-service/things", mp, key, `{}`))
		if w.Code != 422 || !strings.Contains(w.Body.String(), `"code":"idempotency_key_reused"`) {
			t.Fatalf("exports shape: %d %s", w.Code, w.Body)
		}
		if runs, _ := h.count(); runs != 1 {
			t.Fatalf("%d runs", runs)
		}
	})

	t.Run("keys are scoped by marketplace", func(t *testing.T) {
		w := serve(r, idemRequest("/public/v1/things", uuid.NewString(), key, `{"name": "a", "n": 1}`))
		if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if runs, ids := h.count(); runs != 2 || ids != 2 {
			t.Fatalf("%d runs, %d ids", runs, ids)
		}
	})

	t.Run("invalid keys", func(t *testing.T) {
		cases := []struct{ key, typ string }{
			{"", "too_short"},
			{strings.Repeat("k", 256), "too_long"},
			{"caf\u00e9", "value_error"},
			{"tab\there", "value_error"},
		}
		for _, tc := range cases {
			w := serve(r, idemRequest("/public/v1/things", mp, tc.key, `{}`))
			var d struct {
				Detail []struct {
					Loc  []string `json:"loc"`
					Type string   `json:"type"`
					Msg  string   `json:"msg"`
				} `json:"detail"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &d)
			if w.Code != 422 || len(d.Detail) != 1 || strings.Join(d.Detail[0].Loc, ".") != "header.Idempotency-Key" || d.Detail[0].Type != tc.typ {
				t.Fatalf("key %q: %d %s", tc.key, w.Code, w.Body)
			}
		}
		req := idemRequest("/public/v1/things", mp, "a", `{}`)
		req.Header.Add("Idempotency-Key", "b")
		if w := serve(r, req); w.Code != 422 {
			t.Fatalf("two keys: %d %s", w.Code, w.Body)
		}
		w := serve(r, idemRequest("/public/v1/export-service/things", mp, "", `{}`))
		if w.Code != 422 || !strings.Contains(w.Body.String(), `"field":"Idempotency-Key"`) {
			t.Fatalf("exports shape: %d %s", w.Code, w.Body)
		}
		if w := serve(r, idemRequest("/public/v1/things", mp, strings.Repeat("~", 255), `{}`)); w.Code != 201 {
			t.Fatalf("a 255-character key: %d %s", w.Code, w.Body)
		}
	})

	t.Run("concurrent requests with one key", func(t *testing.T) {
		k := uuid.NewString()
		gate := make(chan struct{})
		h.set(func(h *things) { h.gate = gate })
		runs0, _ := h.count()
		var wg sync.WaitGroup
		codes := make([]int, 5)
		bodies := make([]string, 5)
		retryAfters := make([]string, 5)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := serve(r, idemRequest("/public/v1/things", mp, k, `{"c":1}`))
				codes[i], bodies[i], retryAfters[i] = w.Code, w.Body.String(), w.Header().Get("Retry-After")
			}()
		}
		testenv.Eventually(t, 5*time.Second, func() error {
			if runs, _ := h.count(); runs != runs0+1 {
				return fmt.Errorf("%d runs", runs-runs0)
			}
			return nil
		})
		time.Sleep(50 * time.Millisecond)
		h.set(func(h *things) { h.gate = nil })
		close(gate)
		wg.Wait()
		created, inUse := 0, 0
		for i, c := range codes {
			switch {
			case c == 201:
				created++
			case c == 409 && strings.Contains(bodies[i], "idempotency_key_in_progress"):
				// Retry-After: the claim's time left (its lease is 5 s).
				if n, err := strconv.Atoi(retryAfters[i]); err != nil || n < 1 || n > 5 {
					t.Fatalf("409 with Retry-After %q, want 1 to 5", retryAfters[i])
				}
				inUse++
			default:
				t.Fatalf("answer %d %s", c, bodies[i])
			}
		}
		if created != 1 || inUse != 4 {
			t.Fatalf("%d created, %d in use", created, inUse)
		}
		if runs, _ := h.count(); runs != runs0+1 {
			t.Fatalf("%d runs", runs-runs0)
		}
		if w := serve(r, idemRequest("/public/v1/things", mp, k, `{"c":1}`)); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("after: %d %s", w.Code, w.Body)
		}
	})

	t.Run("5xx and 429 are not kept", func(t *testing.T) {
		for _, status := range []int{503, 500, 429} {
			k := uuid.NewString()
			h.set(func(h *things) { h.status = status })
			w1 := serve(r, idemRequest("/public/v1/things", mp, k, `{"s":1}`))
			h.set(func(h *things) { h.status = 0 })
			w2 := serve(r, idemRequest("/public/v1/things", mp, k, `{"s":1}`))
			w3 := serve(r, idemRequest("/public/v1/things", mp, k, `{"s":1}`))
			if w1.Code != status || w2.Code != 201 || w2.Header().Get("Idempotent-Replayed") != "" || w3.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("%d then %d (%s) then %d", w1.Code, w2.Code, w2.Header().Get("Idempotent-Replayed"), w3.Code)
			}
			// Both attempts derived the same id.
			var a, b struct{ ID string }
			_ = json.Unmarshal(w1.Body.Bytes(), &a)
			_ = json.Unmarshal(w2.Body.Bytes(), &b)
			if a.ID == "" || a.ID != b.ID {
				t.Fatalf("ids %q and %q", a.ID, b.ID)
			}
			// A different body after the 5xx is still another request.
			if w := serve(r, idemRequest("/public/v1/things", mp, k, `{"s":2}`)); w.Code != 422 {
				t.Fatalf("other body after a released key: %d", w.Code)
			}
		}
	})

	t.Run("a result too large to keep", func(t *testing.T) {
		k := uuid.NewString()
		h.set(func(h *things) { h.bigBody = true })
		defer h.set(func(h *things) { h.bigBody = false })
		runs0, _ := h.count()
		for range 2 {
			if w := serve(r, idemRequest("/public/v1/things", mp, k, `{}`)); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("%d %v", w.Code, w.Header())
			}
		}
		if runs, _ := h.count(); runs != runs0+2 {
			t.Fatalf("%d runs", runs-runs0)
		}
	})

	t.Run("without a key, or where keys do not apply", func(t *testing.T) {
		runs0, ids0 := h.count()
		for range 2 {
			w := serve(r, idemRequest("/public/v1/things", mp, "\x00", `{"name": "a", "n": 1}`))
			var out struct{ Keyed bool }
			_ = json.Unmarshal(w.Body.Bytes(), &out)
			if w.Code != 201 || out.Keyed {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if w := serve(r, idemRequest("/public/v1/things/x/upload", mp, key, `{}`)); w.Code != 201 || strings.Contains(w.Body.String(), `"keyed":true`) {
				t.Fatalf("upload: %d %s", w.Code, w.Body)
			}
		}
		if runs, ids := h.count(); runs != runs0+4 || ids != ids0+4 {
			t.Fatalf("%d runs, %d ids", runs-runs0, ids-ids0)
		}
		// A body above the limit goes to the handler (which answers 413).
		if w := serve(r, idemRequest("/public/v1/things", mp, uuid.NewString(), strings.Repeat(" ", 2<<10))); w.Code != 201 || strings.Contains(w.Body.String(), `"keyed":true`) {
			t.Fatalf("large body: %d", w.Code)
		}
	})
}

// TestIdempotencyKeyRedisDown: with a key, a request whose key store is
// unreachable, or frozen, is 503 within a second (well within the write
// deadline) and not run.
func TestIdempotencyKeyRedisDown(t *testing.T) {
	// A server that accepts connections and never answers: a frozen Redis.
	frozen, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = frozen.Close() })
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := frozen.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	// A port nothing listens on: Redis down.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	down := l.Addr().String()
	_ = l.Close()

	for name, addr := range map[string]string{"down": down, "frozen": frozen.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			rdb := redisstore.Open(redisstore.Options{Addr: addr})
			t.Cleanup(func() { _ = rdb.Close() })
			const timeout = 5 * time.Second
			p := &Public{RetryAfter: time.Second, Log: quietLog, WriteTimeout: timeout, MaxBodyBytes: 1 << 10,
				Idempotency: idempotency.NewStore(rdb, 5*time.Second)}
			h := &things{ids: map[string]int{}}
			r := writesEngine(p, func(g *gin.RouterGroup) { g.POST("/things", h.create) })
			start := time.Now()
			w := serve(r, idemRequest("/public/v1/things", uuid.NewString(), "k", `{}`))
			if took := time.Since(start); took > 1500*time.Millisecond {
				t.Errorf("503 after %s", took)
			}
			if w.Code != 503 || errCode(t, w) != "service_unavailable" || w.Header().Get("Retry-After") == "" {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if runs, _ := h.count(); runs != 0 {
				t.Fatal("the request ran")
			}
			// Without a key the request does not need Redis.
			if w := serve(r, idemRequest("/public/v1/things", uuid.NewString(), "\x00", `{}`)); w.Code != 201 {
				t.Fatalf("without a key: %d", w.Code)
			}
		})
	}
}

// TestDerivedIDs: ids derived from a key are UUIDv7s whose time is the
// key's first use, the same for the same inputs and different otherwise.
func TestDerivedIDs(t *testing.T) {
	seed := time.UnixMilli(1_760_000_000_123)
	a := idempotency.DeriveID("mp", "k", "fp", seed, 0)
	u := uuid.MustParse(a)
	if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("%s: version %d variant %v", a, u.Version(), u.Variant())
	}
	sec, nsec := u.Time().UnixTime()
	if got := time.Unix(sec, nsec).UnixMilli(); got != seed.UnixMilli() {
		t.Fatalf("time %d, want %d", got, seed.UnixMilli())
	}
	if a != idempotency.DeriveID("mp", "k", "fp", seed, 0) {
		t.Fatal("not deterministic")
	}
	seen := map[string]bool{a: true}
	for _, b := range []string{
		idempotency.DeriveID("mp2", "k", "fp", seed, 0), idempotency.DeriveID("mp", "k2", "fp", seed, 0),
		idempotency.DeriveID("mp", "k", "fp2", seed, 0), idempotency.DeriveID("mp", "k", "fp", seed, 1),
		idempotency.DeriveID("mp", "k", "fp", seed.Add(time.Millisecond), 0),
	} {
		if seen[b] {
			t.Fatalf("%s derived twice", b)
		}
		seen[b] = true
	}
	if id, keyed, err := idempotency.NewID(context.Background(), 0); err != nil || keyed || uuid.MustParse(id).Version() != 7 {
		t.Fatalf("without a key: %s %v %v", id, keyed, err)
	}
	if !errors.Is(fmt.Errorf("x: %w", statelog.ErrInFlight), statelog.ErrUnavailable) {
		t.Fatal("ErrInFlight does not wrap ErrUnavailable")
	}
}

// TestWriteUnreadBody: a write refused before its body is read (413 on the
// declared length) is answered at once; the middleware leaves the server's
// own request body alone (net/http decides by its type whether to drain
// unread bytes before answering).
func TestWriteUnreadBody(t *testing.T) {
	p := &Public{RetryAfter: time.Second, Log: quietLog, WriteTimeout: 5 * time.Second, MaxBodyBytes: 1 << 10}
	r := writesEngine(p, func(g *gin.RouterGroup) {
		g.POST("/upload", func(c *gin.Context) { abortV2(c, http.StatusRequestEntityTooLarge, "request_too_large", "too large") })
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(conn, "POST /public/v1/upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n--b\r\n", int64(2)<<30)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkWrites: a 420 KB PUT (a catalog batch of 500 products) through
// the /public/v1 group with and without the write middleware.
func BenchmarkWrites(b *testing.B) {
	body := bytes.Repeat([]byte(`{"id":"p","name":"product"},`), 420<<10/28)
	for _, with := range []bool{false, true} {
		b.Run(fmt.Sprintf("middleware=%v", with), func(b *testing.B) {
			gin.SetMode(gin.ReleaseMode)
			r := gin.New()
			var mw []gin.HandlerFunc
			if with {
				mw = append(mw, (&Public{Log: quietLog, WriteTimeout: 5 * time.Second, MaxBodyBytes: 16 << 20}).Writes())
			}
			r.Group("/public/v1", mw...).PUT("/products", func(c *gin.Context) {
				n, _ := io.Copy(io.Discard, c.Request.Body)
				if n != int64(len(body)) || c.Request.Context().Err() != nil {
					c.Status(500)
					return
				}
				c.Status(200)
			})
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				// Read in chunks, as from a connection.
				r.ServeHTTP(w, httptest.NewRequest("PUT", "/public/v1/products", struct{ io.Reader }{bytes.NewReader(body)}))
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
