package accounts_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/management/accounts"
)

// TestUsage: touched keys are written at the flush, each field keeps the
// latest time any process wrote, and a process reads its own unflushed
// uses.
func TestUsage(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	u := accounts.NewUsage(rdb, 20*time.Millisecond, nil)
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	if got, err := u.LastUsed(ctx, []string{"k1"}); err != nil || len(got) != 0 {
		t.Fatalf("before any use: %v %v", got, err)
	}
	before := time.Now().Add(-time.Second).Unix()
	u.Touch("k1")
	if got, _ := u.LastUsed(ctx, []string{"k1", "k2"}); got["k1"].Unix() < before || len(got) != 1 {
		t.Fatalf("own unflushed use: %v", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for mr.HGet("ec:apikey:last-used", "k1") == "" {
		if time.Now().After(deadline) {
			t.Fatal("not flushed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Another process's later use is kept over an earlier one written after it.
	mr.HSet("ec:apikey:last-used", "k1", "9999999999")
	u.Touch("k1")
	time.Sleep(100 * time.Millisecond)
	if v := mr.HGet("ec:apikey:last-used", "k1"); v != "9999999999" {
		t.Fatalf("a later use was overwritten by an earlier one: %s", v)
	}
	other := accounts.NewUsage(rdb, time.Hour, nil)
	if got, _ := other.LastUsed(ctx, []string{"k1"}); got["k1"].Unix() != 9999999999 {
		t.Fatalf("another process reads %v", got)
	}
}
