package spend

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/redisstore"
)

// argsTestCharges is a batch of charges of every kind the fold sends: plain
// charges with budgets, clicks judged by the click rules, impressions
// recorded for them, charges with the earlier layouts' markers; over
// campaigns of two marketplaces, two days, interleaved.
func argsTestCharges(n int) []Charge {
	now := time.Now()
	rules := InvalidRules{RequireImpression: true, MinClickDelay: time.Second, RepeatWindow: time.Minute, MaxClicksPerHour: 20}
	mps := []string{"mp-b", "mp-a"}
	cs := make([]Charge, n)
	for i := range cs {
		mp := mps[i%2]
		c := Charge{MarketplaceID: mp, Key: "key-" + strconv.Itoa(i), Epoch: 490_000 + int64(i%3), Owner: "3:" + strconv.Itoa(1000+i),
			CampaignID: "camp-" + strconv.Itoa(i%7), Day: []string{"2026-11-29", "2026-11-30"}[(i/3)%2], Micros: int64(1_000 * (i % 11)),
			Limits:    Limits{DailyMicros: int64(i%4) * 1_000_000, TotalMicros: 9_000_000_000, WeeklyMicros: int64(i % 3), MonthlyMicros: 5},
			KeepUntil: now.Add(time.Duration(i%5+1) * time.Hour)}
		switch i % 4 {
		case 1:
			c.Click = &ClickCheck{Rules: rules, Shopper: "shopper-" + strconv.Itoa(i%13), AtMs: 1_790_000_000_000 + int64(i),
				SeenKey: "seen-" + strconv.Itoa(i), StateUntil: now.Add(2 * time.Hour)}
		case 2:
			c.Impression, c.ImpressionAtMs = true, 1_790_000_000_000+int64(i)
		case 3:
			c.MarketplaceMarkers = true
			c.LegacyMarker = "ec:charged:{" + mp + "}:" + c.Key
		}
		cs[i] = c
	}
	return cs
}

// wantProfileArgs is the ARGV text of the profile of charge c, of the
// call's campaign camp, as the script reads it (chargeScript), written out
// field by field.
func wantProfileArgs(c *Charge, camp int, cluster bool) []string {
	kind, day, week, month, rules, until, old := "s", "", "", "", "", "0", ""
	var l Limits
	if !c.Impression {
		kind, day, week, month, l = "c", c.Day, WeekOf(c.Day), MonthOf(c.Day), c.Limits
		if !cluster && c.MarketplaceMarkers {
			old = "ec:cm:{" + c.MarketplaceID + "}:"
		}
		if c.Click != nil && c.Click.Rules.On() {
			kind, rules, until = "k", c.Click.Rules.arg(), strconv.FormatInt(c.Click.StateUntil.Unix(), 10)
		}
	}
	return []string{strconv.Itoa(camp), kind, strconv.FormatInt(c.Epoch, 10), strconv.FormatInt(c.KeepUntil.Unix(), 10),
		day, week, month, strconv.FormatInt(l.DailyMicros, 10), strconv.FormatInt(l.TotalMicros, 10),
		strconv.FormatInt(l.WeeklyMicros, 10), strconv.FormatInt(l.MonthlyMicros, 10), rules, until, old}
}

// wantChargeArgs is the ARGV text of charge c of the call's profile
// profile (from 1) as the script reads it (chargeScript), written out field
// by field.
func wantChargeArgs(c *Charge, profile int, cluster bool) []string {
	out := []string{strconv.Itoa(profile), c.Key, strconv.FormatUint(uint64(keyHash(c.Key)), 10)}
	if c.Impression {
		return append(out, strconv.FormatInt(c.ImpressionAtMs, 10))
	}
	legacy := c.LegacyMarker
	if cluster {
		legacy = ""
	}
	out = append(out, c.Owner, strconv.FormatInt(c.Micros, 10), legacy)
	k := c.Click
	if k == nil || !k.Rules.On() {
		return out
	}
	seen, seenHash := "", ""
	if k.Rules.NeedImpressions() {
		seen, seenHash = k.SeenKey, strconv.FormatUint(uint64(keyHash(k.SeenKey)), 10)
	}
	return append(out, strconv.FormatInt(k.AtMs, 10), seen, seenHash, k.Shopper)
}

// argText is an argument as go-redis writes it.
func argText(t *testing.T, a any) string {
	switch v := a.(type) {
	case string:
		return v
	case *string:
		return *v
	case int64:
		return strconv.FormatInt(v, 10)
	case *int64:
		return strconv.FormatInt(*v, 10)
	}
	t.Fatalf("argument of type %T", a)
	return ""
}

// TestChargeCallsArgs: the calls hold every charge once, by slot, then
// marketplace, then campaign, each campaign's charges in the order given,
// chunks of at most chargeChunk; each call's KEYS are its campaigns' spend
// keys and its ARGV the oldest day kept, their marker prefixes, the
// profiles its charges share and each charge's arguments, in the script's
// layout.
func TestChargeCallsArgs(t *testing.T) {
	cs := argsTestCharges(1_234)
	now := time.Now()
	oldestDay := DayOf(now.Add(-DayFieldsKept), time.UTC)
	for _, cluster := range []bool{false, true} {
		calls := chargeCalls(cs, cluster, now)
		seen := make([]bool, len(cs))
		var order []int
		for ci, call := range calls {
			if len(call.idx) == 0 || len(call.idx) > chargeChunk {
				t.Fatalf("call %d: %d charges", ci, len(call.idx))
			}
			got := make([]string, len(call.args))
			for k, a := range call.args {
				got[k] = argText(t, a)
			}
			want := []string{oldestDay + " " + WeekOf(oldestDay) + " " + MonthOf(oldestDay)}
			var keys []string
			camp := map[string]int{}
			for _, i := range call.idx {
				c := &cs[i]
				if seen[i] {
					t.Fatalf("charge %d in two calls", i)
				}
				seen[i] = true
				order = append(order, i)
				if k := SpendKey(c.MarketplaceID, c.CampaignID); camp[k] == 0 {
					keys = append(keys, k)
					camp[k] = len(keys)
					want = append(want, MarkerPrefix(c.MarketplaceID, c.CampaignID))
				}
			}
			// The profiles, once each in the order of their first charge,
			// then the charges.
			profile := map[string]int{}
			var profiles, items []string
			for _, i := range call.idx {
				p := wantProfileArgs(&cs[i], camp[SpendKey(cs[i].MarketplaceID, cs[i].CampaignID)], cluster)
				id := strings.Join(p, "\x00")
				if profile[id] == 0 {
					profiles = append(profiles, p...)
					profile[id] = len(profile) + 1
				}
				items = append(items, wantChargeArgs(&cs[i], profile[id], cluster)...)
			}
			want = append(append(append(want, strconv.Itoa(len(profile))), profiles...), items...)
			if fmt.Sprint(call.keys) != fmt.Sprint(keys) {
				t.Fatalf("cluster %v, call %d: keys %v, want %v", cluster, ci, call.keys, keys)
			}
			if len(got) != len(want) {
				t.Fatalf("cluster %v, call %d: %d arguments, want %d", cluster, ci, len(got), len(want))
			}
			for k := range want {
				if got[k] != want[k] {
					t.Fatalf("cluster %v, call %d, argument %d: %q, want %q", cluster, ci, k+1, got[k], want[k])
				}
			}
		}
		if len(order) != len(cs) {
			t.Fatalf("cluster %v: %d charges in the calls, want %d", cluster, len(order), len(cs))
		}
		// The order: by slot, marketplace and campaign, stable.
		want := make([]int, len(cs))
		for i := range want {
			want[i] = i
		}
		slot := func(i int) int {
			if !cluster {
				return 0
			}
			return redisstore.Slot(SpendKey(cs[i].MarketplaceID, cs[i].CampaignID))
		}
		sort.SliceStable(want, func(a, b int) bool {
			ca, cb := &cs[want[a]], &cs[want[b]]
			if sa, sb := slot(want[a]), slot(want[b]); sa != sb {
				return sa < sb
			}
			if ca.MarketplaceID != cb.MarketplaceID {
				return ca.MarketplaceID < cb.MarketplaceID
			}
			return ca.CampaignID < cb.CampaignID
		})
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("cluster %v: charges in the order %v, want %v", cluster, order, want)
		}
	}
}

// TestChargeCallsAllocations: laying out a batch's calls allocates per call
// and per campaign, not per charge (it was about 30 allocations a charge:
// each argument boxed, each number formatted, each campaign's key hashed
// again for every charge).
func TestChargeCallsAllocations(t *testing.T) {
	cs := argsTestCharges(5_000)
	now := time.Now()
	for _, cluster := range []bool{false, true} {
		allocs := testing.AllocsPerRun(5, func() { chargeCalls(cs, cluster, now) })
		if a := allocs / float64(len(cs)); a > 0.1 {
			t.Errorf("cluster %v: %.2f allocations a charge (%.0f for %d), want at most 0.1", cluster, a, allocs, len(cs))
		}
	}
}
