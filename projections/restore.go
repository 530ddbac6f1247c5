package projections

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
)

// What a restore rebuilds from ClickHouse's copy so that the new cluster's
// fold neither folds again what the copy holds nor charges again what it
// charged (docs/operations/operations.md, Backup and restore):
//
//   - the event claims: every event the copy holds, received within the
//     dedupe window, is claimed in the new claims changelog by an owner no
//     record of the new events topic can be (RestoredClaimOffset), so a
//     client's retry of it is a duplicate;
//   - the charge markers: every winner the copy charged (or refused for a
//     budget) within the markers' lifetime gets its marker, owned by
//     RestoredChargeOwner, so another record for it is not charged;
//   - the spend: ReconcileSpend, from the copy's charges.

// RestoredClaimOffset is the owner offset of the claims a restore writes:
// no record of an events topic reaches it, so every record is another one
// than the owner.
const RestoredClaimOffset = math.MaxInt64

// RestoredChargeOwner is the owner of the charge markers a restore writes
// (an owner is a record's partition:offset; this one is no record's).
const RestoredChargeOwner = "restored"

// RestoreClaims produces to the claims changelog topic a claim of every
// event of the view `events` received since now minus window (the dedupe
// window), in the partition the event was folded from, dated when it was
// received. The events topic of the new cluster must have as many
// partitions as the one the copy was folded from (a retry lands on its
// first copy's partition). It returns how many claims it produced.
func RestoreClaims(ctx context.Context, ch clickhouse.Conn, cl *kgo.Client, topic string, window time.Duration, now time.Time) (int, error) {
	since := now.Add(-window - window/claimGenerations)
	rows, err := ch.Query(ctx, `SELECT toString(marketplace_id), toString(kind), event_id, kafka_partition, toInt64(received_at_ms)
		FROM events WHERE received_at >= ?`, since.UTC().Truncate(time.Second))
	if err != nil {
		return 0, fmt.Errorf("restore claims: read the events: %w", err)
	}
	defer rows.Close()
	var recs []*kgo.Record
	n := 0
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("restore claims: changelog: %w", err)
		}
		n += len(recs)
		recs = recs[:0]
		return nil
	}
	value := binary.AppendUvarint(nil, uint64(RestoredClaimOffset))
	for rows.Next() {
		var mp, kind, id string
		var part int32
		var receivedMs int64
		if err := rows.Scan(&mp, &kind, &id, &part, &receivedMs); err != nil {
			return n, fmt.Errorf("restore claims: read the events: %w", err)
		}
		h := hashKey(mp + ":" + kind + ":" + id)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Key: h[:], Value: value, Timestamp: time.UnixMilli(receivedMs)})
		if len(recs) == 10_000 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("restore claims: read the events: %w", err)
	}
	return n, flush()
}

// RestoreMarkers sets, for every row of charges_raw (charges and budget
// refusals) whose auction's markers would still be kept at now, the
// winner's charge marker, owned by RestoredChargeOwner, without moving
// spend (ReconcileSpend sets it). replicas is what the charge script waits
// for (ENDCAP_REDIS_WAIT_REPLICAS). It returns how many markers it set.
func RestoreMarkers(ctx context.Context, ch clickhouse.Conn, rdb redis.UniversalClient, replicas int, now time.Time) (int, error) {
	since := now.Add(-spend.ChargeWindow - spend.ChargeMarkerMargin - time.Hour)
	rows, err := ch.Query(ctx, `SELECT toString(marketplace_id), campaign_id, toString(auction_id), rank, toString(kind),
		toInt64(toUnixTimestamp(auction_at)), toString(day_local)
		FROM charges_raw FINAL WHERE auction_at >= ?`, since.UTC().Truncate(time.Second))
	if err != nil {
		return 0, fmt.Errorf("restore markers: read the charges: %w", err)
	}
	defer rows.Close()
	var batch []spend.Charge
	n := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := spend.ApplyCharges(ctx, rdb, batch, replicas); err != nil {
			return fmt.Errorf("restore markers: %w", err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	for rows.Next() {
		var mp, camp, auction, kind, day string
		var rank uint8
		var auctionAt int64
		if err := rows.Scan(&mp, &camp, &auction, &rank, &kind, &auctionAt, &day); err != nil {
			return n, fmt.Errorf("restore markers: read the charges: %w", err)
		}
		id, err := uuid.Parse(auction)
		if err != nil {
			return n, fmt.Errorf("restore markers: auction id %q: %w", auction, err)
		}
		c := bidtoken.Claims{AuctionID: id, Rank: rank, AuctionTimeMs: auctionAt * 1000}
		k := records.KindImpression
		if kind == "click" {
			k = records.KindClick
		}
		batch = append(batch, spend.Charge{MarketplaceID: mp, Key: spend.ChargeKey(&c, k), Epoch: spend.MarkerEpoch(&c), Owner: RestoredChargeOwner,
			CampaignID: camp, Day: day, KeepUntil: spend.MarkerUntil(&c, now)})
		if len(batch) == 5_000 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("restore markers: read the charges: %w", err)
	}
	return n, flush()
}
