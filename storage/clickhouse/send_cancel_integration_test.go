package clickhouse_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/endcap/endcap/testkit/testenv"
)

// TestBatchSentThenCancelled: a batch sent under a context that its caller
// cancels as soon as Send returns (the `defer cancel()` of every insert and
// of the migrations) leaves its connection usable. The client watches a
// batch's context from a goroutine that closes the connection when the
// context ends; here that goroutine is made to read the context late (its
// Done sleeps 30 ms), which is what a loaded machine does to it. A client
// whose Send does not wait for that goroutine has it close the connection
// after it is back in the pool, under the next batch on it ("use of closed
// network connection"), about one time in two.
func TestBatchSentThenCancelled(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := env.Config(t, nil)
	_ = testenv.ClickHouse(t, ctx, cfg) // the database
	conn, err := ch.Open(&ch.Options{Addr: []string{cfg.ClickHouseAddr}, MaxOpenConns: 1, DialTimeout: 10 * time.Second,
		Auth: ch.Auth{Database: cfg.ClickHouseDatabase, Username: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE TABLE sent (x UInt64) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	send := func(ctx context.Context, x uint64, beforeSend func()) error {
		b, err := conn.PrepareBatch(ctx, "INSERT INTO sent (x)")
		if err != nil {
			return err
		}
		if err := b.Append(x); err != nil {
			return err
		}
		beforeSend()
		return b.Send()
	}
	const rounds = 8
	for i := range rounds {
		late, cancelLate := context.WithCancel(ctx)
		if err := send(lateDone{late, goroutineID()}, uint64(2*i), func() {}); err != nil {
			t.Fatalf("round %d: first batch: %v", i, err)
		}
		cancelLate()
		// The next batch takes the connection from the pool; the late
		// goroutine, if it is still to run, wakes while it is in use.
		if err := send(ctx, uint64(2*i+1), func() { time.Sleep(60 * time.Millisecond) }); err != nil {
			t.Fatalf("round %d: the batch after a cancelled one: %v", i, err)
		}
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM sent").Scan(&n); err != nil || n != 2*rounds {
		t.Fatalf("%d rows (%v), want %d", n, err, 2*rounds)
	}
}

// lateDone is a context whose Done, called from any goroutine but the one
// that made it, first sleeps 30 ms.
type lateDone struct {
	context.Context
	owner uint64
}

func (c lateDone) Done() <-chan struct{} {
	if goroutineID() != c.owner {
		time.Sleep(30 * time.Millisecond)
	}
	return c.Context.Done()
}

// goroutineID is the calling goroutine's number, from its stack's header
// ("goroutine 42 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	var id uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
