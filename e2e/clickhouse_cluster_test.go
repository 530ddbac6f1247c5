package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestClickHouseCluster runs the system as separate processes against a
// replicated ClickHouse (deploy/localstack: ZooKeeper and one shard of two
// replicas of 18.16) in cluster mode (ENDCAP_CLICKHOUSE_CLUSTER), every
// process given both replicas' addresses: migrations from two processes at
// once, one on each replica, then again; a steady load of impressions,
// auctions with clicks (charged) and purchases while the replica the
// processes use is killed (kill -9) and restarted, then the other one. At
// the end, read from either replica: every acknowledged event stored once,
// every clicked winner charged once and the charges summing to the Redis
// spend; the same export file and the same vendor charges from processes
// that read one replica each; every replicated table the same on both.
func TestClickHouseCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the system as separate processes against two ClickHouse replicas")
	}
	began := time.Now()
	s := newFaultStackWith(t, func(o *localstack.Options) { o.ClickHouseReplicas = 2 })
	t.Logf("stack with ZooKeeper and two replicas started in %s", time.Since(began).Round(time.Millisecond))
	r1, r2 := s.st.ClickHouseAddrs[0], s.st.ClickHouseAddrs[1]
	t.Cleanup(func() {
		if t.Failed() {
			for i := 1; i <= 2; i++ {
				name := localstack.ClickHouseService(i)
				t.Logf("errors of replica %d:\n%s", i, tail(filepath.Join(s.st.Dir, name, "logs", "clickhouse-server.err.log"), 30))
			}
		}
	})
	// Every export recomputes its days (through the replica its exporter
	// reads), whenever the rollup job last did.
	s.env = append(s.env, "ENDCAP_CLICKHOUSE_ADDR="+r1+","+r2, "ENDCAP_CLICKHOUSE_CLUSTER="+s.st.ClickHouseCluster,
		"ENDCAP_EXPORT_MAX_STALENESS=0s")
	replica := func(addr string) clickhouse.Conn {
		c, err := clickhouse.Open(clickhouse.Options{Addr: addr, Database: "endcap", User: "default"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c1, c2 := replica(r1), replica(r2)

	// Two processes migrate a fresh cluster at the same time, each through
	// another replica; then again: nothing left to apply.
	migrate := func(addr string) (string, error) {
		cmd := exec.Command(s.bin, "migrate")
		cmd.Env = append(append(devEnv(), s.env...), "ENDCAP_CLICKHOUSE_ADDR="+addr)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	for round, want := range []string{"", "applied 0 migration(s)"} {
		start := time.Now()
		outs, errs := make([]string, 2), make([]error, 2)
		var wg sync.WaitGroup
		for i, addr := range []string{r1, r2} {
			wg.Go(func() { outs[i], errs[i] = migrate(addr) })
		}
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil || !strings.Contains(outs[i], fmt.Sprintf("schema version %d", clickhouse.LatestVersion())) || !strings.Contains(outs[i], want) {
				t.Fatalf("migration %d through replica %d: %v\n%s", round+1, i+1, errs[i], outs[i])
			}
		}
		t.Logf("migration %d, two processes at once: %s (%s)", round+1, strings.TrimSpace(outs[0]+" / "+outs[1]), time.Since(start).Round(time.Millisecond))
	}
	if a, b := clusterTables(t, c1), clusterTables(t, c2); !slices.Equal(a, b) || len(a) < 15 {
		t.Fatalf("the replicas' tables differ or are missing:\nreplica 1: %v\nreplica 2: %v", a, b)
	}

	api := s.serve("api", "api")
	proj := s.serve("projector", "projector")
	exporter := s.serve("exporter", "exporter")
	d := s.setUp(api, "Cluster", api, proj, exporter)
	mkKey, advKey := d.mkKey, d.advKey
	ld := startLoad(t, api, mkKey)
	stopPurchases := ld.postPurchases()
	defer ld.stop()
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := ld.clicks(); n < 5 {
			return fmt.Errorf("%d clicks acknowledged", n)
		}
		return nil
	})
	ld.setPhase("steady")
	if err := s.waitCaughtUp(ld, "steady", catchUpBound); err != nil {
		t.Fatal(err)
	}

	// A replica killed under load: the first, which every process uses
	// while it is up, then the second.
	for _, k := range []struct {
		replica int
		down    time.Duration
	}{{1, 10 * time.Second}, {2, 6 * time.Second}} {
		name := fmt.Sprintf("replica %d killed", k.replica)
		t.Run(name, func(t *testing.T) {
			ld.setPhase(name)
			from := time.Now()
			if err := s.st.Kill(localstack.ClickHouseService(k.replica)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(k.down)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			restart := time.Now()
			if err := s.st.Restart(ctx, localstack.ClickHouseService(k.replica)); err != nil {
				t.Fatal(err)
			}
			t.Logf("replica %d restarted in %s; during the fault: %s", k.replica, time.Since(restart).Round(time.Millisecond), ld.summary(from))
			ld.setPhase(name + "-after")
			time.Sleep(3 * time.Second)
			ld.setPhase(name + "-check")
			if err := s.waitCaughtUp(ld, name+"-check", catchUpBound); err != nil {
				t.Errorf("not caught up within %s of the restart: %v", catchUpBound, err)
				s.diagnose(t)
			}
			for _, v := range ld.violations(from) {
				t.Error(v)
			}
		})
	}
	stopPurchases()
	ld.stop()
	if err := s.waitCaughtUp(ld, "", catchUpBound); err != nil {
		t.Fatal(err)
	}

	// The restarted replicas caught up: once each has fetched what the
	// other wrote, every replicated table holds the same rows on both.
	syncReplicas(t, c1, c2)
	for _, table := range clusterTables(t, c1) {
		name, engine, _ := strings.Cut(table, " ")
		if !strings.HasPrefix(engine, "Replicated") {
			continue
		}
		q := "SELECT toString(count()) FROM " + name
		if strings.Contains(engine, "Replacing") {
			q += " FINAL"
		}
		a, b := queryConn(t, c1, q), queryConn(t, c2, q)
		if a[0][0] != b[0][0] {
			t.Errorf("%s: %s rows on replica 1, %s on replica 2", name, a[0][0], b[0][0])
		}
	}
	var purchases int
	for _, conn := range []clickhouse.Conn{c1, c2} {
		rows := queryConn(t, conn, "SELECT toString(count()) FROM attributed_purchases WHERE marketplace_id = ?", d.mp)
		n, _ := strconv.Atoi(rows[0][0])
		if n == 0 || purchases != 0 && n != purchases {
			t.Errorf("attributed purchases: %d, %d on the other replica", n, purchases)
		}
		purchases = n
	}

	// Every acknowledged event once, every clicked winner charged once, the
	// charges equal to the spend in Redis: read from either replica.
	for i, conn := range []clickhouse.Conn{c1, c2} {
		t.Run(fmt.Sprintf("read from replica %d", i+1), func(t *testing.T) {
			s.ch = conn
			s.checkExactlyOnce(t, ld, d.mp, d.campaign)
		})
	}
	spend := s.redisSpend(t, d.mp, d.campaign)

	// The same export file and the same vendor charges from processes that
	// read one replica each. The second exporter recomputes the rollup days
	// on its replica (a staging table there, REPLACE PARTITION replicated).
	body := fmt.Sprintf(`{"dataset":"monitoring_metrics","dimensions":["day_local","campaign_id"],"metrics":["clicks","charged_clicks","ad_spent_clicks"],`+
		`"granularity":"day_local","startDate":%q,"endDate":%q,"format":"csv"}`, exDay(-1), exDay(0))
	first := clusterExport(t, api, advKey, body)
	exporter.signal(t, syscall.SIGTERM)
	s.serve("exporter-r2", "exporter", "ENDCAP_CLICKHOUSE_ADDR="+r2)
	second := clusterExport(t, api, advKey, body)
	if first != second {
		t.Errorf("the export read through replica 2 differs from the one read through replica 1:\n%s\n%s", first, second)
	}
	// Every click, charged, for the Redis spend (summed over the days: the
	// load may have crossed midnight UTC).
	var clicks, charged int
	amount := new(big.Rat)
	for _, line := range strings.Split(strings.ReplaceAll(first, `"`, ""), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 5 || f[1] != d.campaign {
			continue
		}
		n, _ := strconv.Atoi(f[2])
		k, _ := strconv.Atoi(f[3])
		r, ok := new(big.Rat).SetString(f[4])
		if !ok {
			t.Fatalf("export line %q: amount %q", line, f[4])
		}
		clicks, charged = clicks+n, charged+k
		amount.Add(amount, r)
	}
	if clicks != ld.clicks() || charged != ld.clicks() || amount.Cmp(big.NewRat(spend, 1_000_000)) != 0 {
		t.Errorf("the export counts %d clicks, %d charged, for %s; want %d for the Redis spend %d µ:\n%s",
			clicks, charged, amount.FloatString(6), ld.clicks(), spend, first)
	}
	apiR2 := s.serve("api-r2", "api", "ENDCAP_CLICKHOUSE_ADDR="+r2)
	s.waitReady(apiR2, 90*time.Second)
	v1 := clusterVendorCharges(t, api, advKey, d.mp)
	v2 := clusterVendorCharges(t, apiR2, advKey, d.mp)
	if !slices.Equal(v1.ids, v2.ids) || v1.sum.Cmp(v2.sum) != 0 {
		t.Errorf("vendor charges: %d for %s through replica 1, %d for %s through replica 2", len(v1.ids), v1.sum.FloatString(6), len(v2.ids), v2.sum.FloatString(6))
	}
	if len(v1.ids) != ld.clicks() || v1.sum.Cmp(new(big.Rat).SetFrac64(spend, 1_000_000)) != 0 {
		t.Errorf("vendor charges: %d for %s, want %d clicks for the Redis spend %d µ", len(v1.ids), v1.sum.FloatString(6), ld.clicks(), spend)
	}
	t.Logf("%d clicks, %d attributed purchase items, spend %d µ: the same from both replicas; test took %s",
		ld.clicks(), purchases, spend, time.Since(began).Round(time.Second))
}

// postPurchases posts, every 300 ms until the returned function is called,
// a purchase of P1 by the user who clicks: the attribution projector
// attributes them to the clicks. Acknowledged ones count as the load's
// events.
func (l *load) postPurchases() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ctx.Err() == nil; n++ {
			phase := l.currentPhase()
			id := fmt.Sprintf("ft-%s/purchase-%d", phase, n)
			body := fmt.Sprintf(`{"purchases":[{"id":%q,"occurredAt":%q,"opaqueUserId":"u-click","items":[{"productId":"P1","unitPrice":2.5,"quantity":1,"vendorId":"v1"}]}]}`,
				id, ts(time.Now()))
			start := time.Now()
			st, b, err := l.api.call("POST", "/v2/events", l.key, body, 2*eventsBound, nil)
			if l.judge("POST /v2/events (purchase)", st, b, err, time.Since(start), 200) {
				l.mu.Lock()
				l.acked[phase]++
				l.ids = append(l.ids, id)
				l.mu.Unlock()
			}
			sleepCtx(ctx, 300*time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// clusterTables lists the tables of the database ("name engine"), sorted.
func clusterTables(t *testing.T, c clickhouse.Conn) []string {
	t.Helper()
	var out []string
	for _, r := range queryConn(t, c, "SELECT name, engine FROM system.tables WHERE database = currentDatabase() AND NOT startsWith(name, 'rollup_stage_') ORDER BY name") {
		out = append(out, r[0]+" "+r[1])
	}
	return out
}

// syncReplicas waits until each replica has fetched every part the other
// has (SYSTEM SYNC REPLICA of each replicated table).
func syncReplicas(t *testing.T, conns ...clickhouse.Conn) {
	t.Helper()
	start := time.Now()
	for _, c := range conns {
		for _, table := range clusterTables(t, c) {
			name, engine, _ := strings.Cut(table, " ")
			if !strings.HasPrefix(engine, "Replicated") {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := c.Exec(ctx, "SYSTEM SYNC REPLICA "+name)
			cancel()
			if err != nil {
				t.Fatalf("SYSTEM SYNC REPLICA %s: %v", name, err)
			}
		}
	}
	t.Logf("replicas in sync after %s", time.Since(start).Round(time.Millisecond))
}

// queryConn runs a query and returns its rows as strings.
func queryConn(t *testing.T, c clickhouse.Conn, q string, args ...any) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][]string
	n := len(rows.Columns())
	for rows.Next() {
		vals := make([]string, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// clusterExport requests an export through api, waits until it is
// completed and returns the file.
func clusterExport(t *testing.T, api *osProc, key, body string) string {
	t.Helper()
	st, b, err := api.call("POST", exPath, key, body, 10*time.Second, nil)
	if err != nil || st != 202 {
		t.Fatalf("export: %d %s %v", st, b, err)
	}
	var e struct {
		ExportID string `json:"exportId"`
	}
	decodeJSON(t, b, &e)
	var v exView
	testenv.Eventually(t, 90*time.Second, func() error {
		st, b, err := api.call("GET", exPath+"/"+e.ExportID, key, "", 10*time.Second, nil)
		if err != nil || st != 200 {
			return fmt.Errorf("GET export: %d %s %v", st, b, err)
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		switch v.Status {
		case "completed":
			return nil
		case "pending", "running":
			return fmt.Errorf("export %s is %s", e.ExportID, v.Status)
		}
		t.Fatalf("export %s: %s", e.ExportID, b)
		return nil
	})
	code, _, file := exDownload(t, v.URL)
	if code != 200 {
		t.Fatalf("download: %d %s", code, file)
	}
	return string(file)
}

type vcSet struct {
	ids []string
	sum *big.Rat
}

// clusterVendorCharges lists the vendor charges of the last two days
// through api: their interaction ids (sorted) and their sum.
func clusterVendorCharges(t *testing.T, api *osProc, key, mp string) vcSet {
	t.Helper()
	out := vcSet{sum: new(big.Rat)}
	q := url.Values{}
	q.Set("start_date", time.Now().UTC().Add(-24*time.Hour).Format(time.RFC3339))
	q.Set("end_date", time.Now().UTC().Add(time.Hour).Format(time.RFC3339))
	q.Set("limit", "500")
	for page := 0; page < 100; page++ {
		st, b, err := api.call("GET", vcPath+"?"+q.Encode(), key, "", 20*time.Second, nil)
		if err != nil || st != 200 {
			t.Fatalf("vendor charges: %d %s %v", st, b, err)
		}
		var body vcBody
		decodeJSON(t, b, &body)
		for _, c := range body.Data {
			out.ids = append(out.ids, c.InteractionID)
			out.sum.Add(out.sum, vcRat(t, c.Amount))
		}
		if !body.HasMore || body.NextPage == nil {
			slices.Sort(out.ids)
			return out
		}
		q.Set("next_page", *body.NextPage)
	}
	t.Fatal("vendor charges: pages do not end")
	return out
}
