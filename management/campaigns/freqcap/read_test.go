package freqcap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/testkit/testenv"
)

// resp3 and resp2 are HGETALL replies of the pairs, as RESP3 (a map) and
// RESP2 (an array) send them.
func resp3(pairs ...string) string { return "%" + strconv.Itoa(len(pairs)/2) + "\r\n" + bulks(pairs) }
func resp2(pairs ...string) string { return "*" + strconv.Itoa(len(pairs)) + "\r\n" + bulks(pairs) }
func bulks(ss []string) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s)
	}
	return b.String()
}

// TestParse: the counts of the current day, week and month are read from
// a reply in either protocol; other periods' fields, the offsets and the
// mark are not counts; an error reply, a redirect and a malformed reply
// are errors and leave no counts.
func TestParse(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) // d20261129 w202648 m202611
	st := stampsAt(at, time.UTC)
	pairs := []string{
		"d20261129:c1:i", "2", "w202648:c1:i", "5", "m202611:c1:i", "9",
		"d20261129:c1:b1:c", "1", "d20261128:c1:i", "7", "w202647:c1:i", "4", "m202610:c1:i", "8",
		"o3", "1234", "p", " d20261129 d20261129 w202648 w202648 m202611 m202611 ",
		"d20261129:c2:i", "not a number",
	}
	for _, c := range []struct {
		name, raw string
		err       string // "" none; "redirect": errRedirect
		counts    map[string]int64
	}{
		{"resp3", resp3(pairs...), "", map[string]int64{"daily c1 i": 2, "weekly c1 i": 5, "monthly c1 i": 9, "daily c1 b1 c": 1, "daily c2 i": 0, "weekly c1 b1 c": 0, "daily c3 i": 0}},
		{"resp2", resp2(pairs...), "", map[string]int64{"daily c1 i": 2, "weekly c1 i": 5, "monthly c1 i": 9, "daily c1 b1 c": 1}},
		{"empty resp3", "%0\r\n", "", map[string]int64{"daily c1 i": 0}},
		{"empty resp2", "*0\r\n", "", map[string]int64{"daily c1 i": 0}},
		{"moved", "-MOVED 3999 127.0.0.1:6381\r\n", "redirect", nil},
		{"ask", "-ASK 3999 127.0.0.1:6381\r\n", "redirect", nil},
		{"error", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "WRONGTYPE", nil},
		{"odd array", "*1\r\n$1\r\na\r\n", "array of 1", nil},
		{"truncated", resp3(pairs...)[:60], "", nil},
		{"short bulk", "%1\r\n$14\r\nd20261129:c1:i\r\n$5\r\n2\r\n", "truncated", nil},
		{"integer element", "%1\r\n$14\r\nd20261129:c1:i\r\n:2\r\n", "element of type", nil},
		{"trailing bytes", resp3("d20261129:c1:i", "2") + "+OK\r\n", "after the reply", nil},
		{"another type", "+OK\r\n", "reply of type", nil},
		{"no line", "%1", "truncated", nil},
		{"huge count", "%99999999\r\n", "pairs", nil},
	} {
		var cs Counts
		err := cs.parse([]byte(c.raw), &st)
		switch {
		case c.err == "redirect":
			if !errors.Is(err, errRedirect) {
				t.Errorf("%s: %v, want a redirect", c.name, err)
			}
		case c.counts == nil:
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		}
		if c.counts == nil {
			if cs.Len() != 0 || cs.Campaign("daily", "c1", Impression) != 0 || cs.Has(CampaignHash("c1")) {
				t.Errorf("%s: %d counts left after an error", c.name, cs.Len())
			}
			continue
		}
		// Has: any count of the campaign (a filter before the counts).
		if c.counts["daily c1 i"] != 0 && !cs.Has(CampaignHash("c1")) {
			t.Errorf("%s: Has(c1) false with counts of c1", c.name)
		}
		if cs.Has(CampaignHash("c3")) || cs.Has(CampaignHash("c1:i")) {
			t.Errorf("%s: Has true for a campaign without counts", c.name)
		}
		for q, want := range c.counts {
			f := strings.Fields(q)
			var got int64
			if len(f) == 3 {
				got = cs.Campaign(f[0], f[1], f[2][0])
			} else {
				got = cs.Bid(f[0], f[1], f[2], f[3][0])
			}
			if got != want {
				t.Errorf("%s: %s = %d, want %d", c.name, q, got, want)
			}
		}
	}
}

// TestReadAllocations: a read allocates about as much for a shopper with
// 300 counts as for one with 3: nothing per count (the reply is one buffer,
// the counts are kept in the Counts' memory between reads).
func TestReadAllocations(t *testing.T) {
	env := testenv.Get(t)
	rdb := env.Redis(t)
	s := New(rdb)
	ctx := context.Background()
	now := time.Now()
	mp := uuid.NewString()
	allocs := func(fields int) float64 {
		user := "shopper-" + uuid.NewString()
		var hits []Hit
		for i := range fields / 3 { // three periods a field
			hits = append(hits, Hit{MP: mp, User: user, Offset: int64(i), At: now, Loc: time.UTC, Fields: []string{CampaignField(uuid.NewString(), Impression)}})
		}
		if err := s.Count(ctx, hits, now); err != nil {
			t.Fatal(err)
		}
		var c Counts
		if err := s.Read(ctx, mp, user, now, time.UTC, &c); err != nil || c.Len() != fields {
			t.Fatalf("%d counts read, want %d (%v)", c.Len(), fields, err)
		}
		return testing.AllocsPerRun(20, func() {
			if err := s.Read(ctx, mp, user, now, time.UTC, &c); err != nil {
				t.Fatal(err)
			}
		})
	}
	few, many := allocs(3), allocs(300)
	t.Logf("allocations a read: %.0f with 3 counts, %.0f with 300", few, many)
	if many-few > 20 {
		t.Errorf("a read allocates %.0f with 3 counts and %.0f with 300: it allocates per count", few, many)
	}
}

// TestCarryOver: a shopper's first count in the hash takes over the counts
// of the current periods, and the offsets, from the hashes of the layout
// before (one per period), and deletes them; a record they had counted
// counts nothing again.
func TestCarryOver(t *testing.T) {
	env := testenv.Get(t)
	rdb := env.Redis(t)
	s := New(rdb)
	ctx := context.Background()
	mp, user, camp := uuid.NewString(), "shopper-"+uuid.NewString(), uuid.NewString()
	now := time.Date(2026, 11, 10, 10, 0, 0, 0, time.UTC)
	p := PeriodsAt(now, time.UTC)
	old := Key(mp, user) + ":"
	f := CampaignField(camp, Impression)
	for suffix, n := range map[string]int64{p.Day: 2, p.Week: 4, p.Month: 6} {
		if err := rdb.HIncrBy(ctx, old+suffix, f, n).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.Expire(ctx, old+suffix, time.Hour)
	}
	if err := rdb.HSet(ctx, old+"o", "1", 40).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Expire(ctx, old+"o", time.Hour)
	// A replay of offset 40 of partition 1 (counted before), then offset 41.
	for _, off := range []int64{40, 41} {
		if err := s.Count(ctx, []Hit{{MP: mp, User: user, Partition: 1, Offset: off, At: now, Loc: time.UTC, Fields: []string{f}}}, now); err != nil {
			t.Fatal(err)
		}
	}
	var c Counts
	if err := s.Read(ctx, mp, user, now, time.UTC, &c); err != nil {
		t.Fatal(err)
	}
	if d, w, m := c.Campaign("daily", camp, Impression), c.Campaign("weekly", camp, Impression), c.Campaign("monthly", camp, Impression); d != 3 || w != 5 || m != 7 {
		t.Errorf("counts %d %d %d, want 3 5 7", d, w, m)
	}
	if ks := testenv.Keys(t, rdb, old+"*"); len(ks) != 0 {
		t.Errorf("the layout before's keys left: %v", ks)
	}
	// The typed read (a cluster's redirect) reads the same.
	var typed Counts
	st := stampsAt(now, time.UTC)
	if err := s.readTyped(ctx, Key(mp, user), &st, &typed); err != nil || typed.Campaign("weekly", camp, Impression) != 5 || typed.Len() != c.Len() {
		t.Errorf("typed read: %d counts, weekly %d, %v; want %d, 5", typed.Len(), typed.Campaign("weekly", camp, Impression), err, c.Len())
	}
}
