package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestRedisCluster runs the system as separate processes on a Redis Cluster
// of three masters with a replica each (deploy/localstack, Options.
// RedisCluster; ENDCAP_REDIS_CLUSTER), under the fault suite's load of
// impressions and of auctions whose winners are clicked, and fails over the
// master that holds the campaign's spend and charge markers the worst way
// for asynchronous replication: its replica is frozen (SIGSTOP) and the
// master's replication stream to it filled past what the sockets hold
// (64 MB written to the campaign's slot), the master takes charges, it is
// killed (kill -9), then the replica is thawed and takes over without the
// charges it never received. The
// charges' WAIT (ENDCAP_REDIS_WAIT_REPLICAS, auto: 1) held those batches:
// they were neither stored nor committed, and are charged again on the new
// master when the fold replays them, once. A second click on every winner
// clicked before the kill is a duplicate, not charged again. The killed node
// comes back as a replica. At the end every acknowledged event is stored
// once, every clicked winner charged once, and the spend in Redis equals
// the charges in ClickHouse (and `endcap admin spend check` finds nothing to
// fix). (With ENDCAP_TEST_WAIT_REPLICAS=0, ENDCAP_REDIS_WAIT_REPLICAS=0, the same run
// charges winners twice: the charges of the frozen seconds are committed,
// then lost with the master.)
func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the system as separate processes on a Redis Cluster")
	}
	began := time.Now()
	s := newFaultStackWith(t, func(o *localstack.Options) { o.RedisCluster, o.RedisReplicas = 3, 1 })
	t.Logf("stack with a Redis Cluster of %d nodes started in %s", len(s.st.RedisAddrs), time.Since(began).Round(time.Millisecond))
	s.env = append(s.env, "ENDCAP_REDIS_ADDR="+strings.Join(s.st.RedisAddrs, ","), "ENDCAP_REDIS_CLUSTER=true")
	if v := os.Getenv("ENDCAP_TEST_WAIT_REPLICAS"); v != "" {
		s.env = append(s.env, "ENDCAP_REDIS_WAIT_REPLICAS="+v) // to see the test fail without the guard
	}
	api := s.serve("api", "api")
	p1 := s.serve("projector-1", "projector")
	p2 := s.serve("projector-2", "projector")
	exporter := s.serve("exporter", "exporter")
	d := s.setUp(api, "Redis Cluster", api, p1, p2, exporter)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*osProc{p1, p2} {
				t.Logf("%s:\n%s", p.name, tail(p.log, 40))
			}
		}
	})

	ld := startLoad(t, api, d.mkKey)
	defer ld.stop()
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := ld.clicks(); n < 10 {
			return fmt.Errorf("%d clicks acknowledged", n)
		}
		return nil
	})
	ld.setPhase("steady")
	if err := s.waitCaughtUp(ld, "steady", catchUpBound); err != nil {
		t.Fatal(err)
	}
	unreplicated := func() float64 {
		var n float64
		for _, p := range []*osProc{p1, p2} {
			v, _ := p.metric("endcap_budget_charge_calls_unreplicated_total")
			n += v
		}
		return n
	}
	if n := unreplicated(); n != 0 {
		t.Errorf("%v charge calls acknowledged without a replica while every master had one", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spendKey := spend.SpendKey(d.mp, d.campaign)
	victim, err := s.st.RedisMasterOf(ctx, spendKey)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := s.st.RedisNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var replica localstack.RedisNode
	for _, n := range nodes {
		if n.Of == victim.ID {
			replica = n
		}
	}
	if replica.Service == "" {
		t.Fatalf("no replica of %s in %+v", victim.Addr, nodes)
	}

	ld.setPhase("replica frozen")
	from := time.Now()
	thaw := s.pause(s.pid(replica.Service))
	fillReplication(t, ctx, victim.Addr, "{"+spend.Tag(d.mp, d.campaign)+"}", 64)
	time.Sleep(4 * time.Second) // the master takes charges its replica never gets
	before := ld.clicked(time.Time{})
	if err := s.st.Kill(victim.Service); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	time.Sleep(time.Second)
	thaw()
	ld.setPhase("master killed")
	var heir localstack.RedisNode
	testenv.Eventually(t, 60*time.Second, func() error {
		if heir, err = s.st.RedisMasterOf(ctx, spendKey); err != nil || heir.Addr == victim.Addr {
			return fmt.Errorf("no replica took over from %s yet (%v)", victim.Addr, err)
		}
		return nil
	})
	t.Logf("%s (frozen for %s) took over the campaign's slot from %s %s after the kill; %d winners clicked by then",
		heir.Service, killed.Sub(from).Round(100*time.Millisecond), victim.Service, time.Since(killed).Round(100*time.Millisecond), len(before))

	// A second click on every winner clicked before the kill: each one is
	// a duplicate, whatever the replica had when it took over.
	ld.setPhase("after the failover")
	time.Sleep(3 * time.Second)
	again := ld.clickAgain(t, before)
	t.Logf("%d winners clicked before the kill clicked again after the failover", again)
	if err := s.waitCaughtUp(ld, "after the failover", catchUpBound); err != nil {
		t.Errorf("not caught up within %s of the failover: %v", catchUpBound, err)
		s.diagnose(t)
	} else {
		t.Logf("every event acknowledged up to the failover folded %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	}
	t.Logf("from the freeze: %s; %v charge calls acknowledged by a master without a replica", ld.summary(from), unreplicated())

	// The killed node comes back as the replica of the one that took over.
	if err := s.st.Restart(ctx, victim.Service); err != nil {
		t.Fatal(err)
	}
	if err := s.st.WaitRedisCluster(ctx); err != nil {
		t.Fatal(err)
	}
	ld.setPhase("node back")
	time.Sleep(5 * time.Second)
	ld.setPhase("node back-check")
	if err := s.waitCaughtUp(ld, "node back-check", catchUpBound); err != nil {
		t.Errorf("not caught up after the node came back: %v", err)
	}
	for _, v := range ld.violations(from) {
		t.Error(v)
	}
	ld.stop()
	s.checkExactlyOnce(t, ld, d.mp, d.campaign)
	// The reconciliation finds every campaign's spend equal to its charges.
	s.cli("admin", "spend", "check", "--marketplace", d.mp)
	t.Logf("test took %s", time.Since(began).Round(time.Second))
}

// fillReplication writes mb values of 1 MB to keys of tag's slot on the
// master at addr: while its replica is frozen, they fill the socket
// buffers between them, and what the master writes next waits in its own
// memory (and is lost with it).
func fillReplication(t *testing.T, ctx context.Context, addr, tag string, mb int) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	v := strings.Repeat("x", 1<<20)
	for i := range mb {
		if err := rdb.Set(ctx, "e2e:fill:"+tag+":"+strconv.Itoa(i), v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// clicked returns the tokens of the winners clicked (acknowledged) since
// from.
func (l *load) clicked(from time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.tokens {
		if !c.at.Before(from) {
			out = append(out, c.token)
		}
	}
	return out
}

// clickAgain sends a second click (an event id of its own) on each winner
// of tokens, acknowledged like the load's events but not counted as clicks
// (a winner is charged once), and returns how many were acknowledged.
func (l *load) clickAgain(t *testing.T, tokens []string) int {
	t.Helper()
	phase := l.currentPhase()
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, tok := range tokens {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := fmt.Sprintf("ft-%s/again-%d", phase, i)
			body := fmt.Sprintf(`{"clicks":[{"id":%q,"occurredAt":%q,"opaqueUserId":"u-click","resolvedBidId":%q}]}`, id, ts(time.Now()), tok)
			for giveUp := time.Now().Add(time.Minute); time.Now().Before(giveUp); time.Sleep(500 * time.Millisecond) {
				start := time.Now()
				st, b, err := l.api.call("POST", "/v2/events", l.key, body, 2*eventsBound, nil)
				if l.judge("POST /v2/events (second click)", st, b, err, time.Since(start), 200) {
					l.mu.Lock()
					l.acked[phase]++
					l.ids = append(l.ids, id)
					l.mu.Unlock()
					mu.Lock()
					n++
					mu.Unlock()
					return
				}
			}
			l.record("a second click was not acknowledged in a minute of retries")
		})
	}
	wg.Wait()
	return n
}
