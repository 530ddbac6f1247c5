package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/management/campaigns/freqcap"
)

// FrequencyCaps is the sink that counts, per shopper, the impressions and
// clicks of the campaigns that cap them (freqcap; docs/reference/campaigns.md,
// Restrictions): an event with a resolvedBidId and an opaqueUserId, of a
// campaign with an active restriction on its kind at fold time, adds one to
// the campaign's and the bid's counts of its day, week and month in the
// marketplace's time zone (its occurredAt, or its receivedAt when that is
// earlier). A replayed batch counts nothing twice: the store remembers the
// last offset it counted for each shopper and partition.
type FrequencyCaps struct {
	store *freqcap.Store
	// capped says whether a campaign has an active restriction on
	// impressions, on clicks.
	capped func(mp, campaignID string) (impressions, clicks bool)
	// location is a marketplace's time zone; an event of a marketplace it
	// does not know fails its batch (retried until the view knows it).
	location func(mp string) (*time.Location, bool)
	now      func() time.Time
}

// NewFrequencyCaps returns the sink.
func NewFrequencyCaps(store *freqcap.Store, capped func(mp, campaignID string) (impressions, clicks bool),
	location func(mp string) (*time.Location, bool)) *FrequencyCaps {
	return &FrequencyCaps{store: store, capped: capped, location: location, now: time.Now}
}

// Name implements EventSink.
func (f *FrequencyCaps) Name() string { return "frequency_caps" }

// Fold implements EventSink.
func (f *FrequencyCaps) Fold(ctx context.Context, events []Event) error {
	var hits []freqcap.Hit
	for i := range events {
		ev := &events[i]
		e := &ev.E
		if !ev.HasToken || e.OpaqueUserID == "" {
			continue
		}
		var kind byte
		switch e.Kind {
		case records.KindImpression:
			kind = freqcap.Impression
		case records.KindClick:
			kind = freqcap.Click
		default:
			continue
		}
		camp := uuid.UUID(ev.Token.CampaignID).String()
		imp, clk := f.capped(e.MarketplaceID, camp)
		if kind == freqcap.Impression && !imp || kind == freqcap.Click && !clk {
			continue
		}
		loc, ok := f.location(e.MarketplaceID)
		if !ok {
			return fmt.Errorf("frequency caps: marketplace %s not known yet", e.MarketplaceID)
		}
		bid := ""
		if ev.Token.BidID != ([16]byte{}) {
			bid = uuid.UUID(ev.Token.BidID).String()
		}
		at := min(e.OccurredAtMs, e.ReceivedAtMs)
		hits = append(hits, freqcap.Hit{MP: e.MarketplaceID, User: e.OpaqueUserID, Partition: ev.Partition, Offset: ev.Offset,
			At: time.UnixMilli(at), Loc: loc, Fields: []string{freqcap.CampaignField(camp, kind), freqcap.BidField(camp, bid, kind)}})
	}
	return f.store.Count(ctx, hits, f.now())
}
