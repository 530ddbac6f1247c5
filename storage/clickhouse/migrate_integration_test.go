package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestMigrateAgain: every statement of every migration is idempotent. With
// the record of the applied migrations emptied (as after a process that
// failed half-way through a migration, before recording it), migrating again
// over the up-to-date schema re-runs them all and succeeds, adding no column
// twice.
func TestMigrateAgain(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, env.Config(t, nil)) // migrated once
	columns := func() uint64 {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = currentDatabase()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := columns()
	if err := conn.Exec(ctx, "TRUNCATE TABLE schema_migrations"); err != nil {
		t.Fatal(err)
	}
	n, err := clickhouse.Migrate(ctx, conn, nil)
	if err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	if n != clickhouse.LatestVersion() {
		t.Errorf("applied %d migrations again, want %d", n, clickhouse.LatestVersion())
	}
	if after := columns(); after != before {
		t.Errorf("%d columns after migrating again, %d before", after, before)
	}
}
