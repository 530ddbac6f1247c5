package spend

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestReadSpend(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr, rdb, _ := setup(t, clk)
	add(t, rdb, "mp1", "c1", "2024-05-10", 1_500_000)
	add(t, rdb, "mp1", "c1", "2024-05-09", 250_000) // another day: total only
	add(t, rdb, "mp1", "c2", "2024-05-10", 7)
	add(t, rdb, "mp2", "c3", "2024-05-10", 99) // another marketplace
	mr.HSet(SpendKey("mp1", "c2"), "!"+DayField("2024-05-10"), "12")
	mr.HSet(SpendKey("mp1", "c2"), "!"+WeekField("2024-05-06"), "20", "!"+MonthField("2024-05"), "30")
	mr.HSet(SpendKey("mp1", "c1"), "!"+TotalField, "2000000")
	mr.HSet(SpendKey("mp1", "big"), TotalField, "9223372036854775807")

	for _, tc := range []struct {
		name string
		ids  []string
		want []Spent
	}{
		{"none", nil, []Spent{}},
		{"counters and hints", []string{"c1", "c2", "c3", "unknown", "big"}, []Spent{
			{Day: 1_500_000, Total: 1_750_000, TotalHint: 2_000_000, Week: 1_750_000, Month: 1_750_000}, // 05-09: the same week and month
			{Day: 7, Total: 7, DayHint: 12, Week: 7, WeekHint: 20, Month: 7, MonthHint: 30},
			{}, // c3 is mp2's
			{},
			{Total: math.MaxInt64},
		}},
		{"one campaign twice", []string{"c2", "c2"}, []Spent{{Day: 7, Total: 7, DayHint: 12, Week: 7, WeekHint: 20, Month: 7, MonthHint: 30}, {Day: 7, Total: 7, DayHint: 12, Week: 7, WeekHint: 20, Month: 7, MonthHint: 30}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := mr.CommandCount()
			got, err := ReadSpends(t.Context(), rdb, "mp1", "2024-05-10", tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			// One HMGET a campaign, sent together.
			if n, want := mr.CommandCount()-before, len(tc.ids); n != want {
				t.Errorf("%d commands, want %d", n, want)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d results, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%s: %+v, want %+v", tc.ids[i], got[i], tc.want[i])
				}
			}
		})
	}
	if s := (Spent{Day: 5, DayHint: 9, Total: 20, TotalHint: 3}); s.EffectiveDay() != 9 || s.EffectiveTotal() != 20 {
		t.Errorf("effective spend of %+v: %d, %d", s, s.EffectiveDay(), s.EffectiveTotal())
	}

	// Bad arguments and bad data.
	for name, try := range map[string]func() error{
		"empty marketplace":        func() error { _, err := ReadSpends(t.Context(), rdb, "", "2024-05-10", []string{"c1"}); return err },
		"brace":                    func() error { _, err := ReadSpends(t.Context(), rdb, "a{b", "2024-05-10", []string{"c1"}); return err },
		"bad day":                  func() error { _, err := ReadSpends(t.Context(), rdb, "mp1", "2024-5-10", []string{"c1"}); return err },
		"refusal-hint campaign id": func() error { _, err := ReadSpends(t.Context(), rdb, "mp1", "2024-05-10", []string{"!c1"}); return err },
	} {
		if err := try(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	mr.HSet(SpendKey("mp1", "c9"), TotalField, "1.5")
	_, err := ReadSpends(t.Context(), rdb, "mp1", "2024-05-10", []string{"c1", "c9"})
	if err == nil || !strings.Contains(err.Error(), `"`+TotalField+`"`) || !strings.Contains(err.Error(), SpendKey("mp1", "c9")) {
		t.Errorf("a non-integer value: %v, want an error naming the key and the field", err)
	}
}

// TestReaderCooldown: a failed read makes the reads of the next Cooldown
// fail at once without asking Redis; the first read after it asks again.
func TestReaderCooldown(t *testing.T) {
	clk := newClock(utc("2024-05-10T12:00:00Z"))
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	r := NewReader(rdb, nil)
	r.now = clk.now
	add(t, rdb, "mp1", "c1", "2024-05-10", 5)
	count := func(result string) float64 {
		return testutil.ToFloat64(telemetry.BudgetSpendReads.WithLabelValues(result))
	}
	ok0, err0, skip0 := count("ok"), count("error"), count("skipped")

	if got, err := r.ReadSpend(t.Context(), "mp1", "2024-05-10", []string{"c1"}); err != nil || got[0].Day != 5 {
		t.Fatalf("healthy read: %v %v", got, err)
	}
	mr.SetError("LOADING Redis is loading the dataset in memory")
	if _, err := r.ReadSpend(t.Context(), "mp1", "2024-05-10", []string{"c1"}); err == nil || errors.Is(err, ErrSpendUnavailable) {
		t.Fatalf("failing Redis: %v, want its error", err)
	}
	mr.SetError("")
	clk.add(r.Cooldown - time.Millisecond)
	if _, err := r.ReadSpend(t.Context(), "mp1", "2024-05-10", []string{"c1"}); !errors.Is(err, ErrSpendUnavailable) {
		t.Fatalf("within the cooldown: %v, want ErrSpendUnavailable", err)
	}
	clk.add(time.Millisecond)
	if got, err := r.ReadSpend(t.Context(), "mp1", "2024-05-10", []string{"c1"}); err != nil || got[0].Day != 5 {
		t.Fatalf("after the cooldown: %v %v", got, err)
	}
	if d := [3]float64{count("ok") - ok0, count("error") - err0, count("skipped") - skip0}; d != [3]float64{2, 1, 1} {
		t.Errorf("reads counted (ok, error, skipped) %v, want [2 1 1]", d)
	}
	// A caller that went away is not a Redis failure.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.ReadSpend(ctx, "mp1", "2024-05-10", []string{"c1"}); err == nil {
		t.Fatal("a cancelled read succeeded")
	}
	if got, err := r.ReadSpend(t.Context(), "mp1", "2024-05-10", []string{"c1"}); err != nil || got[0].Day != 5 {
		t.Fatalf("after a cancelled read: %v %v", got, err)
	}
}

// TestReaderFrozenRedis: a Redis that hangs (SIGSTOP) costs a read its
// timeout, not the client's socket timeout, and the reads during the
// cooldown nothing; once it answers again, so do the reads.
func TestReaderFrozenRedis(t *testing.T) {
	pr := testenv.OwnRedis(t)
	rdb := redisstore.Open(redisstore.Options{Addr: pr.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	r := NewReader(rdb, nil)
	r.Cooldown = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := AddSpend(ctx, rdb, "mp1", "c1", "2024-05-10", 42); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadSpend(ctx, "mp1", "2024-05-10", []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	if err := pr.Freeze(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := r.ReadSpend(ctx, "mp1", "2024-05-10", []string{"c1"})
	if took := time.Since(start); err == nil || took > r.Timeout+250*time.Millisecond {
		t.Fatalf("read of a frozen Redis: %v after %s (timeout %s)", err, took, r.Timeout)
	}
	start = time.Now()
	if _, err := r.ReadSpend(ctx, "mp1", "2024-05-10", []string{"c1"}); !errors.Is(err, ErrSpendUnavailable) || time.Since(start) > 10*time.Millisecond {
		t.Fatalf("read during the cooldown: %v after %s", err, time.Since(start))
	}
	pr.Thaw()
	testenv.Eventually(t, 10*time.Second, func() error {
		got, err := r.ReadSpend(ctx, "mp1", "2024-05-10", []string{"c1"})
		if err != nil {
			return err
		}
		if got[0].Day != 42 || got[0].Total != 42 {
			return testenv.Errorf("read %+v", got[0])
		}
		return nil
	})
}
