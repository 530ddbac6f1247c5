package statelog_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type thing struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

// view opens a log on the entities topic and a collection of things.
func view(t testing.TB, brokers []string) (*statelog.Log, *statelog.Collection[thing]) {
	t.Helper()
	return viewWith(t, brokers, "t.", nil)
}

// viewWith is view on the topics of prefix, calling before (when not nil)
// with the collection before the log runs (to register listeners).
func viewWith(t testing.TB, brokers []string, prefix string, before func(*statelog.Collection[thing])) (*statelog.Log, *statelog.Collection[thing]) {
	t.Helper()
	var c *statelog.Collection[thing]
	l := testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: prefix}, func(l *statelog.Log) {
		c = statelog.NewCollection[thing](l, "thing")
		if before != nil {
			before(c)
		}
	})
	return l, c
}

func TestCollectionBatchesAndRebuild(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	_, c := view(t, brokers)
	ctx := t.Context()
	var ws []statelog.Write[thing]
	for i := 0; i < 1000; i++ {
		ws = append(ws, statelog.Write[thing]{ID: fmt.Sprintf("id-%04d", i), Expected: statelog.AnyVersion, Value: thing{Name: "x", N: i}})
	}
	if err := c.PutMany(ctx, "mp-a", ws); err != nil {
		t.Fatal(err)
	}
	if c.Len("mp-a") != 1000 || c.Len("mp-b") != 0 {
		t.Fatalf("read-your-writes: %d / %d", c.Len("mp-a"), c.Len("mp-b"))
	}
	// Overwrite some, delete some, in one batch.
	if err := c.PutMany(ctx, "mp-a", []statelog.Write[thing]{
		{ID: "id-0001", Expected: statelog.AnyVersion, Value: thing{Name: "y", N: 1}},
		{ID: "id-0002", Expected: statelog.AnyVersion, Deleted: true},
	}); err != nil {
		t.Fatal(err)
	}
	// A batch with a wrong expected version writes nothing.
	err := c.PutMany(ctx, "mp-a", []statelog.Write[thing]{
		{ID: "id-0003", Expected: statelog.AnyVersion, Value: thing{Name: "z"}},
		{ID: "id-0004", Expected: 7, Value: thing{Name: "z"}},
	})
	if !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("stale batch: %v", err)
	}
	if v, _, _ := c.Get("mp-a", "id-0003"); v.Name != "x" {
		t.Errorf("a rejected batch wrote %+v", v)
	}
	ids, vals, more := c.Page("mp-a", "id-0997", 10, nil)
	if len(ids) != 2 || more || vals[1].N != 999 {
		t.Errorf("page: %v %v %v", ids, vals, more)
	}

	// A cold view rebuilds the same state from Kafka.
	_, c2 := view(t, brokers)
	if c2.Len("mp-a") != 999 {
		t.Fatalf("rebuilt %d entities, want 999", c2.Len("mp-a"))
	}
	if v, ver, ok := c2.Get("mp-a", "id-0001"); !ok || v.Name != "y" || ver != 2 {
		t.Errorf("rebuilt id-0001 = %+v v%d %v", v, ver, ok)
	}
	if _, _, ok := c2.Get("mp-a", "id-0002"); ok {
		t.Error("deleted entity came back")
	}
}

// TestLastWriterWinsAcrossProcesses: two views (two processes) overwrite the
// same entities concurrently; both succeed and every view converges.
func TestLastWriterWinsAcrossProcesses(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	_, c1 := view(t, brokers)
	_, c2 := view(t, brokers)
	ctx := t.Context()
	var wg sync.WaitGroup
	for w, c := range []*statelog.Collection[thing]{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 20; round++ {
				if err := c.PutMany(ctx, "mp", []statelog.Write[thing]{{ID: "shared", Expected: statelog.AnyVersion, Value: thing{Name: fmt.Sprint(w), N: round}}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testenv.Eventually(t, 5*time.Second, func() error {
		a, va, _ := c1.Get("mp", "shared")
		b, vb, _ := c2.Get("mp", "shared")
		if a != b || va != vb || va != 40 {
			return fmt.Errorf("views differ: %+v v%d / %+v v%d", a, va, b, vb)
		}
		return nil
	})
}

// TestLockedWrites: with a Redis locker, concurrent writes expecting one
// version give exactly one winner in all processes together.
func TestLockedWrites(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	rdb := redisstore.Open(redisstore.Options{Addr: env.RedisAddr, Cluster: env.RedisCluster})
	defer rdb.Close()
	l1, c1 := view(t, brokers)
	l2, c2 := view(t, brokers)
	lk := redisstore.NewLocker(rdb, fmt.Sprintf("test:%d:", time.Now().UnixNano()), 5*time.Second)
	l1.SetLocker(lk)
	l2.SetLocker(lk)
	ctx := t.Context()
	if _, err := c1.Put(ctx, "mp", "x", 0, thing{Name: "v1"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if _, v, _ := c2.Get("mp", "x"); v != 1 {
			return errors.New("second view has not seen v1")
		}
		return nil
	})
	var wins, conflicts int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Put(ctx, "mp", "x", 1, thing{Name: fmt.Sprint("w", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, statelog.ErrConflict), errors.Is(err, redisstore.ErrLocked):
				conflicts++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != 9 {
		t.Errorf("wins %d conflicts %d", wins, conflicts)
	}
}

// TestConcurrentUpsertsInOneProcess: last-writer-wins batches of one
// process are not serialised by the lock stripes; when they overlap, the
// losers are written again on top, every write succeeds, and every write
// counts in the entity's version.
func TestConcurrentUpsertsInOneProcess(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	_, c := view(t, brokers)
	ctx := t.Context()
	const writers, rounds, ids = 6, 5, 40
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				ws := make([]statelog.Write[thing], ids)
				for i := range ws {
					ws[i] = statelog.Write[thing]{ID: fmt.Sprintf("id-%02d", i), Expected: statelog.AnyVersion, Value: thing{Name: fmt.Sprint(w), N: r}}
				}
				if err := c.PutMany(ctx, "mp", ws); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// A write expecting a version, racing with them, either wins or is a
	// conflict; it never corrupts the count.
	var expectedWins int64
	for i := 0; i < 10; i++ {
		_, ver, _ := c.Get("mp", "id-00")
		if _, err := c.Put(ctx, "mp", "id-00", ver, thing{Name: "expected"}); err == nil {
			expectedWins++
		} else if !errors.Is(err, statelog.ErrConflict) {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i := 0; i < ids; i++ {
		id := fmt.Sprintf("id-%02d", i)
		want := int64(writers * rounds)
		if i == 0 {
			want += expectedWins
		}
		if _, ver, ok := c.Get("mp", id); !ok || ver != want {
			t.Fatalf("%s at version %d, want %d", id, ver, want)
		}
	}
	// A cold view agrees.
	_, c2 := view(t, brokers)
	for i := 0; i < ids; i++ {
		id := fmt.Sprintf("id-%02d", i)
		a, va, _ := c.Get("mp", id)
		b, vb, _ := c2.Get("mp", id)
		if a != b || va != vb {
			t.Fatalf("%s: rebuilt %+v v%d, live %+v v%d", id, b, vb, a, va)
		}
	}
}

// TestCollectionEntriesInPlace: entries are updated in place and a deleted
// one is reused; what listeners are given as the old value is still the old
// value, and every entity reads back as its own.
func TestCollectionEntriesInPlace(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	var mu sync.Mutex
	var seen []string
	_, c := viewWith(t, brokers, "inplace.", func(c *statelog.Collection[thing]) {
		c.Listen(func(_, id string, old, nw *thing) {
			s := id + ":"
			if old != nil {
				s += fmt.Sprint(*old)
			}
			s += "->"
			if nw != nil {
				s += fmt.Sprint(*nw)
			}
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		})
	})
	ctx := t.Context()
	put := func(id string, n int) {
		t.Helper()
		if _, err := c.Put(ctx, "m", id, statelog.AnyVersion, thing{Name: id, N: n}); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 1)
	put("b", 1)
	put("c", 1)
	put("a", 2)
	if err := c.Delete(ctx, "m", "b", statelog.AnyVersion); err != nil {
		t.Fatal(err)
	}
	put("d", 1) // b's entry
	put("d", 2)
	want := []string{"a:->{a 1}", "b:->{b 1}", "c:->{c 1}", "a:{a 1}->{a 2}", "b:{b 1}->", "d:->{d 1}", "d:{d 1}->{d 2}"}
	mu.Lock()
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("listener saw %q, want %q", seen, want)
	}
	mu.Unlock()
	for id, w := range map[string]thing{"a": {"a", 2}, "c": {"c", 1}, "d": {"d", 2}} {
		if v, ver, ok := c.Get("m", id); !ok || v != w || ver != int64(w.N) {
			t.Errorf("%s: %v version %d %v, want %v version %d", id, v, ver, ok, w, w.N)
		}
	}
	if _, _, ok := c.Get("m", "b"); ok {
		t.Error("b is deleted but still read")
	}
	got := map[string]thing{}
	c.Each("m", func(id string, v thing) bool { got[id] = v; return true })
	if len(got) != 3 || got["a"].N != 2 || got["c"].N != 1 || got["d"].N != 2 {
		t.Errorf("Each: %v", got)
	}
}
