package freqcap

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestPeriodsAt(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at                    string
		loc                   *time.Location
		day, week, month      string
		dayEnd, weekEnd, mEnd string
	}{
		// Sunday 29 November 2026, 23:30 UTC is Monday 30 November 00:30 in Paris.
		{"2026-11-29T23:30:00Z", time.UTC, "d20261129", "w202648", "m202611", "2026-11-30T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"2026-11-29T23:30:00Z", paris, "d20261130", "w202649", "m202611", "2026-12-01T00:00:00+01:00", "2026-12-07T00:00:00+01:00", "2026-12-01T00:00:00+01:00"},
		// ISO week 53 of 2026 runs into January 2027.
		{"2027-01-02T12:00:00Z", time.UTC, "d20270102", "w202653", "m202701", "2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-02-01T00:00:00Z"},
		{"2026-12-31T12:00:00Z", nil, "d20261231", "w202653", "m202612", "2027-01-01T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-01T00:00:00Z"},
	} {
		at, _ := time.Parse(time.RFC3339, c.at)
		p := PeriodsAt(at, c.loc)
		if p.Day != c.day || p.Week != c.week || p.Month != c.month {
			t.Errorf("%s in %v: %s %s %s, want %s %s %s", c.at, c.loc, p.Day, p.Week, p.Month, c.day, c.week, c.month)
		}
		for _, e := range []struct {
			got  time.Time
			want string
		}{{p.DayEnd, c.dayEnd}, {p.WeekEnd, c.weekEnd}, {p.MonthEnd, c.mEnd}} {
			w, _ := time.Parse(time.RFC3339, e.want)
			if !e.got.Equal(w) {
				t.Errorf("%s in %v: end %s, want %s", c.at, c.loc, e.got, e.want)
			}
		}
	}
}

// TestCount: hits add one per field in each period; a replayed record (same
// partition, an offset already counted) adds nothing; a hit of a period
// that is over adds nothing; the next day starts from zero while the week
// and the month go on.
func TestCount(t *testing.T) {
	env := testenv.Get(t)
	rdb := env.Redis(t)
	s := New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mp, user, camp := uuid.NewString(), "shopper-"+uuid.NewString(), uuid.NewString()
	cf := CampaignField(camp, Impression)
	bf := BidField(camp, "bid-1", Click)
	now := time.Date(2026, 11, 10, 10, 0, 0, 0, time.UTC) // a Tuesday
	hit := func(off int64, at time.Time, fields ...string) Hit {
		return Hit{MP: mp, User: user, Partition: 3, Offset: off, At: at, Loc: time.UTC, Fields: fields}
	}
	if err := s.Count(ctx, []Hit{hit(10, now, cf), hit(11, now, cf, bf)}, now); err != nil {
		t.Fatal(err)
	}
	// The same records again (a replay), and an older offset: nothing.
	if err := s.Count(ctx, []Hit{hit(10, now, cf), hit(11, now, cf, bf), hit(5, now, cf)}, now); err != nil {
		t.Fatal(err)
	}
	var c Counts
	if err := s.Read(ctx, mp, user, now, time.UTC, &c); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"daily", "weekly", "monthly"} {
		if got := c.Campaign(f, camp, Impression); got != 2 {
			t.Errorf("%s %s = %d, want 2", f, cf, got)
		}
		if got := c.Bid(f, camp, "bid-1", Click); got != 1 {
			t.Errorf("%s %s = %d, want 1", f, bf, got)
		}
	}
	// The next day: the day is new, the week and month go on.
	next := now.Add(24 * time.Hour)
	if err := s.Count(ctx, []Hit{hit(12, next, cf)}, next); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(ctx, mp, user, next, time.UTC, &c); err != nil {
		t.Fatal(err)
	}
	if d, w, m := c.Campaign("daily", camp, Impression), c.Campaign("weekly", camp, Impression), c.Campaign("monthly", camp, Impression); d != 1 || w != 3 || m != 3 {
		t.Errorf("next day: %d %d %d, want 1 3 3", d, w, m)
	}
	// An event of a month that is over (counted late) adds nothing anywhere.
	old := now.AddDate(0, -2, 0)
	if err := s.Count(ctx, []Hit{hit(13, old, cf)}, next); err != nil {
		t.Fatal(err)
	}
	_ = s.Read(ctx, mp, user, old, time.UTC, &c)
	if got := c.Campaign("monthly", camp, Impression); got != 0 {
		t.Errorf("a period over counted %d", got)
	}
	// The next week: the week is new; the month goes on.
	nw := now.Add(7 * 24 * time.Hour)
	if err := s.Read(ctx, mp, user, nw, time.UTC, &c); err != nil {
		t.Fatal(err)
	}
	if d, w, m := c.Campaign("daily", camp, Impression), c.Campaign("weekly", camp, Impression), c.Campaign("monthly", camp, Impression); d != 0 || w != 0 || m != 3 {
		t.Errorf("next week: %d %d %d, want 0 0 3", d, w, m)
	}
	// One key, which lives to the end of the longest period it holds + 1 h:
	// the month (to December 2026), set at the first count (the TTL is only
	// ever raised; Redis's clock is not the test's).
	if ks := testenv.Keys(t, rdb, Key(mp, user)+"*"); len(ks) != 1 {
		t.Errorf("keys %v, want one", ks)
	}
	ttl, err := rdb.TTL(ctx, Key(mp, user)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC).Sub(now); ttl < want-5*time.Second || ttl > want+5*time.Second {
		t.Errorf("TTL %s, want about %s", ttl, want)
	}
	// The next day's count dropped the fields of the day before (over for
	// more than an hour).
	fields, err := rdb.HKeys(ctx, Key(mp, user)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if strings.HasPrefix(f, PeriodsAt(now, time.UTC).Day) {
			t.Errorf("a field of a day over: %s (all: %v)", f, fields)
		}
	}
}

// TestErase: an erasure removes every live hash of the shopper (this
// period's and the previous one's) and the offsets, not another shopper's.
func TestErase(t *testing.T) {
	env := testenv.Get(t)
	rdb := env.Redis(t)
	s := New(rdb)
	ctx := context.Background()
	mp, gone, kept := uuid.NewString(), "gone-"+uuid.NewString(), "kept-"+uuid.NewString()
	now := time.Now()
	f := CampaignField(uuid.NewString(), Click)
	// Yesterday's counts (still alive for an hour after midnight, here kept
	// alive by counting at yesterday's clock) and today's.
	for i, at := range []time.Time{now.Add(-24 * time.Hour), now} {
		for _, u := range []string{gone, kept} {
			if err := s.Count(ctx, []Hit{{MP: mp, User: u, Offset: int64(i), At: at, Loc: time.UTC, Fields: []string{f}}}, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	// And hashes of the layout before (a period's hash), not carried over.
	for _, u := range []string{gone, kept} {
		if err := rdb.HIncrBy(ctx, Key(mp, u)+":"+PeriodsAt(now, time.UTC).Week, f, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Erase(ctx, mp, []string{gone}, now); err != nil || n != 2 {
		t.Fatalf("erased %d keys, %v; want 2", n, err)
	}
	if ks := testenv.Keys(t, rdb, Key(mp, gone)+"*"); len(ks) != 0 {
		t.Errorf("left %v", ks)
	}
	if ks := testenv.Keys(t, rdb, Key(mp, kept)+"*"); len(ks) != 2 {
		t.Errorf("another shopper's keys: %v", ks)
	}
}

// commandNames records the names of the commands a client sends.
type commandNames struct {
	mu    sync.Mutex
	names []string
}

func (h *commandNames) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *commandNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.add(c)
		}
		return next(ctx, cmds)
	}
}

func (h *commandNames) add(c redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names = append(h.names, strings.ToLower(c.Name()))
}

func (h *commandNames) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.names
	h.names = nil
	return n
}

// TestCountBySHA: the count script goes by its SHA-1 (EVALSHA), never by
// its text (EVAL); a server that lost it (SCRIPT FLUSH) gets it loaded and
// the hits counted, once each.
func TestCountBySHA(t *testing.T) {
	env := testenv.Get(t)
	rdb := env.Redis(t)
	names := &commandNames{}
	rdb.AddHook(names)
	s := New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mp, camp := uuid.NewString(), uuid.NewString()
	users := []string{"shopper-" + uuid.NewString(), "shopper-" + uuid.NewString()}
	cf := CampaignField(camp, Click)
	now := time.Now()
	hits := func(off int64) []Hit {
		var hs []Hit
		for _, u := range users {
			hs = append(hs, Hit{MP: mp, User: u, Partition: 1, Offset: off, At: now, Loc: time.UTC, Fields: []string{cf}})
		}
		return hs
	}
	check := func(step string, wantLoad bool) {
		t.Helper()
		sent := names.take()
		if slices.Contains(sent, "eval") || !slices.Contains(sent, "evalsha") {
			t.Errorf("%s: commands %v, want EVALSHA and no EVAL", step, sent)
		}
		if got := slices.Contains(sent, "script"); got != wantLoad {
			t.Errorf("%s: commands %v: a SCRIPT LOAD %v, want %v", step, sent, got, wantLoad)
		}
	}
	// The first count may load the script (a server that never ran it).
	if err := s.Count(ctx, hits(1), now); err != nil {
		t.Fatal(err)
	}
	names.take()
	if err := s.Count(ctx, hits(2), now); err != nil {
		t.Fatal(err)
	}
	check("loaded", false)
	if err := redisstore.ForEachMaster(ctx, rdb, func(ctx context.Context, m *redis.Client) error {
		return m.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	names.take()
	if err := s.Count(ctx, hits(3), now); err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
	check("after SCRIPT FLUSH", true)
	for _, u := range users {
		var c Counts
		if err := s.Read(ctx, mp, u, now, time.UTC, &c); err != nil {
			t.Fatal(err)
		}
		if got := c.Campaign("daily", camp, Click); got != 3 {
			t.Errorf("%s: %d clicks counted, want 3", u, got)
		}
	}
}
