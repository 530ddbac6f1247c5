package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/kafka"
)

// emittedTTL: how long Redis remembers that an event was appended to the
// webhook events topic. Longer than any source can bring the same event up
// again (a local day's budget: 34 days of replays; a scored file: 24 h).
const emittedTTL = 40 * 24 * time.Hour

// Emitter appends events that are not entity changes (a budget used up, a
// scored-attribution file written) to the webhook events topic, each once:
// a Redis marker per event id remembers those appended. An event whose
// marker is missing is appended (again, if a process died between the
// append and the marker: the router makes its deliveries once all the
// same).
type Emitter struct {
	Kafka *kgo.Client
	Topic string
	Redis redis.UniversalClient
}

// Emit appends the events not appended before and returns once Kafka
// acknowledged them. An error means some may not be: call it again.
func (e *Emitter) Emit(ctx context.Context, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var uniq []Event
	for _, ev := range evs {
		if !seen[ev.ID] {
			seen[ev.ID] = true
			uniq = append(uniq, ev)
		}
	}
	keys := make([]string, len(uniq))
	for i, ev := range uniq {
		keys[i] = "ec:webhooks:emitted:" + ev.ID
	}
	pipe := e.Redis.Pipeline()
	exists := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		exists[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("webhooks: read emitted markers: %w", err)
	}
	var recs []*kgo.Record
	var done []string
	for i, ev := range uniq {
		if exists[i].Val() == 1 {
			continue
		}
		v, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: e.Topic, Key: []byte(ev.MarketplaceID), Value: v})
		done = append(done, keys[i])
	}
	if len(recs) == 0 {
		return nil
	}
	if err := kafka.Produce(ctx, e.Kafka, recs...).Wait(ctx); err != nil {
		return fmt.Errorf("webhooks: append events: %w", err)
	}
	pipe = e.Redis.Pipeline()
	for _, k := range done {
		pipe.Set(ctx, k, "1", emittedTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("webhooks: write emitted markers: %w", err)
	}
	return nil
}

// Budgets of a budget.exhausted event.
const (
	BudgetDaily   = "daily"
	BudgetWeekly  = "weekly"
	BudgetMonthly = "monthly"
	BudgetTotal   = "total"
)

// budgetExhausted is the data of a budget.exhausted event.
type budgetExhausted struct {
	Budget   string                 `json:"budget"`        // daily, weekly, monthly or total
	Day      string                 `json:"day,omitempty"` // the marketplace-local day of the refused charge (daily, weekly and monthly budgets)
	Campaign campaigns.CampaignJSON `json:"campaign"`
}

// BudgetExhaustedEvent is the event of a campaign's charge refused for its
// budget: one per campaign and local day for the daily budget, local week
// for the weekly one, local month for the monthly one, one per campaign for
// the total budget (raising the total budget and using it up again makes
// another), at the time of the first refusal seen.
func BudgetExhaustedEvent(mp string, c campaigns.CampaignJSON, totalMicros int64, budget, day string, at time.Time) (Event, error) {
	d := budgetExhausted{Budget: budget, Campaign: c}
	var id string
	switch budget {
	case BudgetDaily:
		d.Day = day
		id = EventID("budget.exhausted", mp, c.ID, BudgetDaily, day)
	case BudgetWeekly:
		d.Day = day
		id = EventID("budget.exhausted", mp, c.ID, BudgetWeekly, spend.WeekOf(day))
	case BudgetMonthly:
		d.Day = day
		id = EventID("budget.exhausted", mp, c.ID, BudgetMonthly, spend.MonthOf(day))
	default:
		id = EventID("budget.exhausted", mp, c.ID, BudgetTotal, fmt.Sprint(totalMicros))
	}
	data, err := marshal(d)
	if err != nil {
		return Event{}, err
	}
	return Event{ID: id, Type: TypeBudgetExhausted, MarketplaceID: mp, Timestamp: at.UTC(), Subject: c.ID, Data: data}, nil
}

// BalanceLow is the data of a vendor.balance_low event: the vendor's funds
// when a charge took (or would have taken) its available funds below the
// marketplace's threshold.
type BalanceLow struct {
	VendorID     string       `json:"vendorId"`
	Balance      money.Micros `json:"balance"`
	CreditLimit  money.Micros `json:"creditLimit"`
	Available    money.Micros `json:"available"`
	Threshold    money.Micros `json:"threshold"`
	CurrencyCode string       `json:"currencyCode"`
	// Credited is the sum of the vendor's top-ups: one event per vendor and
	// credited sum (a top-up and running low again makes another).
	Credited money.Micros `json:"-"`
}

// BalanceLowEvent is the event of a vendor whose available funds fell
// below the threshold: one per vendor and sum of its top-ups.
func BalanceLowEvent(mp string, d BalanceLow, at time.Time) (Event, error) {
	data, err := marshal(d)
	if err != nil {
		return Event{}, err
	}
	return Event{ID: EventID(TypeVendorBalanceLow, mp, d.VendorID, fmt.Sprint(int64(d.Credited))), Type: TypeVendorBalanceLow,
		MarketplaceID: mp, Timestamp: at.UTC(), Subject: d.VendorID, Data: data}, nil
}

// ScoredReadyEvent is the event of a day's scored-attribution file written
// (one for the provisional file, one for the final one); file is what the
// file-reports endpoint lists for the day.
func ScoredReadyEvent(mp, day string, final bool, file any, at time.Time) (Event, error) {
	data, err := marshal(file)
	if err != nil {
		return Event{}, err
	}
	return Event{ID: EventID("scored_attribution.ready", mp, day, fmt.Sprint(final)), Type: TypeScoredAttributionReady,
		MarketplaceID: mp, Timestamp: at.UTC(), Subject: day, Data: data}, nil
}
