// Package claimstore keeps sets of 16-byte keys on local disk, in an
// embedded LSM store (Pebble): per Kafka partition and per generation (a
// span of time), each key with the offset of the record that owns it, and
// per partition a checkpoint (the next offset of the changelog the partition's
// keys are rebuilt from). A generation is dropped whole (a range deletion,
// whose files compactions then delete without rewriting them). It holds no
// rule of its own: the events fold decides what a key means
// (docs/design/projector.md, Claims).
//
// Memory does not grow with the keys stored: Pebble's block cache (index and
// filter blocks, data blocks) and its memtables are bounded by Options; the
// rest is on disk.
package claimstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Key is a stored key (the events fold's: 16 bytes of a SHA-256).
type Key = [16]byte

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Dir is the directory of the store (created when missing).
	Dir string
	// CacheBytes bounds Pebble's block cache. Default 256 MiB.
	CacheBytes int64
	// MemTableBytes is the size of one memtable (at most two are kept in
	// memory, one being flushed). Default 32 MiB.
	MemTableBytes uint64
	// BloomBitsPerKey sizes the tables' Bloom filters. Default 10 (about
	// 1 % false positives).
	BloomBitsPerKey int
	// MaxOpenFiles bounds the tables kept open, each with its reader's
	// memory. Default Pebble's, 1,000.
	MaxOpenFiles int
	// L0CompactionThreshold: level 0 is compacted into the level below
	// when its tables make half this many sublevels (layers of overlapping
	// tables), and writes wait when they make three times this many.
	// Default 12 (Pebble's is 4).
	L0CompactionThreshold int
	// TrimInterval is how often the free memory of the C allocator, in
	// which Pebble keeps its block cache, is handed back to the OS
	// (malloc_trim). Default 10 s; negative: never.
	TrimInterval time.Duration
	Log          *slog.Logger
}

// Defaults of Options.
const (
	DefaultCacheBytes      = 256 << 20
	DefaultMemTableBytes   = 32 << 20
	DefaultBloomBitsPerKey = 10
	DefaultTrimInterval    = 10 * time.Second
	DefaultL0Compaction    = 12
)

// Store is a claim store on local disk. Its methods may be called
// concurrently.
type Store struct {
	db    *pebble.DB
	opts  *pebble.Options
	cache interface{ Unref() }
	// seq numbers the tables Write builds for ingestion.
	seq atomic.Uint64
	dir string
	// cacheMax is the block cache's bound.
	cacheMax int64
	// remove: Close deletes the directory (RemoveOnClose).
	remove bool
	// stopTrim ends the trimming goroutine (nil: none), which closes
	// trimmed when it has returned.
	stopTrim, trimmed chan struct{}
}

// RemoveOnClose has Close delete the store's directory (a temporary store).
func (s *Store) RemoveOnClose() { s.remove = true }

// Key layout: 'c' | generation (4 bytes, big-endian) | partition (4) | key
// (16) → the owner's offset (uvarint); 'k' | partition (4) → the checkpoint
// (uvarint). The generation first, so that dropping old generations is one
// range for every partition, and a generation's keys share their tables.
const (
	claimTag      = 'c'
	checkpointTag = 'k'
	claimKeyLen   = 1 + 4 + 4 + 16
)

// Open opens (or creates) the store in o.Dir.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("claim store: no directory")
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.BloomBitsPerKey <= 0 {
		o.BloomBitsPerKey = DefaultBloomBitsPerKey
	}
	if o.L0CompactionThreshold <= 0 {
		o.L0CompactionThreshold = DefaultL0Compaction
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("claim store: %w", err)
	}
	cache := pebble.NewCache(o.CacheBytes)
	opts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                o.MemTableBytes,
		MemTableStopWritesThreshold: 2,
		MaxOpenFiles:                o.MaxOpenFiles,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLog{o.Log},
		// A catch-up's tables each hold a batch of random keys: each
		// overlaps every other of its partition and generation, and each
		// compaction of L0 into the level below rewrites what that level
		// holds of them. Letting L0 reach six sublevels (Pebble's default:
		// two) before it is compacted rewrites that level a third as often;
		// a lookup consults one more table a sublevel, through its Bloom
		// filter (docs/design/performance.md, Events fold: catch-up).
		L0CompactionThreshold: o.L0CompactionThreshold,
		L0StopWritesThreshold: 3 * o.L0CompactionThreshold,
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(o.BloomBitsPerKey)
		// The keys are hashes: compression would find nothing to take.
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("claim store: open %s: %w", o.Dir, err)
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "ingest"), 0o755); err != nil {
		db.Close()
		cache.Unref()
		return nil, fmt.Errorf("claim store: %w", err)
	}
	s := &Store{db: db, opts: opts, cache: cache, dir: o.Dir, cacheMax: o.CacheBytes}
	if o.TrimInterval == 0 {
		o.TrimInterval = DefaultTrimInterval
	}
	if canTrim && o.TrimInterval > 0 {
		s.stopTrim, s.trimmed = make(chan struct{}), make(chan struct{})
		go s.trim(o.TrimInterval)
	}
	return s, nil
}

// trim hands the C allocator's free memory back to the OS every interval
// until Close (trimC).
func (s *Store) trim(interval time.Duration) {
	defer close(s.trimmed)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopTrim:
			return
		case <-t.C:
			trimC()
		}
	}
}

// Close closes the store (its write-ahead log keeps what was written).
func (s *Store) Close() error {
	if s.stopTrim != nil {
		close(s.stopTrim)
		<-s.trimmed
	}
	err := s.db.Close()
	s.cache.Unref()
	if s.remove {
		err = errors.Join(err, os.RemoveAll(s.dir))
	}
	return err
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func claimKey(buf []byte, gen uint32, p int32, k *Key) []byte {
	buf = append(buf[:0], claimTag)
	buf = binary.BigEndian.AppendUint32(buf, gen)
	buf = binary.BigEndian.AppendUint32(buf, uint32(p))
	return append(buf, k[:]...)
}

func checkpointKey(p int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{checkpointTag}, uint32(p))
}

// Owner is what Lookup found for a key.
type Owner struct {
	Offset int64
	Found  bool
}

// Lookup looks every key of partition p up in the generations gens, in
// their order (the first that has a key decides), and writes what it found
// into out (as long as keys). One iterator a generation serves every key,
// in the keys' order, and consults the tables' Bloom filters on every level
// (Pebble's point reads leave out the last level's: most keys looked up here
// are new, and the last level holds most keys).
func (s *Store) Lookup(p int32, gens []uint32, keys []Key, out []Owner) error {
	clear(out)
	idx := make([]sortKey, len(keys))
	for i := range keys {
		idx[i] = newSortKey(0, &keys[i], i)
	}
	sortKeys(idx)
	buf := make([]byte, 0, claimKeyLen)
	for _, g := range gens {
		lo := claimKey(nil, g, p, &Key{})[:1+4+4]
		hi := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{claimTag}, g), uint32(p)+1)
		if uint32(p) == ^uint32(0) {
			hi = binary.BigEndian.AppendUint32([]byte{claimTag}, g+1)
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi, UseL6Filters: true})
		if err != nil {
			return fmt.Errorf("claim store: %w", err)
		}
		if !it.First() { // the generation holds no key of p (one ahead of the clock, one not yet written)
			if err := it.Close(); err != nil {
				return fmt.Errorf("claim store: %w", err)
			}
			continue
		}
		for _, sk := range idx {
			i := sk.i
			if out[i].Found {
				continue
			}
			buf = claimKey(buf, g, p, &keys[i])
			if !it.SeekPrefixGE(buf) || !bytes.Equal(it.Key(), buf) {
				continue
			}
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return fmt.Errorf("claim store: %w", err)
			}
			off, n := binary.Uvarint(v)
			if n <= 0 {
				it.Close()
				return fmt.Errorf("claim store: a claim of partition %d holds %x, not an offset", p, v)
			}
			out[i] = Owner{Offset: int64(off), Found: true}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("claim store: %w", err)
		}
	}
	return nil
}

// sortKey is a key in the store's order: by generation, then the key's
// bytes (as bytes.Compare orders them, here as two big-endian integers),
// then its place i in its batch.
type sortKey struct {
	hi, lo uint64
	gen    uint32
	i      int
}

func newSortKey(gen uint32, k *Key, i int) sortKey {
	return sortKey{hi: binary.BigEndian.Uint64(k[:8]), lo: binary.BigEndian.Uint64(k[8:]), gen: gen, i: i}
}

func (a sortKey) compare(b sortKey) int {
	if a.gen != b.gen {
		return cmp.Compare(a.gen, b.gen)
	}
	if a.hi != b.hi {
		return cmp.Compare(a.hi, b.hi)
	}
	if a.lo != b.lo {
		return cmp.Compare(a.lo, b.lo)
	}
	return cmp.Compare(a.i, b.i)
}

func (a sortKey) sameKey(b sortKey) bool { return a.gen == b.gen && a.hi == b.hi && a.lo == b.lo }

// sortKeys sorts ks into the store's order. Keys of one generation (the
// usual batch) are first put by their first byte into 256 buckets (they are
// hashes: spread evenly) and each bucket is then sorted, about a third of
// the time of one sort of them all.
func sortKeys(ks []sortKey) {
	cmpf := func(a, b sortKey) int { return a.compare(b) }
	if len(ks) < 1024 || slices.ContainsFunc(ks, func(k sortKey) bool { return k.gen != ks[0].gen }) {
		slices.SortFunc(ks, cmpf)
		return
	}
	var start [257]int
	for _, k := range ks {
		start[k.hi>>56+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	tmp := make([]sortKey, len(ks))
	next := start
	for _, k := range ks { // in the batch's order: each bucket keeps it
		tmp[next[k.hi>>56]] = k
		next[k.hi>>56]++
	}
	copy(ks, tmp)
	for b := range 256 {
		slices.SortFunc(ks[start[b]:start[b+1]], cmpf)
	}
}

// Entry is one key to store.
type Entry struct {
	Gen    uint32
	Key    Key
	Offset int64
}

// Write stores entries of partition p and, when checkpoint >= 0, its
// checkpoint, in one atomic batch. It does not wait for the disk (the
// changelog, not this store, is what must survive).
func (s *Store) Write(p int32, entries []Entry, checkpoint int64) error {
	if len(entries) >= ingestAbove {
		s.waitL0()
		if err := s.ingest(p, entries); err != nil {
			return err
		}
		entries = nil
	}
	b := s.db.NewBatchWithSize(len(entries) * (claimKeyLen + 16))
	defer b.Close()
	key := make([]byte, 0, claimKeyLen)
	val := make([]byte, 0, binary.MaxVarintLen64)
	for i := range entries {
		e := &entries[i]
		key = claimKey(key, e.Gen, p, &e.Key)
		val = binary.AppendUvarint(val[:0], uint64(e.Offset))
		if err := b.Set(key, val, nil); err != nil {
			return err
		}
	}
	if checkpoint >= 0 {
		if err := b.Set(checkpointKey(p), binary.AppendUvarint(nil, uint64(checkpoint)), nil); err != nil {
			return err
		}
	}
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("claim store: write: %w", err)
	}
	return nil
}

// waitL0 waits, at most ingestWait, while L0 has as many sublevels as
// make Pebble hold writes to the memtable back (L0StopWritesThreshold),
// which holds no ingestion back: so that writes faster than the compactions
// do not deepen L0, and every lookup, without bound.
func (s *Store) waitL0() {
	deadline := time.Now().Add(ingestWait)
	for int(s.db.Metrics().Levels[0].Sublevels) >= s.opts.L0StopWritesThreshold && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// ingestWait bounds how long an ingestion waits for the compactions of L0.
const ingestWait = 10 * time.Second

// ingestAbove is the batch size from which Write builds a table and
// ingests it rather than inserting each key in the memtable: random keys
// make the memtable's skiplist the dearest step of a write.
const ingestAbove = 2_000

// ingest writes entries of partition p, sorted, into a table and ingests
// it.
func (s *Store) ingest(p int32, entries []Entry) error {
	idx := make([]sortKey, len(entries))
	for i := range entries {
		idx[i] = newSortKey(entries[i].Gen, &entries[i].Key, i)
	}
	sortKeys(idx)
	path := filepath.Join(s.dir, "ingest", fmt.Sprintf("%d-%d.sst", p, s.seq.Add(1)))
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("claim store: %w", err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), s.opts.MakeWriterOptions(0, s.db.TableFormat()))
	key := make([]byte, 0, claimKeyLen)
	val := make([]byte, 0, binary.MaxVarintLen64)
	for n, sk := range idx {
		if n > 0 && sk.sameKey(idx[n-1]) {
			continue // the same key twice in one batch: the first written wins
		}
		e := &entries[sk.i]
		key = claimKey(key, e.Gen, p, &e.Key)
		val = binary.AppendUvarint(val[:0], uint64(e.Offset))
		if err = w.Set(key, val); err != nil {
			break
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.db.Ingest(context.Background(), []string{path})
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("claim store: ingest: %w", err)
	}
	return nil
}

// Checkpoint returns partition p's checkpoint (false: none recorded).
func (s *Store) Checkpoint(p int32) (int64, bool, error) {
	v, closer, err := s.db.Get(checkpointKey(p))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("claim store: checkpoint: %w", err)
	}
	defer closer.Close()
	off, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, false, fmt.Errorf("claim store: the checkpoint of partition %d holds %x", p, v)
	}
	return int64(off), true, nil
}

// DropBefore deletes every generation older than gen, of every partition.
func (s *Store) DropBefore(gen uint32) error {
	start := []byte{claimTag}
	end := binary.BigEndian.AppendUint32([]byte{claimTag}, gen)
	if err := s.db.DeleteRange(start, end, pebble.NoSync); err != nil {
		return fmt.Errorf("claim store: drop generations before %d: %w", gen, err)
	}
	return nil
}

// Stats is what the store holds and uses.
type Stats struct {
	DiskBytes     uint64 // tables, logs and manifests
	CacheBytes    int64  // the block cache in use
	CacheMax      int64
	MemTableBytes uint64 // memtables, the one being written and those being flushed
	Tables        int64
	// L0Tables and L0Sublevels: the tables of level 0 and the layers they
	// make (a lookup consults one table of each sublevel and one of each
	// other level: the read amplification).
	L0Tables    int64
	L0Sublevels int32
	// ReadAmp is the sublevels of L0 and the other levels with tables.
	ReadAmp int
	// IngestedBytes, FlushedBytes and CompactedBytes: the tables' bytes
	// ingested by Write, flushed from the memtables and written by the
	// compactions since the store was opened.
	IngestedBytes, FlushedBytes, CompactedBytes uint64
	// Compactions: how many compactions ran since the store was opened.
	Compactions int64
}

// Stats reads the store's figures.
func (s *Store) Stats() Stats {
	m := s.db.Metrics()
	var tables int64
	for _, l := range m.Levels {
		tables += l.TablesCount
	}
	tot := m.Total()
	return Stats{
		DiskBytes:      m.DiskSpaceUsage(),
		CacheBytes:     m.BlockCache.Size,
		CacheMax:       s.cacheMax,
		MemTableBytes:  m.MemTable.Size,
		Tables:         tables,
		L0Tables:       m.Levels[0].TablesCount,
		L0Sublevels:    m.Levels[0].Sublevels,
		ReadAmp:        m.ReadAmp(),
		IngestedBytes:  tot.TableBytesIngested,
		FlushedBytes:   m.Levels[0].TableBytesFlushed,
		CompactedBytes: tot.TableBytesCompacted,
		Compactions:    m.Compact.Count,
	}
}

// Flush writes the memtable to tables and waits (benchmarks and tests).
func (s *Store) Flush() error { return s.db.Flush() }

// CompactAll compacts the whole store and waits (benchmarks: the steady
// state's files).
func (s *Store) CompactAll() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}

// pebbleLog sends Pebble's log lines to slog: its info lines (flushes,
// compactions) at debug.
type pebbleLog struct{ log *slog.Logger }

func (l pebbleLog) Infof(format string, args ...any) {
	l.log.Debug("claim store: " + fmt.Sprintf(format, args...))
}

func (l pebbleLog) Errorf(format string, args ...any) {
	l.log.Error("claim store: " + fmt.Sprintf(format, args...))
}

func (l pebbleLog) Fatalf(format string, args ...any) {
	msg := "claim store: " + fmt.Sprintf(format, args...)
	l.log.Error(msg)
	panic(msg)
}
