package projections_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/testkit/testenv"
)

// openClaims opens the fold's claims in a directory of the test's (the
// fold closes them; a test that uses them alone closes them itself).
func openClaims(t testing.TB, brokers []string, topics kafka.Topics, window time.Duration) *projections.Claims {
	t.Helper()
	return openClaimsIn(t, t.TempDir(), brokers, topics, window, nil)
}

func openClaimsIn(t testing.TB, dir string, brokers []string, topics kafka.Topics, window time.Duration, legacy *projections.RedisClaims) *projections.Claims {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := projections.OpenClaims(ctx, projections.ClaimsOptions{Dir: dir, Brokers: brokers, EventsTopic: topics.Events,
		Topic: topics.Claims, Window: window, Legacy: legacy, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// claimsEnv is kfake with the topics (3 partitions) for tests of Claims
// alone.
type claimsEnv struct {
	brokers []string
	topics  kafka.Topics
	cl      *kgo.Client
}

func newClaimsEnv(t *testing.T) claimsEnv {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cl, topics := testenv.Topics(t, t.Context(), cfg, brokers, 3)
	return claimsEnv{brokers: brokers, topics: topics, cl: cl}
}

// claim decides keys and, unless keep is false, keeps the first claims (as
// the fold does before committing).
func claim(t *testing.T, c *projections.Claims, keep bool, keys ...projections.ClaimKey) []projections.Claim {
	t.Helper()
	got, err := c.Claim(t.Context(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if keep {
		if err := c.Keep(t.Context(), keys, got); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

const (
	first = projections.ClaimFirst
	dup   = projections.ClaimDuplicate
	again = projections.ClaimReplay
)

func k(key string, p int32, o int64) projections.ClaimKey {
	return projections.ClaimKey{Key: key, Partition: p, Offset: o}
}

// TestClaims: the first record of a partition to claim a key owns it; its
// replay is a replay and any other record of the partition a duplicate,
// in the batch and in later ones; keys are claimed per partition; a key
// forgotten after the window is first again.
func TestClaims(t *testing.T) {
	e := newClaimsEnv(t)
	c := openClaims(t, e.brokers, e.topics, 2*time.Second)
	defer c.Close()
	steps := []struct {
		keys []projections.ClaimKey
		want []projections.Claim
	}{
		{nil, nil},
		{[]projections.ClaimKey{k("a", 0, 1), k("b", 0, 2), k("a", 0, 3), k("a", 1, 7), k("é☃:\x00*?", 2, 1)},
			[]projections.Claim{first, first, dup, first, first}},
		{[]projections.ClaimKey{k("a", 0, 1), k("a", 0, 3), k("b", 0, 9), k("a", 1, 7), k("a", 1, 8), k("c", 1, 9)},
			[]projections.Claim{again, dup, dup, again, dup, first}},
	}
	for i, s := range steps {
		if got := claim(t, c, true, s.keys...); !slices.Equal(got, s.want) {
			t.Errorf("step %d: %v, want %v", i, got, s.want)
		}
	}
	// One and a half windows later every claim is forgotten.
	time.Sleep(3100 * time.Millisecond)
	if got := claim(t, c, true, k("a", 0, 20), k("c", 1, 21)); !slices.Equal(got, []projections.Claim{first, first}) {
		t.Errorf("after the window: %v, want [first first]", got)
	}
}

// TestClaimsMove: a partition's claims follow it to another projector
// (another store, empty: a new host, a lost disk) through the changelog: it
// decides every key as the first did, replays of the owners and duplicates
// alike. Claims decided but not kept (a batch that failed before its
// commit) are not in the changelog, and their records, read again by the
// new owner, are first claims there. A store reopened on its directory reads
// only what the changelog got since.
func TestClaimsMove(t *testing.T) {
	e := newClaimsEnv(t)
	dirA := t.TempDir()
	a := openClaimsIn(t, dirA, e.brokers, e.topics, time.Hour, nil)
	var kept []projections.ClaimKey
	for p := range int32(3) {
		for i := range 50 {
			kept = append(kept, k(fmt.Sprintf("ev-%d-%d", p, i), p, int64(i)))
		}
	}
	claim(t, a, true, kept...)
	// A batch decided and not kept: the fold failed before its commit.
	if got := claim(t, a, false, k("lost", 1, 50)); got[0] != first {
		t.Fatalf("lost: %v", got)
	}
	a.Close()

	b := openClaimsIn(t, t.TempDir(), e.brokers, e.topics, time.Hour, nil)
	defer b.Close()
	b.Assigned([]int32{0, 1, 2})
	var keys []projections.ClaimKey
	var want []projections.Claim
	for _, kk := range kept {
		keys = append(keys, kk, k(kk.Key, kk.Partition, kk.Offset+1000))
		want = append(want, again, dup)
	}
	keys = append(keys, k("lost", 1, 50), k("lost", 1, 51))
	want = append(want, first, dup)
	if got := claim(t, b, true, keys...); !slices.Equal(got, want) {
		t.Errorf("after the move: %v\nwant %v", got, want)
	}

	// The first store comes back on its directory: it catches up with what
	// b claimed (the lost key) and not with its own claims again.
	a = openClaimsIn(t, dirA, e.brokers, e.topics, time.Hour, nil)
	defer a.Close()
	before := caughtUp(t)
	if got := claim(t, a, false, k("lost", 1, 50), k("lost", 1, 52), k("ev-2-3", 2, 3)); !slices.Equal(got, []projections.Claim{again, dup, again}) {
		t.Errorf("back on its directory: %v, want [replay duplicate replay]", got)
	}
	if n := caughtUp(t) - before; n != 1 { // b's first claim of "lost", on partition 1; nothing new on 2
		t.Errorf("the reopened store read %v changelog records, want 1 (what b claimed)", n)
	}
}

// caughtUp is endcap_projector_claims_caught_up_records_total.
func caughtUp(t *testing.T) float64 {
	t.Helper()
	return testutil.ToFloat64(telemetry.ClaimsCaughtUp)
}

// TestClaimsLegacy: during the window after the upgrade, the claims the
// previous versions made in Redis (hashed keys, and whole keys before them)
// decide the keys the store does not know: their owner's replay is a
// replay, any other record a duplicate, even one that claims first in the
// store. Past the window they are not read.
func TestClaimsLegacy(t *testing.T) {
	e := newClaimsEnv(t)
	rdb := testRedis(t)
	ctx := t.Context()
	base := fmt.Sprintf("test:legacyclaims:%d:", time.Now().UnixNano())
	h := sha256.Sum256([]byte("hashed"))
	if err := rdb.Set(ctx, base+"ev2:"+string(h[:16]), "0:1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, base+"ev:whole", "1:5", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(2 * time.Second)
	legacy := projections.NewRedisClaims(rdb, base+"ev2:", until, base+"ev:", until)
	c := openClaimsIn(t, t.TempDir(), e.brokers, e.topics, time.Hour, legacy)
	defer c.Close()
	got := claim(t, c, true, k("hashed", 0, 2), k("hashed", 0, 1), k("whole", 1, 5), k("whole", 1, 6), k("new", 0, 3), k("new", 0, 4))
	if want := []projections.Claim{dup, again, again, dup, first, dup}; !slices.Equal(got, want) {
		t.Errorf("during the window: %v, want %v", got, want)
	}
	time.Sleep(time.Until(until) + 100*time.Millisecond)
	got = claim(t, c, true, k("hashed", 0, 7), k("whole", 1, 8), k("new", 0, 3))
	if want := []projections.Claim{first, first, again}; !slices.Equal(got, want) {
		t.Errorf("after the window: %v, want %v", got, want)
	}
	if projections.NewRedisClaims(rdb, base+"ev2:", time.Time{}, "", time.Time{}) != nil {
		t.Error("nothing to read, and a reader")
	}
}
