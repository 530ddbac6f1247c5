package spend

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/redisstore"
)

// capCharge is a charge of campaign camp in marketplace mp on day, under
// limits, by owner.
func capCharge(mp, key, owner, camp, day string, micros int64, l Limits) Charge {
	return Charge{MarketplaceID: mp, Key: key, Owner: owner, CampaignID: camp, Day: day, Micros: micros, Limits: l,
		KeepUntil: time.Now().Add(time.Hour)}
}

// TestApplyChargesCap: a charge is applied only while the campaign's spend
// of its day and in total, plus its amount, stay within the budgets; one
// that would cross either is refused whole, and the next smaller one that
// fits is still applied. Spend ends at most at the budget.
func TestApplyChargesCap(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	// Recent days: a new day's charge deletes day fields older than
	// DayFieldsKept.
	d1, d2 := DayOf(time.Now().Add(-48*time.Hour), time.UTC), DayOf(time.Now().Add(-24*time.Hour), time.UTC)
	type step struct {
		key    string
		day    string
		micros int64
		want   ChargeOutcome
	}
	tests := []struct {
		name   string
		limits Limits
		steps  []step
		// spend of d1, of d2 and in total at the end
		day1, day2, total int64
	}{
		{"daily budget", Limits{DailyMicros: 1_000}, []step{
			{"a", d1, 400, ChargeApplied},
			{"b", d1, 400, ChargeApplied},
			{"c", d1, 400, ChargeRefusedDaily}, // 1,200 > 1,000
			{"d", d1, 200, ChargeApplied},      // exactly at the budget
			{"e", d1, 1, ChargeRefusedDaily},
			{"f", d1, 0, ChargeApplied}, // nothing to add: within
			{"g", d2, 1_000, ChargeApplied},
			{"h", d2, 1, ChargeRefusedDaily},
		}, 1_000, 1_000, 2_000},
		{"total budget", Limits{TotalMicros: 1_500}, []step{
			{"a", d1, 1_000, ChargeApplied},
			{"b", d2, 600, ChargeRefusedTotal},
			{"c", d2, 500, ChargeApplied}, // exactly at the budget
			{"d", d2, 1, ChargeRefusedTotal},
		}, 1_000, 500, 1_500},
		{"both: the total is checked first", Limits{DailyMicros: 1_000, TotalMicros: 1_500}, []step{
			{"a", d1, 1_000, ChargeApplied},
			{"b", d1, 1, ChargeRefusedDaily},
			{"c", d2, 600, ChargeRefusedTotal},
			{"d", d2, 2_000, ChargeRefusedTotal}, // over both
			{"e", d2, 500, ChargeApplied},
		}, 1_000, 500, 1_500},
		{"a charge larger than the budget", Limits{DailyMicros: 100}, []step{
			{"a", d1, 101, ChargeRefusedDaily},
			{"b", d1, 100, ChargeApplied},
		}, 100, 0, 100},
		{"a negative budget refuses everything", Limits{DailyMicros: -1}, []step{
			{"a", d1, 0, ChargeRefusedDaily},
			{"b", d1, 1, ChargeRefusedDaily},
		}, 0, 0, 0},
		{"no budget", Limits{}, []step{
			{"a", d1, 1 << 60, ChargeApplied},
			{"b", d1, 1 << 60, ChargeApplied},
		}, 1 << 61, 0, 1 << 61},
	}
	for ti, tc := range tests {
		camp := "c" + strconv.Itoa(ti)
		// One step a call, then all of them again in one call: the same
		// decisions, replayed.
		var all []Charge
		for si, s := range tc.steps {
			c := capCharge(mp, camp+s.key, "0:"+strconv.Itoa(si), camp, s.day, s.micros, tc.limits)
			all = append(all, c)
			got, err := ApplyCharges(ctx, rdb, []Charge{c}, replicas())
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got[0] != s.want {
				t.Errorf("%s: charge %s of %d on %s: %v, want %v", tc.name, s.key, s.micros, s.day, got[0], s.want)
			}
		}
		got, err := ApplyCharges(ctx, rdb, all, replicas())
		if err != nil {
			t.Fatal(err)
		}
		for si, s := range tc.steps {
			want := s.want
			if want == ChargeApplied {
				want = ChargeReplayed
			}
			if got[si] != want {
				t.Errorf("%s: replay of %s: %v, want %v", tc.name, s.key, got[si], want)
			}
		}
		if g1, g2, gt := daySpend(t, ctx, rdb, mp, camp, d1), daySpend(t, ctx, rdb, mp, camp, d2), totalSpend(t, ctx, rdb, mp, camp); g1 != tc.day1 || g2 != tc.day2 || gt != tc.total {
			t.Errorf("%s: spend %d / %d, total %d; want %d / %d, total %d", tc.name, g1, g2, gt, tc.day1, tc.day2, tc.total)
		}
	}
}

// TestApplyChargesCapInt64: budgets, counters and amounts near the int64
// limits are compared and added exactly (a Lua double would round them),
// and a campaign without a budget is never taken past the largest int64 (a
// counter that would overflow refuses the charge instead of failing the
// call).
func TestApplyChargesCapInt64(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const day = "2025-06-01"
	const maxI = math.MaxInt64
	const big = 1<<62 + 1 // far above 2^53
	tests := []struct {
		name   string
		limits Limits
		start  int64 // day and total spend before
		steps  []int64
		want   []ChargeOutcome
		end    int64
	}{
		{"budget 2^62 + 3: one micro-unit decides", Limits{DailyMicros: big + 2}, 0,
			[]int64{big, 3, 2, 1}, []ChargeOutcome{ChargeApplied, ChargeRefusedDaily, ChargeApplied, ChargeRefusedDaily}, big + 2},
		{"at the largest int64", Limits{TotalMicros: maxI}, maxI - 10,
			[]int64{11, 10, 0, 1}, []ChargeOutcome{ChargeRefusedTotal, ChargeApplied, ChargeApplied, ChargeRefusedTotal}, maxI},
		{"no budget: no overflow", Limits{}, maxI - 5,
			[]int64{6, maxI, 5, 1}, []ChargeOutcome{ChargeRefusedTotal, ChargeRefusedTotal, ChargeApplied, ChargeRefusedTotal}, maxI},
		{"2^53 + 1 twice", Limits{DailyMicros: 1<<54 + 2}, 0,
			[]int64{1<<53 + 1, 1<<53 + 1, 1}, []ChargeOutcome{ChargeApplied, ChargeApplied, ChargeRefusedDaily}, 1<<54 + 2},
		{"counters near the bounds, a large amount", Limits{DailyMicros: maxI, TotalMicros: maxI}, 999_999_999_999_999_999,
			[]int64{maxI - 999_999_999_999_999_999, 1}, []ChargeOutcome{ChargeApplied, ChargeRefusedTotal}, maxI},
	}
	for ti, tc := range tests {
		camp := "big" + strconv.Itoa(ti)
		if tc.start > 0 {
			if err := AddSpend(ctx, rdb, mp, camp, day, tc.start); err != nil {
				t.Fatal(err)
			}
		}
		// All in one call: the running sums inside the script decide.
		var cs []Charge
		for si, m := range tc.steps {
			cs = append(cs, capCharge(mp, camp+"-"+strconv.Itoa(si), "1:"+strconv.Itoa(si), camp, day, m, tc.limits))
		}
		got, err := ApplyCharges(ctx, rdb, cs, replicas())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if d, tot := daySpend(t, ctx, rdb, mp, camp, day), totalSpend(t, ctx, rdb, mp, camp); d != tc.end || tot != tc.end {
			t.Errorf("%s: spend %d / %d, want %d", tc.name, d, tot, tc.end)
		}
	}
}

// TestApplyChargesCapNegativeCounter: a counter below zero (written by hand)
// is read and added to exactly.
func TestApplyChargesCapNegativeCounter(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const day = "2025-06-01"
	for _, v := range []int64{-1, -1_000_000_000, -1_000_000_001, -5_000_000_000_123, math.MinInt64} {
		camp := "neg" + strconv.FormatInt(v, 10)
		if err := rdb.HSet(ctx, SpendKey(mp, camp), DayField(day), v).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, SpendKey(mp, camp), TotalField, v).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := ApplyCharges(ctx, rdb, []Charge{capCharge(mp, camp, "0:1", camp, day, 7, Limits{})}, replicas())
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != ChargeApplied {
			t.Errorf("counter %d: %v", v, got[0])
		}
		if d, tot := daySpend(t, ctx, rdb, mp, camp, day), totalSpend(t, ctx, rdb, mp, camp); d != v+7 || tot != v+7 {
			t.Errorf("counter %d + 7: %d / %d", v, d, tot)
		}
	}
}

// TestApplyChargesCapChunks: many charges of one campaign in one call (in
// one chunk and across chunks, all pipelined) and across calls: the first
// ones in order are applied up to the budget, the rest refused, and spend
// ends exactly at the sum of the applied amounts.
func TestApplyChargesCapChunks(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const day = "2025-06-01"
	tests := []struct {
		name    string
		n       int // charges in the call
		price   int64
		budget  int64
		applied int
	}{
		{"one chunk", 400, 7, 1_000, 142},
		{"across chunks", 1_700, 3, 4_000, 1_333}, // the budget runs out in the third chunk
		{"exactly the budget", 1_200, 5, 6_000, 1_200},
		{"the budget runs out at a chunk's end", 1_000, 10, 5_000, 500},
	}
	for ti, tc := range tests {
		camp := "chunks" + strconv.Itoa(ti)
		var cs []Charge
		for i := range tc.n {
			// Other campaigns interleaved: they have no budget.
			cs = append(cs, capCharge(mp, camp+"/"+strconv.Itoa(i), "2:"+strconv.Itoa(i), camp, day, tc.price, Limits{DailyMicros: tc.budget}))
			if i%3 == 0 {
				cs = append(cs, capCharge(mp, camp+"/other/"+strconv.Itoa(i), "3:"+strconv.Itoa(i), "other"+camp, day, 1, Limits{}))
			}
		}
		got, err := ApplyCharges(ctx, rdb, cs, replicas())
		if err != nil {
			t.Fatal(err)
		}
		var applied int
		var sum int64
		for i, o := range got {
			if cs[i].CampaignID != camp {
				if o != ChargeApplied {
					t.Fatalf("%s: another campaign's charge %v", tc.name, o)
				}
				continue
			}
			switch o {
			case ChargeApplied:
				applied++
				sum += cs[i].Micros
			case ChargeRefusedDaily:
				if applied < tc.applied {
					t.Fatalf("%s: charge %d refused after only %d applied", tc.name, i, applied)
				}
			default:
				t.Fatalf("%s: charge %d: %v", tc.name, i, o)
			}
		}
		if applied != tc.applied {
			t.Errorf("%s: %d applied, want %d", tc.name, applied, tc.applied)
		}
		if d := daySpend(t, ctx, rdb, mp, camp, day); d != sum || d > tc.budget {
			t.Errorf("%s: spend %d, applied %d, budget %d", tc.name, d, sum, tc.budget)
		}
	}

	// Across calls, one charge each: the same.
	const camp, budget, price = "calls", 100, 30
	var applied int
	for i := range 10 {
		got, err := ApplyCharges(ctx, rdb, []Charge{capCharge(mp, "calls/"+strconv.Itoa(i), "4:"+strconv.Itoa(i), camp, day, price, Limits{DailyMicros: budget})}, replicas())
		if err != nil {
			t.Fatal(err)
		}
		if got[0] == ChargeApplied {
			applied++
		} else if got[0] != ChargeRefusedDaily {
			t.Fatalf("call %d: %v", i, got[0])
		}
	}
	if d := daySpend(t, ctx, rdb, mp, camp, day); applied != 3 || d != 90 {
		t.Errorf("across calls: %d applied, spend %d; want 3 and 90", applied, d)
	}
}

// TestApplyChargesRefusedReplay: a refused charge stays refused when its
// record is replayed, even after the budget was raised, and another record
// for the same key is a duplicate; a new key under the raised budget is
// applied.
func TestApplyChargesRefusedReplay(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const day = "2025-06-01"
	low, high := Limits{DailyMicros: 100, TotalMicros: 150}, Limits{DailyMicros: 1_000, TotalMicros: 1_000}
	first := []Charge{
		capCharge(mp, "a", "0:1", "c", day, 100, low),
		capCharge(mp, "b", "0:2", "c", day, 10, low),                    // over the daily budget
		capCharge(mp, "t", "0:3", "c", "2025-06-02", 60, low),           // over the total budget
		capCharge(mp, "z", "0:4", "c", day, 0, Limits{DailyMicros: -1}), // refused whatever the amount
	}
	got, err := ApplyCharges(ctx, rdb, first, replicas())
	if err != nil {
		t.Fatal(err)
	}
	want := []ChargeOutcome{ChargeApplied, ChargeRefusedDaily, ChargeRefusedTotal, ChargeRefusedDaily}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first pass %v, want %v", got, want)
	}
	if v := markerOwner(t, ctx, rdb, mp, "c", 0, "b"); v != "!d0:2" {
		t.Errorf("refused marker %q, want !d0:2", v)
	}
	if v := markerOwner(t, ctx, rdb, mp, "c", 0, "t"); v != "!t0:3" {
		t.Errorf("refused marker %q, want !t0:3", v)
	}

	// The budget is raised; the same records come again (a replay), then
	// other records for the same winners, then a new one.
	var replay []Charge
	for _, c := range first {
		c.Limits = high
		replay = append(replay, c)
	}
	steps := []struct {
		name    string
		charges []Charge
		want    []ChargeOutcome
	}{
		{"replay after the budget was raised", replay, []ChargeOutcome{ChargeReplayed, ChargeRefusedDaily, ChargeRefusedTotal, ChargeRefusedDaily}},
		{"other records for the same keys", []Charge{
			capCharge(mp, "b", "5:1", "c", day, 10, high),
			capCharge(mp, "t", "5:2", "c", day, 60, high),
			capCharge(mp, "a", "5:3", "c", day, 100, high),
		}, []ChargeOutcome{ChargeDuplicate, ChargeDuplicate, ChargeDuplicate}},
		{"an owner that only looks like the refused one", []Charge{capCharge(mp, "b", "d0:2", "c", day, 10, high)}, []ChargeOutcome{ChargeDuplicate}},
		{"a new key under the raised budget", []Charge{capCharge(mp, "n", "6:1", "c", day, 10, high)}, []ChargeOutcome{ChargeApplied}},
	}
	for _, s := range steps {
		got, err := ApplyCharges(ctx, rdb, s.charges, replicas())
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	if d, tot := daySpend(t, ctx, rdb, mp, "c", day), totalSpend(t, ctx, rdb, mp, "c"); d != 110 || tot != 110 {
		t.Errorf("spend %d / %d, want 110 (a and n)", d, tot)
	}
	if _, n := epochMeta(t, ctx, rdb, mp, "c", 0); n != 5 {
		t.Errorf("the epoch counted %d markers, want 5 (refused ones too)", n)
	}
}

// TestApplyChargesCapConcurrent: several callers charge the same campaign at
// once, in chunked, pipelined calls: its spend never passes the budget, and
// the applied amounts add up to the spend counters exactly.
func TestApplyChargesCapConcurrent(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const day = "2025-06-01"
	const writers, each = 8, 700 // > one chunk per call
	l := Limits{DailyMicros: 1_000_003, TotalMicros: 2_000_000}
	var wg sync.WaitGroup
	outcomes := make([][]ChargeOutcome, writers)
	charges := make([][]Charge, writers)
	errs := make([]error, writers)
	for w := range writers {
		var cs []Charge
		for i := range each {
			// Amounts 1,000 to 1,999, on two days (so the total binds too),
			// some keys shared between writers.
			key := fmt.Sprintf("w%d/%d", w, i)
			if i%10 == 0 {
				key = fmt.Sprintf("shared/%d", i)
			}
			d := day
			if i%2 == 1 {
				d = "2025-06-02"
			}
			cs = append(cs, capCharge(mp, key, fmt.Sprintf("%d:%d", w, i), "c", d, int64(1_000+(w*each+i)%1_000), l))
		}
		charges[w] = cs
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[w], errs[w] = ApplyCharges(ctx, rdb, cs, replicas())
		}()
	}
	wg.Wait()
	var applied [2]int64
	var refused int
	for w := range writers {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		for i, o := range outcomes[w] {
			switch o {
			case ChargeApplied:
				di := 0
				if charges[w][i].Day != day {
					di = 1
				}
				applied[di] += charges[w][i].Micros
			case ChargeRefusedDaily, ChargeRefusedTotal:
				refused++
			case ChargeDuplicate:
			default:
				t.Fatalf("writer %d charge %d: %v", w, i, o)
			}
		}
	}
	d1, d2 := daySpend(t, ctx, rdb, mp, "c", day), daySpend(t, ctx, rdb, mp, "c", "2025-06-02")
	total := totalSpend(t, ctx, rdb, mp, "c")
	t.Logf("spend %d + %d = %d of %d (daily %d), %d refused", d1, d2, total, l.TotalMicros, l.DailyMicros, refused)
	if d1 != applied[0] || d2 != applied[1] || total != applied[0]+applied[1] {
		t.Errorf("spend %d / %d, total %d; applied %d / %d", d1, d2, total, applied[0], applied[1])
	}
	if d1 > l.DailyMicros || d2 > l.DailyMicros || total > l.TotalMicros {
		t.Errorf("over budget: %d / %d, total %d", d1, d2, total)
	}
	// With amounts of at most 1,999, a budget is left with less than that.
	if total < l.TotalMicros-1_999 || refused == 0 {
		t.Errorf("total %d: the budget of %d was not used up (%d refused)", total, l.TotalMicros, refused)
	}
}

// TestApplyChargesBadCounter: a spend counter that is not an int64 fails
// the script call before it writes anything: no marker, no spend, for any
// campaign of the call (all of them on one server; on a cluster, the
// campaigns of other slots go in other calls, which may apply).
func TestApplyChargesBadCounter(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	const day = "2025-06-01"
	for _, bad := range []string{"abc", "1.5", "9223372036854775808", "-9223372036854775809", "", "12345678901234567890"} {
		if err := rdb.HSet(ctx, SpendKey(mp, "bad"), TotalField, bad).Err(); err != nil {
			t.Fatal(err)
		}
		cs := []Charge{
			capCharge(mp, "ok-"+bad, "0:1", "good", day, 5, Limits{}),
			capCharge(mp, "bad-"+bad, "0:2", "bad", day, 5, Limits{}),
		}
		if _, err := ApplyCharges(ctx, rdb, cs, replicas()); err == nil {
			t.Errorf("counter %q: no error", bad)
		}
		if n, _ := rdb.Exists(ctx, MarkerMetaKey(mp, "bad", 0)).Result(); n != 0 {
			t.Errorf("counter %q: markers written", bad)
		}
		if v := hget(t, ctx, rdb, SpendKey(mp, "bad"), DayField(day)); v != 0 {
			t.Errorf("counter %q: spend moved to %d", bad, v)
		}
		if redisstore.Slot(SpendKey(mp, "good")) == redisstore.Slot(SpendKey(mp, "bad")) || !redisstore.IsCluster(rdb) {
			if v := daySpend(t, ctx, rdb, mp, "good", day); v != 0 {
				t.Errorf("counter %q: another campaign's spend of the call moved to %d", bad, v)
			}
			if n, _ := rdb.Exists(ctx, MarkerMetaKey(mp, "good", 0)).Result(); n != 0 {
				t.Errorf("counter %q: markers of another campaign of the call written", bad)
			}
		}
	}
	if _, err := ApplyCharges(ctx, rdb, []Charge{capCharge(mp, "k", "!0:1", "c", day, 1, Limits{})}, replicas()); err == nil {
		t.Error("an owner beginning with ! was accepted")
	}
}

// TestRefusalStopsServing: a refused charge leaves a hint in the hash of
// the budget that refused it (the spend it would have made), which the
// spend cache folds in: the auction's budget rule then sees the campaign at
// its budget although its spend stays below it, until the budget is raised
// above that spend. The latest refusal sets the hint.
func TestRefusalStopsServing(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	now := time.Now()
	today := DayOf(now, time.UTC)
	daily := Limits{DailyMicros: 350}
	var cs []Charge
	for i := range 4 {
		cs = append(cs, capCharge(mp, "d"+strconv.Itoa(i), "0:"+strconv.Itoa(i), "c", today, 100, daily))
	}
	cs = append(cs, capCharge(mp, "t", "0:9", "t", today, 100, Limits{TotalMicros: 150}),
		capCharge(mp, "t2", "0:10", "t", today, 100, Limits{TotalMicros: 150}))
	got, err := ApplyCharges(ctx, rdb, cs, replicas())
	if err != nil {
		t.Fatal(err)
	}
	if want := "[applied applied applied refused_daily applied refused_total]"; fmt.Sprint(got) != want {
		t.Fatalf("%v, want %s", got, want)
	}
	if h := hget(t, ctx, rdb, SpendKey(mp, "c"), "!"+DayField(today)); h != 400 {
		t.Errorf("daily refusal hint %d, want 400 (300 spent + 100 refused)", h)
	}
	if h := hget(t, ctx, rdb, SpendKey(mp, "t"), "!"+TotalField); h != 200 {
		t.Errorf("total refusal hint %d, want 200", h)
	}

	cache := NewCache(rdb, Options{})
	cache.Register(mp, time.UTC, "c", "t", "o")
	check := func(what, camp string, l Limits, wantDay, wantTotal int64, exhausted bool) {
		t.Helper()
		if err := cache.RefreshNow(ctx); err != nil {
			t.Fatal(err)
		}
		d, tot := cache.Spend(mp, time.UTC, camp, now)
		v := Check(l, Spent{Day: d, Total: tot}, now, time.UTC)
		if d != wantDay || tot != wantTotal || (v == DailyExhausted || v == TotalExhausted) != exhausted {
			t.Errorf("%s: spend %d / %d, %v; want %d / %d, exhausted %v", what, d, tot, v, wantDay, wantTotal, exhausted)
		}
	}
	check("daily refusal", "c", daily, 400, 300, true)
	check("budget raised to the refused spend", "c", Limits{DailyMicros: 400}, 400, 300, true)
	check("budget raised above it", "c", Limits{DailyMicros: 401}, 400, 300, false)
	check("total refusal", "t", Limits{TotalMicros: 150}, 100, 200, true)
	check("total raised", "t", Limits{TotalMicros: 1_000}, 100, 200, false)

	// Under a raised budget, the next refusal sets the hint again.
	got, err = ApplyCharges(ctx, rdb, []Charge{
		capCharge(mp, "d5", "1:5", "c", today, 100, Limits{DailyMicros: 450}),
		capCharge(mp, "d6", "1:6", "c", today, 100, Limits{DailyMicros: 450}),
	}, replicas())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[applied refused_daily]" {
		t.Fatalf("raised budget: %v", got)
	}
	check("refused again under the raised budget", "c", Limits{DailyMicros: 450}, 500, 400, true)

	// A refusal for another day (a late click) does not touch today's.
	if _, err := ApplyCharges(ctx, rdb, []Charge{capCharge(mp, "old", "1:7", "o", "2020-01-01", 100, Limits{DailyMicros: 50})}, replicas()); err != nil {
		t.Fatal(err)
	}
	check("a past day's refusal", "o", Limits{DailyMicros: 50}, 0, 0, false)
}
