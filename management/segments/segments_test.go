package segments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type harness struct {
	svc *Service
	rdb redis.UniversalClient
	mp  string
}

// newHarness runs a segments service on a fresh entities log (kfake) and the
// test Redis, for one marketplace id of its own.
func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	log := testenv.Logger(t)
	rdb := redisstore.Open(redisstore.Options{Addr: cfg.RedisAddr, Cluster: cfg.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	var svc *Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: cfg.KafkaTopicPrefix, Log: log}, func(l *statelog.Log) {
		l.SetLocker(redisstore.NewLocker(rdb, "ec:lock:"+cfg.KafkaTopicPrefix, 10*time.Second))
		svc = New(l, rdb, append([]Option{WithLogger(log)}, opts...)...)
	})
	return &harness{svc: svc, rdb: rdb, mp: uuid.NewString()}
}

// ids returns a file of n ids "<prefix>-<i>", one per line, optionally with
// a pause every `every` lines (a slow client), written through a pipe that
// closes when the test ends (an upload that stops reading early does not
// leave its writer waiting).
func ids(t *testing.T, prefix string, n int, every int, pause time.Duration) io.Reader {
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pr.Close() })
	go func() {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%s-%d\n", prefix, i)
			if b.Len() > 32<<10 || (every > 0 && i%every == every-1) {
				if _, err := io.WriteString(pw, b.String()); err != nil {
					return
				}
				b.Reset()
				if every > 0 && i%every == every-1 {
					time.Sleep(pause)
				}
			}
		}
		_, _ = io.WriteString(pw, b.String())
		_ = pw.Close()
	}()
	return pr
}

// failingAfter yields r and then fails with err instead of io.EOF (a client
// that goes away).
type failingAfter struct {
	r   io.Reader
	err error
}

func (f failingAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func (h *harness) total(t *testing.T, id string) int64 {
	t.Helper()
	s, err := h.svc.Get(context.Background(), h.mp, id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Total
}

func (h *harness) member(t *testing.T, id, user string) bool {
	t.Helper()
	ok, err := h.svc.IsMember(context.Background(), h.mp, id, user)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// keys lists the Redis member keys of a segment (every generation; on a
// cluster, from every master).
func (h *harness) keys(t *testing.T, id string) []string {
	t.Helper()
	var mu sync.Mutex
	var ks []string
	err := redisstore.ForEachMaster(context.Background(), h.rdb, func(ctx context.Context, m *redis.Client) error {
		got, err := m.Keys(ctx, memberKey(h.mp, id, "*")).Result()
		mu.Lock()
		ks = append(ks, got...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func (h *harness) upload(t *testing.T, id string, a Action, r io.Reader) error {
	t.Helper()
	_, err := h.svc.Upload(context.Background(), h.mp, id, a, r, 0)
	return err
}

func TestUploadActionsAndTotals(t *testing.T) {
	h := newHarness(t, WithChunkSize(1000), WithOldGenerationGrace(200*time.Millisecond))
	ctx := context.Background()
	if err := h.upload(t, "s", ActionAdd, ids(t, "u", 2500, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := h.total(t, "s"); got != 2500 {
		t.Fatalf("total %d", got)
	}
	seg, _ := h.svc.Get(ctx, h.mp, "s")
	if seg.Name != "s" || seg.Config.Type != TypeUserList || seg.Version != 1 {
		t.Fatalf("created segment %+v", seg)
	}
	// duplicates and new ids
	if err := h.upload(t, "s", ActionAdd, ids(t, "u", 3000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := h.total(t, "s"); got != 3000 {
		t.Fatalf("total after add with duplicates %d", got)
	}
	// remove, including ids that are not members
	if err := h.upload(t, "s", ActionRemove, strings.NewReader("u-0\nu-1\nnobody\nu-1\n")); err != nil {
		t.Fatal(err)
	}
	if got := h.total(t, "s"); got != 2998 || h.member(t, "s", "u-0") || !h.member(t, "s", "u-2") {
		t.Fatalf("after remove: total %d", got)
	}
	// replace
	if err := h.upload(t, "s", ActionReplace, strings.NewReader("a\nb\na\n")); err != nil {
		t.Fatal(err)
	}
	if got := h.total(t, "s"); got != 2 || h.member(t, "s", "u-2") || !h.member(t, "s", "a") {
		t.Fatalf("after replace: total %d", got)
	}
	// replace with an empty file empties the segment
	if err := h.upload(t, "s", ActionReplace, strings.NewReader("\n\n")); err != nil {
		t.Fatal(err)
	}
	if got := h.total(t, "s"); got != 0 {
		t.Fatalf("after empty replace: total %d", got)
	}
	// remove on a segment that does not exist creates it, empty
	if err := h.upload(t, "fresh", ActionRemove, strings.NewReader("x\n")); err != nil {
		t.Fatal(err)
	}
	if !h.svc.SegmentExists(h.mp, "fresh") || h.total(t, "fresh") != 0 {
		t.Fatal("remove did not create an empty segment")
	}
	// another marketplace's segment of the same id is another segment
	other := *h
	other.mp = uuid.NewString()
	if other.svc.SegmentExists(other.mp, "s") || other.member(t, "s", "a") {
		t.Fatal("marketplace isolation broken")
	}
	if err := other.upload(t, "s", ActionAdd, strings.NewReader("z\n")); err != nil {
		t.Fatal(err)
	}
	if other.total(t, "s") != 1 || h.member(t, "s", "z") || other.member(t, "s", "a") {
		t.Fatal("marketplace isolation broken after upload")
	}
	// delete removes the members
	if err := h.svc.Delete(ctx, h.mp, "s", 0); err != nil {
		t.Fatal(err)
	}
	if h.svc.SegmentExists(h.mp, "s") || h.member(t, "s", "a") {
		t.Fatal("deleted segment still answers")
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if ks := h.keys(t, "s"); len(ks) != 0 {
			return fmt.Errorf("keys left after delete: %v", ks)
		}
		return nil
	})
}

// TestReplaceIsAtomic: while a slow replace runs, readers see the old members
// and the old total, then the new ones: never a mix.
func TestReplaceIsAtomic(t *testing.T) {
	h := newHarness(t, WithChunkSize(500), WithOldGenerationGrace(300*time.Millisecond))
	if err := h.upload(t, "s", ActionAdd, ids(t, "old", 20000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	oldKeys := h.keys(t, "s")
	type obs struct {
		total    int64
		old, new bool
	}
	var seen []obs
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			seg, err1 := h.svc.Get(context.Background(), h.mp, "s")
			o, err2 := h.svc.IsMember(context.Background(), h.mp, "s", "old-0")
			n, err3 := h.svc.IsMember(context.Background(), h.mp, "s", "new-0")
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Error(err)
				return
			}
			seen = append(seen, obs{seg.Total, o, n})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	start := time.Now()
	if err := h.upload(t, "s", ActionReplace, ids(t, "new", 30000, 2000, 20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("replace took %s; %d observations", time.Since(start), len(seen))
	// Each reading (the total, one old member, one new member) switches
	// exactly once, from the old state to the new: a total between the two,
	// or a member that comes back, would be a mix. (One observation may
	// straddle the switch: its three readings are taken one after another.)
	switched := [3]int{-1, -1, -1}
	for i, o := range seen {
		for k, now := range [3]bool{o.total == 30000, !o.old, o.new} {
			if o.total != 20000 && o.total != 30000 {
				t.Fatalf("observation %d: total %d: a mix of old and new", i, o.total)
			}
			if now && switched[k] < 0 {
				switched[k] = i
			}
			if !now && switched[k] >= 0 {
				t.Fatalf("observation %d: %+v: reading %d went back to the old state", i, o, k)
			}
		}
	}
	for k, at := range switched {
		if at <= 0 {
			t.Fatalf("reading %d: switched at observation %d of %d: did not observe both states", k, at, len(seen))
		}
	}
	// the replaced generation is gone after the grace period
	testenv.Eventually(t, 5*time.Second, func() error {
		n, err := h.rdb.Exists(context.Background(), oldKeys...).Result()
		if err != nil || n != 0 {
			return fmt.Errorf("old generation still there (%d, %v)", n, err)
		}
		return nil
	})
	if ks := h.keys(t, "s"); len(ks) != 1 {
		t.Fatalf("keys %v", ks)
	}
}

// TestFailedUploads: a replace (or an upload that would create the segment)
// that fails midway changes nothing and leaves no staged key; an add applies
// the full chunks read before the first invalid line, and the same file sent
// again completes it.
func TestFailedUploads(t *testing.T) {
	h := newHarness(t, WithChunkSize(1000), WithMaxFileBytes(64<<10))
	ctx := context.Background()
	if err := h.upload(t, "s", ActionAdd, ids(t, "base", 100, 0, 0)); err != nil {
		t.Fatal(err)
	}
	disconnect := errors.New("connection reset by peer")
	invalid := io.MultiReader(ids(t, "x", 2500, 0, 0), strings.NewReader(strings.Repeat("y", 91)+"\n\xff\nok\n"))
	cases := []struct {
		name    string
		file    io.Reader
		check   func(error) bool
		wantErr string
	}{
		{"client goes away", failingAfter{ids(t, "x", 3000, 0, 0), disconnect}, func(err error) bool { return errors.Is(err, ErrRead) && errors.Is(err, disconnect) }, ""},
		{"too large", ids(t, "x", 20000, 0, 0), func(err error) bool { return errors.Is(err, ErrFileTooLarge) }, ""},
		{"invalid lines", invalid, func(err error) bool {
			v, ok := validation.As(err)
			return ok && len(v) == 2 && fmt.Sprint(v[0].Loc) == "[body file 2501]" && v[0].Type == validation.TooLong &&
				fmt.Sprint(v[1].Loc) == "[body file 2502]" && v[1].Type == validation.Invalid
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := h.upload(t, "s", ActionReplace, tc.file)
			if !tc.check(err) {
				t.Fatalf("err = %v", err)
			}
			if got := h.total(t, "s"); got != 100 || !h.member(t, "s", "base-7") || h.member(t, "s", "x-1") {
				t.Fatalf("replace changed the segment: total %d", got)
			}
			if ks := h.keys(t, "s"); len(ks) != 1 {
				t.Fatalf("staged keys left: %v", ks)
			}
			if err := h.upload(t, "new-"+tc.name, ActionAdd, failingAfter{ids(t, "x", 3000, 0, 0), disconnect}); err == nil {
				t.Fatal("accepted")
			}
			if h.svc.SegmentExists(h.mp, "new-"+tc.name) || len(h.keys(t, "new-"+tc.name)) != 0 {
				t.Fatal("a failed upload created a segment")
			}
		})
	}
	t.Run("add keeps full chunks", func(t *testing.T) {
		file := io.MultiReader(ids(t, "x", 2500, 0, 0), strings.NewReader("\xff\n"))
		err := h.upload(t, "s", ActionAdd, file)
		if _, ok := validation.As(err); !ok {
			t.Fatalf("err = %v", err)
		}
		if got := h.total(t, "s"); got != 2100 {
			t.Fatalf("total %d, want 100 + two chunks of 1000", got)
		}
		if err := h.upload(t, "s", ActionAdd, ids(t, "x", 2500, 0, 0)); err != nil {
			t.Fatal(err)
		}
		if got := h.total(t, "s"); got != 2600 {
			t.Fatalf("total after retry %d", got)
		}
	})
	t.Run("if-match", func(t *testing.T) {
		seg, _ := h.svc.Get(ctx, h.mp, "s")
		if _, err := h.svc.Upload(ctx, h.mp, "s", ActionReplace, strings.NewReader("a\n"), statelog.IfMatch(seg.Version+1)); !errors.Is(err, statelog.ErrConflict) {
			t.Fatalf("err = %v", err)
		}
		v, err := h.svc.Upload(ctx, h.mp, "s", ActionReplace, strings.NewReader("a\n"), statelog.IfMatch(seg.Version))
		if err != nil || v != seg.Version+1 || h.total(t, "s") != 1 {
			t.Fatalf("v %d err %v", v, err)
		}
	})
}

// TestOneUploadAtATime: a second upload or a delete of a segment while an
// upload runs is refused; a lost lease aborts the upload without changes.
func TestOneUploadAtATime(t *testing.T) {
	h := newHarness(t, WithChunkSize(100), WithOldGenerationGrace(100*time.Millisecond))
	ctx := context.Background()
	if err := h.upload(t, "s", ActionAdd, strings.NewReader("a\n")); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- h.upload(t, "s", ActionReplace, pr) }()
	_, _ = io.WriteString(pw, "b\nc\n")
	testenv.Eventually(t, 5*time.Second, func() error {
		if n, _ := h.rdb.Exists(ctx, lockKey(h.mp, "s")).Result(); n != 1 {
			return errors.New("upload has not started")
		}
		return nil
	})
	if err := h.upload(t, "s", ActionAdd, strings.NewReader("z\n")); !errors.Is(err, ErrUploadInProgress) {
		t.Fatalf("second upload: %v", err)
	}
	if err := h.svc.Delete(ctx, h.mp, "s", 0); !errors.Is(err, ErrUploadInProgress) {
		t.Fatalf("delete: %v", err)
	}
	if err := h.upload(t, "other", ActionAdd, strings.NewReader("z\n")); err != nil {
		t.Fatalf("upload to another segment: %v", err)
	}
	_ = pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.total(t, "s") != 2 {
		t.Fatal("replace did not apply")
	}

	t.Run("lease lost", func(t *testing.T) {
		h.svc.leaseTTL = 300 * time.Millisecond
		defer func() { h.svc.leaseTTL = 30 * time.Second }()
		pr, pw := io.Pipe()
		defer pr.Close() // the writer below ends with the reader
		done := make(chan error, 1)
		go func() { done <- h.upload(t, "s", ActionReplace, pr) }()
		go func() {
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(pw, "l-%d\n", i); err != nil {
					return
				}
				if i%100 == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
		time.Sleep(150 * time.Millisecond)
		h.rdb.Del(ctx, lockKey(h.mp, "s")) // another writer's lease expired ours
		h.rdb.Set(ctx, lockKey(h.mp, "s"), "someone else", time.Second)
		select {
		case err := <-done:
			if !errors.Is(err, ErrUploadInProgress) {
				t.Fatalf("err = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("upload went on without its lease")
		}
		_ = pw.CloseWithError(errors.New("stop"))
		if got := h.total(t, "s"); got != 2 {
			t.Fatalf("an upload without its lease changed the segment: total %d", got)
		}
		testenv.Eventually(t, 5*time.Second, func() error {
			if ks := h.keys(t, "s"); len(ks) != 1 {
				return fmt.Errorf("keys %v", ks)
			}
			return nil
		})
	})
}

func TestPutGetListDelete(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	str := func(s string) *string { return &s }
	seg, created, err := h.svc.Put(ctx, h.mp, "b", Input{Name: str(" B "), Description: str("d")}, 0)
	if err != nil || !created || seg.Name != "B" || seg.Version != 1 || seg.Config.Type != TypeUserList {
		t.Fatalf("%+v %v %v", seg, created, err)
	}
	if _, _, err := h.svc.Put(ctx, h.mp, "b", Input{Name: str("B2")}, 5); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("if-match mismatch: %v", err)
	}
	if err := h.upload(t, "b", ActionAdd, strings.NewReader("u1\nu2\n")); err != nil {
		t.Fatal(err)
	}
	seg, created, err = h.svc.Put(ctx, h.mp, "b", Input{Name: str("B2")}, 1)
	if err != nil || created || seg.Description != "" || seg.Total != 2 || seg.Version != 2 {
		t.Fatalf("update: %+v %v %v", seg, created, err)
	}
	if _, _, err := h.svc.Put(ctx, h.mp, "a", Input{Name: str("A")}, 0); err != nil {
		t.Fatal(err)
	}
	list, more, err := h.svc.List(ctx, h.mp, "", 1)
	if err != nil || !more || len(list) != 1 || list[0].ID != "a" {
		t.Fatalf("page 1: %+v %v %v", list, more, err)
	}
	list, more, err = h.svc.List(ctx, h.mp, "a", 1)
	if err != nil || more || len(list) != 1 || list[0].ID != "b" || list[0].Total != 2 {
		t.Fatalf("page 2: %+v %v %v", list, more, err)
	}
	if err := h.svc.Delete(ctx, h.mp, "b", 1); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("delete if-match: %v", err)
	}
	if err := h.svc.Delete(ctx, h.mp, "b", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Get(ctx, h.mp, "b"); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := h.svc.Delete(ctx, h.mp, "b", 0); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("delete deleted: %v", err)
	}
	if _, err := h.svc.Get(ctx, h.mp, strings.Repeat("x", 256)); err == nil {
		t.Fatal("long id accepted")
	}
}

// TestUpgradeKeys: member sets an earlier build kept under the marketplace's
// hash tag are renamed to the segment's keys, with their expiry, once; a
// set the new key has already is kept, and a second run renames nothing.
func TestUpgradeKeys(t *testing.T) {
	if testenv.RedisClusterMode() {
		t.Skip("a cluster never held the earlier keys")
	}
	h := newHarness(t)
	ctx := context.Background()
	name := "S"
	gen := map[string]string{}
	for _, id := range []string{"old", "both", "none"} {
		if _, _, err := h.svc.Put(ctx, h.mp, id, Input{Name: &name}, 0); err != nil {
			t.Fatal(err)
		}
		st, _, _ := h.svc.coll.Get(h.mp, id)
		gen[id] = st.Generation
	}
	for k, members := range map[string][]any{
		marketplaceMemberKey(h.mp, "old", gen["old"]):   {"u1", "u2"},
		marketplaceMemberKey(h.mp, "both", gen["both"]): {"stale"},
		memberKey(h.mp, "both", gen["both"]):            {"fresh"},
	} {
		if err := h.rdb.SAdd(ctx, k, members...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.rdb.Expire(ctx, marketplaceMemberKey(h.mp, "old", gen["old"]), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := h.svc.UpgradeKeys(ctx, h.mp); err != nil || n != 1 {
		t.Fatalf("UpgradeKeys = %d, %v; want 1", n, err)
	}
	if !h.member(t, "old", "u1") || !h.member(t, "old", "u2") || h.total(t, "old") != 2 {
		t.Error("the renamed segment lost members")
	}
	if ttl, _ := h.rdb.TTL(ctx, memberKey(h.mp, "old", gen["old"])).Result(); ttl <= 59*time.Minute {
		t.Errorf("renamed set's TTL %s, want the old one's (1h)", ttl)
	}
	if !h.member(t, "both", "fresh") || h.member(t, "both", "stale") {
		t.Error("a set under the new key was replaced by the old one")
	}
	if h.total(t, "none") != 0 {
		t.Error("a segment without members got some")
	}
	if n, err := h.svc.UpgradeKeys(ctx, h.mp); err != nil || n != 0 {
		t.Errorf("second UpgradeKeys = %d, %v; want 0", n, err)
	}
}
