package chdb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/clickhouse/chrecord"
	"github.com/endcap/endcap/testkit/chdb"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestMigrationsTwoEngines: every migration, applied through the recording
// connection to 18.16 and then applied again over the up-to-date schema
// (as after a migration that failed half-way), replays on chDB: every
// statement is accepted and every read of the migrator answers alike.
func TestMigrationsTwoEngines(t *testing.T) {
	env := testenv.Get(t)
	e := chdb.ForTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := env.Config(t, nil)
	rec := chrecord.Record(cfg.ClickHouseDatabase, chrecord.Options{Results: true})
	defer rec.Close()
	conn := testenv.ClickHouse(t, ctx, cfg)
	if err := conn.Exec(ctx, "TRUNCATE TABLE schema_migrations"); err != nil {
		t.Fatal(err)
	}
	if _, err := clickhouse.Migrate(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	stmts := rec.Statements()
	rep := chdb.Replay(ctx, e, cfg.ClickHouseDatabase, rec.TimeZone(), stmts)
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	creates := 0
	for _, s := range stmts {
		if strings.HasPrefix(s.SQL, "CREATE TABLE") || strings.HasPrefix(s.SQL, "CREATE MATERIALIZED VIEW") {
			creates++
		}
	}
	if creates == 0 || rep.Compared == 0 {
		t.Fatalf("nothing recorded: %d statements, %d CREATE, %d queries compared", len(stmts), creates, rep.Compared)
	}
	t.Logf("ClickHouse %s: %d statements (%v), %d queries compared, in %s",
		e.Version(), rep.Statements, rep.ByKind, rep.Compared, rep.Took.Round(time.Millisecond))
}
