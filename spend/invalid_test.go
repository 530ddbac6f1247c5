package spend

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
)

// TestJudgeClick: each rule at its threshold, and the order in which they
// are checked.
func TestJudgeClick(t *testing.T) {
	all := InvalidRules{RequireImpression: true, MinClickDelay: 250 * time.Millisecond, RepeatWindow: time.Second, MaxClicksPerHour: 3}
	const at = 1_800_000_000_000
	seen := func(ms int64) ClickState { return ClickState{ClickMs: at, Seen: true, SeenMs: ms} }
	with := func(s ClickState, f func(*ClickState)) ClickState { f(&s); return s }
	for _, tc := range []struct {
		name  string
		rules InvalidRules
		s     ClickState
		want  NoCharge
	}{
		{"valid", all, seen(at - 5_000), Chargeable},
		{"no impression", all, ClickState{ClickMs: at}, NoChargeInvalidNoImpression},
		{"no impression, rule off", InvalidRules{MinClickDelay: time.Second}, ClickState{ClickMs: at}, Chargeable},
		{"249 ms after the impression", all, seen(at - 249), NoChargeInvalidTooFast},
		{"250 ms after the impression", all, seen(at - 250), Chargeable},
		{"before the impression", all, seen(at + 10), NoChargeInvalidTooFast},
		{"too fast, rule off", InvalidRules{RequireImpression: true}, seen(at), Chargeable},
		{"999 ms after the shopper's last click", all, with(seen(at-5_000), func(s *ClickState) { s.Last, s.LastMs = true, at-999 }), NoChargeInvalidRepeat},
		{"999 ms before the shopper's last click", all, with(seen(at-5_000), func(s *ClickState) { s.Last, s.LastMs = true, at+999 }), NoChargeInvalidRepeat},
		{"1 s after the shopper's last click", all, with(seen(at-5_000), func(s *ClickState) { s.Last, s.LastMs = true, at-1_000 }), Chargeable},
		{"repeat, rule off", InvalidRules{}, ClickState{ClickMs: at, Last: true, LastMs: at}, Chargeable},
		{"the 3rd click of the hour", all, with(seen(at-5_000), func(s *ClickState) { s.HourClicks = 2 }), Chargeable},
		{"the 4th click of the hour", all, with(seen(at-5_000), func(s *ClickState) { s.HourClicks = 3 }), NoChargeInvalidRate},
		{"rate, rule off", InvalidRules{}, ClickState{ClickMs: at, HourClicks: 1000}, Chargeable},
		{"no impression before too fast, repeat and rate", all, ClickState{ClickMs: at, Last: true, LastMs: at, HourClicks: 9}, NoChargeInvalidNoImpression},
		{"too fast before repeat", all, with(seen(at), func(s *ClickState) { s.Last, s.LastMs, s.HourClicks = true, at, 9 }), NoChargeInvalidTooFast},
		{"repeat before rate", all, with(seen(at-5_000), func(s *ClickState) { s.Last, s.LastMs, s.HourClicks = true, at, 9 }), NoChargeInvalidRepeat},
	} {
		if got := JudgeClick(tc.rules, tc.s); got != tc.want {
			t.Errorf("%s: JudgeClick = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestInvalidRulesValidate(t *testing.T) {
	for _, tc := range []struct {
		r  InvalidRules
		ok bool
	}{
		{DefaultInvalidRules, true},
		{InvalidRules{}, true},
		{InvalidRules{RepeatWindow: time.Hour}, true},
		{InvalidRules{RepeatWindow: time.Hour + time.Millisecond}, false},
		{InvalidRules{RepeatWindow: -time.Second}, false},
		{InvalidRules{MinClickDelay: -time.Millisecond}, false},
		{InvalidRules{MaxClicksPerHour: -1}, false},
	} {
		if err := tc.r.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v", tc.r, err)
		}
	}
}

// clickModel is the state of the click rules as the script should keep it,
// for one campaign: each winner's earliest impression, each charge key's
// marker, and each shopper's latest click and clicks of each UTC hour.
type clickModel struct {
	rules  InvalidRules
	seen   map[string]int64
	marked map[string]bool
	last   map[string]int64 // shopper + hour → latest click
	count  map[string]int64 // shopper + hour → clicks decided
}

func (m *clickModel) impression(key string, ms int64) {
	if v, ok := m.seen[key]; !ok || ms < v {
		m.seen[key] = ms
	}
}

// click is what the script should answer for a new click (no marker yet),
// with the JudgeClick verdict; ChargeDuplicate when the winner has one.
func (m *clickModel) click(key, seenKey, shopper string, ms int64) (ChargeOutcome, NoCharge) {
	if m.marked[key] {
		return ChargeDuplicate, NoChargeDuplicate
	}
	m.marked[key] = true
	s := ClickState{ClickMs: ms}
	s.SeenMs, s.Seen = m.seen[seenKey]
	hour := ms / time.Hour.Milliseconds()
	hk := func(h int64) string { return fmt.Sprintf("%s/%d", shopper, h) }
	if shopper != "" {
		s.LastMs, s.Last = m.last[hk(hour)]
		if !s.Last && ms-hour*time.Hour.Milliseconds() < m.rules.RepeatWindow.Milliseconds() {
			s.LastMs, s.Last = m.last[hk(hour-1)]
		}
		s.HourClicks = m.count[hk(hour)]
	} else {
		s.Last, s.HourClicks = false, 0
		// Without a shopper, only the impression rules can refuse.
	}
	why := JudgeClick(m.rules, s)
	if shopper == "" && (why == NoChargeInvalidRepeat || why == NoChargeInvalidRate) {
		why = Chargeable
	}
	if shopper != "" {
		if l, ok := m.last[hk(hour)]; !ok || ms > l {
			m.last[hk(hour)] = ms
		}
		m.count[hk(hour)]++
	}
	switch why {
	case NoChargeInvalidNoImpression:
		return ChargeInvalidNoImpression, why
	case NoChargeInvalidTooFast:
		return ChargeInvalidTooFast, why
	case NoChargeInvalidRepeat:
		return ChargeInvalidRepeat, why
	case NoChargeInvalidRate:
		return ChargeInvalidRate, why
	}
	return ChargeApplied, why
}

// TestJudgeClickScript: a long random stream of impressions and clicks of
// a few shoppers on a few winners of two campaigns, over hour boundaries,
// applied by the charge script in calls of varying size, decides every
// click as JudgeClick does on the state it should have; the invalid clicks
// move no spend; a replay of the whole stream (the same owners) decides the
// same although every counter has moved; the same clicks from other records
// are duplicates.
func TestJudgeClickScript(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	rules := InvalidRules{RequireImpression: true, MinClickDelay: 250 * time.Millisecond, RepeatWindow: 2 * time.Second, MaxClicksPerHour: 4}
	now := time.Now()
	// A whole hour boundary in the middle of the stream.
	base := now.Truncate(time.Hour).Add(-time.Hour - 40*time.Second).UnixMilli()
	rng := rand.New(rand.NewPCG(7, 11))
	camps := []string{"c-a", "c-b"}
	models := map[string]*clickModel{}
	for _, c := range camps {
		models[c] = &clickModel{rules: rules, seen: map[string]int64{}, marked: map[string]bool{}, last: map[string]int64{}, count: map[string]int64{}}
	}
	var charges []Charge
	var want []ChargeOutcome
	ms := base
	recent := map[string]*bidtoken.Claims{}
	const price = 1_000
	for i := range 600 {
		ms += rng.Int64N(1_500)
		camp := camps[rng.IntN(2)]
		m := models[camp]
		c := bidtoken.Claims{AuctionTimeMs: ms - 30_000, Rank: uint8(rng.IntN(3))}
		copy(c.AuctionID[:], fmt.Sprintf("auction-%09d", rng.IntN(300)))
		if recent[camp] != nil && rng.IntN(2) == 0 {
			c = *recent[camp] // a click (or impression) on a winner just seen
		}
		recent[camp] = &c
		shopper := []string{"", "s1", "s2", "s3"}[rng.IntN(4)]
		ch := Charge{MarketplaceID: mp, CampaignID: camp, Epoch: 7, Owner: fmt.Sprintf("0:%d", i), Day: DayOf(time.UnixMilli(ms), time.UTC),
			KeepUntil: now.Add(time.Hour)}
		if rng.IntN(3) == 0 {
			ch.Key, ch.Impression, ch.ImpressionAtMs = ImpressionKey(&c), true, ms
			m.impression(ch.Key, ms)
			want = append(want, ChargeRecorded)
		} else {
			ch.Key, ch.Micros = ChargeKey(&c, records.KindClick), price
			ch.Click = &ClickCheck{Rules: rules, Shopper: shopper, AtMs: ms, SeenKey: ImpressionKey(&c), StateUntil: InvalidStateUntil(ms, now)}
			o, _ := m.click(ch.Key, ch.Click.SeenKey, shopper, ms)
			want = append(want, o)
		}
		charges = append(charges, ch)
	}
	apply := func(cs []Charge) []ChargeOutcome {
		t.Helper()
		var out []ChargeOutcome
		for len(cs) > 0 {
			n := min(len(cs), 1+rng.IntN(40))
			got, err := ApplyCharges(ctx, rdb, cs[:n], replicas())
			if err != nil {
				t.Fatal(err)
			}
			out, cs = append(out, got...), cs[n:]
		}
		return out
	}
	got := apply(charges)
	counts := map[ChargeOutcome]int{}
	var spent = map[string]int64{}
	for i := range got {
		counts[want[i]]++
		if got[i] != want[i] {
			t.Errorf("entry %d (%s, owner %s): %s, want %s", i, charges[i].CampaignID, charges[i].Owner, got[i], want[i])
		}
		if got[i] == ChargeApplied {
			spent[charges[i].CampaignID] += price
		}
	}
	t.Logf("outcomes: %v", counts)
	for _, o := range []ChargeOutcome{ChargeApplied, ChargeDuplicate, ChargeInvalidNoImpression, ChargeInvalidTooFast, ChargeInvalidRepeat, ChargeInvalidRate} {
		if counts[o] == 0 {
			t.Errorf("the stream has no %s click (%v): it tests too little", o, counts)
		}
	}
	for _, c := range camps {
		if s := totalSpend(t, ctx, rdb, mp, c); s != spent[c] {
			t.Errorf("%s spent %d, want %d (the applied clicks only)", c, s, spent[c])
		}
	}
	// The replay decides the same, whatever the counters have become.
	again := apply(charges)
	for i := range again {
		w := want[i]
		if w == ChargeApplied {
			w = ChargeReplayed
		}
		if again[i] != w {
			t.Errorf("replay of entry %d: %s, want %s", i, again[i], w)
		}
	}
	// The same clicks from other records are duplicates.
	others := make([]Charge, 0, len(charges))
	for _, c := range charges {
		if !c.Impression {
			c.Owner = "1:" + strings.TrimPrefix(c.Owner, "0:")
			others = append(others, c)
		}
	}
	for i, o := range apply(others) {
		if o != ChargeDuplicate {
			t.Errorf("another record's click %d: %s, want duplicate", i, o)
		}
	}
	for _, c := range camps {
		if s := totalSpend(t, ctx, rdb, mp, c); s != spent[c] {
			t.Errorf("after the replays %s spent %d, want %d", c, s, spent[c])
		}
	}
	// The shopper's counters expire.
	hour := base / time.Hour.Milliseconds()
	key := "ec:iv:{" + Tag(mp, "c-a") + "}:" + fmt.Sprint(hour)
	if ttl, err := rdb.TTL(ctx, key).Result(); err != nil || ttl <= 0 || ttl > InvalidStateKept+2*time.Hour {
		t.Errorf("TTL of %s = %s (%v), want up to %s", key, ttl, err, InvalidStateKept+2*time.Hour)
	}
}

// TestClickRulesOff: a charge without click rules, or with them all off,
// is charged as before whatever the state.
func TestClickRulesOff(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	now := time.Now()
	cs := []Charge{
		{MarketplaceID: mp, CampaignID: "c", Key: "k1", Owner: "0:1", Day: "2026-11-20", Micros: 5, KeepUntil: now.Add(time.Hour)},
		{MarketplaceID: mp, CampaignID: "c", Key: "k2", Owner: "0:2", Day: "2026-11-20", Micros: 5, KeepUntil: now.Add(time.Hour),
			Click: &ClickCheck{Shopper: "s", AtMs: now.UnixMilli(), StateUntil: now.Add(time.Hour)}},
	}
	got, err := ApplyCharges(ctx, rdb, cs, replicas())
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != ChargeApplied || got[1] != ChargeApplied {
		t.Errorf("outcomes %v, want both applied", got)
	}
	bad := cs[1]
	bad.Click = &ClickCheck{Rules: InvalidRules{RequireImpression: true}, AtMs: 1}
	if _, err := ApplyCharges(ctx, rdb, []Charge{bad}, 0); err == nil || !strings.Contains(err.Error(), "SeenKey") {
		t.Errorf("a click whose rules read impressions without a SeenKey: %v", err)
	}
}
