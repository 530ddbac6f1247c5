package localstack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// chQueryAt runs a query over HTTP against one server and returns its body.
func chQueryAt(t *testing.T, httpAddr, q string) string {
	t.Helper()
	got, err := chTry(httpAddr, q)
	if err != nil {
		t.Fatalf("%s: %s: %v", httpAddr, q, err)
	}
	return got
}

func chTry(httpAddr, q string) (string, error) {
	resp, err := http.Post("http://"+httpAddr+"/?"+url.Values{"query": {q}}.Encode(), "text/plain", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// TestReplicatedClickHouse starts ZooKeeper and two replicas of one shard, creates a replicated table on the
// cluster, and checks that rows written on either replica reach the other, also after a replica was killed
// and restarted.
func TestReplicatedClickHouse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper and two ClickHouse servers")
	}
	o := testOptions(t, t.TempDir())
	o.Redis, o.S3 = false, false
	o.ClickHouseReplicas = 2
	requireBinaries(t, o)
	t0 := time.Now()
	s := startStack(t, o)
	t.Logf("ZooKeeper and 2 replicas ready after %s", time.Since(t0).Round(time.Millisecond))
	if len(s.ClickHouseAddrs) != 2 || len(s.ClickHouseHTTPAddrs) != 2 || s.ClickHouseCluster != DefaultClickHouseCluster || s.ZooKeeperAddr == "" {
		t.Fatalf("stack: %+v", s)
	}
	for _, svc := range []string{ServiceZooKeeper, ServiceClickHouse, ClickHouseService(2)} {
		if s.PIDs()[svc] == 0 {
			t.Fatalf("no pid for %s: %v", svc, s.PIDs())
		}
	}
	r1, r2 := s.ClickHouseHTTPAddrs[0], s.ClickHouseHTTPAddrs[1]
	for i, a := range s.ClickHouseHTTPAddrs {
		if got := chQueryAt(t, a, "SELECT macro, substitution FROM system.macros WHERE macro IN ('shard', 'replica') ORDER BY macro"); got != "replica\t"+ReplicaName(i+1)+"\nshard\t01\n" {
			t.Fatalf("replica %d macros: %q", i+1, got)
		}
	}
	chQueryAt(t, r1, "CREATE TABLE default.rep ON CLUSTER endcap (k UInt64, v String) "+
		"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/default/rep', '{replica}') ORDER BY k")
	chQueryAt(t, r1, "INSERT INTO default.rep SELECT number, 'a' FROM system.numbers LIMIT 100")
	chQueryAt(t, r2, "INSERT INTO default.rep SELECT number + 100, 'b' FROM system.numbers LIMIT 100")
	waitCount := func(addr string, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := chTry(addr, "SELECT count() FROM default.rep FINAL")
			if err == nil && got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: count %q (%v), want %q", addr, got, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitCount(r1, "200\n")
	waitCount(r2, "200\n")

	// A replica killed while the other takes writes catches up when it is back.
	if err := s.Kill(ClickHouseService(2)); err != nil {
		t.Fatal(err)
	}
	chQueryAt(t, r1, "INSERT INTO default.rep SELECT number + 200, 'c' FROM system.numbers LIMIT 100")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t1 := time.Now()
	if err := s.Restart(ctx, ClickHouseService(2)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t1)
	t.Logf("replica 2 restarted in %s", took.Round(time.Millisecond))
	if took < ddlWorkerSettle {
		t.Errorf("replica 2 called ready %s after its restart, before its DDL worker can be (%s)", took, ddlWorkerSettle)
	}
	chQueryAt(t, r2, "SYSTEM SYNC REPLICA default.rep")
	if got := chQueryAt(t, r2, "SELECT count(), countIf(v = 'c') FROM default.rep"); got != "300\t100\n" {
		t.Fatalf("replica 2 after its restart: %q", got)
	}
	if err := s.Restart(ctx, ClickHouseService(2)); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Restart of a running replica: %v", err)
	}
}
