package exports

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// quota counts the exports of each marketplace per UTC day in Redis:
// ec:exports:quota:<marketplace>:<YYYY-MM-DD>, kept two days.
type quota struct{ rdb redis.UniversalClient }

const quotaTTL = 48 * time.Hour

// takeScript counts one export unless the day's count reached the limit;
// it returns 1 when counted, 0 when the quota is used.
var takeScript = redis.NewScript(`
local n = tonumber(redis.call("GET", KEYS[1]) or "0")
if n >= tonumber(ARGV[1]) then return 0 end
redis.call("INCR", KEYS[1])
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 1`)

func quotaKey(mp, day string) string { return "ec:exports:quota:" + mp + ":" + day }

func (q *quota) take(ctx context.Context, mp, day string, limit int) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n, err := takeScript.Run(ctx, q.rdb, []string{quotaKey(mp, day)}, limit, quotaTTL.Milliseconds()).Int()
	return n == 1, err
}

// giveBack uncounts an export that was not accepted after all.
func (q *quota) giveBack(ctx context.Context, mp, day string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = q.rdb.Decr(ctx, quotaKey(mp, day)).Err()
}

// used is the day's count.
func (q *quota) used(ctx context.Context, mp, day string) (int, error) {
	n, err := q.rdb.Get(ctx, quotaKey(mp, day)).Int()
	if err == redis.Nil {
		return 0, nil
	}
	return n, err
}
