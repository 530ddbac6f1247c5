package clickhouse_test

import (
	"strings"
	"testing"

	"github.com/endcap/endcap/storage/clickhouse"
)

// TestClusterStatement: the cluster form of each kind of migration
// statement, and the statements it refuses.
func TestClusterStatement(t *testing.T) {
	s := clickhouse.Schema{Cluster: "c1", Database: "db"}
	for _, c := range []struct {
		name, in, want, err string
	}{
		{"replacing, no arguments",
			"CREATE TABLE IF NOT EXISTS t (a UInt8) ENGINE = ReplacingMergeTree()\nPARTITION BY a ORDER BY a",
			"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER c1 (a UInt8) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}')\nPARTITION BY a ORDER BY a", ""},
		{"replacing with a version",
			"CREATE TABLE IF NOT EXISTS t (a UInt8, v UInt64) ENGINE = ReplacingMergeTree(v) ORDER BY a",
			"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER c1 (a UInt8, v UInt64) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}', v) ORDER BY a", ""},
		{"merge tree without parentheses",
			"create table t (a UInt8) engine = MergeTree order by a",
			"create table db.t ON CLUSTER c1 (a UInt8) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}') order by a", ""},
		{"summing with a tuple of columns",
			"CREATE TABLE IF NOT EXISTS s (k UInt8, a UInt64, b UInt64) ENGINE = SummingMergeTree((a, b)) ORDER BY k",
			"CREATE TABLE IF NOT EXISTS db.s ON CLUSTER c1 (k UInt8, a UInt64, b UInt64) ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/db/s', '{replica}', (a, b)) ORDER BY k", ""},
		{"aggregating, qualified name",
			"CREATE TABLE IF NOT EXISTS other.g (k UInt8, u AggregateFunction(uniqExact, String)) ENGINE = AggregatingMergeTree() ORDER BY k",
			"CREATE TABLE IF NOT EXISTS db.g ON CLUSTER c1 (k UInt8, u AggregateFunction(uniqExact, String)) ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/db/g', '{replica}') ORDER BY k", ""},
		{"already replicated",
			"CREATE TABLE IF NOT EXISTS r (a UInt8) ENGINE = ReplicatedMergeTree('/x', 'y') ORDER BY a",
			"CREATE TABLE IF NOT EXISTS db.r ON CLUSTER c1 (a UInt8) ENGINE = ReplicatedMergeTree('/x', 'y') ORDER BY a", ""},
		{"memory", "CREATE TABLE IF NOT EXISTS m (a UInt8) ENGINE = Memory", "", "MergeTree family"},
		{"view: the tables it reads named with the database",
			"CREATE VIEW IF NOT EXISTS v AS\nSELECT * FROM a FINAL\nUNION ALL SELECT x FROM b FINAL ANY LEFT JOIN (SELECT y FROM c) AS j USING (k) JOIN system.one AS o ON 1 = 1, numbers(1)",
			"CREATE VIEW IF NOT EXISTS db.v ON CLUSTER c1 AS\nSELECT * FROM db.a FINAL\nUNION ALL SELECT x FROM db.b FINAL ANY LEFT JOIN (SELECT y FROM db.c) AS j USING (k) JOIN system.one AS o ON 1 = 1, numbers(1)", ""},
		{"materialized view to a table",
			"CREATE MATERIALIZED VIEW IF NOT EXISTS mv TO agg AS SELECT k, uniqExactState(s) AS u FROM src GROUP BY k",
			"CREATE MATERIALIZED VIEW IF NOT EXISTS db.mv ON CLUSTER c1 TO db.agg AS SELECT k, uniqExactState(s) AS u FROM db.src GROUP BY k", ""},
		{"materialized view with an inner engine",
			"CREATE MATERIALIZED VIEW IF NOT EXISTS mv ENGINE = SummingMergeTree() ORDER BY k AS SELECT k, count() AS n FROM src GROUP BY k",
			"CREATE MATERIALIZED VIEW IF NOT EXISTS db.mv ON CLUSTER c1 ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/db/mv', '{replica}') ORDER BY k AS SELECT k, count() AS n FROM db.src GROUP BY k", ""},
		{"alter: ZooKeeper carries it",
			"ALTER TABLE interactions_raw ADD COLUMN c String",
			"ALTER TABLE interactions_raw ADD COLUMN c String", ""},
		{"drop",
			"DROP TABLE IF EXISTS interactions",
			"DROP TABLE IF EXISTS db.interactions ON CLUSTER c1", ""},
		{"insert: replication copies it",
			"INSERT INTO t (a) SELECT 1",
			"INSERT INTO t (a) SELECT 1", ""},
		{"populate", "CREATE MATERIALIZED VIEW mv ENGINE = MergeTree() ORDER BY k POPULATE AS SELECT k FROM src", "", "POPULATE"},
		{"copy of another table's engine", "CREATE TABLE IF NOT EXISTS s AS rollup_daily", "", "MergeTree family"},
		{"own ON CLUSTER", "ALTER TABLE t ON CLUSTER x ADD COLUMN c String", "", "ON CLUSTER itself"},
		{"unknown statement", "OPTIMIZE TABLE t FINAL", "", "not known"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Statement(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Statement(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Statement(%q)\n got %q, %v\nwant %q", c.in, got, err, c.want)
			}
			// On one server, every statement runs as written.
			if one, err := (clickhouse.Schema{}).Statement(c.in); err != nil || one != c.in {
				t.Fatalf("single-server form of %q: %q, %v", c.in, one, err)
			}
		})
	}
}

// TestClusterMigrations: every statement of every migration has a cluster
// form, and every MergeTree table in it is replicated.
func TestClusterMigrations(t *testing.T) {
	ms, err := clickhouse.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	s := clickhouse.Schema{Cluster: "endcap", Database: "endcap"}
	for _, m := range ms {
		for i, st := range m.Statements {
			got, err := s.Statement(st)
			if err != nil {
				t.Errorf("%s statement %d: %v", m.Name, i+1, err)
				continue
			}
			if !strings.Contains(got, " ON CLUSTER endcap") && !strings.HasPrefix(got, "ALTER TABLE ") {
				t.Errorf("%s statement %d runs on one replica: %.100q", m.Name, i+1, got)
			}
			if strings.Contains(got, "MergeTree") && !strings.Contains(got, "ENGINE = Replicated") {
				t.Errorf("%s statement %d creates a table that is not replicated: %.100q", m.Name, i+1, got)
			}
		}
	}
}
