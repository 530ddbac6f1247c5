package idempotency_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A marketplace keeps at most MaxBytes of results: past it a new key is
// refused (Full, with the time until its oldest result expires) and its
// request does not run, while the keys it holds still replay and other
// marketplaces are not concerned.
func TestStoreMaxBytes(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	st := idempotency.NewStore(rdb, 10*time.Second)
	st.MaxBytes = 3000 // two results of about 1 KiB and their overhead
	ctx := context.Background()
	mp, other := uuid.NewString(), uuid.NewString()
	body := []byte(strings.Repeat("x", 1000))
	run := func(scope, key string) idempotency.Begun {
		t.Helper()
		b, err := st.Begin(ctx, scope, key, "fp")
		if err != nil {
			t.Fatal(err)
		}
		if b.Outcome == idempotency.Claimed {
			if err := st.Complete(ctx, b.Claim, idempotency.Result{Status: 201, Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	for _, k := range []string{"a", "b", "c"} {
		if b := run(mp, k); b.Outcome != idempotency.Claimed {
			t.Fatalf("key %s: outcome %d", k, b.Outcome)
		}
	}
	// 3 × (1000 + overhead) ≥ 3000: full.
	b := run(mp, "d")
	if b.Outcome != idempotency.Full || b.RetryAfter < 23*time.Hour || b.RetryAfter > idempotency.Retention {
		t.Fatalf("past the bound: %+v", b)
	}
	// The refused key holds nothing: once there is room it runs.
	if b := run(mp, "a"); b.Outcome != idempotency.Replay || string(b.Result.Body) != string(body) {
		t.Fatalf("replay of a kept key: %+v", b)
	}
	if b := run(other, "d"); b.Outcome != idempotency.Claimed {
		t.Fatalf("another marketplace: %+v", b)
	}
	// Expired results no longer count: the set's members are dropped by
	// their expiry (here made past by hand).
	keys := testenv.Keys(t, rdb, "ec:idem-usage:{"+mp+"}")
	if len(keys) != 1 {
		t.Fatalf("usage keys %v", keys)
	}
	ms, err := rdb.ZRange(ctx, keys[0], 0, -1).Result()
	if err != nil || len(ms) != 3 {
		t.Fatalf("members %v %v", ms, err)
	}
	if err := rdb.ZAdd(ctx, keys[0], redisZ(ms[0])).Err(); err != nil {
		t.Fatal(err)
	}
	if b := run(mp, "d"); b.Outcome != idempotency.Claimed {
		t.Fatalf("after the oldest expired: %+v", b)
	}
}

func redisZ(member string) redis.Z { return redis.Z{Score: 1, Member: member} }

// A claim whose request died with its process (never completed nor
// released): the key answers InProgress with the time left on the claim,
// and once that has passed the next request takes the key over, with the
// first one's seed (the same ids).
func TestStoreClaimOfADeadRequest(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	const lease = 2 * time.Second
	st := idempotency.NewStore(rdb, lease)
	ctx := context.Background()
	mp := uuid.NewString()
	first, err := st.Begin(ctx, mp, "k", "fp")
	if err != nil || first.Outcome != idempotency.Claimed {
		t.Fatalf("first: %+v %v", first, err)
	}
	// The first request's process dies here: its claim stays.
	b, err := st.Begin(ctx, mp, "k", "fp")
	if err != nil || b.Outcome != idempotency.InProgress || b.RetryAfter <= lease-time.Second || b.RetryAfter > lease {
		t.Fatalf("while the claim holds: %+v %v, want InProgress with RetryAfter in (%s, %s]", b, err, lease-time.Second, lease)
	}
	time.Sleep(b.RetryAfter)
	b, err = st.Begin(ctx, mp, "k", "fp")
	if err != nil || b.Outcome != idempotency.Claimed || !b.Claim.Seed.Equal(first.Claim.Seed) {
		t.Fatalf("after RetryAfter: %+v %v, want the key taken over with the first seed", b, err)
	}
}
