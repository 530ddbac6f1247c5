package api

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"

	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRateLimits runs the GCRA middleware against real Redis: the 11th
// catalog request of a key within a second is 429 with Retry-After, every
// limited response carries the X-RateLimit-* headers, and keys are limited
// separately.
func TestRateLimits(t *testing.T) {
	env := testenv.Get(t)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr, Cluster: env.RedisCluster})
	defer rdb.Close()
	catalog, _ := ParseLimit("10/1s")
	def, _ := ParseLimit("45/2s")
	rl := NewRateLimiter(redis_rate.NewLimiter(rdb), map[string]redis_rate.Limit{"catalog": catalog, "default": def}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	run := fmt.Sprint(time.Now().UnixNano())
	r.Use(func(c *gin.Context) {
		c.Set(principalKey, accounts.Principal{Key: accounts.APIKey{ID: run + c.GetHeader("X-Key")}})
	})
	r.GET("/c", rl.Limit("catalog"), func(c *gin.Context) { c.JSON(200, gin.H{"ok": true}) })
	r.GET("/d", rl.Limit("default"), func(c *gin.Context) { c.JSON(200, gin.H{"ok": true}) })
	get := func(path, key string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-Key", key)
		r.ServeHTTP(w, req)
		return w
	}
	for i := 1; i <= 10; i++ {
		w := get("/c", "a")
		if w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		// redis_rate's GCRA computes Remaining in floating point: it may
		// read one less than the exact count (e.g. 8 after the first of 10).
		rem, _ := strconv.Atoi(w.Header().Get("X-RateLimit-Remaining"))
		if w.Header().Get("X-RateLimit-Limit") != "10" || rem > 10-i || rem < 10-i-1 || w.Header().Get("X-RateLimit-Reset") == "" {
			t.Errorf("request %d headers: %v", i, w.Header())
		}
	}
	w := get("/c", "a")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("11th: %d %v", w.Code, w.Header())
	}
	var body v2Error
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.ErrCode != "too_many_requests" {
		t.Errorf("429 body %s", w.Body)
	}
	if w := get("/c", "b"); w.Code != 200 {
		t.Errorf("another key is limited too: %d", w.Code)
	}
	if w := get("/d", "a"); w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "45" {
		t.Errorf("the default class shares the catalog budget: %d %v", w.Code, w.Header())
	}
	// The exports routes answer their 429 in their own error shape. Their
	// limiter refills once an hour: the 46 requests may take as long as a
	// loaded machine makes them (at 45 per 2 s one comes back every 44 ms).
	hourly, _ := ParseLimit("45/1h")
	p := &Public{Limits: NewRateLimiter(redis_rate.NewLimiter(rdb), map[string]redis_rate.Limit{"default": hourly}, slog.New(slog.NewTextHandler(io.Discard, nil))), Log: quietLog}
	ExportRoutes(nil)(r.Group("/public/v1"), p)
	for i := 0; i <= 45; i++ {
		w = get("/public/v1/export-service/datasets", "e")
	}
	var ebody exportError
	if err := json.Unmarshal(w.Body.Bytes(), &ebody); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" ||
		err != nil || ebody.Error.Code != "too_many_requests" || ebody.Error.Details == nil {
		t.Errorf("the 46th export request: %d %v %s", w.Code, w.Header(), w.Body)
	}
	time.Sleep(1100 * time.Millisecond)
	if w := get("/c", "a"); w.Code != 200 {
		t.Errorf("after a second: %d", w.Code)
	}

	// Redis gone: requests are let through (fail open).
	down := redisstore.Open(redisstore.Options{Addr: "127.0.0.1:1"})
	defer down.Close()
	open := NewRateLimiter(redis_rate.NewLimiter(down), map[string]redis_rate.Limit{"catalog": catalog}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r2 := gin.New()
	r2.Use(func(c *gin.Context) { c.Set(principalKey, accounts.Principal{Key: accounts.APIKey{ID: "x"}}) })
	r2.GET("/c", open.Limit("catalog"), func(c *gin.Context) { c.JSON(200, gin.H{"ok": true}) })
	w = httptest.NewRecorder()
	r2.ServeHTTP(w, httptest.NewRequest("GET", "/c", nil))
	if w.Code != 200 {
		t.Errorf("with Redis down: %d", w.Code)
	}
}
