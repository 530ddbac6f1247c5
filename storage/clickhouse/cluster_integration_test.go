package clickhouse_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// replicaOptions are the options of a process connected to replica i
// (0-based) of st's cluster.
func replicaOptions(st *localstack.Stack, i int, db string) clickhouse.Options {
	return clickhouse.Options{Addr: st.ClickHouseAddrs[i], Database: db, User: "default", Cluster: st.ClickHouseCluster}
}

func openReplica(t *testing.T, st *localstack.Stack, i int, db string) clickhouse.Conn {
	t.Helper()
	c, err := clickhouse.Open(replicaOptions(st, i, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// schemaOf describes the tables of db on one replica: name, engine and
// columns (in their order), one line each.
func schemaOf(t *testing.T, ctx context.Context, c clickhouse.Conn, db string) []string {
	t.Helper()
	cols := map[string][]string{}
	rows, err := c.Query(ctx, "SELECT table, name, type FROM system.columns WHERE database = ?", db)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table, name, typ string
		if err := rows.Scan(&table, &name, &typ); err != nil {
			t.Fatal(err)
		}
		cols[table] = append(cols[table], name+" "+typ)
	}
	rows.Close()
	rows, err = c.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = ? ORDER BY name", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		out = append(out, name+" "+engine+" ("+strings.Join(cols[name], ", ")+")")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterMigrate: on a cluster of two replicas, two processes connected
// to different replicas migrate at the same time and both succeed; migrating
// again on either applies nothing; both replicas end with the same schema,
// every table of the schema replicated (views aside), the record of the
// applied migrations too, and rows written on one replica are read on the
// other.
func TestClusterMigrate(t *testing.T) {
	st := testenv.OwnClickHouseCluster(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	const db = "endcap"
	var wg sync.WaitGroup
	errs := make([]error, 2)
	took := make([]time.Duration, 2)
	for i := range 2 {
		wg.Go(func() {
			start := time.Now()
			o := replicaOptions(st, i, db)
			if err := clickhouse.EnsureDatabase(ctx, o); err != nil {
				errs[i] = err
				return
			}
			c, err := clickhouse.Open(o)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			_, errs[i] = o.Schema().Migrate(ctx, c, nil)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process on replica %d: %v", i+1, err)
		}
	}
	t.Logf("two processes migrated a fresh cluster at the same time in %s and %s", took[0].Round(time.Millisecond), took[1].Round(time.Millisecond))

	c1, c2 := openReplica(t, st, 0, db), openReplica(t, st, 1, db)
	for i, c := range []clickhouse.Conn{c1, c2} {
		start := time.Now()
		n, err := replicaOptions(st, i, db).Schema().Migrate(ctx, c, nil)
		if err != nil || n != 0 {
			t.Fatalf("migrating replica %d again: %d applied, %v", i+1, n, err)
		}
		t.Logf("migrating replica %d again applied nothing in %s", i+1, time.Since(start).Round(time.Millisecond))
		if v, err := clickhouse.SchemaVersion(ctx, c); err != nil || v != clickhouse.LatestVersion() {
			t.Fatalf("replica %d: schema version %d, %v; want %d", i+1, v, err, clickhouse.LatestVersion())
		}
	}
	s1, s2 := schemaOf(t, ctx, c1, db), schemaOf(t, ctx, c2, db)
	if strings.Join(s1, "\n") != strings.Join(s2, "\n") {
		t.Fatalf("the replicas' schemas differ:\nreplica 1:\n%s\nreplica 2:\n%s", strings.Join(s1, "\n"), strings.Join(s2, "\n"))
	}
	tables, views := 0, 0
	for _, l := range s1 {
		f := strings.Fields(l)
		switch {
		case f[1] == "View":
			views++
		case strings.HasPrefix(f[1], "Replicated") && strings.HasSuffix(f[1], "MergeTree"):
			tables++
		default:
			t.Errorf("table %s has engine %s, not a replicated one", f[0], f[1])
		}
	}
	if tables < 10 || views < 5 {
		t.Errorf("%d replicated tables and %d views:\n%s", tables, views, strings.Join(s1, "\n"))
	}

	// Written on one replica, read on the other.
	b, err := c1.PrepareBatch(ctx, "INSERT INTO rollup_days (day_local, computed_at, rows)")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), time.Now().UTC(), uint64(7)); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Exec(ctx, "SYSTEM SYNC REPLICA rollup_days"); err != nil {
		t.Fatal(err)
	}
	var rows uint64
	if err := c2.QueryRow(ctx, "SELECT sum(rows) FROM rollup_days FINAL").Scan(&rows); err != nil || rows != 7 {
		t.Fatalf("replica 2 reads %d rows in rollup_days (%v), want 7", rows, err)
	}

	// A stage of a replicated table is a plain table of one replica, whose
	// partitions swap into the replicated table and reach the other replica.
	if err := clickhouse.CreateStage(ctx, c1, "stage_probe", "rollup_daily"); err != nil {
		t.Fatal(err)
	}
	var engine string
	if err := c1.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = currentDatabase() AND name = 'stage_probe'").Scan(&engine); err != nil || engine != "MergeTree" {
		t.Fatalf("stage engine %q, %v", engine, err)
	}
	if err := c1.Exec(ctx, "INSERT INTO stage_probe (marketplace_id, day_local, impressions) SELECT generateUUIDv4(), toDate('2026-01-02'), 3"); err != nil {
		t.Fatal(err)
	}
	if err := c1.Exec(ctx, "ALTER TABLE rollup_daily REPLACE PARTITION ID '20260102' FROM stage_probe"); err != nil {
		t.Fatal(err)
	}
	if err := c2.Exec(ctx, "SYSTEM SYNC REPLICA rollup_daily"); err != nil {
		t.Fatal(err)
	}
	if err := c2.QueryRow(ctx, "SELECT sum(impressions) FROM rollup_daily WHERE day_local = '2026-01-02'").Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("replica 2 reads %d impressions swapped in on replica 1 (%v), want 3", rows, err)
	}
}

// TestClusterMigrateSkipsClusterWhenUpToDate: with the schema up to date,
// a process starts (EnsureDatabase, Migrate) while another replica is down:
// nothing goes to the cluster, whose queue would wait for the dead replica.
func TestClusterMigrateSkipsClusterWhenUpToDate(t *testing.T) {
	st := testenv.OwnClickHouseCluster(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	o := replicaOptions(st, 0, "endcap")
	if err := clickhouse.EnsureDatabase(ctx, o); err != nil {
		t.Fatal(err)
	}
	c := openReplica(t, st, 0, "endcap")
	if _, err := o.Schema().Migrate(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Kill(localstack.ClickHouseService(2)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := clickhouse.EnsureDatabase(ctx, o); err != nil {
		t.Fatal(err)
	}
	if n, err := o.Schema().Migrate(ctx, c, nil); err != nil || n != 0 {
		t.Fatalf("migrating with replica 2 down: %d applied, %v", n, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("an up-to-date schema took %s to check with a replica down", d)
	}
	// A statement that must reach every replica fails within the bound
	// instead of hanging, and replica 2 runs it when it is back.
	sch := o.Schema()
	q, err := sch.Statement("CREATE TABLE IF NOT EXISTS probe (a UInt8) ENGINE = MergeTree() ORDER BY a")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	qctx, qcancel := context.WithTimeout(ctx, 60*time.Second)
	err = c.Exec(clickhouse.OnCluster(qctx), q)
	qcancel()
	if err == nil {
		t.Fatalf("ON CLUSTER with replica 2 down succeeded")
	}
	t.Logf("ON CLUSTER with replica 2 down failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	if err := st.Restart(rctx, localstack.ClickHouseService(2)); err != nil {
		t.Fatal(err)
	}
	c2 := openReplica(t, st, 1, "endcap")
	testenv.Eventually(t, 30*time.Second, func() error {
		var n uint64
		if err := c2.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'endcap' AND name = 'probe'").Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("replica 2 has %d tables probe (%v)", n, err)
		}
		return nil
	})
}

// TestClusterInsertDeduplication: a replicated table keeps a retried batch
// (the same rows in the same order) once, through either replica, before
// any merge; a replay that is not the same block (other batch boundaries)
// is inserted, and FINAL folds it like on one server.
func TestClusterInsertDeduplication(t *testing.T) {
	st := testenv.OwnClickHouseCluster(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	o := replicaOptions(st, 0, "endcap")
	if err := clickhouse.EnsureDatabase(ctx, o); err != nil {
		t.Fatal(err)
	}
	c1, c2 := openReplica(t, st, 0, "endcap"), openReplica(t, st, 1, "endcap")
	if _, err := o.Schema().Migrate(ctx, c1, nil); err != nil {
		t.Fatal(err)
	}
	mp := "0193b7a0-0000-7000-8000-000000000001"
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	insert := func(c clickhouse.Conn, ids ...string) {
		t.Helper()
		b, err := c.PrepareBatch(clickhouse.Insert(ctx), "INSERT INTO events_raw (marketplace_id, kind, event_id, occurred_at, received_at, kafka_partition, kafka_offset)")
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			if err := b.Append(mp, "impression", id, at, at, int32(0), int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	counts := func(c clickhouse.Conn) (raw, final uint64) {
		t.Helper()
		if err := c.Exec(ctx, "SYSTEM SYNC REPLICA events_raw"); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, "SELECT count() FROM events_raw").Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, "SELECT count() FROM events_raw FINAL").Scan(&final); err != nil {
			t.Fatal(err)
		}
		return raw, final
	}
	insert(c1, "a", "b", "c")
	insert(c1, "a", "b", "c") // a retry of the same batch on the same replica
	insert(c2, "a", "b", "c") // ... and through the other replica
	for i, c := range []clickhouse.Conn{c1, c2} {
		if raw, final := counts(c); raw != 3 || final != 3 {
			t.Fatalf("replica %d after a batch and two retries: %d rows, %d with FINAL; want 3 and 3", i+1, raw, final)
		}
	}
	// A replay with other batch boundaries (one more record, offsets
	// shifted): another block, stored; FINAL shows each event once.
	insert(c2, "b", "c", "d")
	for i, c := range []clickhouse.Conn{c1, c2} {
		if raw, final := counts(c); raw != 6 || final != 4 {
			t.Fatalf("replica %d after a replay in other batches: %d rows, %d with FINAL; want 6 and 4", i+1, raw, final)
		}
	}
}
