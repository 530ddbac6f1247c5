package projections

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/claimstore"
	"github.com/endcap/endcap/storage/kafka"
)

// Claims remembers, for a window, which Kafka record of the events topic
// first claimed each idempotency key (docs/design/projector.md, Claims). A key is
// claimed within its record's partition (a client's retry of an event lands
// on the partition of its first copy: the topic is keyed by marketplace and
// user), so the projector that owns a partition decides its keys alone:
//
//   - on local disk (claimstore: an LSM store whose memory does not grow
//     with the keys), under the first 16 bytes of the SHA-256 of the key,
//     with the owner's offset, in generations of half a window: a claim is
//     remembered for one to one and a half windows, and a generation is
//     dropped whole;
//   - in the changelog topic (one partition per partition of the events
//     topic, compacted, deleted after the generations): every new claim is
//     produced there, and acknowledged, before the batch's offsets are
//     committed. A projector that is assigned a partition first reads what
//     the changelog holds for it beyond what its disk has (all of it after
//     a lost disk), so that it knows every claim of the window that a
//     committed record made.
//
// The owner of a key is the first record of the partition, in offset order,
// that claimed it within the window: whichever projector decides (a replay
// after a crash, the partition's next owner), it decides the same.
type Claims struct {
	store *claimstore.Store
	dir   string // the store's directory, whose volume's size and free space are exported
	// statfsAt: when the volume's figures were last read (Unix ns).
	statfsAt atomic.Int64
	cl       *kgo.Client // the changelog: produced to, and read partition by partition
	topic    string
	window   time.Duration
	gen      time.Duration
	legacy   *RedisClaims // nil: no earlier claims to read
	log      *slog.Logger
	now      func() time.Time

	mu sync.Mutex
	// next: per partition caught up with the changelog since it was
	// assigned, the changelog's next offset as the store has it; a
	// partition not in next must be caught up before its keys are decided.
	next    map[int32]int64
	dropped uint32 // generations before this one have been dropped
}

// ClaimsOptions configure Claims.
type ClaimsOptions struct {
	// Dir is the local store's directory (ENDCAP_PROJECTOR_STATE_DIR);
	// empty: a new temporary directory, removed at Close.
	Dir string
	// CacheBytes bounds the store's block cache (0: claimstore's default).
	CacheBytes int64
	// Brokers, EventsTopic and Topic: the changelog topic of the events
	// topic's claims, created when missing (EnsureClaimsTopic) with
	// Replication.
	Brokers     []string
	Conn        kafka.Conn // how the client connects (TLS, SASL)
	EventsTopic string
	Topic       string
	Replication int
	// Window: a claim is remembered at least this long
	// (ENDCAP_DEDUPE_WINDOW).
	Window time.Duration
	// Legacy reads the claims earlier versions kept in Redis, while they
	// live (nil: none).
	Legacy *RedisClaims
	Log    *slog.Logger
}

// OpenClaims opens the claim store, and creates its changelog topic when
// missing. Close it after the fold (EventFold.Close does).
func OpenClaims(ctx context.Context, o ClaimsOptions) (*Claims, error) {
	if o.EventsTopic == "" || o.Topic == "" || o.Window <= 0 {
		return nil, errors.New("claims: the events topic, a changelog topic and a window are required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	cl, err := kafka.NewClient(o.Brokers, o.Log, o.Conn.With(kgo.ClientID("endcap-claims"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxBytes(64<<20), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	if err := EnsureClaimsTopic(ctx, cl, o.EventsTopic, o.Topic, max(o.Replication, 1), ClaimsRetention(o.Window)); err != nil {
		cl.Close()
		return nil, err
	}
	dir, temp := o.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "endcap-claims-"); err != nil {
			cl.Close()
			return nil, err
		}
		temp = true
	}
	st, err := claimstore.Open(claimstore.Options{Dir: dir, CacheBytes: o.CacheBytes, Log: o.Log})
	if err != nil {
		cl.Close()
		if temp {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	if temp {
		st.RemoveOnClose()
	}
	o.Log.Info("events fold: claim store opened", "dir", dir, "temporary", temp)
	return &Claims{store: st, dir: dir, cl: cl, topic: o.Topic, window: o.Window, gen: max(o.Window/claimGenerations, time.Millisecond),
		legacy: o.Legacy, log: o.Log, now: time.Now, next: map[int32]int64{}}, nil
}

// claimGenerations is how many generations make a window: a claim is
// remembered for one window and up to 1/claimGenerations more, and a key is
// looked up in claimGenerations+1 generations.
const claimGenerations = 2

// Close closes the changelog client and the store.
func (c *Claims) Close() error {
	c.cl.Close()
	return c.store.Close()
}

// EnsureClaimsTopic creates the changelog topic of the claims of the events
// topic when missing, with as many partitions as the events topic, and adds
// partitions to it when the events topic has more. Its records are
// compacted (one a key) and deleted after retention (make it at least
// 1.5 windows: the generations' lifetime).
func EnsureClaimsTopic(ctx context.Context, cl *kgo.Client, events, claims string, replication int, retention time.Duration) error {
	adm := kadm.NewClient(cl)
	ends, err := kafka.EndOffsets(ctx, cl, events)
	if err != nil {
		return fmt.Errorf("claims topic: %w", err)
	}
	want := int32(len(ends))
	if err := kafka.EnsureTopics(ctx, cl, []kafka.TopicSpec{{Name: claims, Partitions: want, Replication: int16(replication),
		Configs: map[string]string{"cleanup.policy": "compact,delete", "retention.ms": fmt.Sprint(retention.Milliseconds())}}}); err != nil {
		return err
	}
	have, err := kafka.EndOffsets(ctx, cl, claims)
	if err != nil {
		return fmt.Errorf("claims topic: %w", err)
	}
	if n := int32(len(have)); n < want {
		if _, err := adm.UpdatePartitions(ctx, int(want), claims); err != nil {
			return fmt.Errorf("claims topic: add partitions (%d → %d): %w", n, want, err)
		}
	}
	return nil
}

// ClaimsRetention is the changelog's retention for a dedupe window: the
// generations' longest life and a day.
func ClaimsRetention(window time.Duration) time.Duration {
	return window + window/claimGenerations + 24*time.Hour
}

// Assigned and Revoked are told of the fold's partitions moving: an assigned
// partition is caught up with the changelog before its next keys are
// decided; a revoked one is forgotten as caught up (another projector may
// claim its keys meanwhile; its claims stay on disk for when it comes back).
func (c *Claims) Assigned(ps []int32) { c.forget(ps) }

// Revoked: see Assigned.
func (c *Claims) Revoked(ps []int32) { c.forget(ps) }

func (c *Claims) forget(ps []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		delete(c.next, p)
	}
}

// generation is the generation of a claim made at t.
func (c *Claims) generation(t time.Time) uint32 {
	return uint32(t.UnixMilli() / c.gen.Milliseconds())
}

// live returns the generations a key is looked up in at now, newest first:
// every one that may hold a claim made within the window.
func (c *Claims) live(now time.Time) []uint32 {
	hi, lo := c.generation(now), c.generation(now.Add(-c.window))
	gens := make([]uint32, 0, hi-lo+2)
	for g := int64(hi) + 1; g >= int64(lo); g-- { // hi+1: a clock a little ahead elsewhere
		gens = append(gens, uint32(g))
	}
	return gens
}

// hashKey is the stored form of a claim key.
func hashKey(k string) claimstore.Key {
	var buf [128]byte // holds the usual key; a longer one grows on the heap ([]byte(k) would always be there)
	h := sha256.Sum256(append(buf[:0], k...))
	return claimstore.Key(h[:16])
}

// Claim decides every key (in the batch's order: a partition's keys by
// offset) and returns one outcome per key (it notes in keys their hashes,
// for Keep). It first catches up the
// partitions it has not since they were assigned. It stores nothing: Keep
// does, before the batch is committed.
func (c *Claims) Claim(ctx context.Context, keys []ClaimKey) ([]Claim, error) {
	out := make([]Claim, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	byPart := map[int32][]int{}
	for i := range keys {
		byPart[keys[i].Partition] = append(byPart[keys[i].Partition], i)
	}
	parts := make([]int32, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	if err := c.catchUp(ctx, parts); err != nil {
		return nil, err
	}
	now := c.now()
	if err := c.expire(now); err != nil {
		return nil, err
	}
	gens := c.live(now)
	hashes := make([]claimstore.Key, len(keys))
	owners := make([]claimstore.Owner, len(keys))
	errs := make([]error, len(parts))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for j, p := range parts {
		idx := byPart[p]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ks := make([]claimstore.Key, len(idx))
			for n, i := range idx {
				ks[n] = hashKey(keys[i].Key)
				hashes[i] = ks[n]
				keys[i].hash, keys[i].hashed = ks[n], true
			}
			found := make([]claimstore.Owner, len(idx))
			if errs[j] = c.store.Lookup(p, gens, ks, found); errs[j] != nil {
				return
			}
			for n, i := range idx {
				owners[i] = found[n]
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var fromRedis []string
	if c.legacy != nil && c.legacy.active(now) {
		var ask []int
		for i := range keys {
			if !owners[i].Found {
				ask = append(ask, i)
			}
		}
		var err error
		if fromRedis, err = c.legacy.owners(ctx, keys, hashes, ask); err != nil {
			return nil, err
		}
	}
	// Within the batch, the first record of a partition to claim a key owns
	// it.
	firsts := make(map[claimstore.Key]int64)
	for _, p := range parts {
		clear(firsts)
		for _, i := range byPart[p] {
			k := &keys[i]
			switch o := owners[i]; {
			case o.Found && o.Offset == k.Offset:
				out[i] = ClaimReplay
			case o.Found:
				out[i] = ClaimDuplicate
			case fromRedis != nil && fromRedis[i] == owner(k.Partition, k.Offset):
				out[i] = ClaimReplay
			case fromRedis != nil && fromRedis[i] != "":
				out[i] = ClaimDuplicate
			default:
				if off, ok := firsts[hashes[i]]; ok && off != k.Offset {
					out[i] = ClaimDuplicate
					continue
				}
				firsts[hashes[i]] = k.Offset
				out[i] = ClaimFirst
			}
		}
	}
	return out, nil
}

// Keep makes the first claims among keys (outcomes from Claim) durable:
// produced to the changelog and acknowledged (acks=all), then written to
// the local store. The batch may be committed once it returned nil.
func (c *Claims) Keep(ctx context.Context, keys []ClaimKey, claims []Claim) error {
	now := c.now()
	gen := c.generation(now)
	byPart := map[int32][]claimstore.Entry{}
	var recs []*kgo.Record
	for i, k := range keys {
		if claims[i] != ClaimFirst {
			continue
		}
		h := k.hash
		if !k.hashed {
			h = hashKey(k.Key)
		}
		byPart[k.Partition] = append(byPart[k.Partition], claimstore.Entry{Gen: gen, Key: h, Offset: k.Offset})
		recs = append(recs, &kgo.Record{Topic: c.topic, Partition: k.Partition, Key: h[:],
			Value: binary.AppendUvarint(nil, uint64(k.Offset)), Timestamp: now})
	}
	if len(recs) == 0 {
		return nil
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	results := c.cl.ProduceSync(pctx, recs...)
	cancel()
	if err := results.FirstErr(); err != nil {
		return fmt.Errorf("claims: changelog: %w", err)
	}
	observeStep(EventsGroup, "claims_changelog", start)
	// Each partition's checkpoint moves past its records when they follow
	// it without a gap; otherwise another projector wrote there meanwhile
	// (one that lost the partition and does not know yet), and the
	// partition is caught up again before its next keys.
	first, last, n := map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
	for _, r := range results {
		p := r.Record.Partition
		if f, ok := first[p]; !ok || r.Record.Offset < f {
			first[p] = r.Record.Offset
		}
		last[p] = max(last[p], r.Record.Offset)
		n[p]++
	}
	// The partitions' tables are written and ingested at once (each
	// ingestion waits for the disk).
	errs := make([]error, 0, len(byPart))
	var emu sync.Mutex
	var wg sync.WaitGroup
	for p, ents := range byPart {
		wg.Go(func() {
			c.mu.Lock()
			next, caught := c.next[p]
			c.mu.Unlock()
			checkpoint := int64(-1)
			if caught && first[p] == next && last[p]-first[p]+1 == n[p] {
				checkpoint = last[p] + 1
			}
			err := c.store.Write(p, ents, checkpoint)
			c.mu.Lock()
			if _, still := c.next[p]; still && checkpoint >= 0 && err == nil {
				c.next[p] = checkpoint
			} else {
				delete(c.next, p)
			}
			c.mu.Unlock()
			if err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	observeStep(EventsGroup, "claims_store", start)
	st := c.store.Stats()
	telemetry.ClaimStoreBytes.WithLabelValues("disk").Set(float64(st.DiskBytes))
	telemetry.ClaimStoreBytes.WithLabelValues("cache").Set(float64(st.CacheBytes))
	telemetry.ClaimStoreBytes.WithLabelValues("memtable").Set(float64(st.MemTableBytes))
	// The volume's figures at most every few seconds (a call allocates).
	var fs syscall.Statfs_t
	if now := time.Now().UnixNano(); now-c.statfsAt.Load() >= int64(5*time.Second) && syscall.Statfs(c.dir, &fs) == nil {
		c.statfsAt.Store(now)
		telemetry.ClaimStoreVolumeBytes.WithLabelValues("size").Set(float64(fs.Blocks) * float64(fs.Bsize))
		telemetry.ClaimStoreVolumeBytes.WithLabelValues("available").Set(float64(fs.Bavail) * float64(fs.Bsize))
	}
	return nil
}

// expire drops the generations no key is looked up in any more.
func (c *Claims) expire(now time.Time) error {
	lo := c.generation(now.Add(-c.window))
	c.mu.Lock()
	done := c.dropped >= lo
	c.mu.Unlock()
	if done {
		return nil
	}
	if err := c.store.DropBefore(lo); err != nil {
		return err
	}
	c.mu.Lock()
	c.dropped = lo
	c.mu.Unlock()
	return nil
}

// catchUpChunk is how many changelog records are written to the store at
// once while catching up (each chunk moves the checkpoint: a catch-up cut
// short resumes there).
const catchUpChunk = 200_000

// catchUp reads, for each partition of ps not caught up since it was
// assigned, the changelog from the store's checkpoint to its end offset, and
// stores its claims that are still in the window.
func (c *Claims) catchUp(ctx context.Context, ps []int32) error {
	c.mu.Lock()
	var todo []int32
	for _, p := range ps {
		if _, ok := c.next[p]; !ok {
			todo = append(todo, p)
		}
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ends, err := kafka.EndOffsets(lctx, c.cl, c.topic)
	cancel()
	if err != nil {
		return fmt.Errorf("claims: changelog end offsets: %w", err)
	}
	from, toRead := map[int32]int64{}, map[int32]int64{}
	for _, p := range todo {
		cp, ok, err := c.store.Checkpoint(p)
		if err != nil {
			return err
		}
		end, known := ends[p]
		if !known {
			return fmt.Errorf("claims: the changelog %s has no partition %d (run EnsureClaimsTopic)", c.topic, p)
		}
		if !ok {
			cp = 0
		}
		from[p] = cp
		if cp < end {
			toRead[p] = cp
		}
	}
	var read int64
	if len(toRead) > 0 {
		if read, err = c.read(ctx, toRead, ends); err != nil {
			return err
		}
	}
	c.mu.Lock()
	for _, p := range todo {
		c.next[p] = max(from[p], ends[p])
	}
	c.mu.Unlock()
	telemetry.ClaimsCaughtUp.Add(float64(read))
	c.log.Info("events fold: claims caught up with the changelog", "partitions", todo, "records", read,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// read consumes the changelog partitions of from (each from its offset)
// up to ends and stores their claims of the window, a chunk at a time with
// its checkpoint. It returns how many records it read.
func (c *Claims) read(ctx context.Context, from, ends map[int32]int64) (int64, error) {
	type progress struct {
		at, end int64
		ents    []claimstore.Entry
	}
	st := map[int32]*progress{}
	assign := map[int32]kgo.Offset{}
	var ps []int32
	for p, o := range from {
		st[p] = &progress{at: o, end: ends[p]}
		assign[p] = kgo.NewOffset().At(o)
		ps = append(ps, p)
	}
	c.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: assign})
	defer c.cl.RemoveConsumePartitions(map[string][]int32{c.topic: ps})
	lo := c.generation(c.now().Add(-c.window))
	var read int64
	for len(st) > 0 {
		fs := c.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return read, fmt.Errorf("claims: catching up with the changelog: %w", err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", p, err)) })
		if ferr != nil {
			return read, fmt.Errorf("claims: reading the changelog: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			s := st[r.Partition]
			if s == nil || r.Offset >= s.end || ferr != nil {
				return
			}
			s.at = r.Offset + 1
			read++
			off, n := binary.Uvarint(r.Value)
			if len(r.Key) != len(claimstore.Key{}) || n <= 0 {
				ferr = fmt.Errorf("claims: changelog record %d/%d is not a claim", r.Partition, r.Offset)
				return
			}
			if g := c.generation(r.Timestamp); g >= lo { // else out of the window
				s.ents = append(s.ents, claimstore.Entry{Gen: g, Key: claimstore.Key(r.Key), Offset: int64(off)})
			}
		})
		if ferr != nil {
			return read, ferr
		}
		for p, s := range st {
			done := s.at >= s.end
			if len(s.ents) >= catchUpChunk || done {
				if err := c.store.Write(p, s.ents, s.at); err != nil {
					return read, err
				}
				s.ents = s.ents[:0]
			}
			if done {
				delete(st, p)
			}
		}
	}
	return read, nil
}
