package api

import (
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"

	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestRateLimiterFrozenRedis freezes a real redis-server (SIGSTOP) under
// the limiter: a request is let through within the limiter's bound (not
// after the client's 3 s socket timeout), the breaker then opens so that the
// following requests do not wait at all, a probe after the cooldown finds
// Redis still frozen and keeps it open, and once Redis is thawed the limits
// apply again.
func TestRateLimiterFrozenRedis(t *testing.T) {
	rs := testenv.OwnRedis(t)
	rdb := redisstore.Open(redisstore.Options{Addr: rs.Addr})
	defer rdb.Close()
	lim, _ := ParseLimit("1000/1s")
	rl := NewRateLimiter(redis_rate.NewLimiter(rdb), map[string]redis_rate.Limit{"default": lim}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rl.Cooldown = time.Second
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set(principalKey, accounts.Principal{Key: accounts.APIKey{ID: "k"}}) })
	r.GET("/d", rl.Limit("default"), func(c *gin.Context) { c.JSON(200, gin.H{"ok": true}) })
	get := func() (code int, limited bool, took time.Duration) {
		start := time.Now()
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/d", nil))
		return w.Code, w.Header().Get("X-RateLimit-Limit") != "", time.Since(start)
	}
	// The bound of one request that asks the frozen Redis: the limiter's
	// timeout and some slack for a loaded machine; far below the 3 s read
	// timeout that applied before.
	bound := rl.Timeout + 350*time.Millisecond
	const quick = 50 * time.Millisecond

	for range 3 { // a few pooled connections, as in a serving process
		if code, limited, _ := get(); code != 200 || !limited {
			t.Fatalf("before the freeze: %d, limited %v", code, limited)
		}
	}
	if err := rs.Freeze(); err != nil {
		t.Fatal(err)
	}
	for i := range DefaultBreakerFailures {
		code, limited, took := get()
		if code != 200 || limited || took > bound {
			t.Fatalf("frozen, request %d: %d, limited %v, took %s (bound %s)", i+1, code, limited, took, bound)
		}
		if took < rl.Timeout-10*time.Millisecond {
			t.Errorf("frozen, request %d answered in %s: did it ask Redis?", i+1, took)
		}
	}
	// The breaker is open: nobody waits, even many at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for range 20 {
		wg.Go(func() {
			code, limited, took := get()
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, took)
			if code != 200 || limited {
				t.Errorf("breaker open: %d, limited %v", code, limited)
			}
		})
	}
	wg.Wait()
	if slowest > quick {
		t.Errorf("breaker open: the slowest request took %s", slowest)
	}
	// After the cooldown one request probes (and waits the bound), the
	// others do not.
	time.Sleep(rl.Cooldown + 50*time.Millisecond)
	if code, limited, took := get(); code != 200 || limited || took > bound || took < rl.Timeout-10*time.Millisecond {
		t.Errorf("probe of a frozen Redis: %d, limited %v, took %s", code, limited, took)
	}
	if _, _, took := get(); took > quick {
		t.Errorf("after a failed probe the breaker is open again, yet a request took %s", took)
	}

	rs.Thaw()
	time.Sleep(rl.Cooldown + 50*time.Millisecond)
	testenv.Eventually(t, 5*time.Second, func() error {
		if code, limited, _ := get(); code != 200 || !limited {
			return testenv.Errorf("after the thaw: %d, limited %v", code, limited)
		}
		return nil
	})
	if code, limited, took := get(); code != 200 || !limited || took > bound {
		t.Errorf("after the thaw, breaker closed: %d, limited %v, took %s", code, limited, took)
	}
}

// TestRateLimiterBreaker walks the breaker's states on a fake clock: closed
// until Failures failures in a row, open (Redis not asked) for Cooldown,
// then one probe at a time; a failed probe reopens it, a success closes it.
func TestRateLimiterBreaker(t *testing.T) {
	down := redisstore.Open(redisstore.Options{Addr: "127.0.0.1:1"})
	defer down.Close()
	lim, _ := ParseLimit("10/1s")
	rl := NewRateLimiter(redis_rate.NewLimiter(down), map[string]redis_rate.Limit{"default": lim}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Unix(1_000_000, 0)
	rl.now = func() time.Time { return now }
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set(principalKey, accounts.Principal{Key: accounts.APIKey{ID: "k"}}) })
	r.GET("/d", rl.Limit("default"), func(c *gin.Context) { c.JSON(200, gin.H{"ok": true}) })
	get := func() int {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/d", nil))
		return w.Code
	}
	open := func() bool { rl.mu.Lock(); defer rl.mu.Unlock(); return !rl.openUntil.IsZero() }

	for i := 1; i < DefaultBreakerFailures; i++ {
		if get() != 200 || open() {
			t.Fatalf("after %d failures: open %v", i, open())
		}
	}
	if get() != 200 || !open() {
		t.Fatal("not open after the third failure in a row")
	}
	if ask, _ := rl.admit(); ask {
		t.Error("open breaker asks Redis")
	}
	now = now.Add(rl.Cooldown)
	ask, probe := rl.admit()
	if !ask || !probe {
		t.Fatalf("after the cooldown: ask %v probe %v", ask, probe)
	}
	if ask, _ := rl.admit(); ask {
		t.Error("a second request probes while the first does")
	}
	rl.done(true, errors.New("still down"))
	if ask, _ := rl.admit(); ask || !open() {
		t.Error("a failed probe did not reopen the breaker")
	}
	now = now.Add(rl.Cooldown)
	_, probe = rl.admit()
	rl.done(probe, nil)
	if open() {
		t.Error("a successful probe did not close the breaker")
	}
	if ask, probe := rl.admit(); !ask || probe {
		t.Errorf("closed breaker: ask %v probe %v", ask, probe)
	}
}
