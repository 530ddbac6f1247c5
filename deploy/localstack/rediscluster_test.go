package localstack

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRedisCluster starts a Redis Cluster of three masters with a replica each, writes keys on every
// master, kills the master of one key (kill -9): its replica takes over and serves the key, the killed
// node comes back as a replica; then the whole stack stops and starts again on the same data: the nodes
// form the same cluster from their nodes.conf, without redis-cli.
func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six redis-server processes")
	}
	dir := t.TempDir()
	o := testOptions(t, dir)
	o.ClickHouse, o.S3 = false, false
	o.RedisCluster, o.RedisReplicas = 3, 1
	requireBinaries(t, o)
	t0 := time.Now()
	s := startStack(t, o)
	t.Logf("3 masters and 3 replicas ready after %s", time.Since(t0).Round(time.Millisecond))
	if len(s.RedisAddrs) != 6 || s.RedisAddr != s.RedisAddrs[0] {
		t.Fatalf("stack: %+v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodes, err := s.RedisNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	masters, slots := 0, 0
	for _, n := range nodes {
		if n.Master {
			masters++
			for _, r := range n.Slots {
				slots += r[1] - r[0] + 1
			}
		} else if n.Of == "" {
			t.Errorf("replica %s has no master", n.Addr)
		}
		if n.Service == "" {
			t.Errorf("node %s is not one of the stack's", n.Addr)
		}
	}
	if masters != 3 || slots != 16384 {
		t.Fatalf("%d masters serving %d slots: %+v", masters, slots, nodes)
	}

	// A key on each master, written where the cluster says it lives, and
	// acknowledged by its replica: WAIT, on the connection of the write (it
	// waits for that connection's writes; on another it returns at once).
	keys := []string{"{a}k", "{b}k", "{c}k", "{d}k", "{e}k"}
	for _, k := range keys {
		m, err := s.RedisMasterOf(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := respDoAll(ctx, m.Addr, []string{"SET", k, "v-" + k}, []string{"WAIT", "1", "2000"}); err != nil || got[0] != "OK" || got[1] != "1" {
			t.Fatalf("SET and WAIT %s on %s: %q %v", k, m.Addr, got, err)
		}
	}
	victim, err := s.RedisMasterOf(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := s.Kill(victim.Service); err != nil {
		t.Fatal(err)
	}
	var heir RedisNode
	for {
		if heir, err = s.RedisMasterOf(ctx, keys[0]); err == nil && heir.Addr != victim.Addr {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no replica took over from %s: %v", victim.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s took over from %s %s after the kill", heir.Service, victim.Service, time.Since(killed).Round(time.Millisecond))
	// The new master serves what its master's replica acknowledged.
	if got, err := respDo(ctx, heir.Addr, "GET", keys[0]); err != nil || got != "v-"+keys[0] {
		nodes, _ := s.RedisNodes(ctx)
		t.Fatalf("GET %s on the new master %s: %q %v; nodes %+v", keys[0], heir.Addr, got, err, nodes)
	}
	if err := s.Restart(ctx, victim.Service); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitRedisCluster(ctx); err != nil {
		t.Fatal(err)
	}
	nodes, err = s.RedisNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Addr == victim.Addr && (n.Master || n.Of != heir.ID) {
			t.Fatalf("the restarted node is %+v, want a replica of %s", n, heir.ID)
		}
	}

	// The same cluster again from the same data.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	o2 := testOptions(t, dir)
	o2.ClickHouse, o2.S3 = false, false
	o2.RedisCluster, o2.RedisReplicas = 3, 1
	o2.RedisBusPorts = s.opts.RedisBusPorts
	for i, a := range s.RedisAddrs {
		_, p, _ := net.SplitHostPort(a)
		port, _ := strconv.Atoi(p)
		if i == 0 {
			o2.RedisPort = port
		} else {
			o2.RedisNodePorts = append(o2.RedisNodePorts, port)
		}
	}
	s2 := startStack(t, o2)
	for _, k := range keys {
		m, err := s2.RedisMasterOf(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := respDo(ctx, m.Addr, "GET", k); err != nil || got != "v-"+k {
			t.Errorf("GET %s after the restart: %q %v", k, got, err)
		}
	}
	again, err := s2.RedisNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids(again) != ids(nodes) {
		t.Errorf("the nodes after the restart are %s, want the same cluster %s", ids(again), ids(nodes))
	}
}

func ids(nodes []RedisNode) string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Service+"="+n.ID)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
