package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
)

// Interactions is the sink of the events fold that folds impressions and
// clicks into ClickHouse table interactions_raw (view `interactions`),
// charges the sponsored ones (table charges_raw, view `charges`) and moves
// campaign spend in Redis, each charge exactly once (docs/design/charges.md).
//
// One batch (the fold has decoded it and dropped duplicated event ids):
// build the rows of the countable impressions and clicks; apply the batch's
// charges in Redis (spend.ApplyCharges, one atomic step per charge: marker
// + spend); insert the interactions and the charges (both at once). The fold
// commits the offsets only after all of it succeeded; a failure anywhere
// retries the whole batch, which then replays: charges answer "replayed"
// (no spend moves twice) and the rows come out identical (FINAL folds them).
type Interactions struct {
	ch    clickhouse.Conn
	rdb   redis.UniversalClient
	views Views
	log   *slog.Logger
	// onRefused is told about the charges a batch refused for a budget.
	onRefused func(ctx context.Context, rs []BudgetRefusal) error
	// onDrawn is told about the vendors whose funds a batch drew on.
	onDrawn func(ctx context.Context, vs []VendorDrawn) error
	// replicas is how many replicas of a Redis master must hold a batch's
	// charges before it goes on (spend.ApplyCharges).
	replicas int
	// upgradedAt is when this Redis moved to the campaign keys
	// (spend.Upgrade); legacyBeforeMs: marketplace id → its
	// legacyCutoffs (see legacyBefore).
	upgradedAt     time.Time
	legacyBeforeMs sync.Map
	// invalid are the thresholds of the invalid-click rules.
	invalid spend.InvalidRules
	// then folds each batch after its charges are decided (InteractionsOptions.Then).
	then DecidedSink
}

// DecidedSink is a sink that folds each batch once the interactions sink has
// decided its charges: invalid holds the interaction ids (Event.Interaction)
// of the batch's clicks refused by an invalid-click rule (spend.JudgeClick),
// now or on their record's first pass (nil when there are none).
type DecidedSink interface {
	Name() string
	FoldDecided(ctx context.Context, events []Event, invalid map[uuid.UUID]bool) error
}

// Views reads the entity attributes of the process's in-memory views. The
// app wires in the accounts, campaigns and catalog services; only
// Marketplace is required.
type Views struct {
	// Marketplace returns a marketplace's currency and time zone. An event
	// of a marketplace it does not know fails its batch (retried until the
	// view knows it): the local day and the currency cannot be guessed.
	Marketplace func(id string) (MarketplaceDims, bool)
	// Campaign returns a campaign's attributes, its status as of at.
	Campaign func(mp, id string, at time.Time) (CampaignDims, bool)
	// Vendor returns a vendor's attributes.
	Vendor func(mp, id string) (VendorDims, bool)
	// ProductVendor returns the vendor of a product when it has exactly
	// one, else "".
	ProductVendor func(mp, id string) string
}

// MarketplaceDims are the attributes of a marketplace the projector uses.
type MarketplaceDims struct {
	Currency string
	Location *time.Location
	// Balances: the marketplace's vendors pay from their balances
	// (docs/reference/balances.md): each charge also draws on its vendor's funds.
	Balances bool
}

// CampaignDims are the attributes of a campaign stored with an interaction,
// and its budgets (micro-units, 0: none), which cap its charges.
type CampaignDims struct {
	Name, Type, VendorID, Status string
	Active                       bool
	DailyBudgetMicros            int64
	WeeklyBudgetMicros           int64
	MonthlyBudgetMicros          int64
	TotalBudgetMicros            int64
}

// VendorDims are the attributes of a vendor stored with an interaction.
type VendorDims struct {
	Name, GlobalID string
}

// InteractionsOptions configure the Interactions sink.
type InteractionsOptions struct {
	ClickHouse clickhouse.Conn
	Redis      redis.UniversalClient
	Views      Views
	Log        *slog.Logger
	// OnRefused, when set, is told about the charges of each batch that
	// were refused for a budget (once per campaign, budget and day in the
	// batch), after they were applied and before the batch commits; an
	// error fails the batch (it is folded again).
	OnRefused func(ctx context.Context, rs []BudgetRefusal) error
	// OnDrawn, when set, is told about the vendors whose funds each batch
	// drew on or refused a charge for (once per vendor in the batch), after
	// the charges were applied and before the batch commits; an error fails
	// the batch (it is folded again).
	OnDrawn func(ctx context.Context, vs []VendorDrawn) error
	// Replicas is how many replicas of a Redis master must hold a batch's
	// charges before the batch is stored and committed (WAIT: at most as
	// many as the master has; spend.ApplyCharges).
	Replicas int
	// UpgradedAt is when Redis moved from the marketplace keys of earlier
	// builds to campaign keys (spend.Upgrade; zero: it never held them):
	// charges of auctions before it also honour the earlier markers.
	UpgradedAt time.Time
	// InvalidClicks are the thresholds of the invalid-click rules
	// (spend.JudgeClick; the zero value turns them off). When a rule reads
	// impressions, the impressions of CPC winners are recorded in Redis.
	InvalidClicks spend.InvalidRules
	// Then, when set, is a sink that folds every batch once its charges are
	// decided, told which clicks were refused as invalid (the attribution
	// sink, which leaves them out), at the same time as this sink's
	// inserts; its error fails the batch like theirs.
	Then DecidedSink
}

// BudgetRefusal is a campaign whose charge was refused for a budget.
type BudgetRefusal struct {
	MarketplaceID, CampaignID string
	Total                     bool   // the total budget (else the daily one, or Budget's)
	Budget                    string // the budget: "daily", "weekly", "monthly" or "total"
	Day                       string // the local day of the charge
	DailyMicros, TotalMicros  int64  // the budgets the charge was checked against
}

// VendorDrawn is a vendor whose funds a batch drew on (or found short).
type VendorDrawn struct {
	MarketplaceID, VendorID string
}

// NewInteractions returns the interactions sink.
func NewInteractions(o InteractionsOptions) (*Interactions, error) {
	if o.Views.Marketplace == nil || o.ClickHouse == nil || o.Redis == nil {
		return nil, errors.New("interactions sink: ClickHouse, Redis and Views.Marketplace are required")
	}
	if err := o.InvalidClicks.Validate(); err != nil {
		return nil, fmt.Errorf("interactions sink: invalid-click rules: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Interactions{ch: o.ClickHouse, rdb: o.Redis, views: o.Views, log: o.Log, onRefused: o.OnRefused,
		onDrawn: o.OnDrawn, replicas: o.Replicas, upgradedAt: o.UpgradedAt, invalid: o.InvalidClicks, then: o.Then}, nil
}

// Name names the sink in logs and metrics.
func (*Interactions) Name() string { return "interactions" }

// Fold folds the batch's countable impressions and clicks, then (with
// Then) lets the next sink fold the batch.
func (p *Interactions) Fold(ctx context.Context, events []Event) error {
	evs := p.pick(events)
	if len(evs) == 0 {
		if p.then != nil {
			return p.foldThen(ctx, events, nil)
		}
		return nil
	}
	rows, charges, err := p.build(ctx, evs)
	if err != nil {
		return err
	}
	ch, err := p.charge(ctx, rows, charges)
	if err != nil {
		return err
	}
	invalid := p.invalidClicks(evs, charges, ch)
	if p.onRefused != nil && len(ch.refusals) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := p.onRefused(rctx, ch.refusals)
		cancel()
		if err != nil {
			return fmt.Errorf("interactions: budget refusals not reported: %w", err)
		}
	}
	if p.onDrawn != nil && len(ch.vendors) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := p.onDrawn(rctx, ch.vendors)
		cancel()
		if err != nil {
			return fmt.Errorf("interactions: vendors' funds not reported: %w", err)
		}
	}
	// Both inserts at once, on two connections; either failing fails the
	// batch, and its retry replays both.
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var chErr, thenErr error
	var wg sync.WaitGroup
	wg.Go(func() { chErr = ch.insert(ictx, p.ch) })
	if p.then != nil {
		wg.Go(func() { thenErr = p.foldThen(ctx, events, invalid) })
	}
	err = rows.insert(ictx, p.ch)
	wg.Wait()
	if err = errors.Join(err, chErr, thenErr); err != nil {
		return err
	}
	rows.count()
	now := time.Now().UnixMilli()
	for k, first := range ch.first {
		if first {
			telemetry.ChargeLatency.Observe(float64(now-ch.receivedMs[k]) / 1000)
		}
	}
	return nil
}

// foldThen folds the batch into the Then sink, timed as its own sink.
func (p *Interactions) foldThen(ctx context.Context, events []Event, invalid map[uuid.UUID]bool) error {
	start := time.Now()
	if err := p.then.FoldDecided(ctx, events, invalid); err != nil {
		return fmt.Errorf("%s: %w", p.then.Name(), err)
	}
	telemetry.SinkBatchSeconds.WithLabelValues(p.then.Name()).Observe(time.Since(start).Seconds())
	return nil
}

// pick returns the countable impressions and clicks of a marketplace
// known by id, in batch order.
func (p *Interactions) pick(events []Event) []*Event {
	out := make([]*Event, 0, len(events))
	old, bad := 0, 0
	for i := range events {
		d := &events[i]
		switch {
		case folded(d):
			out = append(out, d)
		case d.E.Kind != records.KindImpression && d.E.Kind != records.KindClick:
		case d.MP == uuid.Nil:
			bad++
		default:
			old++ // not countable
		}
	}
	if old > 0 {
		telemetry.InteractionsSkipped.WithLabelValues("too_old").Add(float64(old))
	}
	if bad > 0 {
		// The API only accepts marketplace ids it issued (UUIDs).
		telemetry.InteractionsSkipped.WithLabelValues("bad_marketplace").Add(float64(bad))
	}
	return out
}

// folded tells whether the interactions sink folds d into interactions_raw:
// a countable impression or click of a marketplace id the API issued.
func folded(d *Event) bool {
	k := d.E.Kind
	return (k == records.KindImpression || k == records.KindClick) && d.MP != uuid.Nil && d.E.Countable()
}

// pendingCharge is a charge to apply, the row it belongs to and the
// position of its event in the batch (evs).
type pendingCharge struct {
	spend.Charge
	row, seq int
}

// build builds the rows of the events, with the charges they may make. The
// rows are in the order of interactions_raw's sorting key (SortedOrder:
// ClickHouse then writes the block without sorting it); the charges are in
// the batch's order, in which spend.ApplyCharges decides a campaign's.
func (p *Interactions) build(ctx context.Context, evs []*Event) (*interactionRows, []pendingCharge, error) {
	rows := newInteractionRows(len(evs))
	rows.invalid = p.invalid
	order := eventOrder(evs)
	// Sized for the events with a token, the most there can be (a charge
	// is large: growing the slice copied them again and again).
	sponsored := 0
	for _, d := range evs {
		if d.HasToken {
			sponsored++
		}
	}
	charges := make([]pendingCharge, 0, sponsored)
	for i, k := range order {
		if i > 0 && i%YieldEvery == 0 {
			if err := priority.Yield(ctx); err != nil {
				return nil, nil, err
			}
		}
		c, err := rows.add(evs[k], &p.views, p.log)
		if err != nil {
			return nil, nil, err
		}
		if c != nil {
			charges = append(charges, pendingCharge{Charge: *c, row: rows.n - 1, seq: int(k)})
		}
	}
	rows.metrics.flush()
	charges = inBatchOrder(charges, len(evs))
	if rows.uncapped > 0 {
		p.log.Warn("interactions projector: campaigns not in this process's view; their charges are not capped by their budgets",
			"interactions", rows.uncapped, "campaign", rows.uncappedCampaign)
	}
	return rows, charges, nil
}

// inBatchOrder returns the charges by seq (each below n, none twice): each
// charge copied once to its place, not moved about by a sort.
func inBatchOrder(charges []pendingCharge, n int) []pendingCharge {
	if len(charges) < 2 {
		return charges
	}
	at := make([]int32, n) // seq → its charge's index + 1 (0: none)
	for k := range charges {
		at[charges[k].seq] = int32(k + 1)
	}
	out := make([]pendingCharge, 0, len(charges))
	for _, k := range at {
		if k > 0 {
			out = append(out, charges[k-1])
		}
	}
	return out
}

// charge applies the charges in Redis and returns the charge rows: one per
// charge applied now or before by the same record, and one per charge
// refused for a budget (now or before, for the same record); a charge
// another record applied or was refused first unmarks its row.
func (p *Interactions) charge(ctx context.Context, rows *interactionRows, pending []pendingCharge) (*chargeRows, error) {
	charges, vendors, err := p.prepare(ctx, rows, pending)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cctx, span := telemetry.StartSpan(cctx, tracerName, "charges apply")
	start := time.Now()
	outcomes, err := spend.ApplyFundedCharges(cctx, p.rdb, charges, vendors, p.replicas)
	cancel()
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return nil, err
	}
	if telemetry.Tracing() {
		span.SetAttributes(attribute.Int("endcap.charges", len(charges)))
	}
	span.End()
	telemetry.ChargeApplyDuration.Observe(time.Since(start).Seconds())
	return p.decide(rows, pending, vendors, outcomes), nil
}

// prepare returns the charges to apply, with the earlier layouts' markers
// they honour, and the vendor whose funds each draws on (fundedVendors).
func (p *Interactions) prepare(ctx context.Context, rows *interactionRows, pending []pendingCharge) ([]spend.Charge, []string, error) {
	charges := make([]spend.Charge, len(pending))
	var (
		mp     string
		before legacyCutoffs
	)
	for i := range pending {
		charges[i] = pending[i].Charge
		if i == 0 || charges[i].MarketplaceID != mp {
			var err error
			if before, err = p.legacyBefore(ctx, charges[i].MarketplaceID); err != nil {
				return nil, nil, err
			}
			mp = charges[i].MarketplaceID
		}
		at := rows.auctionAtMs[pending[i].row]
		charges[i].MarketplaceMarkers = at < before.hashes
		if at < before.strings {
			charges[i].LegacyMarker = legacyMarkerKey(charges[i].MarketplaceID, charges[i].Key)
		}
	}
	return charges, p.fundedVendors(rows, pending), nil
}

// decide turns the charges' outcomes into the charge rows and unmarks the
// rows of the charges not made, counting them in the metrics once a batch.
func (p *Interactions) decide(rows *interactionRows, pending []pendingCharge, vendors []string, outcomes []spend.ChargeOutcome) *chargeRows {
	ch := &chargeRows{outcomes: outcomes}
	var m batchMetrics
	for k, o := range outcomes {
		if o == spend.ChargeRecorded {
			continue // an impression recorded for the click rules: its row is not charged ("kind")
		}
		i := pending[k].row
		m.charge(rows.chargeType.At(i), o)
		if o == spend.ChargeDuplicate {
			rows.uncharge(i, spend.NoChargeDuplicate)
			m.notCharged(spend.NoChargeDuplicate)
			continue
		}
		if o.Refused() {
			c := &pending[k].Charge
			ch.noteRefusal(BudgetRefusal{MarketplaceID: c.MarketplaceID, CampaignID: c.CampaignID, Total: o == spend.ChargeRefusedTotal, Budget: refusedBudget(o),
				Day: c.Day, DailyMicros: c.Limits.DailyMicros, TotalMicros: c.Limits.TotalMicros})
		}
		if vendors[k] != "" && (o == spend.ChargeApplied || o == spend.ChargeRefusedFunds) {
			ch.noteVendor(VendorDrawn{MarketplaceID: pending[k].MarketplaceID, VendorID: vendors[k]})
		}
		if why := spend.Refusal(o); why != spend.Chargeable {
			// Stored as not charged (for a budget, or as an invalid click),
			// with a charges_raw row of amount 0 that says why (the
			// vendor-charges list shows it on request).
			rows.uncharge(i, why)
			m.notCharged(why)
			ch.add(rows, i, false, false)
			continue
		}
		// A funded charge reaches the campaign step only once drawn: applied
		// (now or before) it is drawn on its vendor's funds.
		ch.add(rows, i, o == spend.ChargeApplied, vendors[k] != "")
		if o == spend.ChargeApplied {
			m.charged(rows.chargeType.At(i), rows.amount[i])
		}
	}
	m.flush()
	return ch
}

// invalidClicks returns the interaction ids of the clicks ch refused as
// invalid (nil when there are none).
func (p *Interactions) invalidClicks(evs []*Event, pending []pendingCharge, ch *chargeRows) map[uuid.UUID]bool {
	var invalid map[uuid.UUID]bool
	for k, c := range pending {
		if ch.outcomes[k].Invalid() {
			if invalid == nil {
				invalid = map[uuid.UUID]bool{}
			}
			invalid[evs[c.seq].Interaction] = true
		}
	}
	return invalid
}

// batchMetrics counts a batch's charges by charge type and outcome, and its
// interactions not charged by reason, for the metrics: added once a batch,
// not once a charge (a labelled counter's look-up costs more than the rest
// of a charge's bookkeeping).
type batchMetrics struct {
	charges [3][32]int // charge type (CPC, CPM, other) × outcome
	other   string     // the other charge type seen
	micros  [3]float64 // charged, by charge type
	not     map[spend.NoCharge]int
}

func chargeTypeIndex(ct string) int {
	switch ct {
	case "CPC":
		return 0
	case "CPM":
		return 1
	}
	return 2
}

func (m *batchMetrics) charge(chargeType string, o spend.ChargeOutcome) {
	t := chargeTypeIndex(chargeType)
	if t == 2 && m.other != chargeType {
		m.other = strings.Clone(chargeType) // a label value, kept by the metric
	}
	if int(o) < len(m.charges[t]) {
		m.charges[t][o]++
		return
	}
	telemetry.Charges.WithLabelValues(strings.Clone(chargeType), chargeOutcomeLabel(o)).Inc()
}

func (m *batchMetrics) charged(chargeType string, micros int64) {
	t := chargeTypeIndex(chargeType)
	if t == 2 && m.other != chargeType {
		m.other = strings.Clone(chargeType) // a label value, kept by the metric
	}
	m.micros[t] += float64(micros)
}

func (m *batchMetrics) notCharged(why spend.NoCharge) {
	if m.not == nil {
		m.not = map[spend.NoCharge]int{}
	}
	m.not[why]++
}

// flush adds the counts to the metrics.
func (m *batchMetrics) flush() {
	for t, byOutcome := range m.charges {
		ct := [...]string{"CPC", "CPM", m.other}[t]
		for o, n := range byOutcome {
			if n > 0 {
				telemetry.Charges.WithLabelValues(ct, chargeOutcomeLabel(spend.ChargeOutcome(o))).Add(float64(n))
			}
		}
		if m.micros[t] > 0 {
			telemetry.ChargedMicros.WithLabelValues(ct).Add(m.micros[t])
		}
	}
	for why, n := range m.not {
		telemetry.NotCharged.WithLabelValues(string(why)).Add(float64(n))
	}
	*m = batchMetrics{}
}

// chargeOutcomeLabel is the outcome label of endcap_charges_total.
func chargeOutcomeLabel(o spend.ChargeOutcome) string {
	switch {
	case o.Refused():
		return "refused"
	case o.Invalid():
		return "invalid"
	}
	return o.String()
}

// fundedVendors is, for each pending charge, the vendor whose funds it
// draws on: the winner's vendor (signed in its token, so a replay names the
// same one) when its marketplace uses balances, else "".
func (p *Interactions) fundedVendors(rows *interactionRows, pending []pendingCharge) []string {
	vendors := make([]string, len(pending))
	var (
		mp       string
		balances bool
	)
	for i := range pending {
		if i == 0 || pending[i].MarketplaceID != mp {
			mp = pending[i].MarketplaceID
			m, ok := p.views.Marketplace(mp)
			balances = ok && m.Balances
		}
		if balances {
			vendors[i] = rows.vendor[pending[i].row]
		}
	}
	return vendors
}

// interactionColumns is the column list of interactions_raw, in the order of
// interactionRows.columns.
const interactionColumns = `marketplace_id, kind, event_id, interaction_id, occurred_at, occurred_at_ms, received_at, day_local,
	currency_code, opaque_user_id, sponsored, auction_id, auction_at, auction_at_ms, rank, ad_format, charge_type, price_micros,
	campaign_id, campaign_name, campaign_type, campaign_status, campaign_active, external_campaign_id, bid_id,
	vendor_id, vendor_name, vendor_global_id, external_vendor_id, entity_type, entity_id, entity_id_hashed,
	additional_attribution_type, additional_attribution_id, device_type, channel, page_type, page_id, page_value,
	placement_path, placement_position, placement_page, placement_page_size, placement_product_id,
	placement_category_ids, placement_search_query, object_type, object_asset_id, click_type,
	charged, amount_micros, amount_sub_micros, kafka_partition, kafka_offset,
	in_events_raw, received_at_ms, resolved_bid_id, event_entity_type, event_entity_id, event_external_vendor_id,
	event_click_type, object_click_type, refused_reason`

// interactionRows holds interactions_raw rows column by column. The String
// columns are built value by value in the form the insert sends them
// (clickhouse.Strings); refused, which a charge's outcome rewrites, and
// vendor, which outlives the batch in the vendors told about their funds,
// are slices of strings.
type interactionRows struct {
	n                                               int
	mp, interaction, auction                        []uuid.UUID
	kind, eventID, currency, user                   clickhouse.Strings
	occurred, received, day, auctionAt              []time.Time
	occurredMs, receivedMs, auctionAtMs, price      []int64
	sponsored, rank, campActive, entHashed, charged []uint8
	adFormat, chargeType                            clickhouse.Strings
	campaign, campName, campType, campStatus        clickhouse.Strings
	extCampaign, bidID                              clickhouse.Strings
	vendor                                          []string
	vendorName, vendorGlobal, extVendor             clickhouse.Strings
	entType, entID, aaType, aaID                    clickhouse.Strings
	device, channel, pgType, pgID                   clickhouse.Strings
	pgValue, plCategories                           [][]string
	plPath, plProduct, plSearch                     clickhouse.Strings
	plPos, plPage, plPageSize                       []uint32
	obType, obAsset, clickType                      clickhouse.Strings
	amount                                          []int64
	sub                                             []uint16
	partition                                       []int32
	offset                                          []int64
	// What the event said that the columns above replace, for the view
	// `events` (migration 0007); in_events_raw is always 0.
	inEventsRaw                                    []uint8
	rbid, evEntType, evEntID, evExtVendor, evClick clickhouse.Strings
	obClick                                        clickhouse.Strings
	// Why a sponsored row is not charged (spend.NoCharge; "" when charged or
	// organic).
	refused []string
	// rowCampaign is the campaign id of the row just added ("" organic).
	rowCampaign string
	// Not columns: sponsored rows whose campaign the view does not know
	// (their charges have no budgets to cap them), and the last such campaign.
	uncapped         int
	uncappedCampaign string
	// invalid are the invalid-click rules the clicks' charges are judged by.
	invalid spend.InvalidRules
	// metrics counts the rows not charged, added to the metrics once the
	// rows are built.
	metrics batchMetrics
	// The last marketplace the view was asked for (a batch has few, in
	// runs: its rows are in the order of the sorting key, which begins
	// with the marketplace).
	mpID   string
	mpDims MarketplaceDims
	// The last local day written as text (dayText).
	dayOf  time.Time
	dayStr string
	// campaignIDs are the batch's campaign ids as text, each written once.
	campaignIDs map[[16]byte]string
	// charge is the charge add returned last; clicks the chunk the
	// clicks' checks come out of.
	charge spend.Charge
	clicks []spend.ClickCheck
}

// dayText is the local day of the row just added as spend.DayOf writes
// it (YYYY-MM-DD), written once a run of rows of one day.
func (r *interactionRows) dayText() string {
	d := r.day[r.n-1]
	if r.dayStr == "" || !d.Equal(r.dayOf) {
		r.dayOf, r.dayStr = d, d.Format(time.DateOnly)
	}
	return r.dayStr
}

// marketplace is v.Marketplace, asked once a run of rows of one
// marketplace.
func (r *interactionRows) marketplace(v *Views, id string) (MarketplaceDims, bool) {
	if r.mpID != "" && id == r.mpID {
		return r.mpDims, true
	}
	m, ok := v.Marketplace(id)
	if ok {
		r.mpID, r.mpDims = id, m
	}
	return m, ok
}

func newInteractionRows(capacity int) *interactionRows {
	s := func() []string { return make([]string, 0, capacity) }
	t := func() []time.Time { return make([]time.Time, 0, capacity) }
	i64 := func() []int64 { return make([]int64, 0, capacity) }
	u8 := func() []uint8 { return make([]uint8, 0, capacity) }
	u32 := func() []uint32 { return make([]uint32, 0, capacity) }
	id := func() []uuid.UUID { return make([]uuid.UUID, 0, capacity) }
	r := &interactionRows{
		mp: id(), interaction: id(), auction: id(),
		occurred: t(), received: t(), day: t(), auctionAt: t(),
		occurredMs: i64(), receivedMs: i64(), auctionAtMs: i64(), price: i64(),
		sponsored: u8(), rank: u8(), campActive: u8(), entHashed: u8(), charged: u8(),
		vendor: s(), pgValue: make([][]string, 0, capacity), plCategories: make([][]string, 0, capacity),
		plPos: u32(), plPage: u32(), plPageSize: u32(),
		amount: i64(), sub: make([]uint16, 0, capacity),
		partition: make([]int32, 0, capacity), offset: i64(),
		inEventsRaw: u8(), refused: s(),
	}
	for _, c := range []*clickhouse.Strings{&r.kind, &r.eventID, &r.currency, &r.user, &r.adFormat, &r.chargeType,
		&r.campaign, &r.campName, &r.campType, &r.campStatus, &r.extCampaign, &r.bidID, &r.vendorName, &r.vendorGlobal,
		&r.extVendor, &r.entType, &r.entID, &r.aaType, &r.aaID, &r.device, &r.channel, &r.pgType, &r.pgID,
		&r.plPath, &r.plProduct, &r.plSearch, &r.obType, &r.obAsset, &r.clickType,
		&r.rbid, &r.evEntType, &r.evEntID, &r.evExtVendor, &r.evClick, &r.obClick} {
		c.Grow(capacity, 0)
	}
	return r
}

func (r *interactionRows) columns() []any {
	return []any{r.mp, &r.kind, &r.eventID, r.interaction, r.occurred, r.occurredMs, r.received, r.day,
		&r.currency, &r.user, r.sponsored, r.auction, r.auctionAt, r.auctionAtMs, r.rank, &r.adFormat, &r.chargeType, r.price,
		&r.campaign, &r.campName, &r.campType, &r.campStatus, r.campActive, &r.extCampaign, &r.bidID,
		r.vendor, &r.vendorName, &r.vendorGlobal, &r.extVendor, &r.entType, &r.entID, r.entHashed,
		&r.aaType, &r.aaID, &r.device, &r.channel, &r.pgType, &r.pgID, r.pgValue,
		&r.plPath, r.plPos, r.plPage, r.plPageSize, &r.plProduct,
		r.plCategories, &r.plSearch, &r.obType, &r.obAsset, &r.clickType,
		r.charged, r.amount, r.sub, r.partition, r.offset,
		r.inEventsRaw, r.receivedMs, &r.rbid, &r.evEntType, &r.evEntID, &r.evExtVendor, &r.evClick, &r.obClick,
		r.refused}
}

func (r *interactionRows) insert(ctx context.Context, conn clickhouse.Conn) error {
	return InsertColumns(ctx, conn, "interactions_raw", interactionColumns, r.n, r.columns())
}

// count adds the inserted rows to the interactions counter.
func (r *interactionRows) count() {
	var n [2][2]int // kind (impression, click) × sponsored
	for i := 0; i < r.n; i++ {
		k := 0
		if r.kind.At(i) == "click" {
			k = 1
		}
		n[k][r.sponsored[i]]++
	}
	for k, kind := range []string{"impression", "click"} {
		for s, sp := range []string{"false", "true"} {
			if n[k][s] > 0 {
				telemetry.Interactions.WithLabelValues(kind, sp).Add(float64(n[k][s]))
			}
		}
	}
}

// uncharge marks row i as not charged, for the reason why (its winner's
// interaction was charged by another event, or a budget refused it).
func (r *interactionRows) uncharge(i int, why spend.NoCharge) {
	r.charged[i], r.amount[i], r.sub[i], r.refused[i] = 0, 0, 0, string(why)
}

// epoch is the DateTime of "no auction" (organic rows).
var epoch = time.Unix(0, 0).UTC()

// localDay is the local date of t in loc as a UTC midnight (the form of a
// Date column).
func localDay(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// add appends e's row. When e is chargeable it marks the row charged and
// returns the charge to apply (the caller unmarks it if Redis answers
// duplicate), which the next add overwrites: copy it. It fails only when
// the marketplace is unknown.
func (r *interactionRows) add(d *Event, v *Views, log *slog.Logger) (*spend.Charge, error) {
	e, mpID, partition, offset := &d.E, d.MP, d.Partition, d.Offset
	m, ok := r.marketplace(v, e.MarketplaceID)
	if !ok {
		return nil, fmt.Errorf("interactions projector: marketplace %s is not in this process's view yet", e.MarketplaceID)
	}
	loc := m.Location
	if loc == nil {
		loc = time.UTC
	}
	occurred := time.UnixMilli(e.OccurredAtMs).UTC()
	r.n++
	r.mp = append(r.mp, mpID)
	r.kind.Append(e.Kind.String())
	r.eventID.Append(e.ID)
	r.interaction = append(r.interaction, d.Interaction)
	r.occurred, r.occurredMs = append(r.occurred, occurred), append(r.occurredMs, e.OccurredAtMs)
	r.received, r.receivedMs = append(r.received, time.UnixMilli(e.ReceivedAtMs).UTC()), append(r.receivedMs, e.ReceivedAtMs)
	r.day = append(r.day, localDay(occurred, loc))
	r.currency.Append(m.Currency)
	r.user.Append(e.OpaqueUserID)
	r.addContext(e)

	var claims *bidtoken.Claims
	why := spend.Chargeable // why a sponsored event is not charged
	switch {
	case d.HasToken:
		claims = &d.Token
	case d.TokenErr != nil:
		why = spend.NoChargeBadToken
		r.metrics.notCharged(spend.NoChargeBadToken)
		log.Error("interactions projector: resolvedBidId unreadable; stored as unattributed and not charged",
			"marketplace", e.MarketplaceID, "event", e.ID, "partition", partition, "offset", offset, "err", d.TokenErr)
	}
	var limits spend.Limits
	if claims == nil {
		r.addOrganic(e, v)
	} else {
		camp, known := r.addSponsored(e, claims, v, occurred)
		limits = spend.Limits{DailyMicros: camp.DailyBudgetMicros, WeeklyMicros: camp.WeeklyBudgetMicros,
			MonthlyMicros: camp.MonthlyBudgetMicros, TotalMicros: camp.TotalBudgetMicros}
		if !known && v.Campaign != nil {
			r.uncapped++
			r.uncappedCampaign = r.rowCampaign
		}
	}
	r.partition, r.offset = append(r.partition, partition), append(r.offset, offset)
	r.addEvent(e, claims != nil)
	return r.addCharge(d, claims, limits, why), nil
}

// addEvent appends what the event said that the row's other columns do not
// keep as it was said: its resolvedBidId; its entity when the row is
// sponsored (entity_* are then the winner's; an organic row's are the
// event's); its externalVendorId and clickType (external_vendor_id and
// click_type fall back on the vendor and on object.clickType);
// object.clickType.
func (r *interactionRows) addEvent(e *records.Event, sponsored bool) {
	var et, ei, oc string
	if sponsored && e.Entity != nil {
		et, ei = e.Entity.Type, e.Entity.ID
	}
	if e.Object != nil {
		oc = e.Object.ClickType
	}
	r.inEventsRaw = append(r.inEventsRaw, 0)
	r.rbid.Append(e.ResolvedBidID)
	r.evEntType.Append(et)
	r.evEntID.Append(ei)
	r.evExtVendor.Append(e.ExternalVendorID)
	r.evClick.Append(e.ClickType)
	r.obClick.Append(oc)
}

// addCharge appends the charge columns of the row just added and returns
// its charge, capped by limits, or nil when it is not chargeable (organic: c
// is nil; bad says why an unreadable token's row is not).
func (r *interactionRows) addCharge(d *Event, c *bidtoken.Claims, limits spend.Limits, bad spend.NoCharge) *spend.Charge {
	e := &d.E
	why := bad
	if c != nil {
		why = spend.ChargeRule(e.Kind, e.OccurredAtMs, e.ReceivedAtMs, c)
	}
	if c == nil || why != spend.Chargeable {
		if why != spend.Chargeable && why != bad {
			r.metrics.notCharged(why)
		}
		r.charged, r.amount, r.sub = append(r.charged, 0), append(r.amount, 0), append(r.sub, 0)
		r.refused = append(r.refused, string(why))
		if c != nil && c.ChargeType == bidtoken.CPC && e.Kind == records.KindImpression && r.invalid.NeedImpressions() {
			// The click rules read the impressions of CPC winners.
			r.charge = spend.Charge{
				MarketplaceID: e.MarketplaceID, Key: spend.ImpressionKey(c), Epoch: spend.MarkerEpoch(c),
				Owner: owner(d.Partition, d.Offset), CampaignID: r.rowCampaign, Day: r.dayText(),
				KeepUntil: spend.MarkerUntil(c, time.Now()), Impression: true, ImpressionAtMs: e.OccurredAtMs,
			}
			return &r.charge
		}
		return nil
	}
	micros, sub := spend.ChargeAmount(c)
	r.charged, r.amount, r.sub = append(r.charged, 1), append(r.amount, micros), append(r.sub, sub)
	r.refused = append(r.refused, "")
	now := time.Now()
	var click *spend.ClickCheck
	if e.Kind == records.KindClick && r.invalid.On() {
		shopper := e.OpaqueUserID
		if len(shopper) > spend.MaxShopper {
			shopper = shopper[:spend.MaxShopper]
		}
		click = r.clickCheck()
		*click = spend.ClickCheck{Rules: r.invalid, Shopper: shopper, AtMs: e.OccurredAtMs, SeenKey: spend.ImpressionKey(c),
			StateUntil: spend.InvalidStateUntil(e.OccurredAtMs, now)}
	}
	r.charge = spend.Charge{
		MarketplaceID: e.MarketplaceID,
		Key:           spend.ChargeKey(c, e.Kind),
		Epoch:         spend.MarkerEpoch(c),
		Owner:         owner(d.Partition, d.Offset),
		CampaignID:    r.rowCampaign,
		Day:           r.dayText(),
		Micros:        micros,
		Limits:        limits,
		KeepUntil:     spend.MarkerUntil(c, now),
		Click:         click,
	}
	return &r.charge
}

// clickCheck returns a ClickCheck for a charge: out of a chunk of them
// (one allocation a chunk, not one a click).
func (r *interactionRows) clickCheck() *spend.ClickCheck {
	if len(r.clicks) == cap(r.clicks) {
		r.clicks = make([]spend.ClickCheck, 0, 256)
	}
	r.clicks = r.clicks[:len(r.clicks)+1]
	return &r.clicks[len(r.clicks)-1]
}

// addContext appends what the event itself says about where it happened.
func (r *interactionRows) addContext(e *records.Event) {
	var at, ai string
	if e.AdditionalAttribution != nil {
		at, ai = e.AdditionalAttribution.Type, e.AdditionalAttribution.ID
	}
	r.aaType.Append(at)
	r.aaID.Append(ai)
	r.device.Append(e.DeviceType)
	r.channel.Append(e.Channel)
	pg := e.Page
	if pg == nil {
		pg = &records.Page{}
	}
	r.pgValue = append(r.pgValue, nonNil(pg.Value))
	r.pgType.Append(pg.Type)
	r.pgID.Append(pg.ID)
	pl := e.Placement
	if pl == nil {
		pl = &records.Placement{}
	}
	r.plPath.Append(pl.Path)
	r.plProduct.Append(pl.ProductID)
	r.plSearch.Append(pl.SearchQuery)
	r.plPos, r.plPage, r.plPageSize = append(r.plPos, uint32(pl.Position)), append(r.plPage, uint32(pl.Page)), append(r.plPageSize, uint32(pl.PageSize))
	r.plCategories = append(r.plCategories, nonNil(pl.CategoryIDs))
	ob := e.Object
	if ob == nil {
		ob = &records.Object{}
	}
	clickType := e.ClickType
	if clickType == "" {
		clickType = ob.ClickType
	}
	r.obType.Append(ob.Type)
	r.obAsset.Append(ob.AssetID)
	r.clickType.Append(clickType)
}

// addSponsored appends the auction, campaign, vendor and winner of a
// sponsored interaction, from its token and the views, and returns the
// campaign's attributes (known: the view has it).
func (r *interactionRows) addSponsored(e *records.Event, c *bidtoken.Claims, v *Views, at time.Time) (CampaignDims, bool) {
	r.sponsored = append(r.sponsored, 1)
	r.auction, r.rank = append(r.auction, uuid.UUID(c.AuctionID)), append(r.rank, c.Rank)
	r.auctionAt, r.auctionAtMs = append(r.auctionAt, time.UnixMilli(c.AuctionTimeMs).UTC()), append(r.auctionAtMs, c.AuctionTimeMs)
	r.price = append(r.price, c.PriceMicros)
	r.adFormat.Append(c.AdFormat.String())
	r.chargeType.Append(c.ChargeType.String())
	campaignID, ok := r.campaignIDs[c.CampaignID]
	if !ok {
		if r.campaignIDs == nil {
			r.campaignIDs = map[[16]byte]string{}
		}
		campaignID = uuid.UUID(c.CampaignID).String()
		r.campaignIDs[c.CampaignID] = campaignID
	}
	r.rowCampaign = campaignID
	var bidID string
	if c.BidID != ([16]byte{}) {
		bidID = uuid.UUID(c.BidID).String()
	}
	r.campaign.Append(campaignID)
	r.bidID.Append(bidID)
	// Sponsored events cannot carry externalCampaignId (the API refuses it).
	r.extCampaign.Append("")
	camp, known := lookupCampaign(v, e.MarketplaceID, campaignID, at)
	r.campName.Append(camp.Name)
	r.campType.Append(camp.Type)
	r.campStatus.Append(camp.Status)
	r.campActive = append(r.campActive, b2u(camp.Active))
	vendorID := c.VendorID
	if c.VendorIDHashed {
		vendorID = camp.VendorID // the campaign's vendor is the winner's vendor
	}
	r.addVendor(e, v, vendorID)
	var hashed uint8
	if c.WinnerIDHashed {
		hashed = 1 // entity_id comes from auction_winners (auction_id, rank)
	}
	r.entHashed = append(r.entHashed, hashed)
	r.entType.Append(c.WinnerType.String())
	r.entID.Append(c.WinnerID)
	return camp, known
}

// addOrganic appends the entity of an organic interaction (or of a
// sponsored one whose token cannot be read).
func (r *interactionRows) addOrganic(e *records.Event, v *Views) {
	r.rowCampaign = ""
	r.sponsored = append(r.sponsored, 0)
	r.auction, r.rank = append(r.auction, uuid.Nil), append(r.rank, 0)
	r.auctionAt, r.auctionAtMs = append(r.auctionAt, epoch), append(r.auctionAtMs, 0)
	r.price = append(r.price, 0)
	r.adFormat.Append("")
	r.chargeType.Append("")
	r.campaign.Append("")
	r.bidID.Append("")
	r.extCampaign.Append(e.ExternalCampaignID)
	r.campActive = append(r.campActive, 0)
	r.campName.Append("")
	r.campType.Append("")
	r.campStatus.Append("")
	var et, ei, vendorID string
	if e.Entity != nil {
		et, ei = e.Entity.Type, e.Entity.ID
		switch et {
		case "vendor":
			vendorID = ei
		case "product":
			if v.ProductVendor != nil {
				vendorID = v.ProductVendor(e.MarketplaceID, ei)
			}
		}
	}
	r.addVendor(e, v, vendorID)
	r.entHashed = append(r.entHashed, 0)
	r.entType.Append(et)
	r.entID.Append(ei)
}

// addVendor appends the vendor columns. external_vendor_id is the event's
// externalVendorId when it has one, else the vendor id (a vendor's id in
// Endcap is the marketplace's own, external, id).
func (r *interactionRows) addVendor(e *records.Event, v *Views, vendorID string) {
	var vd VendorDims
	if vendorID != "" && v.Vendor != nil {
		vd, _ = v.Vendor(e.MarketplaceID, vendorID)
	}
	ext := e.ExternalVendorID
	if ext == "" {
		ext = vendorID
	}
	r.vendor = append(r.vendor, vendorID)
	r.vendorName.Append(vd.Name)
	r.vendorGlobal.Append(vd.GlobalID)
	r.extVendor.Append(ext)
}

func lookupCampaign(v *Views, mp, id string, at time.Time) (CampaignDims, bool) {
	if v.Campaign == nil {
		return CampaignDims{}, false
	}
	return v.Campaign(mp, id, at)
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// refusedBudget names the budget a charge outcome refused for.
func refusedBudget(o spend.ChargeOutcome) string {
	switch o {
	case spend.ChargeRefusedTotal:
		return "total"
	case spend.ChargeRefusedWeekly:
		return "weekly"
	case spend.ChargeRefusedMonthly:
		return "monthly"
	}
	return "daily"
}
