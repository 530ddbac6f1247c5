package app

import (
	"context"
	"time"

	"github.com/endcap/endcap/internal/retry"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/kafka"
)

// newEventFold builds the consumer group of the events topic and its three
// sinks, after merging in the offsets of the groups that folded the topic
// before (projections.LegacyEventsGroups; docs/design/projector.md).
func (a *App) newEventFold(ctx context.Context) (*projections.EventFold, error) {
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	at, err := kafka.MergeGroups(mctx, a.Kafka, projections.EventsGroup, projections.LegacyEventsGroups, a.Topics.Events)
	cancel()
	switch {
	case err != nil:
		a.log.Warn("events fold: merging the previous consumer groups", "err", err)
	case at != nil:
		a.log.Info("events fold: merged the previous consumer groups; it starts each partition at the lowest offset they had committed",
			"groups", projections.LegacyEventsGroups, "offsets", at)
	}
	attr, err := attribution.NewProjector(attribution.Options{
		ClickHouse: a.ClickHouse, Log: a.log,
		Marketplace: func(id string) (attribution.Marketplace, bool) {
			m, ok := a.Accounts.Marketplace(id)
			return attribution.Marketplace{Currency: m.Currency, Location: m.Location(), Rules: attribution.RulesOf(m.Attribution)}, ok
		},
		ProductVendor: a.productVendor,
		CampaignVendor: func(mp, id string) string {
			c, _, _ := a.Campaigns.Campaign(mp, id)
			return c.VendorID
		},
	})
	if err != nil {
		return nil, err
	}
	inter, err := projections.NewInteractions(projections.InteractionsOptions{
		ClickHouse: a.ClickHouse, Redis: a.Redis, Log: a.log,
		OnRefused: a.onBudgetRefused(a.webhookEmitter()), // budget.exhausted (docs/reference/webhooks.md)
		OnDrawn:   a.onVendorsDrawn(a.webhookEmitter()),  // vendor.balance_low (docs/reference/balances.md)
		Replicas:  a.cfg.WaitReplicas(), UpgradedAt: a.upgradedAt,
		InvalidClicks: spend.InvalidRules{RequireImpression: a.cfg.InvalidClickRequireImpression,
			MinClickDelay: a.cfg.InvalidClickMinDelay, RepeatWindow: a.cfg.InvalidClickRepeatWindow,
			MaxClicksPerHour: a.cfg.InvalidClickMaxPerHour},
		// Attribution folds each batch once its charges are decided, and
		// leaves the invalid clicks out (docs/design/attribution.md).
		Then: attr,
		Views: projections.Views{
			Marketplace: func(id string) (projections.MarketplaceDims, bool) {
				m, ok := a.Accounts.Marketplace(id)
				return projections.MarketplaceDims{Currency: m.Currency, Location: m.Location(), Balances: m.Balances}, ok
			},
			Campaign: func(mp, id string, at time.Time) (projections.CampaignDims, bool) {
				c, _, ok := a.Campaigns.Campaign(mp, id)
				if !ok {
					return projections.CampaignDims{}, false
				}
				return projections.CampaignDims{Name: c.Name, Type: c.Type, VendorID: c.VendorID,
					Status: campaigns.Status(c, at), Active: c.Active,
					DailyBudgetMicros: c.DailyBudgetMicros, WeeklyBudgetMicros: c.WeeklyBudgetMicros, MonthlyBudgetMicros: c.MonthlyBudgetMicros,
					TotalBudgetMicros: c.TotalBudgetMicros}, true
			},
			Vendor: func(mp, id string) (projections.VendorDims, bool) {
				v, ok := a.Catalog.Vendor(mp, id)
				return projections.VendorDims{Name: v.Name, GlobalID: v.GlobalID}, ok
			},
			ProductVendor: a.productVendor,
		},
	})
	if err != nil {
		return nil, err
	}
	claims, err := a.eventClaims(ctx)
	if err != nil {
		return nil, err
	}
	f, err := projections.NewEventFold(projections.EventFoldOptions{
		Brokers: a.cfg.KafkaBrokers, Topic: a.Topics.Events,
		Claims:  claims,
		Sinks:   []projections.EventSink{projections.NewEventsRaw(a.ClickHouse, inter), inter, a.frequencyCapsSink()},
		MaxRows: a.cfg.EventsBatchRows, FlushInterval: a.cfg.ProjectorFlushInterval, Group: a.groupOptions(), Log: a.log,
		Yield: a.foreground,
	})
	if err != nil {
		_ = claims.Close()
		return nil, err
	}
	return f, nil
}

// The claims earlier versions kept in Redis (docs/design/projector.md, Upgrading
// to the claim store): hashed under claimPrefix, and before that whole
// under legacyClaimPrefix. claimFormat records when the hashed keys began,
// claimStore when the claim store did (LegacyClaimsUntil).
const (
	claimPrefix       = "ec:claim:ev2:"
	legacyClaimPrefix = "ec:claim:ev:"
	claimFormat       = "ec:claim:format"
	claimStore        = "ec:claim:store"
)

// eventClaims opens the fold's claims (ENDCAP_PROJECTOR_STATE_DIR, or a
// temporary directory removed at Close), with their changelog topic, reading
// the claims of earlier versions in Redis for one dedupe window after the
// upgrade. It waits for Redis and Kafka (retrying every few seconds) rather
// than fail the process.
func (a *App) eventClaims(ctx context.Context) (*projections.Claims, error) {
	for backoff := retry.New(time.Second, 15*time.Second); ; {
		c, err := a.openClaims(ctx)
		if err == nil {
			return c, nil
		}
		wait := backoff.Next()
		a.log.Warn("events fold: opening the claims", "err", err, "retry_in", wait)
		if err := retry.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func (a *App) openClaims(ctx context.Context) (*projections.Claims, error) {
	actx, cancel := context.WithTimeout(ctx, 60*time.Second) // each search takes at most 20 s
	defer cancel()
	// "ec:claim:ev" finds the claims of both layouts.
	hashedUntil, err := projections.LegacyClaimsUntil(actx, a.Redis, claimStore, "ec:claim:ev", a.cfg.DedupeWindow)
	if err != nil {
		return nil, err
	}
	wholeUntil, err := projections.LegacyClaimsUntil(actx, a.Redis, claimFormat, legacyClaimPrefix, a.cfg.DedupeWindow)
	if err != nil {
		return nil, err
	}
	// Whole keys are never read past the hashed ones: both were made
	// before the claim store.
	if wholeUntil.After(hashedUntil) {
		wholeUntil = hashedUntil
	}
	legacy := projections.NewRedisClaims(a.Redis, claimPrefix, hashedUntil, legacyClaimPrefix, wholeUntil)
	if legacy != nil && time.Now().Before(legacy.Until()) {
		a.log.Info("events fold: claims of the previous versions in Redis are read beside the claim store until they expire",
			"until", legacy.Until().UTC().Format(time.RFC3339))
	}
	return projections.OpenClaims(actx, projections.ClaimsOptions{Dir: a.cfg.ProjectorStateDir,
		CacheBytes: int64(a.cfg.ProjectorStateCacheMB) << 20, Brokers: a.cfg.KafkaBrokers, Conn: a.kafkaConn, EventsTopic: a.Topics.Events,
		Topic: a.Topics.Claims, Replication: a.cfg.KafkaReplicationFactor, Window: a.cfg.DedupeWindow, Legacy: legacy, Log: a.log})
}

// productVendor is the vendor of a product that has exactly one, else "".
// It shares the catalog's memory: keep it no longer than the batch.
func (a *App) productVendor(mp, id string) string {
	if p, ok := a.Catalog.Product(mp, id); ok && p.Vendors.Len() == 1 {
		return p.Vendors.At(0)
	}
	return ""
}

// frequencyCapsSink counts the impressions and clicks of capped campaigns
// per shopper (docs/reference/campaigns.md, Restrictions).
func (a *App) frequencyCapsSink() *projections.FrequencyCaps {
	return projections.NewFrequencyCaps(freqcap.New(a.Redis), a.Campaigns.AnyCapped,
		func(mp, id string) (bool, bool) {
			c, _, ok := a.Campaigns.Campaign(mp, id)
			if !ok {
				return false, false
			}
			return c.CapsInteractions()
		},
		func(id string) (*time.Location, bool) {
			m, ok := a.Accounts.Marketplace(id)
			return m.Location(), ok
		})
}
