package chdb

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/clickhouse/chrecord"
)

func TestShape(t *testing.T) {
	for _, c := range []struct {
		q                string
		ordered, limited bool
	}{
		{"SELECT a FROM t", false, false},
		{"SELECT a FROM t ORDER BY a", true, false},
		{"SELECT a FROM t ORDER BY a LIMIT 3", true, true},
		{"SELECT a FROM t LIMIT 3", false, true},
		{"SELECT a FROM (SELECT a FROM t ORDER BY a LIMIT 3)", false, false},
		{"SELECT a FROM t LIMIT 1 BY a", false, false},
		{"SELECT 'ORDER BY' FROM t", false, false},
		{"SELECT a AS border_by FROM t WHERE x = 'LIMIT 2'", false, false},
		{"SELECT a FROM t\nORDER BY a\nLIMIT 10", true, true},
	} {
		o, l := shape(c.q)
		if o != c.ordered || l != c.limited {
			t.Errorf("shape(%q) = %v, %v; want %v, %v", c.q, o, l, c.ordered, c.limited)
		}
	}
}

// result builds a JSONCompactEachRowWithNamesAndTypes answer.
func result(names, types []string, rows ...[]any) string {
	var b strings.Builder
	for _, v := range []any{names, types} {
		j, _ := json.Marshal(v)
		b.Write(j)
		b.WriteByte('\n')
	}
	for _, r := range rows {
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestCompare(t *testing.T) {
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -5*3600))
	rec := func(q string, complete bool, rows ...[]string) chrecord.Statement {
		return chrecord.Statement{Kind: chrecord.Query, SQL: q, Captured: true, Complete: complete,
			Names:  []string{"d", "at", "n", "f", "dec", "s"},
			Types:  []string{"Date", "DateTime('UTC')", "UInt64", "Float64", "Decimal(18, 6)", "LowCardinality(String)"},
			Result: rows}
	}
	row := func(n uint64, f float64, dec, s string) []string {
		return []string{chrecord.Canon("Date", day), chrecord.Canon("DateTime('UTC')", at), chrecord.Canon("UInt64", n),
			chrecord.Canon("Float64", f), chrecord.Canon("Decimal(18, 6)", dec), chrecord.Canon("String", s)}
	}
	names := []string{"d", "at", "n", "f", "dec", "s"}
	types := []string{"Date", "DateTime('UTC')", "UInt64", "Float64", "Decimal(18, 6)", "String"}
	out := func(rows ...[]any) string { return result(names, types, rows...) }
	unix := at.Unix()
	for _, c := range []struct {
		name string
		s    chrecord.Statement
		out  string
		ok   bool
	}{
		{"same rows, other order, no ORDER BY", rec("SELECT x FROM t", true, row(1, 0.1, "1.500000", "a"), row(2, 0.2, "2", "b")),
			out([]any{"2026-01-02", unix, 2, 0.2, 2, "b"}, []any{"2026-01-02", unix, 1, 0.1 + 1e-17, 1.5, "a"}), true},
		{"other order with ORDER BY", rec("SELECT x FROM t ORDER BY n", true, row(1, 0.1, "1.5", "a"), row(2, 0.2, "2", "b")),
			out([]any{"2026-01-02", unix, 2, 0.2, 2, "b"}, []any{"2026-01-02", unix, 1, 0.1, 1.5, "a"}), false},
		{"a row more", rec("SELECT x FROM t", true, row(1, 0.1, "1.5", "a")),
			out([]any{"2026-01-02", unix, 1, 0.1, 1.5, "a"}, []any{"2026-01-02", unix, 1, 0.1, 1.5, "a"}), false},
		{"another value", rec("SELECT x FROM t", true, row(1, 0.1, "1.5", "a")),
			out([]any{"2026-01-02", unix, 1, 0.1, 1.5, "b"}), false},
		{"another instant", rec("SELECT x FROM t", true, row(1, 0.1, "1.5", "a")),
			out([]any{"2026-01-02", unix + 1, 1, 0.1, 1.5, "a"}), false},
		{"first row read only (QueryRow), ordered", rec("SELECT x FROM t ORDER BY n", false, row(1, 0.1, "1.5", "a")),
			out([]any{"2026-01-02", unix, 1, 0.1, 1.5, "a"}, []any{"2026-01-02", unix, 2, 0.2, 2, "b"}), true},
		{"first row read only, not first on the other engine", rec("SELECT x FROM t ORDER BY n", false, row(2, 0.2, "2", "b")),
			out([]any{"2026-01-02", unix, 1, 0.1, 1.5, "a"}, []any{"2026-01-02", unix, 2, 0.2, 2, "b"}), false},
		{"LIMIT without ORDER BY: the count", rec("SELECT x FROM t LIMIT 1", true, row(2, 0.2, "2", "b")),
			out([]any{"2026-01-02", unix, 1, 0.1, 1.5, "a"}), true},
		{"system table: columns only", rec("SELECT x FROM system.parts", true, row(2, 0.2, "2", "b")), out(), true},
		{"another column type", rec("SELECT x FROM t", true),
			result(names, []string{"Date", "DateTime('UTC')", "Int64", "Float64", "Decimal(18, 6)", "String"}), false},
	} {
		what, _ := Compare(c.s, c.out)
		if (what == "") != c.ok {
			t.Errorf("%s: Compare says %q", c.name, what)
		}
	}
}

func TestNormType(t *testing.T) {
	for in, want := range map[string]string{
		"LowCardinality(String)":                     "String",
		"Nullable(DateTime('UTC'))":                  "DateTime('UTC')",
		"Array(LowCardinality(Nullable(String)))":    "Array(String)",
		"Tuple(a Nullable(UInt8), b Decimal(18, 6))": "Tuple(aUInt8,bDecimal(18,6))",
	} {
		if got := normType(in); got != want {
			t.Errorf("normType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShapeOfStatements(t *testing.T) {
	same := [][2]string{
		{"SELECT a FROM t WHERE m = 'x' AND ts >= 17 LIMIT 100", "SELECT a FROM t WHERE m = 'y\\'z' AND ts >= 1795 LIMIT 7"},
		{"SELECT a FROM t WHERE id IN ('a', 'b')", "SELECT a FROM t WHERE id IN ('c','d','e')"},
		{"SELECT  a\n\tFROM t WHERE x = 1.5", "SELECT a FROM t WHERE x = 2"},
	}
	for _, c := range same {
		if Shape(c[0]) != Shape(c[1]) {
			t.Errorf("shapes differ: %q, %q", Shape(c[0]), Shape(c[1]))
		}
	}
	differ := [][2]string{
		{"SELECT a FROM t WHERE m = 'x'", "SELECT a FROM t WHERE m = 1"},
		{"SELECT a FROM t1", "SELECT a FROM t2"},
		{"SELECT a FROM t WHERE m = 'x'", "SELECT b FROM t WHERE m = 'x'"},
	}
	for _, c := range differ {
		if Shape(c[0]) == Shape(c[1]) {
			t.Errorf("same shape %q for %q and %q", Shape(c[0]), c[0], c[1])
		}
	}
}

// TestSkipCheck: with ENDCAP_TEST_CHDB=1, CheckTest makes Open record the
// test's database, and SkipCheck stops it.
func TestSkipCheck(t *testing.T) {
	t.Setenv(CheckEnv, "1")
	db := "endcap_test_skipcheck"
	open := func() string {
		c, err := clickhouse.Open(clickhouse.Options{Addr: "127.0.0.1:1", Database: db}) // no network call
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return fmt.Sprintf("%T", c)
	}
	plain := open()
	t.Run("checked", func(t *testing.T) {
		CheckTest(t, db)
		if got := open(); got == plain {
			t.Fatalf("CheckTest: Open returns a %s, not a recording connection", got)
		}
		SkipCheck(db)
		if got := open(); got != plain {
			t.Fatalf("after SkipCheck: Open returns a %s, want %s", got, plain)
		}
	})
}
