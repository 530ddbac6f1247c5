package spend

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/testkit/testenv"
)

// chargeMix is a fixed workload of the charge script: the items of a fold
// batch, in the order the fold sends them, and the state they meet.
type chargeMix struct {
	name, mp string
	items    []Charge
	// spent: the campaigns' daily budgets are spent before the items come.
	spent bool
	// buckets: the campaigns' hours have this many marker hashes (as for
	// a steady rate of 64 markers a hash); 0: one (the first hour of a
	// campaign, as in a catch-up of a new stack).
	buckets int64
}

// The campaigns of the mixes: a few, as the demo marketplace has.
const (
	costCampaigns = 3
	costDaily     = 20_000_000
)

// catchupMix is the fold's catch-up (docs/design/performance.md, Events
// fold: catch-up): per 10 items 7 records of CPC winners' impressions and 3
// clicks on them 2 s later, judged by the default click rules, by shoppers
// of 100,000, at campaigns whose daily budgets are spent (nearly every
// click refused for the daily budget, a few as repeats).
func catchupMix(n int, now time.Time) chargeMix {
	return chargeMix{name: "catch-up", mp: "mp-catchup", items: mixItems("mp-catchup", 1, n, now, 3, 0, costDaily), spent: true}
}

// sizedMix is catchupMix with 4,096 marker hashes a campaign's hour: each
// item of a call touches a hash of its own.
func sizedMix(n int, now time.Time) chargeMix {
	return chargeMix{name: "sized", mp: "mp-sized", items: mixItems("mp-sized", 3, n, now, 3, 0, costDaily), spent: true, buckets: 4096}
}

// appliedMix: per 10 items 3 impression records, 3 valid clicks and 4 CPM
// impressions (no click rules), every charge within budgets that are far
// from spent: nearly every charge applied.
func appliedMix(n int, now time.Time) chargeMix {
	return chargeMix{name: "applied", mp: "mp-applied", items: mixItems("mp-applied", 2, n, now, 3, 4, 1_000_000_000_000)}
}

// mixItems lays out n items: per 10, 10-clicks-cpm impression records,
// clicks records of them clicked 2 s later and cpm CPM charges, in
// marketplace mp, from the random seed seed, with the daily budget daily.
func mixItems(mp string, seed uint64, n int, now time.Time, clicks, cpm int, daily int64) []Charge {
	rng := rand.New(rand.NewPCG(seed, 2))
	hour := now.Truncate(time.Hour)
	epoch := hour.Unix() / 3600
	at := hour.Add(10 * time.Minute).UnixMilli()
	day := DayOf(now, time.UTC)
	keep := hour.Add(3 * time.Hour)
	limits := Limits{DailyMicros: daily}
	rules := DefaultInvalidRules
	out := make([]Charge, 0, n)
	var pending []Charge // clicks on impressions recorded, not yet sent
	for i := 0; len(out) < n; i++ {
		camp := "c" + strconv.Itoa(rng.IntN(costCampaigns))
		var auction [16]byte
		for k := range auction {
			auction[k] = byte(rng.Uint32())
		}
		key := func(kind byte) string { return string(auction[:]) + "\x01" + string(kind) }
		owner := "3:" + strconv.Itoa(1_000_000+i)
		ms := at + int64(i)
		switch slot := i % 10; {
		case slot < 10-clicks-cpm:
			out = append(out, Charge{MarketplaceID: mp, CampaignID: camp, Key: key('s'), Epoch: epoch, Owner: owner,
				Day: day, KeepUntil: keep, Impression: true, ImpressionAtMs: ms})
			if len(pending) < clicks*(i/10+1) {
				pending = append(pending, Charge{MarketplaceID: mp, CampaignID: camp, Key: key('c'), Epoch: epoch,
					Day: day, Micros: 500_000, Limits: limits, KeepUntil: keep,
					Click: &ClickCheck{Rules: rules, Shopper: "u" + strconv.Itoa(rng.IntN(100_000)), AtMs: ms + 2_000, SeenKey: key('s'),
						StateUntil: keep}})
			}
		case slot < 10-cpm:
			if len(pending) > 0 {
				c := pending[0]
				pending = pending[1:]
				c.Owner = owner
				out = append(out, c)
			}
		default:
			out = append(out, Charge{MarketplaceID: mp, CampaignID: camp, Key: key('i'), Epoch: epoch, Owner: owner,
				Day: day, Micros: 2_000, Limits: limits, KeepUntil: keep})
		}
	}
	return out
}

// prepare sets the state the mix meets.
func (m chargeMix) prepare(t testing.TB, ctx context.Context, rdb redis.UniversalClient) {
	t.Helper()
	if m.buckets > 0 {
		for c := range costCampaigns {
			setMarkers(t, ctx, rdb, m.mp, "c"+strconv.Itoa(c), m.items[0].Epoch-1, MarkersPerBucket*m.buckets)
		}
	}
	if !m.spent {
		return
	}
	for c := range costCampaigns {
		if err := AddSpend(ctx, rdb, m.mp, "c"+strconv.Itoa(c), m.items[0].Day, costDaily); err != nil {
			t.Fatal(err)
		}
	}
}

// run applies the mix in fold batches of batch items and returns the
// outcomes by kind.
func (m chargeMix) run(t testing.TB, ctx context.Context, rdb redis.UniversalClient, batch int) map[ChargeOutcome]int {
	t.Helper()
	got := map[ChargeOutcome]int{}
	for from := 0; from < len(m.items); from += batch {
		out, err := ApplyCharges(ctx, rdb, m.items[from:min(from+batch, len(m.items))], 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			got[o]++
		}
	}
	return got
}

// TestChargeScriptCost runs the mixes through the charge script on a
// Redis of its own and reports Redis's commands (and, under callgrind, its
// instructions) an item; the commands the script runs an item are bounded. With ENDCAP_CHARGE_COST_ADDR (host:port) and
// ENDCAP_CHARGE_COST_PID (its pid) it uses a redis-server started under
// valgrind --tool=callgrind instead, and zeroes and dumps its counts around
// the mix named by ENDCAP_CHARGE_COST_MIX (deploy/local/charge-script-cost.sh).
func TestChargeScriptCost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var rdb *redis.Client
	pid := os.Getenv("ENDCAP_CHARGE_COST_PID")
	if addr := os.Getenv("ENDCAP_CHARGE_COST_ADDR"); addr != "" {
		rdb = redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: testenv.OwnRedis(t).Addr})
	}
	t.Cleanup(func() { _ = rdb.Close() })
	now := time.Now()
	// The first half warms the hashes up (past the listpack encoding of a
	// new hash), as a catch-up's items meet them; the second is measured.
	const n = 20_000
	for _, m := range []chargeMix{catchupMix(n, now), appliedMix(n, now), sizedMix(n, now)} {
		if want := os.Getenv("ENDCAP_CHARGE_COST_MIX"); want != "" && want != m.name {
			continue
		}
		// The arguments an item: what the items of a call share is sent once
		// (23 an item before).
		args := 0
		for _, c := range chargeCalls(m.items, false, now) {
			args += len(c.args)
		}
		t.Logf("%s: %.2f arguments an item", m.name, float64(args)/float64(len(m.items)))
		if per := float64(args) / float64(len(m.items)); per > 8 {
			t.Errorf("%s: %.2f arguments an item, want at most 8", m.name, per)
		}
		m.prepare(t, ctx, rdb)
		if err := chargeScript.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		warm, measured := m, m
		warm.items, measured.items = m.items[:n/2], m.items[n/2:]
		warm.run(t, ctx, rdb, 4_000)
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if pid != "" {
			callgrindControl(t, "-z", pid)
		}
		got := measured.run(t, ctx, rdb, 4_000)
		if pid != "" {
			callgrindControl(t, "-d", pid)
		}
		calls := commandCalls(t, ctx, rdb)
		sum := 0
		for k, v := range calls {
			if k != "evalsha" && k != "config|resetstat" && k != "config" && k != "info" {
				sum += v
			}
		}
		t.Logf("%s: %d items, outcomes %v; %d script calls; commands in them %d (%.2f an item): %v",
			m.name, len(measured.items), got, calls["evalsha"], sum, float64(sum)/float64(len(measured.items)), calls)
		t.Logf("%s: evalsha %.2f µs an item", m.name, commandMicros(t, ctx, rdb, "evalsha")/float64(len(measured.items)))
		// With one marker hash a campaign's hour, the script's commands are
		// a few a call (a campaign's counters, an epoch's description, each
		// hash's expiry, and one read and one write of each marker hash and
		// each shoppers' hash it touches), not a few an item: it was 2.22
		// an item in the catch-up's mix. (With many, each item touches a
		// hash of its own, read, written and given its expiry on its own.)
		if per := float64(sum) / float64(len(measured.items)); m.buckets == 0 && per > 0.1 {
			t.Errorf("%s: %.2f commands an item in the script, want at most 0.1", m.name, per)
		}
	}
}

func callgrindControl(t testing.TB, flag, pid string) {
	t.Helper()
	if b, err := exec.Command("callgrind_control", flag, pid).CombinedOutput(); err != nil {
		t.Fatalf("callgrind_control %s %s: %v\n%s", flag, pid, err, b)
	}
}

// BenchmarkChargeCalls: laying out the script calls of the catch-up's mix
// (10,000 items), the fold's side of the charge step.
func BenchmarkChargeCalls(b *testing.B) {
	now := time.Now()
	items := catchupMix(10_000, now).items
	b.ReportAllocs()
	for b.Loop() {
		chargeCalls(items, false, now)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/item")
}
