package app

import (
	"context"
	"time"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/spend"
)

// Webhook deliveries (docs/reference/webhooks.md): the api serves the delivery log,
// the exporter routes events into deliveries and sends them.

// runsWebhooks says whether the process holds the deliveries log.
func (a *App) runsWebhooks() bool { return a.target.runs(TargetAPI) || a.target.runs(TargetExporter) }

// dispatcherOptions are the delivery settings of the configuration.
func (a *App) dispatcherOptions() webhooks.DispatcherOptions {
	return webhooks.DispatcherOptions{
		Guard:           &webhooks.Guard{AllowLoopback: a.cfg.WebhookAllowLoopback},
		Timeout:         a.cfg.WebhookTimeout,
		MaxInFlight:     a.cfg.WebhookMaxInFlight,
		Schedule:        webhooks.Schedule{Base: a.cfg.WebhookRetryBase},
		DisableAfter:    a.cfg.WebhookDisableAfter,
		RecordRetention: a.cfg.WebhookRetention,
		Log:             a.log,
	}
}

// runWebhooks routes events into deliveries and sends them (exporter),
// once the entity state and the deliveries have loaded.
func (a *App) runWebhooks(ctx context.Context, run func(string, func(context.Context) error)) {
	run("webhooks", func(ctx context.Context) error {
		if err := a.WaitReady(ctx); err != nil {
			return err
		}
		if err := a.Deliveries.WaitReady(ctx); err != nil {
			return err
		}
		r, err := webhooks.NewRouter(a.WebhookDeliveries, webhooks.RouterOptions{
			Brokers: a.cfg.KafkaBrokers, Conn: a.kafkaConn, Entities: a.Topics.Entities, Events: a.Topics.WebhookEvents,
			Decoders: a.webhookDecoders(), SessionTimeout: a.cfg.KafkaSessionTimeout, Log: a.log,
			Sync: a.Entities.CatchUp,
		})
		if err != nil {
			return err
		}
		run("webhooks router", r.Run)
		return a.dispatcher.Run(ctx)
	})
}

// webhookEmitter appends budget and scored-file events.
func (a *App) webhookEmitter() *webhooks.Emitter {
	return &webhooks.Emitter{Kafka: a.Kafka, Topic: a.Topics.WebhookEvents, Redis: a.Redis}
}

// location is a marketplace's time zone (UTC when unknown).
func (a *App) location(mp string) *time.Location {
	m, _ := a.Accounts.Marketplace(mp)
	return m.Location()
}

// onBudgetRefused turns the fold's refusals into budget.exhausted events.
func (a *App) onBudgetRefused(em *webhooks.Emitter) func(ctx context.Context, rs []projections.BudgetRefusal) error {
	return func(ctx context.Context, rs []projections.BudgetRefusal) error {
		now := time.Now()
		var evs []webhooks.Event
		for _, r := range rs {
			c, _, ok := a.Campaigns.Campaign(r.MarketplaceID, r.CampaignID)
			if !ok {
				continue
			}
			kind := webhooks.BudgetDaily
			switch {
			case r.Total:
				kind = webhooks.BudgetTotal
			case r.Budget == webhooks.BudgetWeekly, r.Budget == webhooks.BudgetMonthly:
				kind = r.Budget
			}
			view := a.Campaigns.View(ctx, r.MarketplaceID, a.location(r.MarketplaceID), c)[0]
			ev, err := webhooks.BudgetExhaustedEvent(r.MarketplaceID, view, r.TotalMicros, kind, r.Day, now)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
		}
		return em.Emit(ctx, evs)
	}
}

// onVendorsDrawn turns the vendors a charge batch drew on into
// vendor.balance_low events, for those whose available funds are now below
// their marketplace's threshold (0: run out).
func (a *App) onVendorsDrawn(em *webhooks.Emitter) func(ctx context.Context, vs []projections.VendorDrawn) error {
	return func(ctx context.Context, vs []projections.VendorDrawn) error {
		now := time.Now()
		var evs []webhooks.Event
		for _, v := range vs {
			m, ok := a.Accounts.Marketplace(v.MarketplaceID)
			if !ok || !m.Balances {
				continue
			}
			f, err := spend.ReadFunds(ctx, a.Redis, v.MarketplaceID, v.VendorID)
			if err != nil {
				return err
			}
			if f.Available() >= m.LowBalanceMicros && !f.Out() {
				continue
			}
			ev, err := webhooks.BalanceLowEvent(v.MarketplaceID, webhooks.BalanceLow{VendorID: v.VendorID,
				Balance: money.Micros(f.Balance()), CreditLimit: money.Micros(f.CreditLimit), Available: money.Micros(f.Available()),
				Threshold: money.Micros(m.LowBalanceMicros), CurrencyCode: m.Currency, Credited: money.Micros(f.Credited)}, now)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
		}
		return em.Emit(ctx, evs)
	}
}

// announceScoredFile turns a written scored-attribution file into a
// scored_attribution.ready event; files written more than a day ago (found
// at a first start) are not announced.
func (a *App) announceScoredFile(sf *scoredfiles.Service, em *webhooks.Emitter) func(context.Context, scoredfiles.Marketplace, time.Time, bool) error {
	return func(ctx context.Context, mp scoredfiles.Marketplace, day time.Time, final bool) error {
		files, err := sf.Files(ctx, mp.ID, day)
		if err != nil || len(files) == 0 {
			return err
		}
		f := files[0]
		if time.Since(f.ProducedAt.Time) > 24*time.Hour || f.Final != final {
			return nil
		}
		ev, err := webhooks.ScoredReadyEvent(mp.ID, f.Date, f.Final, f, f.ProducedAt.Time)
		if err != nil {
			return err
		}
		return em.Emit(ctx, []webhooks.Event{ev})
	}
}

// webhookDecoders are the entities whose changes are webhook events, each
// decoded by its own area (the router knows none of them).
func (a *App) webhookDecoders() map[string]webhooks.Decoder {
	d := map[string]webhooks.Decoder{privacy.TypeDeletion: webhooks.DeletionDecoder}
	if a.Campaigns != nil {
		d[campaigns.TypeCampaign] = webhooks.CampaignDecoder(a.Campaigns, a.location)
	}
	if a.Exports != nil {
		d[exports.TypeExport] = a.Exports.WebhookDecoder()
	}
	return d
}
