package redisstore_test

import (
	"context"
	"testing"

	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestServer reads the test stack's Redis: the version Endcap needs, and no
// eviction.
func TestServer(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	defer rdb.Close()
	s, err := redisstore.Server(t.Context(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Supported(); err != nil || s.Evicts() {
		t.Errorf("test Redis %+v: supported %v, evicts %v", s, err, s.Evicts())
	}
}

// TestConnectionFailed: failures to reach a server count, answers of the
// server (an error reply, a missing key) and the caller's own end do not.
func TestConnectionFailed(t *testing.T) {
	ctx := t.Context()
	rdb := testenv.Get(t).Redis(t)
	down := redisstore.Open(redisstore.Options{Addr: "127.0.0.1:1"})
	defer down.Close()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"no error", ctx, nil, false},
		{"missing key", ctx, rdb.Get(ctx, "redisstore-test-missing").Err(), false},
		{"error reply", ctx, rdb.Do(ctx, "NO-SUCH-COMMAND").Err(), false},
		{"connection refused", ctx, down.Ping(ctx).Err(), true},
		{"the caller gave up", canceled, context.Canceled, false},
		{"a deadline", ctx, context.DeadlineExceeded, false},
	} {
		if c.name != "no error" && c.err == nil {
			t.Fatalf("%s: no error to judge", c.name)
		}
		if got := redisstore.ConnectionFailed(c.ctx, c.err); got != c.want {
			t.Errorf("%s (%v): %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
