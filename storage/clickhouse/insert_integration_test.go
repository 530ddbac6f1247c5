package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/clickhouse"
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
