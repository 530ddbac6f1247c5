package statelog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestWritesGiveUpOnAHungBroker: with a broker that holds produce requests,
// Append and AppendBatch return ErrInFlight when their context ends (franz-go's
// ProduceSync would wait for the broker), keep the entity's locks meanwhile,
// and the writes land whole once the broker answers.
func TestWritesGiveUpOnAHungBroker(t *testing.T) {
	env := testenv.Get(t)
	cluster, brokers := testenv.Kafka(t)
	l, c := view(t, brokers)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr, Cluster: env.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	l.SetLocker(redisstore.NewLocker(rdb, fmt.Sprintf("test:%d:", time.Now().UnixNano()), 10*time.Second))

	release := testenv.HangProduce(t, cluster)
	// Should the code under test wait for the broker, the test still ends.
	time.AfterFunc(20*time.Second, release)

	bounded := func(what string, d time.Duration, fn func(ctx context.Context) error) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		err := fn(ctx)
		if took := time.Since(start); took > d+time.Second {
			t.Errorf("%s returned after %s with a %s context", what, took.Round(time.Millisecond), d)
		}
		return err
	}

	err := bounded("Put", 500*time.Millisecond, func(ctx context.Context) error {
		_, err := c.Put(ctx, "mp", "a", 0, thing{Name: "first"})
		return err
	})
	if !errors.Is(err, statelog.ErrInFlight) || !errors.Is(err, statelog.ErrUnavailable) {
		t.Fatalf("Put on a hung broker: %v, want ErrInFlight", err)
	}
	var batch []statelog.Write[thing]
	for i := range 50 {
		batch = append(batch, statelog.Write[thing]{ID: fmt.Sprintf("b-%02d", i), Expected: statelog.AnyVersion, Value: thing{Name: "batch", N: i}})
	}
	err = bounded("PutMany", 500*time.Millisecond, func(ctx context.Context) error { return c.PutMany(ctx, "mp", batch) })
	if !errors.Is(err, statelog.ErrInFlight) {
		t.Fatalf("PutMany on a hung broker: %v, want ErrInFlight", err)
	}
	// The first write still holds the entity: another writer of it gets a
	// conflict (the Redis lock) at once, and nothing is appended.
	err = bounded("second Put", 500*time.Millisecond, func(ctx context.Context) error {
		_, err := c.Put(ctx, "mp", "a", 0, thing{Name: "second"})
		return err
	})
	if !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("second writer of a held entity: %v, want a conflict", err)
	}
	// Without the Redis lock the wait is for this process's stripe; it too
	// ends with the context.
	l.SetLocker(nil)
	err = bounded("third Put", 300*time.Millisecond, func(ctx context.Context) error {
		_, err := c.Put(ctx, "mp", "a", 0, thing{Name: "third"})
		return err
	})
	if !errors.Is(err, statelog.ErrUnavailable) || errors.Is(err, statelog.ErrInFlight) {
		t.Fatalf("writer waiting for the stripe: %v, want ErrUnavailable (nothing appended)", err)
	}
	if _, _, ok := c.Get("mp", "a"); ok || c.Len("mp") != 0 {
		t.Fatalf("applied before the broker answered: %d entities", c.Len("mp"))
	}
	// Past the limit of given-up writes waiting for Kafka, a write fails at
	// once and writes nothing.
	if n := l.GivenUp(); n != 2 {
		t.Fatalf("%d given-up writes, want 2", n)
	}
	l.SetMaxGivenUp(2)
	err = bounded("Put past the limit", 0, func(ctx context.Context) error {
		_, err := c.Put(context.Background(), "mp", "c", statelog.AnyVersion, thing{Name: "refused"})
		return err
	})
	if !errors.Is(err, statelog.ErrUnavailable) || errors.Is(err, statelog.ErrInFlight) {
		t.Fatalf("write past the limit: %v, want ErrUnavailable (nothing appended)", err)
	}

	release()
	testenv.Eventually(t, 15*time.Second, func() error {
		if n := c.Len("mp"); n != 51 {
			return fmt.Errorf("%d entities applied, want 51", n)
		}
		return nil
	})
	if v, ver, _ := c.Get("mp", "a"); v.Name != "first" || ver != 1 {
		t.Fatalf("a = %+v version %d, want the first write at version 1", v, ver)
	}
	for i := range 50 {
		if v, ver, ok := c.Get("mp", fmt.Sprintf("b-%02d", i)); !ok || v.N != i || ver != 1 {
			t.Fatalf("b-%02d = %+v version %d", i, v, ver)
		}
	}
	if _, _, ok := c.Get("mp", "c"); ok {
		t.Fatal("the write refused past the limit was applied")
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := l.GivenUp(); n != 0 {
			return fmt.Errorf("%d given-up writes still wait", n)
		}
		return nil
	})
	// Once settled, the entity is free again.
	testenv.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Put(ctx, "mp", "a", 1, thing{Name: "after"})
		return err
	})
}
