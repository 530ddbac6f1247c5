package spend

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestUpgrade: a Redis of the marketplace-keyed layout is copied into the
// campaigns' spend hashes once, whichever of several processes starting
// together does it (the others wait for its record): totals, recent day
// fields and refusal hints; day fields past DayFieldsKept are not copied;
// a field the campaign's hash has already is kept (a copy started again).
// A later call only reads the record. A Redis without the earlier layout
// records that there was nothing to copy.
func TestUpgrade(t *testing.T) {
	rs := testenv.OwnRedis(t)
	rdb := redisstore.Open(redisstore.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now := time.Now()
	today, old := DayOf(now, time.UTC), DayOf(now.Add(-40*24*time.Hour), time.UTC)
	for k, fv := range map[string][]any{
		"ec:spend:{mpA}:total":      {"c1", 500, "c2", 70, "!c2", 90},
		"ec:spend:{mpA}:d:" + today: {"c1", 200, "!c1", 260, "c2", 70},
		"ec:spend:{mpA}:d:" + old:   {"c1", 5},
		"ec:spend:{mpB}:total":      {"c3", 1},
	} {
		if err := rdb.HSet(ctx, k, fv...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A copy that was interrupted after writing c3's total.
	if err := rdb.HSet(ctx, SpendKey("mpB", "c3"), TotalField, 1).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ats := make([]time.Time, 3)
	errs := make([]error, 3)
	for i := range ats {
		wg.Go(func() { ats[i], errs[i] = Upgrade(ctx, rdb, testenv.Logger(t)) })
	}
	wg.Wait()
	for i := range ats {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !ats[i].Equal(ats[0]) || ats[i].Before(now.Add(-time.Second)) || ats[i].After(time.Now()) {
			t.Fatalf("upgrade times %v, want one time of this run", ats)
		}
	}
	want := map[string]string{
		SpendKey("mpA", "c1"): fmt.Sprint(map[string]string{TotalField: "500", DayField(today): "200", "!" + DayField(today): "260"}),
		SpendKey("mpA", "c2"): fmt.Sprint(map[string]string{TotalField: "70", "!" + TotalField: "90", DayField(today): "70"}),
		SpendKey("mpB", "c3"): fmt.Sprint(map[string]string{TotalField: "1"}),
	}
	for k, w := range want {
		got, err := rdb.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != w {
			t.Errorf("%s = %v, want %s", k, got, w)
		}
	}
	again, err := Upgrade(ctx, rdb, testenv.Logger(t))
	if err != nil || !again.Equal(ats[0]) {
		t.Errorf("a later call: %v, %v; want the recorded %v", again, err, ats[0])
	}
	if v, _ := rdb.HGet(ctx, SpendKey("mpA", "c1"), TotalField).Result(); v != "500" {
		t.Errorf("a later call changed c1's total to %s", v)
	}

	// A Redis that never held the earlier layout.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if at, err := Upgrade(ctx, rdb, testenv.Logger(t)); err != nil || !at.IsZero() {
		t.Errorf("a new installation: %v, %v; want the zero time", at, err)
	}
	if v, _ := rdb.Get(ctx, UpgradeKey).Result(); v != "0" {
		t.Errorf("%s = %q, want 0 (nothing to copy)", UpgradeKey, v)
	}
}

// TestUpgradeCluster: a cluster never held the earlier layout: nothing is
// read, copied or recorded.
func TestUpgradeCluster(t *testing.T) {
	if !testenv.RedisClusterMode() {
		t.Skip("needs the test cluster (ENDCAP_TEST_REDIS_CLUSTER=1)")
	}
	rdb := testenv.Get(t).Redis(t)
	if at, err := Upgrade(t.Context(), rdb, testenv.Logger(t)); err != nil || !at.IsZero() {
		t.Errorf("Upgrade on a cluster: %v, %v; want the zero time", at, err)
	}
	if n, _ := rdb.Exists(t.Context(), UpgradeKey).Result(); n != 0 {
		t.Errorf("%s written on a cluster", UpgradeKey)
	}
}
