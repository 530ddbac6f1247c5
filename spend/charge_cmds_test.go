package spend

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/testkit/testenv"
)

// commandCalls is how many times a server ran each command (INFO
// commandstats: a script's commands are counted one by one).
func commandCalls(t *testing.T, ctx context.Context, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				out[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.Atoi(v)
			}
		}
	}
	return out
}

// TestImpressionRecordCommands: the charge script reads the records of a
// marker hash that a call touches many times with one HMGET and writes
// the new ones with one HSET, not a command a record; one it holds already
// is written again only when the new one is earlier (the earliest stays).
func TestImpressionRecordCommands(t *testing.T) {
	own := testenv.OwnRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: own.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const mp, camp, n = "mp-records", "c-records", 100
	now := time.Now()
	records := func(atMs int64) []Charge {
		cs := make([]Charge, n)
		for i := range cs {
			cs[i] = Charge{MarketplaceID: mp, CampaignID: camp, Key: "imp-" + strconv.Itoa(i), Epoch: 9, Owner: "0:" + strconv.Itoa(i),
				Day: DayOf(now, time.UTC), KeepUntil: now.Add(time.Hour), Impression: true, ImpressionAtMs: atMs + int64(i)}
		}
		return cs
	}
	apply := func(cs []Charge) map[string]int {
		t.Helper()
		before := commandCalls(t, ctx, rdb)
		got, err := ApplyCharges(ctx, rdb, cs, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range got {
			if o != ChargeRecorded {
				t.Fatalf("record %d: %s, want recorded", i, o)
			}
		}
		after := commandCalls(t, ctx, rdb)
		for k := range after {
			after[k] -= before[k]
		}
		return after
	}
	const at = 1_800_000_000_000
	// New records: the bucket read once and written once; the script's
	// own reads (the epoch's bucket count, the epoch before's) are two
	// HGETs a call, and its description one HSET.
	if c := apply(records(at)); c["hsetnx"] != 0 || c["hmget"] != 1 || c["hget"] > 2 || c["hset"] != 2 {
		t.Errorf("%d new records: %d HSETNX, %d HMGET, %d HGET, %d HSET; want 0, 1, at most 2 and 2", n, c["hsetnx"], c["hmget"], c["hget"], c["hset"])
	}
	// Later ones: read, not written (but the epoch's description).
	if c := apply(records(at + 5_000)); c["hmget"] != 1 || c["hset"] != 1 {
		t.Errorf("%d later records: %d HMGET, %d HSET; want 1 and 1 (the epoch's description)", n, c["hmget"], c["hset"])
	}
	// Earlier ones: read and written in one HSET.
	if c := apply(records(at - 5_000)); c["hmget"] != 1 || c["hset"] != 2 {
		t.Errorf("%d earlier records: %d HMGET, %d HSET, want 1 and 2", n, c["hmget"], c["hset"])
	}
	// The earliest of each stays.
	meta, err := rdb.HGet(ctx, MarkerMetaKey(mp, camp, 9), MarkerMetaField).Result()
	if err != nil {
		t.Fatal(err)
	}
	buckets, _ := strconv.ParseUint(strings.Split(meta, ":")[0], 10, 32)
	for _, i := range []int{0, n - 1} {
		key := "imp-" + strconv.Itoa(i)
		v, err := rdb.HGet(ctx, MarkerBucketKey(mp, camp, 9, uint32(buckets), key), key).Result()
		if want := strconv.FormatInt(at-5_000+int64(i), 10); err != nil || v != want {
			t.Errorf("record %d holds %q (%v), want %s", i, v, err, want)
		}
	}
}
