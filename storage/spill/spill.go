// Package spill keeps, on local disk, values that an in-memory view of the
// entities log holds no copy of (the catalog's product texts: docs/design/state.md,
// Memory), in an embedded LSM store (Pebble). It is a cache of the log, not
// a source of truth: every process fills a fresh store as it loads the log
// from its start, and deletes it when it stops. It holds no rule of its own.
//
// Memory does not grow with the values stored: Pebble's block cache and its
// memtables are bounded (Options); the rest is on disk and in the OS page
// cache.
package spill

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Dir is the directory under which the store makes its own
	// subdirectory (spill-*), removed by Close. Default: the system's
	// temporary directory. Subdirectories of processes that ended without
	// Close are removed by the next Open in the same directory.
	Dir string
	// CacheBytes bounds Pebble's block cache. Default 32 MiB.
	CacheBytes int64
	// MemTableBytes is the size of one memtable (at most two in memory).
	// Default 16 MiB.
	MemTableBytes uint64
	Log           *slog.Logger
}

// Defaults of Options.
const (
	DefaultCacheBytes    = 32 << 20
	DefaultMemTableBytes = 16 << 20
)

// ErrMissing is what Get returns for a key the store does not hold.
var ErrMissing = errors.New("spill: no such key")

// ErrClosed is what every method returns once Close began.
var ErrClosed = errors.New("spill: the store is closed")

// Store is a spill store. Its methods may be called concurrently.
type Store struct {
	// mu: Close waits for the calls in progress (Pebble panics on a
	// closed store); closed is set under it.
	mu     sync.RWMutex
	closed bool
	db     *pebble.DB
	cache  interface{ Unref() }
	dir    string
}

const subdirPrefix = "spill-"

// Open makes a new, empty store under o.Dir.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("spill store: %w", err)
	}
	removeStale(o.Dir, o.Log)
	dir, err := os.MkdirTemp(o.Dir, subdirPrefix)
	if err != nil {
		return nil, fmt.Errorf("spill store: %w", err)
	}
	cache := pebble.NewCache(o.CacheBytes)
	opts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                o.MemTableBytes,
		MemTableStopWritesThreshold: 2,
		// A cache of the log, rebuilt at every start: nothing to recover.
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLog{o.Log},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("spill store: open %s: %w", dir, err)
	}
	return &Store{db: db, cache: cache, dir: dir}, nil
}

// removeStale removes the stores of processes that ended without Close: the
// spill-* subdirectories of dir whose Pebble lock nobody holds.
func removeStale(dir string, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), subdirPrefix) {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		lock, err := vfs.Default.Lock(filepath.Join(sub, "LOCK"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // being created (its LOCK comes with pebble.Open), or not a store
			}
			continue // held: a live process's store
		}
		_ = lock.Close()
		if err := os.RemoveAll(sub); err == nil {
			log.Info("spill store: removed the store of an ended process", "dir", sub)
		}
	}
}

// Close closes the store and deletes its directory.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.db.Close()
	s.cache.Unref()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Dir is the store's own directory.
func (s *Store) Dir() string { return s.dir }

// Set stores value under key (both copied).
func (s *Store) Set(key, value []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.Set(key, value, pebble.NoSync)
}

// Delete removes key.
func (s *Store) Delete(key []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.Delete(key, pebble.NoSync)
}

// Get appends the value of key to dst; ErrMissing when there is none.
func (s *Store) Get(dst, key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return dst, ErrClosed
	}
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, ErrMissing
	}
	if err != nil {
		return dst, err
	}
	dst = append(dst, v...)
	return dst, closer.Close()
}

// pebbleLog writes Pebble's messages to the process's log: its Infof
// (flushes, compactions) at debug level.
type pebbleLog struct{ l *slog.Logger }

func (p pebbleLog) Infof(format string, args ...any) {
	p.l.Debug("spill store: " + fmt.Sprintf(format, args...))
}
func (p pebbleLog) Errorf(format string, args ...any) {
	p.l.Error("spill store: " + fmt.Sprintf(format, args...))
}
func (p pebbleLog) Fatalf(format string, args ...any) {
	msg := "spill store: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

var _ io.Closer = (*Store)(nil)
