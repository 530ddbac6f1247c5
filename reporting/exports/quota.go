package exports

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/storage/redisstore"
)

// quota counts the exports of each marketplace per UTC day in Redis, by
// export id, so that counting one export again (the retry of a request
// with an Idempotency-Key, whose export id is the same) counts nothing:
// a set ec:exports:quota-ids:<marketplace>:<YYYY-MM-DD>, kept two days.
// The counter of the same day written by earlier versions
// (ec:exports:quota:<marketplace>:<YYYY-MM-DD>) still counts, on one Redis
// server: a cluster never held it (and the two keys are in different
// slots, which a script on a cluster cannot use together).
type quota struct{ rdb redis.UniversalClient }

const quotaTTL = 48 * time.Hour

// takeScript counts export ARGV[3] unless it is counted already or the
// day's count reached the limit; it returns 1 when counted, 0 when the
// quota is used.
var takeScript = redis.NewScript(`
if redis.call("SISMEMBER", KEYS[1], ARGV[3]) == 1 then return 1 end
local n = redis.call("SCARD", KEYS[1])
if #KEYS > 1 then n = n + tonumber(redis.call("GET", KEYS[2]) or "0") end
if n >= tonumber(ARGV[1]) then return 0 end
redis.call("SADD", KEYS[1], ARGV[3])
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 1`)

// vendorQuotaScope counts a vendor's exports apart from its marketplace's
// (by the vendor's UUID: a catalog id may hold any character).
func vendorQuotaScope(mp, vendor string) string { return mp + ":vendor:" + vendorid.String(mp, vendor) }

func quotaKey(mp, day string) string       { return "ec:exports:quota-ids:" + mp + ":" + day }
func legacyQuotaKey(mp, day string) string { return "ec:exports:quota:" + mp + ":" + day }

// take counts export id (bounded by ctx).
func (q *quota) take(ctx context.Context, mp, day, id string, limit int) (bool, error) {
	keys := []string{quotaKey(mp, day)}
	if !redisstore.IsCluster(q.rdb) {
		keys = append(keys, legacyQuotaKey(mp, day))
	}
	n, err := bounded.Call(ctx, func(ctx context.Context) (int, error) {
		return takeScript.Run(ctx, q.rdb, keys, limit, quotaTTL.Milliseconds(), id).Int()
	}, nil)
	return n == 1, err
}

// giveBack uncounts an export that was not accepted after all.
func (q *quota) giveBack(ctx context.Context, mp, day, id string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = q.rdb.SRem(ctx, quotaKey(mp, day), id).Err()
}
