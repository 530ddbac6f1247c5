package invitations

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/timestamp"
)

// mailCap counts the invitations (one e-mail each) a marketplace creates
// per UTC day in Redis (ec:invitations:mail-count:<marketplace>:<YYYY-MM-DD>,
// kept two days), so that the platform's SMTP server cannot be used as a
// relay: past the cap a request creates nothing.
type mailCap struct {
	rdb   redis.UniversalClient
	limit int
}

// takeMailScript adds ARGV[1] to the day's count unless that takes it past
// ARGV[2]; it returns 1 when added, 0 when refused.
var takeMailScript = redis.NewScript(`
local n = tonumber(redis.call("GET", KEYS[1]) or "0")
if n + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return 0 end
redis.call("INCRBY", KEYS[1], ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[3])
return 1`)

func mailCountKey(mp string, day time.Time) string {
	return "ec:invitations:mail-count:" + mp + ":" + day.Format(time.DateOnly)
}

// CapError: the invitations of a request would take the marketplace past
// its daily cap of invitation e-mails. It is a TooMany error of the house
// vocabulary; Reset is when the next UTC day starts.
type CapError struct {
	Limit int
	Reset time.Time
	err   *errkind.Error
}

func (e *CapError) Error() string { return e.err.Msg }
func (e *CapError) Unwrap() error { return e.err }

func newCapError(limit, asked int, reset time.Time) *CapError {
	return &CapError{Limit: limit, Reset: reset, err: errkind.New(errkind.TooMany,
		"this marketplace may send "+strconv.Itoa(limit)+" invitation e-mails a day (UTC) and these "+strconv.Itoa(asked)+
			" would pass it; nothing was created. The count starts again at "+timestamp.Format(reset))}
}

// SetDailyMailCap makes Create refuse, with a *CapError, the invitations
// that would take a marketplace past limit e-mails in a UTC day (counted
// in rdb). Without it nothing is counted (no e-mail is sent: the console
// shows the links instead).
func (s *Service) SetDailyMailCap(rdb redis.UniversalClient, limit int) {
	s.cap = &mailCap{rdb: rdb, limit: limit}
}

// take counts n e-mails of marketplace mp on the day of now.
func (c *mailCap) take(ctx context.Context, mp string, n int, now time.Time) error {
	day := now.UTC().Truncate(24 * time.Hour)
	if n > c.limit {
		return newCapError(c.limit, n, day.Add(24*time.Hour))
	}
	ok, err := bounded.Call(ctx, func(ctx context.Context) (int, error) {
		return takeMailScript.Run(ctx, c.rdb, []string{mailCountKey(mp, day)}, n, c.limit, (48 * time.Hour).Milliseconds()).Int()
	}, nil)
	if err != nil {
		return errors.Join(errkind.New(errkind.Unavailable, "the count of invitation e-mails cannot be read right now; nothing was created. Retry later"), err)
	}
	if ok != 1 {
		return newCapError(c.limit, n, day.Add(24*time.Hour))
	}
	return nil
}

// giveBack uncounts n e-mails whose invitations were not created after all.
func (c *mailCap) giveBack(ctx context.Context, mp string, n int, now time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = c.rdb.DecrBy(ctx, mailCountKey(mp, now.UTC().Truncate(24*time.Hour)), int64(n)).Err()
}
