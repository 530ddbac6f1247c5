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
	// anyCapped says whether some campaign of a marketplace has an active
	// restriction (nil: ask capped of every campaign): the events of a
	// marketplace without one are skipped whole.
	anyCapped func(mp string) bool
	// capped says whether a campaign has an active restriction on
	// impressions, on clicks.
	capped func(mp, campaignID string) (impressions, clicks bool)
	// location is a marketplace's time zone; an event of a marketplace it
	// does not know fails its batch (retried until the view knows it).
	location func(mp string) (*time.Location, bool)
	now      func() time.Time
}

// NewFrequencyCaps returns the sink. anyCapped may be nil.
func NewFrequencyCaps(store *freqcap.Store, anyCapped func(mp string) bool, capped func(mp, campaignID string) (impressions, clicks bool),
	location func(mp string) (*time.Location, bool)) *FrequencyCaps {
	return &FrequencyCaps{store: store, anyCapped: anyCapped, capped: capped, location: location, now: time.Now}
}

// Name implements EventSink.
func (f *FrequencyCaps) Name() string { return "frequency_caps" }

// campaignCaps is what a batch asked of a campaign once: its id as text and
// the kinds it caps.
type campaignCaps struct {
	id       string
	imp, clk bool
}

// Fold implements EventSink. Each marketplace and each campaign of the
// batch is asked once: a batch of marketplaces without an active
// restriction costs a look-up a marketplace, nothing an event.
func (f *FrequencyCaps) Fold(ctx context.Context, events []Event) error {
	var (
		hits    []freqcap.Hit
		markets map[uuid.UUID]bool // marketplace → some campaign capped
		camps   map[[2]uuid.UUID]campaignCaps
		lastMP  uuid.UUID
		last    bool
	)
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
		if f.anyCapped != nil {
			// The token names the event's marketplace (Event.readToken).
			if ev.MP != lastMP || markets == nil {
				yes, ok := markets[ev.MP]
				if !ok {
					if markets == nil {
						markets = map[uuid.UUID]bool{}
					}
					yes = f.anyCapped(e.MarketplaceID)
					markets[ev.MP] = yes
				}
				lastMP, last = ev.MP, yes
			}
			if !last {
				continue
			}
		}
		ck := [2]uuid.UUID{ev.MP, ev.Token.CampaignID}
		c, ok := camps[ck]
		if !ok {
			if camps == nil {
				camps = map[[2]uuid.UUID]campaignCaps{}
			}
			c.id = uuid.UUID(ev.Token.CampaignID).String()
			c.imp, c.clk = f.capped(e.MarketplaceID, c.id)
			camps[ck] = c
		}
		if kind == freqcap.Impression && !c.imp || kind == freqcap.Click && !c.clk {
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
			At: time.UnixMilli(at), Loc: loc, Fields: []string{freqcap.CampaignField(c.id, kind), freqcap.BidField(c.id, bid, kind)}})
	}
	if len(hits) == 0 {
		return nil
	}
	return f.store.Count(ctx, hits, f.now())
}
