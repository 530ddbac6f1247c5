package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestDeadlinesOnFrozenRedis: with Redis frozen (SIGSTOP), every kind of
// call Endcap makes returns when its caller's context deadline passes, not
// after the client's 3 s socket timeout: a command, a pipeline (claims,
// charges), a script (unlock, charge), a lock. After the thaw the same
// client works again (the timed-out connections were dropped, not reused
// with a reply still pending).
func TestDeadlinesOnFrozenRedis(t *testing.T) {
	rs := testenv.OwnRedis(t)
	rdb := redisstore.Open(redisstore.Options{Addr: rs.Addr})
	defer rdb.Close()
	bg := context.Background()
	if err := rdb.Set(bg, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	lk := redisstore.NewLocker(rdb, "lock:", 10*time.Second)
	if err := rs.Freeze(); err != nil {
		t.Fatal(err)
	}
	const deadline = 200 * time.Millisecond
	calls := map[string]func(ctx context.Context) error{
		"GET": func(ctx context.Context) error { return rdb.Get(ctx, "k").Err() },
		"pipeline": func(ctx context.Context) error {
			p := rdb.Pipeline()
			for i := range 100 {
				p.SetNX(ctx, "p:"+string(rune('a'+i%26)), i, time.Minute)
			}
			_, err := p.Exec(ctx)
			return err
		},
		"script": func(ctx context.Context) error {
			return rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"k"}).Err()
		},
		// A unique key: the lock sent to the frozen server may still be
		// taken when it resumes (a timed-out write is not undone).
		"lock": func(ctx context.Context) error { _, err := lk.Lock(ctx, time.Now().String()); return err },
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(bg, deadline)
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		cancel()
		if err == nil || took > deadline+400*time.Millisecond {
			t.Errorf("%s on a frozen Redis: err %v after %s (deadline %s)", name, err, took, deadline)
		}
	}
	rs.Thaw()
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		if err := call(ctx); err != nil {
			t.Errorf("%s after the thaw: %v", name, err)
		}
		cancel()
	}
}
