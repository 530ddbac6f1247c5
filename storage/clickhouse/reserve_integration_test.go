package clickhouse_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestReserveStrings: a batch's String columns sized by ReserveStrings take
// their whole slices without growing (a handful of allocations where an
// unsized column grows dozens of times), and the rows arrive intact.
func TestReserveStrings(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, env.Config(t, nil))
	if err := conn.Exec(ctx, `CREATE TABLE reserve_test (id UInt32, a String, tags Array(String), b String)
		ENGINE = MergeTree() ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	ids := make([]uint32, n)
	a, b := make([]string, n), make([]string, n)
	tags := make([][]string, n)
	for i := range n {
		ids[i] = uint32(i)
		a[i] = fmt.Sprintf("event-%08d-%s", i, strings.Repeat("x", i%40))
		b[i] = "" // empty strings too
		if i%3 == 0 {
			b[i] = "é☃" + fmt.Sprint(i)
		}
		tags[i] = []string{"t", fmt.Sprint(i % 7)}
	}
	cols := []any{ids, a, tags, b}

	mallocs := func(prepare bool) uint64 {
		batch, err := conn.PrepareBatch(ctx, "INSERT INTO reserve_test (id, a, tags, b)")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = batch.Abort() }()
		if prepare {
			if got := clickhouse.ReserveStrings(batch, cols); got != 2 {
				t.Fatalf("ReserveStrings sized %d columns, want 2 (a and b)", got)
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, i := range []int{1, 3} {
			if err := batch.Column(i).Append(cols[i]); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	// The counter is the process's: a background goroutine (the driver's
	// pool, the test environment) can allocate during a measurement, and only
	// ever adds. The least of a few tries is the append's own count.
	least := func(prepare bool) uint64 {
		m := mallocs(prepare)
		for range 4 {
			m = min(m, mallocs(prepare))
		}
		return m
	}
	sized, unsized := least(true), least(false)
	t.Logf("appending two String columns of %d rows: %d allocations sized, %d unsized", n, sized, unsized)
	if sized > 8 || unsized < 4*sized {
		t.Fatalf("appending two String columns of %d rows: %d allocations sized, %d unsized", n, sized, unsized)
	}

	batch, err := conn.PrepareBatch(ctx, "INSERT INTO reserve_test (id, a, tags, b)")
	if err != nil {
		t.Fatal(err)
	}
	clickhouse.ReserveStrings(batch, cols)
	for i, c := range cols {
		if err := batch.Column(i).Append(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT id, a, tags, b FROM reserve_test ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var (
			id     uint32
			ga, gb string
			gt     []string
		)
		if err := rows.Scan(&id, &ga, &gt, &gb); err != nil {
			t.Fatal(err)
		}
		if id != uint32(got) || ga != a[got] || gb != b[got] || !slices.Equal(gt, tags[got]) {
			t.Fatalf("row %d: (%d, %q, %v, %q), want (%d, %q, %v, %q)", got, id, ga, gt, gb, got, a[got], tags[got], b[got])
		}
		got++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("read %d rows, want %d", got, n)
	}
}

// BenchmarkReserveStrings: building (not sending) a block of 50,000 rows of
// eight String columns shaped like the fold's (ids, names, types), with and
// without ReserveStrings.
func BenchmarkReserveStrings(b *testing.B) {
	env := testenv.Get(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(b, ctx, env.Config(b, nil))
	names := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	if err := conn.Exec(ctx, "CREATE TABLE reserve_bench ("+strings.Join(names, " String, ")+" String) ENGINE = MergeTree() ORDER BY s0"); err != nil {
		b.Fatal(err)
	}
	const n = 50_000
	cols := make([]any, len(names))
	for c := range cols {
		ss := make([]string, n)
		for i := range ss {
			switch c % 4 {
			case 0: // a UUID in text
				ss[i] = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, c, i%4096, c, i*7919)
			case 1: // a name
				ss[i] = fmt.Sprintf("campaign %d of vendor %d", i%1000, i%70)
			case 2: // a type
				ss[i] = "impression"
			default: // a user id
				ss[i] = fmt.Sprintf("user-%06d", i*13%100_000)
			}
		}
		cols[c] = ss
	}
	for _, sized := range []bool{false, true} {
		b.Run(fmt.Sprintf("sized=%v", sized), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				batch, err := conn.PrepareBatch(ctx, "INSERT INTO reserve_bench ("+strings.Join(names, ", ")+")")
				if err != nil {
					b.Fatal(err)
				}
				if sized {
					clickhouse.ReserveStrings(batch, cols)
				}
				for i, c := range cols {
					if err := batch.Column(i).Append(c); err != nil {
						b.Fatal(err)
					}
				}
				if err := batch.Abort(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
