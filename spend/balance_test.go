package spend

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

func funds(t *testing.T, f func() (Funds, error)) Funds {
	t.Helper()
	got, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTopUpOnce: a top-up is credited once per id, whatever the retries.
func TestTopUpOnce(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	for i, want := range []bool{true, false, false} {
		got, err := ApplyTopUp(ctx, rdb, mp, "v1", "t1", 1_500_000)
		if err != nil || got != want {
			t.Fatalf("top-up %d: %v, %v; want %v", i, got, err, want)
		}
	}
	if ok, err := ApplyTopUp(ctx, rdb, mp, "v1", "t2", 2); err != nil || !ok {
		t.Fatalf("second top-up: %v %v", ok, err)
	}
	if f := funds(t, func() (Funds, error) { return ReadFunds(ctx, rdb, mp, "v1") }); f.Credited != 1_500_002 || f.Balance() != 1_500_002 {
		t.Fatalf("funds %+v", f)
	}
	if _, err := ApplyTopUp(ctx, rdb, mp, "v1", "t3", MaxFunds); !errors.Is(err, ErrFundsLimit) {
		t.Fatalf("over MaxFunds: %v", err)
	}
	// Credit limits: the highest version wins, whatever the order.
	for _, c := range []struct {
		micros, version int64
		changed         bool
	}{{500, 2, true}, {900, 1, false}, {700, 3, true}, {100, 3, false}} {
		got, err := SetCreditLimit(ctx, rdb, mp, "v1", c.micros, c.version)
		if err != nil || got != c.changed {
			t.Fatalf("credit limit %+v: %v %v", c, got, err)
		}
	}
	if f := funds(t, func() (Funds, error) { return ReadFunds(ctx, rdb, mp, "v1") }); f.CreditLimit != 700 || f.Available() != 1_500_702 {
		t.Fatalf("funds %+v", f)
	}
}

// TestFundedChargesRefuse: a vendor's charges are applied while its
// balance plus credit limit covers them, to the micro-unit; one that does
// not fit is refused whole (and again on a replay, even after a top-up),
// the next smaller one that fits is applied; a charge the campaign's budget
// refuses gives its draw back; unfunded charges are not drawn.
func TestFundedChargesRefuse(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	day := DayOf(time.Now(), time.UTC)
	if _, err := ApplyTopUp(ctx, rdb, mp, "v", "t1", 1_000); err != nil {
		t.Fatal(err)
	}
	if _, err := SetCreditLimit(ctx, rdb, mp, "v", 200, 1); err != nil {
		t.Fatal(err)
	}
	ch := []Charge{
		capCharge(mp, "a", "p:1", "c1", day, 700, Limits{}),
		capCharge(mp, "b", "p:2", "c2", day, 400, Limits{TotalMicros: 300}), // the budget refuses it: drawn, given back
		capCharge(mp, "c", "p:3", "c1", day, 501, Limits{}),                 // 700 + 501 > 1,200
		capCharge(mp, "d", "p:4", "c2", day, 300, Limits{}),
		capCharge(mp, "e", "p:5", "c1", day, 200, Limits{}), // exactly at the credit limit
		capCharge(mp, "f", "p:6", "c3", day, 5_000, Limits{}),
	}
	vendors := []string{"v", "v", "v", "v", "v", ""}
	want := []ChargeOutcome{ChargeApplied, ChargeRefusedTotal, ChargeRefusedFunds, ChargeApplied, ChargeApplied, ChargeApplied}
	check := func(label string, want []ChargeOutcome) {
		t.Helper()
		got, err := ApplyFundedCharges(ctx, rdb, ch, vendors, replicas())
		if err != nil {
			t.Fatal(label, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: charge %d: %v, want %v", label, i, got[i], want[i])
			}
		}
		f := funds(t, func() (Funds, error) { return ReadFunds(ctx, rdb, mp, "v") })
		if f.Drawn != 1_200 || f.Balance() != -200 || f.Available() != 0 || !f.Out() {
			t.Fatalf("%s: funds %+v", label, f)
		}
	}
	check("first", want)
	replayed := []ChargeOutcome{ChargeReplayed, ChargeRefusedTotal, ChargeRefusedFunds, ChargeReplayed, ChargeReplayed, ChargeReplayed}
	check("replay", replayed)
	if total := totalSpend(t, ctx, rdb, mp, "c1"); total != 900 {
		t.Fatalf("c1 spent %d", total)
	}
	if total := totalSpend(t, ctx, rdb, mp, "c2"); total != 300 {
		t.Fatalf("c2 spent %d", total)
	}
	// A top-up does not change what was decided; a new charge uses it.
	if _, err := ApplyTopUp(ctx, rdb, mp, "v", "t2", 10_000); err != nil {
		t.Fatal(err)
	}
	got, err := ApplyFundedCharges(ctx, rdb, ch[2:3], vendors[2:3], replicas())
	if err != nil || got[0] != ChargeRefusedFunds {
		t.Fatalf("replay after a top-up: %v %v", got, err)
	}
	other := ch[2]
	other.Owner = "p:9"
	if got, err := ApplyFundedCharges(ctx, rdb, []Charge{other}, []string{"v"}, replicas()); err != nil || got[0] != ChargeDuplicate {
		t.Fatalf("another record of the refused winner: %v %v", got, err)
	}
	fresh := capCharge(mp, "g", "p:7", "c1", day, 501, Limits{})
	if got, err := ApplyFundedCharges(ctx, rdb, []Charge{fresh}, []string{"v"}, replicas()); err != nil || got[0] != ChargeApplied {
		t.Fatalf("after the top-up: %v %v", got, err)
	}
	if f := funds(t, func() (Funds, error) { return ReadFunds(ctx, rdb, mp, "v") }); f.Drawn != 1_701 || f.Out() {
		t.Fatalf("funds after the top-up %+v", f)
	}
}

// TestFundedChargesConcurrent: many projectors' calls at once on one
// vendor, with replays, never draw beyond its funds, and the vendor's drawn
// sum equals the campaigns' spend.
func TestFundedChargesConcurrent(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	day := DayOf(time.Now(), time.UTC)
	const credited, limit = 100_003, 5_000
	if _, err := ApplyTopUp(ctx, rdb, mp, "v", "t", credited); err != nil {
		t.Fatal(err)
	}
	if _, err := SetCreditLimit(ctx, rdb, mp, "v", limit, 1); err != nil {
		t.Fatal(err)
	}
	const callers, each = 8, 60
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for w := range callers {
		wg.Go(func() {
			var ch []Charge
			var vs []string
			for i := range each {
				k := strconv.Itoa(w) + ":" + strconv.Itoa(i)
				ch = append(ch, capCharge(mp, k, "o"+k, "c"+strconv.Itoa(i%4), day, int64(250+i*7), Limits{DailyMicros: 40_000}))
				vs = append(vs, "v")
			}
			for range 2 { // the second pass is a replay
				for from := 0; from < len(ch); from += 20 {
					if _, err := ApplyFundedCharges(ctx, rdb, ch[from:from+20], vs[from:from+20], replicas()); err != nil {
						errs[w] = err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	f := funds(t, func() (Funds, error) { return ReadFunds(ctx, rdb, mp, "v") })
	var spent int64
	for c := range 4 {
		spent += totalSpend(t, ctx, rdb, mp, "c"+strconv.Itoa(c))
	}
	if f.Drawn != spent || f.Drawn > credited+limit || f.Drawn <= credited {
		t.Fatalf("drawn %d, campaigns spent %d, funds %d", f.Drawn, spent, credited+limit)
	}
}

// TestFundsCache: the auction's copy of the vendors' funds says out once a
// refresh read them out (no funds, or the last refused charge does not
// fit), and in again after a top-up covers it.
func TestFundsCache(t *testing.T) {
	ctx, rdb, mp := chargeEnv(t)
	c := NewFundsCache(rdb, Options{Timeout: 5 * time.Second})
	now := time.Now()
	if _, err := ApplyTopUp(ctx, rdb, mp, "rich", "t", 1_000); err != nil {
		t.Fatal(err)
	}
	if c.Out(mp, "broke", now) || c.Out(mp, "rich", now) {
		t.Fatal("a vendor not loaded yet reads out")
	}
	refresh := func() {
		t.Helper()
		if err := c.RefreshNow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	refresh()
	if !c.Out(mp, "broke", now) || c.Out(mp, "rich", now) {
		t.Fatalf("after a refresh: broke out %v, rich out %v", c.Out(mp, "broke", now), c.Out(mp, "rich", now))
	}
	// A charge of 600 fits, one of 500 more does not: rich is out although
	// 400 are left.
	day := DayOf(now, time.UTC)
	got, err := ApplyFundedCharges(ctx, rdb, []Charge{capCharge(mp, "a", "p:1", "c", day, 600, Limits{}),
		capCharge(mp, "b", "p:2", "c", day, 500, Limits{})}, []string{"rich", "rich"}, replicas())
	if err != nil || got[0] != ChargeApplied || got[1] != ChargeRefusedFunds {
		t.Fatalf("charges: %v %v", got, err)
	}
	refresh()
	if !c.Out(mp, "rich", now) {
		t.Fatal("rich is not out after a refusal")
	}
	if _, err := ApplyTopUp(ctx, rdb, mp, "rich", "t2", 100); err != nil {
		t.Fatal(err)
	}
	refresh()
	if c.Out(mp, "rich", now) {
		t.Fatal("rich is out after a top-up that covers the refused charge")
	}
}
