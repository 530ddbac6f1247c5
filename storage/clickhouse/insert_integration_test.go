package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestInsertSettings: a query under clickhouse.Insert runs with the server's
// squashing of insert blocks switched off (both thresholds 0), and one
// without it keeps the server's defaults. The table is the test server's own
// (18.16 in make test), so a setting it did not know would fail here.
func TestInsertSettings(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, env.Config(t, nil))
	read := func(ctx context.Context) map[string]string {
		rows, err := conn.Query(ctx, `SELECT name, value FROM system.settings
			WHERE name IN ('min_insert_block_size_rows', 'min_insert_block_size_bytes')`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			m[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	got := read(clickhouse.Insert(ctx))
	for _, k := range []string{"min_insert_block_size_rows", "min_insert_block_size_bytes"} {
		if got[k] != "0" {
			t.Errorf("under Insert, %s = %q, want 0 (settings %v)", k, got[k], got)
		}
	}
	if def := read(ctx); def["min_insert_block_size_rows"] == "0" || def["min_insert_block_size_rows"] == "" {
		t.Errorf("without Insert, min_insert_block_size_rows = %q, want the server's default", def["min_insert_block_size_rows"])
	}
}

// TestInsertWritesBlocksAsTheyCome: an insert of two blocks (the batch
// flushed half way) is squashed into one part by default, and written as two
// parts under clickhouse.Insert, which is what proves the settings reach the
// INSERT itself and not only a SELECT.
func TestInsertWritesBlocksAsTheyCome(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, env.Config(t, nil))
	for _, q := range []string{
		"CREATE TABLE insert_blocks (run UInt8, id UInt32) ENGINE = MergeTree() PARTITION BY run ORDER BY id",
		"SYSTEM STOP MERGES insert_blocks",
	} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	insert := func(ctx context.Context, run uint8) {
		t.Helper()
		b, err := conn.PrepareBatch(ctx, "INSERT INTO insert_blocks (run, id)")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			if i == 100 {
				if err := b.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Append(run, uint32(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	parts := func(run uint8) (n uint64) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count() FROM system.parts
			WHERE database = currentDatabase() AND table = 'insert_blocks' AND active AND partition = ?`,
			fmt.Sprint(run)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	insert(ctx, 1)
	insert(clickhouse.Insert(ctx), 2)
	if n := parts(1); n != 1 {
		t.Errorf("default settings: two blocks made %d parts, want 1 (squashed)", n)
	}
	if n := parts(2); n != 2 {
		t.Errorf("under Insert: two blocks made %d parts, want 2 (written as they came)", n)
	}
	var rows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM insert_blocks").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 400 {
		t.Errorf("%d rows, want 400", rows)
	}
}
