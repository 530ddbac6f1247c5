package projections

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestFrequencyCapsSink: impressions and clicks with a token and a shopper
// count for campaigns that cap their kind, on the campaign and the bid; a
// replayed batch counts nothing again; events without a shopper, of
// uncapped campaigns or of other kinds count nothing.
func TestFrequencyCapsSink(t *testing.T) {
	env := testenv.Get(t)
	store := freqcap.New(env.Redis(t))
	mp, capped, free := uuid.New(), uuid.New(), uuid.New()
	bid := uuid.New()
	user := "shopper-" + uuid.NewString()
	sink := NewFrequencyCaps(store,
		func(m, c string) (bool, bool) { return c == capped.String(), false },
		func(m string) (*time.Location, bool) { return time.UTC, m == mp.String() })
	now := time.Now()
	ev := func(off int64, kind records.Kind, camp uuid.UUID, user string) Event {
		e := Event{E: records.Event{Kind: kind, MarketplaceID: mp.String(), ID: uuid.NewString(), OccurredAtMs: now.UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: user}, MP: mp, Partition: 2, Offset: off, HasToken: true}
		e.Token.MarketplaceID, e.Token.CampaignID, e.Token.BidID = mp, camp, bid
		return e
	}
	batch := []Event{ev(100, records.KindImpression, capped, user), ev(101, records.KindImpression, capped, user),
		ev(102, records.KindClick, capped, user), // clicks not capped
		ev(103, records.KindImpression, free, user), ev(104, records.KindImpression, capped, ""),
		ev(105, records.KindPurchase, capped, user)}
	ctx := context.Background()
	for range 2 { // the second time, a replay
		if err := sink.Fold(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	var c freqcap.Counts
	if err := store.Read(ctx, mp.String(), user, now, time.UTC, &c); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"daily", "weekly", "monthly"} {
		for _, q := range []struct {
			what      string
			got, want int64
		}{
			{"the capped campaign's impressions", c.Campaign(p, capped.String(), freqcap.Impression), 2},
			{"its bid's impressions", c.Bid(p, capped.String(), bid.String(), freqcap.Impression), 2},
			{"its clicks (not capped)", c.Campaign(p, capped.String(), freqcap.Click), 0},
			{"the uncapped campaign's impressions", c.Campaign(p, free.String(), freqcap.Impression), 0},
		} {
			if q.got != q.want {
				t.Errorf("%s %s = %d, want %d", p, q.what, q.got, q.want)
			}
		}
	}
	// A marketplace the views do not know yet fails the batch.
	other := ev(200, records.KindImpression, capped, user)
	other.E.MarketplaceID = uuid.NewString()
	if err := sink.Fold(ctx, []Event{other}); err == nil {
		t.Error("an unknown marketplace was counted")
	}
}
