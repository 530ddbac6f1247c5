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
	sink := NewFrequencyCaps(store, func(string) bool { return true },
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

// TestFrequencyCapsSinkUncapped: the events of a marketplace without an
// active restriction are skipped whole: its campaigns are not looked up, its
// shoppers not counted, and the batch allocates nothing an event; a capped
// marketplace's campaigns are looked up once a batch.
func TestFrequencyCapsSinkUncapped(t *testing.T) {
	env := testenv.Get(t)
	store := freqcap.New(env.Redis(t))
	uncapped, capped := uuid.New(), uuid.New()
	camp := uuid.New()
	lookups := map[string]int{}
	sink := NewFrequencyCaps(store, func(m string) bool { return m == capped.String() },
		func(m, c string) (bool, bool) {
			lookups[m]++
			return true, true
		},
		func(string) (*time.Location, bool) { return time.UTC, true })
	now := time.Now()
	batch := make([]Event, 1000)
	for i := range batch {
		e := &batch[i]
		e.E = records.Event{Kind: records.KindImpression, MarketplaceID: uncapped.String(), ID: uuid.NewString(),
			OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "shopper-" + uuid.NewString()}
		if i%2 == 1 {
			e.E.Kind = records.KindClick
		}
		e.MP, e.Partition, e.Offset, e.HasToken = uncapped, 1, int64(i), true
		e.Token.MarketplaceID, e.Token.CampaignID, e.Token.BidID = uncapped, camp, uuid.New()
	}
	ctx := context.Background()
	if allocs := testing.AllocsPerRun(5, func() {
		if err := sink.Fold(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}); allocs > 4 {
		t.Errorf("%.0f allocations for a batch of %d events of a marketplace without restrictions, want a few a batch (none an event)", allocs, len(batch))
	}
	if lookups[uncapped.String()] != 0 {
		t.Errorf("the uncapped marketplace's campaigns were looked up %d times", lookups[uncapped.String()])
	}
	var c freqcap.Counts
	if err := store.Read(ctx, uncapped.String(), batch[0].E.OpaqueUserID, now, time.UTC, &c); err != nil || c.Len() != 0 {
		t.Errorf("a shopper of the uncapped marketplace has %d counts (%v)", c.Len(), err)
	}
	// The same events in a capped marketplace count, their campaign looked
	// up once.
	for i := range batch {
		batch[i].E.MarketplaceID, batch[i].MP, batch[i].Token.MarketplaceID = capped.String(), capped, capped
	}
	if err := sink.Fold(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if lookups[capped.String()] != 1 {
		t.Errorf("the capped marketplace's campaign was looked up %d times in a batch, want once", lookups[capped.String()])
	}
	if err := store.Read(ctx, capped.String(), batch[1].E.OpaqueUserID, now, time.UTC, &c); err != nil {
		t.Fatal(err)
	}
	if got := c.Campaign("daily", camp.String(), freqcap.Click); got != 1 {
		t.Errorf("a capped marketplace's shopper has %d clicks today, want 1", got)
	}
}
