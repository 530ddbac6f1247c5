package accounts

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Usage records when each API key was last used, in Redis (a key's record on
// the log is never rewritten for it). Touch is on the path of every
// authenticated request: it only stores the time in memory; Run writes the
// keys touched since its last flush, every flush interval, so a key's "last
// used" is at most that late.
type Usage struct {
	rdb   redis.UniversalClient
	every time.Duration
	log   *slog.Logger

	// touched: key id -> *atomic.Int64, unix seconds of its last use (0 once
	// flushed). A sync.Map: its reads take no lock, so that the requests of
	// many cores do not contend on one.
	touched sync.Map
}

// usageKey is the Redis hash of the last uses: field key id, value unix
// seconds.
const usageKey = "ec:apikey:last-used"

// NewUsage returns a Usage that flushes every interval (default 30 s).
func NewUsage(rdb redis.UniversalClient, every time.Duration, log *slog.Logger) *Usage {
	if every <= 0 {
		every = 30 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &Usage{rdb: rdb, every: every, log: log}
}

// Touch notes that key id was used now.
func (u *Usage) Touch(id string) {
	v, ok := u.touched.Load(id)
	if !ok {
		v, _ = u.touched.LoadOrStore(id, new(atomic.Int64))
	}
	t := v.(*atomic.Int64)
	now := time.Now().Unix()
	if t.Load() != now {
		t.Store(now)
	}
}

// Run flushes the touched keys every interval until ctx ends, then once more.
func (u *Usage) Run(ctx context.Context) error {
	tick := time.NewTicker(u.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			u.flush(fctx)
			cancel()
			return ctx.Err()
		case <-tick.C:
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			u.flush(fctx)
			cancel()
		}
	}
}

func (u *Usage) flush(ctx context.Context) {
	var args []any
	u.touched.Range(func(id, v any) bool {
		if s := v.(*atomic.Int64).Swap(0); s != 0 {
			args = append(args, id, s)
		}
		return true
	})
	if len(args) == 0 {
		return
	}
	// Each field keeps the latest time any process wrote.
	if err := maxScript.Run(ctx, u.rdb, []string{usageKey}, args...).Err(); err != nil && err != redis.Nil {
		u.log.Warn("api key usage not recorded", "keys", len(args)/2, "err", err)
	}
}

var maxScript = redis.NewScript(`
for i = 1, #ARGV, 2 do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if tonumber(ARGV[i+1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1]) end
end
return 0`)

// LastUsed returns the last use of each of ids that has one.
func (u *Usage) LastUsed(ctx context.Context, ids []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(ids) == 0 {
		return out, nil
	}
	vals, err := u.rdb.HMGet(ctx, usageKey, ids...).Result()
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			out[ids[i]] = time.Unix(n, 0).UTC()
		}
	}
	// What this process used since its last flush is newer.
	for _, id := range ids {
		if v, ok := u.touched.Load(id); ok {
			if s := v.(*atomic.Int64).Load(); s != 0 {
				out[id] = time.Unix(s, 0).UTC()
			}
		}
	}
	return out, nil
}
