package clickhouse_test

import (
	"testing"

	"github.com/endcap/endcap/storage/clickhouse"
)

// TestMigrationStatements: a statement that adds a column adds exactly one,
// in the form the migrator recognises (it skips it when the column exists).
func TestMigrationStatements(t *testing.T) {
	ms, err := clickhouse.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[len(ms)-1].Version != clickhouse.LatestVersion() {
		t.Fatalf("%d migrations, latest %d", len(ms), clickhouse.LatestVersion())
	}
	for _, c := range []struct {
		name, sql string
		ok        bool
	}{
		{"one column", "ALTER TABLE t ADD COLUMN c UInt8 DEFAULT 1", true},
		{"lower case, new lines", "alter table t\n  add column c String", true},
		{"two columns", "ALTER TABLE t ADD COLUMN a UInt8, ADD COLUMN b UInt8", false},
		{"with another change", "ALTER TABLE t DROP COLUMN x, ADD COLUMN b UInt8", false},
		{"no column", "CREATE TABLE IF NOT EXISTS t (a UInt8) ENGINE = Memory", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := clickhouse.CheckStatement(c.sql); (err == nil) != c.ok {
				t.Errorf("CheckStatement(%q) = %v, want ok %v", c.sql, err, c.ok)
			}
		})
	}
}
