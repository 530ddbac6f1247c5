package spend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/redisstore"
)

// UpgradeKey records when this build's first process copied the spend of
// the layout before campaign keys into the campaigns' spend hashes (Unix
// milliseconds; "0": there was none to copy). Set once, never changed.
const UpgradeKey = "ec:upgrade:campaign-keys"

// upgradeLock is the lease of the process that copies.
const upgradeLock = "ec:lock:upgrade:campaign-keys"

// Upgrade moves one Redis server from the layout of the builds before
// 2026-11-26, which kept spend in two hashes per marketplace
// (ec:spend:{mp}:total and ec:spend:{mp}:d:<day>, campaign id → micro-units,
// "!" and a campaign id → a refusal hint) and markers in hashes per
// marketplace, to the campaign keys of this one (SpendKey, MarkerPrefix),
// once: it copies every campaign's total, the day fields of the last
// DayFieldsKept and the refusal hints into its spend hash (HSETNX: a copy
// interrupted and started again writes nothing twice), then records when
// in UpgradeKey, and returns that time. Markers are not copied (they do
// not say their campaign): the charging pipeline reads the marketplace's
// marker hashes beside the campaign's for the auctions before that time
// (Charge.MarketplaceMarkers). Every later call, from any process, reads
// the record.
//
// One process copies at a time (a Redis lease); the others wait for its
// record. It returns the zero time when there was nothing to copy (a new
// installation) and on a cluster, which never held the earlier layout.
// Projectors of the earlier build must be stopped first: what they charge
// after the copy is not carried over (docs/operations/operations.md, Upgrading).
func Upgrade(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) (time.Time, error) {
	if redisstore.IsCluster(rdb) {
		return time.Time{}, nil
	}
	for {
		at, done, err := upgradeRecord(ctx, rdb)
		if err != nil || done {
			return at, err
		}
		lctx, release, err := redisstore.Lease(ctx, rdb, upgradeLock, 30*time.Second)
		if errors.Is(err, redisstore.ErrBusy) {
			select { // another process copies: wait for its record
			case <-ctx.Done():
				return time.Time{}, ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		at, err = upgradeUnderLease(lctx, rdb, log)
		release()
		return at, err
	}
}

// upgradeRecord reads UpgradeKey.
func upgradeRecord(ctx context.Context, rdb redis.UniversalClient) (time.Time, bool, error) {
	v, err := rdb.Get(ctx, UpgradeKey).Result()
	if err == redis.Nil {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("budget: read %s: %w", UpgradeKey, err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}, false, fmt.Errorf("budget: %s holds %q, not Unix milliseconds", UpgradeKey, v)
	}
	if ms == 0 {
		return time.Time{}, true, nil
	}
	return time.UnixMilli(ms), true, nil
}

func upgradeUnderLease(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) (time.Time, error) {
	if at, done, err := upgradeRecord(ctx, rdb); err != nil || done {
		return at, err // recorded meanwhile
	}
	now := time.Now()
	oldest := DayOf(now.Add(-DayFieldsKept), time.UTC)
	var hashes, fields int
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, "ec:spend:{*}:*", 1000).Result()
		if err != nil {
			return time.Time{}, fmt.Errorf("budget: upgrade: scan the spend hashes: %w", err)
		}
		for _, k := range keys {
			mp, field, ok := oldSpendKey(k)
			if !ok || (field != TotalField && field < DayField(oldest)) {
				continue
			}
			n, err := copyOldSpend(ctx, rdb, k, mp, field)
			if err != nil {
				return time.Time{}, err
			}
			hashes++
			fields += n
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	rec := int64(0)
	if hashes > 0 {
		rec = now.UnixMilli()
	}
	if err := rdb.SetNX(ctx, UpgradeKey, rec, 0).Err(); err != nil {
		return time.Time{}, fmt.Errorf("budget: record the upgrade: %w", err)
	}
	if hashes > 0 {
		log.Info("budget: spend copied from the marketplace hashes into the campaigns' hashes",
			"hashes", hashes, "fields", fields, "since", now.UTC().Format(time.RFC3339))
	}
	at, _, err := upgradeRecord(ctx, rdb)
	return at, err
}

// oldSpendKey parses a spend hash name of the earlier layout: its
// marketplace, and the field its values go to in a campaign's hash
// (TotalField, or DayField of its day).
func oldSpendKey(k string) (mp, field string, ok bool) {
	rest, ok := strings.CutPrefix(k, "ec:spend:{")
	if !ok {
		return "", "", false
	}
	mp, rest, ok = strings.Cut(rest, "}:")
	if !ok || mp == "" || strings.ContainsAny(mp, "{}:") {
		return "", "", false // a campaign key (its tag holds mp:campaign) or a stranger
	}
	if rest == "total" {
		return mp, TotalField, true
	}
	if day, ok := strings.CutPrefix(rest, "d:"); ok && validDay(day) == nil {
		return mp, DayField(day), true
	}
	return "", "", false
}

// copyOldSpend copies the fields of one spend hash of the earlier layout
// into the campaigns' hashes and returns how many it copied.
func copyOldSpend(ctx context.Context, rdb redis.UniversalClient, key, mp, field string) (int, error) {
	var n int
	var cursor uint64
	for {
		kv, next, err := rdb.HScan(ctx, key, cursor, "", 1000).Result()
		if err != nil {
			return n, fmt.Errorf("budget: upgrade: read %s: %w", key, err)
		}
		pipe := rdb.Pipeline()
		for i := 0; i+1 < len(kv); i += 2 {
			camp, f := kv[i], field
			if hint, ok := strings.CutPrefix(camp, "!"); ok {
				camp, f = hint, "!"+field
			}
			if validCampaign(camp) != nil {
				continue
			}
			pipe.HSetNX(ctx, SpendKey(mp, camp), f, kv[i+1])
			n++
		}
		if pipe.Len() > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return n, fmt.Errorf("budget: upgrade: copy %s: %w", key, err)
			}
		}
		if next == 0 {
			return n, nil
		}
		cursor = next
	}
}
