package freqcap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// shopperHits are hits giving a shopper n counts of as many campaigns (and
// the campaigns).
func shopperHits(mp, user string, n int, at time.Time) ([]Hit, []string) {
	var hits []Hit
	var camps []string
	for i := range n {
		c := uuid.NewString()
		camps = append(camps, c)
		for k := 0; k <= i%3; k++ { // 1, 2 or 3 impressions
			hits = append(hits, Hit{MP: mp, User: user, Offset: int64(len(hits)), At: at, Loc: time.UTC, Fields: []string{CampaignField(c, Impression)}})
		}
	}
	return hits, camps
}

// sendReceive reads a shopper's counts in two halves.
func sendReceive(s *Store, p *Pending, mp, user string, at time.Time, c *Counts, timeout time.Duration) error {
	s.Send(context.Background(), mp, user, time.Now().Add(timeout), p)
	return p.Receive(at, time.UTC, c)
}

// TestSendReceive: the counts read in two halves are the typed read's, for
// shoppers of few and of many counts (a reply of several reads of the
// socket), on one server or a cluster (ENDCAP_TEST_REDIS_CLUSTER); a read
// dropped (Discard) leaves its connection in step for the next; readers in
// parallel each get their own shopper's counts; the connections kept are
// bounded.
func TestSendReceive(t *testing.T) {
	env := testenv.Get(t)
	rdb := env.Redis(t)
	s := New(rdb)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	now := time.Now()
	mp := uuid.NewString()
	type shopper struct {
		user  string
		camps []string
	}
	var shoppers []shopper
	for i, n := range []int{0, 1, 20, 3000} {
		u := fmt.Sprintf("shopper-%d-%s", i, uuid.NewString())
		hits, camps := shopperHits(mp, u, n, now)
		if err := s.Count(ctx, hits, now); err != nil {
			t.Fatal(err)
		}
		shoppers = append(shoppers, shopper{u, camps})
	}
	check := func(what string, c *Counts, sh shopper) {
		t.Helper()
		if c.Len() != 3*len(sh.camps) {
			t.Errorf("%s: %d counts, want %d", what, c.Len(), 3*len(sh.camps))
		}
		for i, camp := range sh.camps {
			if got := c.Campaign("weekly", camp, Impression); got != int64(i%3+1) {
				t.Errorf("%s: campaign %d counted %d, want %d", what, i, got, i%3+1)
				return
			}
		}
	}
	var p Pending
	var c Counts
	for _, sh := range shoppers {
		if err := sendReceive(s, &p, mp, sh.user, now, &c, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		check("two halves", &c, sh)
		var typed Counts
		if err := s.Read(ctx, mp, sh.user, now, time.UTC, &typed); err != nil || typed.Len() != c.Len() {
			t.Errorf("the typed read: %d counts (%v), the two halves %d", typed.Len(), err, c.Len())
		}
	}
	// Dropped reads, the large one among them, then reads on the same
	// Pending: each reply is its own read's.
	for i := range 20 {
		s.Send(ctx, mp, shoppers[3].user, time.Now().Add(5*time.Second), &p)
		if i%2 == 0 {
			p.Discard()
		}
		sh := shoppers[i%3]
		if err := sendReceive(s, &p, mp, sh.user, now, &c, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		check("after a dropped read", &c, sh)
	}
	// A reply taken after the deadline, which it came before (the
	// auction's goroutine kept off the cores): the counts, not an error.
	s.Send(ctx, mp, shoppers[2].user, time.Now().Add(20*time.Millisecond), &p)
	time.Sleep(300 * time.Millisecond) // the reply comes in about a millisecond; this leaves room for a loaded machine
	if err := p.Receive(now, time.UTC, &c); err != nil {
		t.Errorf("a reply taken after its deadline: %v", err)
	} else {
		check("taken late", &c, shoppers[2])
	}
	// Readers in parallel.
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Go(func() {
			var p Pending
			var c Counts
			for i := range 20 {
				sh := shoppers[(g+i)%3]
				if err := sendReceive(s, &p, mp, sh.user, now, &c, 10*time.Second); err != nil {
					t.Error(err)
					return
				}
				check("in parallel", &c, sh)
			}
		})
	}
	wg.Wait()
	s.conns.mu.Lock()
	for addr, n := range s.conns.nodes {
		if len(n.idle) > maxIdlePerNode {
			t.Errorf("%s: %d connections kept, want at most %d", addr, len(n.idle), maxIdlePerNode)
		}
	}
	s.conns.mu.Unlock()
	// Receive without a Send, and twice: an error, not a hang.
	var none Pending
	if err := none.Receive(now, time.UTC, &c); err == nil {
		t.Error("Receive without a Send: no error")
	}
}

// TestSendFaults: a server that freezes makes Receive give up at the
// deadline (Unavailable), and the next read after it thaws is right (the
// late reply went with its connection); kept connections that the server
// closed are dialled again; nothing listening is an error at once.
func TestSendFaults(t *testing.T) {
	pr := testenv.OwnRedis(t)
	rdb := redisstore.Open(redisstore.Options{Addr: pr.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	s := New(rdb)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	now := time.Now()
	mp, user := uuid.NewString(), "shopper-"+uuid.NewString()
	hits, camps := shopperHits(mp, user, 5, now)
	if err := s.Count(ctx, hits, now); err != nil {
		t.Fatal(err)
	}
	var p Pending
	var c Counts
	if err := sendReceive(s, &p, mp, user, now, &c, 5*time.Second); err != nil || c.Len() != 15 {
		t.Fatalf("%d counts, %v", c.Len(), err)
	}

	if err := pr.Freeze(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := sendReceive(s, &p, mp, user, now, &c, 100*time.Millisecond)
	if !errors.Is(err, errkind.Unavailable) || c.Len() != 0 {
		t.Errorf("frozen: %v, %d counts; want Unavailable and none", err, c.Len())
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("frozen: Receive returned after %v, the deadline was 100ms", d)
	}
	// A read dropped while frozen: Discard returns at once.
	start = time.Now()
	s.Send(ctx, mp, user, time.Now().Add(200*time.Millisecond), &p)
	p.Discard()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Discard took %v on a frozen server", d)
	}
	pr.Thaw()
	for range 3 {
		if err := sendReceive(s, &p, mp, user, now, &c, 5*time.Second); err != nil || c.Campaign("daily", camps[2], Impression) != 3 {
			t.Fatalf("thawed: %d, %v; want 3", c.Campaign("daily", camps[2], Impression), err)
		}
	}

	// The server closes every client connection (as its idle timeout or a
	// restart would): the kept ones are dialled again.
	admin := redis.NewClient(&redis.Options{Addr: pr.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	for range 3 {
		if err := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		if err := sendReceive(s, &p, mp, user, now, &c, 5*time.Second); err != nil || c.Len() != 15 {
			t.Fatalf("after the server closed the connections: %d counts, %v", c.Len(), err)
		}
	}

	// Nothing listens.
	downRDB := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = downRDB.Close() })
	down := New(downRDB)
	start = time.Now()
	if err := sendReceive(down, &p, mp, user, now, &c, time.Second); !errors.Is(err, errkind.Unavailable) {
		t.Errorf("nothing listening: %v, want Unavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("nothing listening: %v", d)
	}
}

// TestSendTLSACL: the reads' own connections are made as go-redis makes
// its own: TLS verified against the authority given, the ACL user of the
// documented rule with a
// password or a password file, on one server and on a cluster (the master
// of each shopper's slot); a wrong password is an error, not counts.
func TestSendTLSACL(t *testing.T) {
	const password = "freqcap-test-password"
	rule := testenv.DocumentedACLRule(t, password)
	for _, cluster := range []bool{false, true} {
		t.Run("cluster="+strconv.FormatBool(cluster), func(t *testing.T) {
			var r *testenv.TLSRedis
			if cluster {
				r = testenv.OwnTLSRedisCluster(t, "admin-test-password", 3, rule)
			} else {
				r = testenv.OwnTLSRedis(t, "admin-test-password", 0, rule)
			}
			tlsc, err := redisstore.TLSConfig(r.CA)
			if err != nil {
				t.Fatal(err)
			}
			pwFile := filepath.Join(t.TempDir(), "password")
			if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			now := time.Now()
			mp := uuid.NewString()
			writer := New(r.Admin)
			users := map[string][]string{}
			for i := range 8 { // shoppers on different slots
				u := "shopper-" + strconv.Itoa(i)
				hits, camps := shopperHits(mp, u, 4, now)
				if err := writer.Count(ctx, hits, now); err != nil {
					t.Fatal(err)
				}
				users[u] = camps
			}
			for _, o := range []redisstore.Options{
				{Addr: r.Addr, Cluster: cluster, TLS: tlsc, Username: "endcap", Password: password},
				{Addr: r.Addr, Cluster: cluster, TLS: tlsc, Username: "endcap", PasswordFile: pwFile},
			} {
				rdb := redisstore.Open(o)
				s := New(rdb)
				var p Pending
				var c Counts
				for u, camps := range users {
					if err := sendReceive(s, &p, mp, u, now, &c, 5*time.Second); err != nil || c.Campaign("monthly", camps[2], Impression) != 3 {
						t.Errorf("%s: %d, %v; want 3", u, c.Campaign("monthly", camps[2], Impression), err)
					}
				}
				_ = s.Close()
				_ = rdb.Close()
			}
			bad := redisstore.Open(redisstore.Options{Addr: r.Addr, Cluster: cluster, TLS: tlsc, Username: "endcap", Password: "wrong"})
			t.Cleanup(func() { _ = bad.Close() })
			var p Pending
			var c Counts
			if err := sendReceive(New(bad), &p, mp, "shopper-1", now, &c, 2*time.Second); !errors.Is(err, errkind.Unavailable) || c.Len() != 0 {
				t.Errorf("a wrong password: %v, %d counts", err, c.Len())
			}
		})
	}
}
