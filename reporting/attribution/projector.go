package attribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
)

// Marketplace is what the projector needs to know about a marketplace.
type Marketplace struct {
	Currency string
	Location *time.Location // defines day_local
	Rules    Rules
}

// Options configure a Projector.
type Options struct {
	ClickHouse clickhouse.Conn
	// Marketplace returns a marketplace's settings. A purchase of a
	// marketplace it does not know fails its batch (retried until it does).
	Marketplace func(id string) (Marketplace, bool)
	// ProductVendor, optional, returns the only vendor of a product (""
	// when it has none or several): the vendor of a purchased item that
	// does not name one, for halo matches.
	ProductVendor func(marketplaceID, productID string) string
	// CampaignVendor, optional, returns a campaign's vendor: the vendor of
	// a winner whose token carried the vendor id hashed.
	CampaignVendor func(marketplaceID, campaignID string) string
	// QueryUsersBytes bounds the user ids one read of a batch's purchases
	// and interactions carries; a batch with more users reads in several
	// queries. 0: maxUsersBytes (1 MiB). Tests set it small.
	QueryUsersBytes int
	Log             *slog.Logger
}

// Projector recomputes the attribution of a user's purchases each time an
// event of that user is folded (docs/design/attribution.md).
//
// It is a sink of the events fold (projections.EventFold), which decodes the
// events topic, drops duplicated event ids (the first record to claim an id
// wins, for every sink alike) and commits a batch only after every sink
// folded it. The topic's records are keyed by marketplace and user: one
// user's events are in one partition, in order. For a batch it
// (1) copies the countable purchases and sponsored interactions into its own
// tables, ordered by user (attribution_purchases_raw,
// attribution_touches_raw); (2) for each user with such an event in the
// batch, reads the user's purchases whose attribution those events can
// change and, when there are any, the user's sponsored interactions within
// the longest window before them (a sponsored interaction after a user's
// last purchase, the common case, reads no interactions), applies
// Attribute, and inserts one row per purchased item
// (attributed_purchases_raw); (3) returns, and the fold commits. Every earlier record of the user
// was copied before (its batch committed after its copy) or in step 1, so
// the computation triggered by a user's last record sees all of that user's
// events: the final attribution is a function of the set of events, whatever
// the order they arrived in. It reads nothing another sink writes.
type Projector struct {
	conn clickhouse.Conn
	o    Options
	log  *slog.Logger
}

// NewProjector returns the attribution sink.
func NewProjector(o Options) (*Projector, error) {
	if o.Marketplace == nil || o.ClickHouse == nil {
		return nil, errors.New("attribution projector: Marketplace and ClickHouse are required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.QueryUsersBytes <= 0 || o.QueryUsersBytes > maxUsersBytes {
		o.QueryUsersBytes = maxUsersBytes
	}
	return &Projector{conn: o.ClickHouse, o: o, log: o.Log}, nil
}

// Name names the sink in logs and metrics.
func (*Projector) Name() string { return "attribution" }

// span is a range of Unix milliseconds; zero value: empty.
type span struct {
	lo, hi int64
	set    bool
}

func (s *span) add(lo, hi int64) {
	if !s.set {
		s.lo, s.hi, s.set = lo, hi, true
		return
	}
	s.lo, s.hi = min(s.lo, lo), max(s.hi, hi)
}

// userWork is what a batch says about one user: when its new purchases and
// its new sponsored interactions occurred.
type userWork struct {
	purchases, touches span
}

// decoded is what a batch holds for attribution: the rows to copy, and by
// marketplace and user what they may change.
type decoded struct {
	touches   []touchRow
	purchases []purchaseRow
	work      map[string]map[string]*userWork
}

func (d *decoded) user(mp, user string) *userWork {
	users := d.work[mp]
	if users == nil {
		users = map[string]*userWork{}
		d.work[mp] = users
	}
	w := users[user]
	if w == nil {
		w = &userWork{}
		users[user] = w
	}
	return w
}

// decode keeps the batch's countable purchases and sponsored interactions
// (with a readable resolvedBidId, as the interactions projector requires)
// and notes by user what they may change.
func (p *Projector) decode(ctx context.Context, events []projections.Event) (*decoded, error) {
	// Sized first: a touchRow is large, and growing the slice copied them
	// again and again.
	nt, np := 0, 0
	for i := range events {
		switch e := &events[i].E; {
		case e.Kind == records.KindPurchase:
			np++
		case e.ResolvedBidID != "" && (e.Kind == records.KindImpression || e.Kind == records.KindClick):
			nt++
		}
	}
	d := &decoded{work: map[string]map[string]*userWork{}, touches: make([]touchRow, 0, nt), purchases: make([]purchaseRow, 0, np)}
	for i := range events {
		// The fold's batch gives way to the API's requests every few
		// thousand events (priority.Yield; docs/design/projector.md).
		if i > 0 && i%projections.YieldEvery == 0 {
			if err := priority.Yield(ctx); err != nil {
				return nil, err
			}
		}
		ev := &events[i]
		e, mp := &ev.E, ev.MP
		sponsored := (e.Kind == records.KindImpression || e.Kind == records.KindClick) && e.ResolvedBidID != ""
		if e.Kind != records.KindPurchase && !sponsored {
			continue
		}
		if mp == uuid.Nil {
			// The API only accepts marketplace ids it issued (UUIDs).
			telemetry.AttributionSkipped.WithLabelValues("bad_marketplace").Inc()
			continue
		}
		if !e.Countable() {
			telemetry.AttributionSkipped.WithLabelValues("too_old").Inc()
			continue
		}
		if e.OpaqueUserID == "" {
			// Its shopper's consent was denied: nothing is attributed to,
			// or from, an event without a user.
			telemetry.AttributionSkipped.WithLabelValues("no_user").Inc()
			continue
		}
		if e.Kind == records.KindPurchase {
			pu := Purchase{EventID: e.ID, UserID: e.OpaqueUserID, OccurredMs: e.OccurredAtMs, ReceivedMs: e.ReceivedAtMs,
				Items: make([]Item, len(e.Items))}
			for i, it := range e.Items {
				pu.Items[i] = Item{ProductID: it.ProductID, UnitPriceMicros: it.UnitPriceMicros, Quantity: it.Quantity, VendorID: it.VendorID}
			}
			d.purchases = append(d.purchases, purchaseRow{mp: mp, mpID: e.MarketplaceID, p: pu, countable: true, partition: ev.Partition, offset: ev.Offset})
			continue
		}
		if !ev.HasToken {
			// The interactions sink logs it (a bug: the API verified the
			// token); it is not a sponsored interaction.
			telemetry.AttributionSkipped.WithLabelValues("bad_token").Inc()
			continue
		}
		d.touches = append(d.touches, touchRow{mp: mp, mpID: e.MarketplaceID, user: e.OpaqueUserID, t: p.touch(e, ev.Interaction, &ev.Token), partition: ev.Partition, offset: ev.Offset})
	}
	d.index()
	return d, nil
}

// index notes, by marketplace and user, when the rows' events occurred.
func (d *decoded) index() {
	for i := range d.touches {
		r := &d.touches[i]
		d.user(r.mpID, r.user).touches.add(r.t.OccurredMs, r.t.OccurredMs)
	}
	for i := range d.purchases {
		r := &d.purchases[i]
		d.user(r.mpID, r.p.UserID).purchases.add(r.p.OccurredMs, r.p.OccurredMs)
	}
}

// touch is what attribution needs of a sponsored interaction: the event
// and its token (as the interactions projector reads them).
func (p *Projector) touch(e *records.Event, interaction uuid.UUID, c *bidtoken.Claims) Touch {
	t := Touch{Kind: e.Kind.String(), EventID: e.ID, InteractionID: interaction,
		OccurredMs: e.OccurredAtMs, ReceivedMs: e.ReceivedAtMs, AuctionID: uuid.UUID(c.AuctionID), AuctionMs: c.AuctionTimeMs,
		Rank: c.Rank, AdFormat: c.AdFormat.String(), ChargeType: c.ChargeType.String(), CampaignID: uuid.UUID(c.CampaignID).String(),
		VendorID: c.VendorID, EntityType: c.WinnerType.String(), EntityID: c.WinnerID, EntityHashed: c.WinnerIDHashed}
	if c.VendorIDHashed && p.o.CampaignVendor != nil {
		t.VendorID = p.o.CampaignVendor(e.MarketplaceID, t.CampaignID)
	}
	if aa := e.AdditionalAttribution; aa != nil {
		t.AAType, t.AAID = aa.Type, aa.ID
	}
	return t
}

// Fold attributes what the batch may change (see Projector).
func (p *Projector) Fold(ctx context.Context, events []projections.Event) error {
	return p.FoldDecided(ctx, events, nil)
}

// FoldDecided is Fold once the interactions sink has decided the batch's
// charges (projections.DecidedSink): the clicks whose interaction id is in
// invalid were refused as invalid clicks, and are copied marked so (column
// invalid), which leaves them out of every attribution.
func (p *Projector) FoldDecided(ctx context.Context, events []projections.Event, invalid map[uuid.UUID]bool) error {
	d, err := p.decode(ctx, events)
	if err != nil {
		return err
	}
	if invalid != nil {
		for i := range d.touches {
			d.touches[i].invalid = invalid[d.touches[i].t.InteractionID]
		}
	}
	if len(d.touches)+len(d.purchases) == 0 {
		return nil
	}
	start := time.Now()
	// The copies first: the computations below read them.
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.insertCopies(ictx, p.conn); err != nil {
		return err
	}
	var out []resultRow
	for mp, users := range d.work {
		m, ok := p.o.Marketplace(mp)
		if !ok {
			return fmt.Errorf("attribution projector: marketplace %s is not in this process's view yet", mp)
		}
		rows, err := p.recompute(ctx, mp, m, users)
		if err != nil {
			return err
		}
		out = append(out, rows...)
	}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	if err := insertResults(rctx, p.conn, out); err != nil {
		return err
	}
	// Counted once a batch by reason (a labelled counter's look-up an item
	// costs more than the count).
	byReason := map[string]int{}
	for i := range out {
		byReason[out[i].res.Reason]++
	}
	for reason, n := range byReason {
		telemetry.AttributedItems.WithLabelValues(reason).Add(float64(n))
	}
	telemetry.AttributionBatchSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// maxUsersBytes bounds the user ids of one query. A batch's users fit in
// one (50,000 events of 100,000 users: about 17,000 ids, 200 KB), and each
// query reads nearly every granule of the recent parts whatever the number
// of users (a batch's users are spread over the whole key range), so one
// query reads a third of what three chunks of 64 KiB read. The queries
// carry a max_query_size to match (queryBytes).
const maxUsersBytes = 1 << 20

// queryBytes is the max_query_size of the reads: the ids bound into the
// text at most double when escaped, plus the query itself.
const queryBytes = 2*maxUsersBytes + 64<<10

// recompute attributes the purchases of users that the batch may have
// changed: a user's purchases of the batch, and those within the longest
// window after each of its sponsored interactions of the batch.
func (p *Projector) recompute(ctx context.Context, mp string, m Marketplace, users map[string]*userWork) ([]resultRow, error) {
	mpID, err := uuid.Parse(mp)
	if err != nil {
		return nil, fmt.Errorf("attribution projector: marketplace id %q: %w", mp, err)
	}
	loc := m.Location
	if loc == nil {
		loc = time.UTC
	}
	maxW := m.Rules.MaxWindow().Milliseconds()
	spans := make(map[string]span, len(users))
	ids := make([]string, 0, len(users))
	for u, w := range users {
		s := w.purchases
		if w.touches.set {
			s.add(w.touches.lo, w.touches.hi+maxW)
		}
		spans[u] = s
		ids = append(ids, u)
	}
	slices.Sort(ids)
	var out []resultRow
	for len(ids) > 0 {
		n, size := 0, 0
		for n < len(ids) && (n == 0 || size+len(ids[n]) <= p.o.QueryUsersBytes) {
			size += len(ids[n]) + 4
			n++
		}
		chunk := ids[:n]
		ids = ids[n:]
		var all span
		for _, u := range chunk {
			all.add(spans[u].lo, spans[u].hi)
		}
		qctx, cancel := context.WithTimeout(clickhouse.LongQuery(ctx, queryBytes), 30*time.Second)
		purchases, err := loadPurchases(qctx, p.conn, mp, chunk, all.lo, all.hi)
		var touches map[string][]Touch
		if err == nil {
			// Touches only of the users with a purchase to recompute, and
			// only those that can qualify for one (within the longest window
			// before it): most users of a batch have sponsored interactions
			// after their last purchase, which change nothing yet.
			need, pspan := keepInSpans(purchases, spans)
			if len(need) > 0 {
				touches, err = loadTouches(qctx, p.conn, mp, need, pspan.lo-maxW, pspan.hi)
			}
		}
		cancel()
		if err != nil {
			return nil, err
		}
		for u, ps := range purchases {
			for i := range ps {
				out = append(out, p.attribute(mp, mpID, &ps[i], touches[u], m, loc)...)
			}
		}
	}
	return out, nil
}

// keepInSpans keeps of each user's purchases those within the user's span
// (the ones the batch may have changed), drops the users left with none, and
// returns the users kept (sorted) and the span of their purchases.
func keepInSpans(purchases map[string][]Purchase, spans map[string]span) ([]string, span) {
	var users []string
	var all span
	for u, ps := range purchases {
		s := spans[u]
		kept := ps[:0]
		for i := range ps {
			if o := ps[i].OccurredMs; o >= s.lo && o <= s.hi && s.set {
				kept = append(kept, ps[i])
				all.add(o, o)
			}
		}
		if len(kept) == 0 {
			delete(purchases, u)
			continue
		}
		purchases[u] = kept
		users = append(users, u)
	}
	slices.Sort(users)
	return users, all
}

// attribute returns the rows of one purchase's items.
func (p *Projector) attribute(mp string, mpID uuid.UUID, pu *Purchase, touches []Touch, m Marketplace, loc *time.Location) []resultRow {
	if p.o.ProductVendor != nil {
		for i := range pu.Items {
			if pu.Items[i].VendorID == "" {
				pu.Items[i].VendorID = p.o.ProductVendor(mp, pu.Items[i].ProductID)
			}
		}
	}
	results := Attribute(pu, touches, &m.Rules)
	day := localDay(time.UnixMilli(pu.OccurredMs), loc)
	rows := make([]resultRow, len(results))
	for i, r := range results {
		rows[i] = resultRow{mp: mpID, p: pu, res: r, day: day, currency: m.Currency, item: pu.Items[r.ItemIndex]}
	}
	return rows
}

// localDay is the local date of t in loc as a UTC midnight (a Date column).
func localDay(t time.Time, loc *time.Location) time.Time {
	y, mo, d := t.In(loc).Date()
	return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
}
