package chdb_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/endcap/endcap/testkit/chdb"
)

// TestQueryLogOnChDB replays on chDB every statement that the native
// clients of a running local stack sent to its ClickHouse, from its
// system.query_log (docs/design/clickhouse.md, "Checking what make run sends"). It
// runs only when ENDCAP_CHDB_QUERY_LOG_URL names that ClickHouse's HTTP
// interface (for example http://127.0.0.1:18123 for `endcap dev
// --clickhouse-system-logs`); ENDCAP_CHDB_QUERY_LOG_DB is the database
// (default endcap). Every statement that 18.16 ran and chDB refuses fails it.
func TestQueryLogOnChDB(t *testing.T) {
	u := os.Getenv("ENDCAP_CHDB_QUERY_LOG_URL")
	if u == "" {
		t.Skip("ENDCAP_CHDB_QUERY_LOG_URL not set: no query log to replay")
	}
	db := os.Getenv("ENDCAP_CHDB_QUERY_LOG_DB")
	if db == "" {
		db = "endcap"
	}
	e := chdb.ForTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	rep, err := chdb.ReplayQueryLog(ctx, e, u, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Refused {
		q := r.Stmt.Query
		if len(q) > 2000 {
			q = q[:2000] + " …"
		}
		t.Errorf("refused by %s: %s\n    %s", e.Version(), r.Err, q)
	}
	for _, s := range rep.LoggedErrs {
		t.Logf("refused by the logged server (not replayed): %.300s: %.300s", s.Err, s.Query)
	}
	t.Logf("%d statements replayed on %s, %d refused; tables copied: %v", rep.Statements, e.Version(), len(rep.Refused), rep.Loaded)
}
