package app

import (
	"context"
	"fmt"
	"time"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/billing"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/offsite"
	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/management/segments"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/reportapi"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/reporting/vendorcharges"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/spill"
)

// domains builds the management services on the entities log and returns
// their /public/v1 route sets.
func (a *App) domains() ([]api.RouteSet, error) {
	var routes []api.RouteSet

	// Exports: records on the entities log, jobs on their topic, files in S3.
	a.Exports = exports.New(a.Entities, exports.Options{ClickHouse: a.ClickHouse, S3: a.S3, Redis: a.Redis,
		Kafka: a.Kafka, JobsTopic: a.Topics.Exports, DailyQuota: a.cfg.ExportDailyQuota,
		URLLifetime: a.cfg.ReportURLLifetime, Log: a.log, Location: a.marketplaceLocation,
		Ledger: balanceLedger{a}, Currency: a.marketplaceCurrency})

	// Catalog: products, vendors, categories. cat is an entityref.Catalog.
	// The products' names and details are on local disk (docs/design/state.md,
	// Memory).
	var err error
	if a.catalogTexts, err = spill.Open(spill.Options{Dir: a.cfg.CatalogDir, Log: a.log}); err != nil {
		return nil, fmt.Errorf("ENDCAP_CATALOG_DIR: %w", err)
	}
	cat := catalog.New(a.Entities, a.catalogTexts)
	routes = append(routes, api.CatalogRoutes(cat))

	// Webhooks on the entities log, their deliveries on a log of their own
	// (api and exporter), sent by the exporter (docs/reference/webhooks.md).
	a.Webhooks = webhooks.New(a.Entities)
	a.Webhooks.Guard = &webhooks.Guard{AllowLoopback: a.cfg.WebhookAllowLoopback}
	a.Webhooks.MaxPerMarketplace = a.cfg.WebhooksPerMarket
	if a.Deliveries != nil {
		a.WebhookDeliveries = webhooks.NewDeliveries(a.Deliveries, a.Webhooks)
		a.WebhookDeliveries.Tests = webhooks.TestLimits{PerHour: a.cfg.WebhookTestsPerHour, PerDay: a.cfg.WebhookTestsPerDay, Kept: a.cfg.WebhookTestsKept}
		if a.target.runs(TargetExporter) {
			a.dispatcher = webhooks.NewDispatcher(a.WebhookDeliveries, a.dispatcherOptions())
		}
	}

	// Billing contacts and vendor links, invitations, webhooks, advertiser
	// domains. bill is an entityref.Billing (Contact(mp, contact, vendor)).
	bill := billing.New(a.Entities, cat)
	// Vendor balances: the ledger on the entities log, the funds in Redis;
	// the projector applies every movement again (docs/reference/balances.md).
	a.Balances = billing.NewBalances(a.Entities, cat, a.Redis)
	if a.target.runs(TargetProjector) {
		a.Balances.EnableApplier()
	}
	a.Invitations = invitations.New(a.Entities, cat)
	if a.cfg.SMTPAddr != "" {
		a.Invitations.SetDailyMailCap(a.Redis, a.cfg.InvitationMailsPerDay)
	}
	routes = append(routes,
		api.BillingRoutes(bill),
		api.BalanceRoutes(a.Balances, a.Accounts),
		api.VendorChargesRoutes(vendorcharges.New(a.ClickHouse)), // charges from ClickHouse (docs/reference/vendor-charges.md)
		api.FileReportsRoutes(scoredfiles.New(a.ClickHouse, a.S3, a.Redis, a.log).WithURLLifetime(a.cfg.ReportURLLifetime)), // daily files in S3 (docs/reference/scored-attribution.md)
		api.InvitationRoutes(a.Invitations),
		api.ExportRoutes(a.Exports), // monitoring_metrics and balance_ledger exports (docs/reference/exports.md)
		api.WebhookRoutes(a.Webhooks, a.WebhookDeliveries),
		api.OffsiteRoutes(offsite.New(a.Entities, cat)),
	)
	// Segments: metadata on the entities log, members in Redis. segs is an
	// entityref.Segments (SegmentExists) and answers IsMember for auctions.
	segs := segments.New(a.Entities, a.Redis, segments.WithLogger(a.log), segments.WithCaps(segments.Caps{
		SegmentMembers: a.cfg.SegmentMaxMembers, SegmentBytes: a.cfg.SegmentMaxBytes,
		MarketplaceMembers: a.cfg.SegmentsMaxMembers, MarketplaceBytes: a.cfg.SegmentsMaxBytes}))
	routes = append(routes, api.SegmentRoutes(segs))

	// Erasure of shoppers (docs/operations/privacy.md): requests on the entities log,
	// applied by the exporter's job.
	a.Privacy = privacy.New(a.Entities)
	routes = append(routes, api.PrivacyRoutes(a.Privacy))

	// Campaigns and bids; automated-campaign bids. camps answers the
	// auction's reads (EachCampaign, LiveBids); the accounts' reserve
	// prices count in its bids' eligibility.
	camps := campaigns.New(a.Entities, cat, bill, segs, a.Accounts)
	spendReader := spend.NewReader(a.Redis, a.log) // spend in campaign views (docs/reference/campaigns.md, Delivery)
	if a.cfg.SpendReadTimeout > 0 {
		spendReader.Timeout = a.cfg.SpendReadTimeout
	}
	camps.UseSpend(spendReader)
	camps.UseFunds(func(ctx context.Context, mp, vendorID string) (bool, error) {
		if m, ok := a.Accounts.Marketplace(mp); !ok || !m.Balances {
			return false, nil
		}
		rctx, cancel := context.WithTimeout(ctx, spendReader.Timeout)
		defer cancel()
		f, err := spend.ReadFunds(rctx, a.Redis, mp, vendorID)
		return f.Out(), err
	})
	routes = append(routes, api.CampaignRoutes(camps), api.RestrictionRoutes(camps), api.CampaignControlRoutes(camps))
	// The Reporting API, from the daily rollup (docs/reference/reporting-api.md).
	routes = append(routes, api.ReportingRoutes(reportapi.New(a.ClickHouse), camps))

	// The auction's index follows the catalog and the campaigns. Only the
	// API serves auctions; the other targets do not keep it.
	if a.target.runs(TargetAPI) {
		a.AuctionIndex = index.New()
		a.AuctionIndex.Register(cat, camps)
	}

	a.Catalog, a.Billing, a.Segments, a.Campaigns = cat, bill, segs, camps
	return routes, nil
}

// marketplaceCurrency is a marketplace's currency ("" for an unknown one).
func (a *App) marketplaceCurrency(id string) string {
	m, _ := a.Accounts.Marketplace(id)
	return m.Currency
}

// balanceLedger gives the balance_ledger exports the vendors' balance
// movements (a.Balances, set once the catalog is).
type balanceLedger struct{ a *App }

func (l balanceLedger) EachMovement(mp string, fn func(exports.LedgerMovement) bool) {
	l.a.Balances.EachMovement(mp, func(m billing.Movement) bool {
		return fn(exports.LedgerMovement{ID: m.ID, VendorID: m.VendorID, Kind: m.Kind, Micros: m.Micros, Description: m.Description, At: m.CreatedAt})
	})
}

// marketplaceLocation is the time zone of a marketplace's local days (nil
// for an unknown marketplace).
func (a *App) marketplaceLocation(id string) *time.Location {
	if m, ok := a.Accounts.Marketplace(id); ok {
		return m.Location()
	}
	return nil
}
