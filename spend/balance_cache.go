package spend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/telemetry"
)

// FundsCache is the auction's copy of vendors' funds (docs/reference/balances.md):
// whether each vendor it was asked about is out of funds, read from Redis
// every Options.Refresh, as the spend cache reads campaigns' spend. Out
// answers from memory; a vendor not loaded yet is registered, answers
// "not out" and is loaded at once. A vendor no Out asked for in IdleAfter
// is dropped.
type FundsCache struct {
	rdb  redis.UniversalClient
	opts Options
	log  *slog.Logger

	snap    atomic.Pointer[fundsSnapshot]
	reg     sync.Map // "<mp>\x00<vendor>" → *fundsEntry: the vendors read
	pass    sync.Mutex
	refresh refresher // kicked when a vendor is registered
}

type fundsEntry struct {
	mp, vendor string
	lastUsed   atomic.Int64 // unix seconds
}

// fundsSnapshot: marketplace → vendor → out of funds, and its entry.
type fundsSnapshot struct {
	out map[string]map[string]fundsRef
}

type fundsRef struct {
	out bool
	e   *fundsEntry
}

// NewFundsCache returns a cache reading from rdb. Call Run to keep it fresh.
func NewFundsCache(rdb redis.UniversalClient, o Options) *FundsCache {
	o = o.withDefaults()
	c := &FundsCache{rdb: rdb, opts: o, log: o.Log, refresh: newRefresher()}
	c.snap.Store(&fundsSnapshot{})
	return c
}

// Out says whether vendor vendorID of marketplace mp was out of funds at the
// last refresh (Funds.Out). It never blocks on Redis; now marks the vendor
// as in use.
func (c *FundsCache) Out(mp, vendorID string, now time.Time) bool {
	if vs, ok := c.snap.Load().out[mp]; ok {
		if r, ok := vs[vendorID]; ok {
			if sec := now.Unix(); r.e.lastUsed.Load() < sec {
				r.e.lastUsed.Store(sec) // a shared write once a second at most
			}
			return r.out
		}
	}
	c.touch(mp, vendorID, now)
	return false
}

func (c *FundsCache) touch(mp, vendorID string, now time.Time) {
	k := mp + "\x00" + vendorID
	if e, ok := c.reg.Load(k); ok {
		e.(*fundsEntry).lastUsed.Store(now.Unix())
		return
	}
	e := &fundsEntry{mp: mp, vendor: vendorID}
	e.lastUsed.Store(now.Unix())
	if _, loaded := c.reg.LoadOrStore(k, e); !loaded {
		c.refresh.Kick()
	}
}

// Run refreshes the cache every Options.Refresh, and at once when a vendor
// is registered, until ctx ends.
func (c *FundsCache) Run(ctx context.Context) error {
	return c.refresh.run(ctx, c.opts.Refresh, c.RefreshNow)
}

// RefreshNow reads the funds of every registered vendor (a pipelined HMGET
// per vendor, per marketplace, bounded by Options.Timeout) and swaps in a
// new snapshot; vendors not asked about in IdleAfter are dropped.
// A marketplace whose read fails keeps its last answers.
func (c *FundsCache) RefreshNow(ctx context.Context) error {
	c.pass.Lock()
	defer c.pass.Unlock()
	cutoff := time.Now().Add(-IdleAfter).Unix()
	byMP := map[string][]*fundsEntry{}
	c.reg.Range(func(k, v any) bool {
		e := v.(*fundsEntry)
		if e.lastUsed.Load() < cutoff {
			c.reg.Delete(k)
			return true
		}
		byMP[e.mp] = append(byMP[e.mp], e)
		return true
	})
	old := c.snap.Load()
	next := &fundsSnapshot{out: make(map[string]map[string]fundsRef, len(byMP))}
	var errs []error
	for mp, es := range byMP {
		vendors := make([]string, len(es))
		for i, e := range es {
			vendors[i] = e.vendor
		}
		rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		fs, err := readFundsMany(rctx, c.rdb, mp, vendors)
		cancel()
		if err != nil {
			telemetry.BudgetRefreshes.WithLabelValues("error").Inc()
			errs = append(errs, fmt.Errorf("balance: refresh marketplace %q: %w", mp, err))
			if prev, ok := old.out[mp]; ok {
				next.out[mp] = prev
			}
			continue
		}
		m := make(map[string]fundsRef, len(vendors))
		for i, v := range vendors {
			m[v] = fundsRef{out: fs[i].Out(), e: es[i]}
		}
		next.out[mp] = m
	}
	c.snap.Store(next)
	err := errors.Join(errs...)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("balance: funds refresh failed; serving the last answers", "err", err)
	}
	return err
}
