package attribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/telemetry"
)

// Group is the consumer group of the attribution projector.
const Group = "endcap-projector-attribution"

// Marketplace is what the projector needs to know about a marketplace.
type Marketplace struct {
	Currency string
	Location *time.Location // defines day_local
	Rules    Rules
}

// Options configure a Projector.
type Options struct {
	Brokers    []string
	Topic      string // the events topic
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
	// Claimer, optional, must be the events projector's (same prefix and
	// window): a record whose event id another record claimed first is a
	// duplicate and dropped, as the events and interactions projectors do.
	// Without it every copy is kept and the first received counts.
	Claimer       *projections.Claimer
	MaxRows       int
	FlushInterval time.Duration
	Log           *slog.Logger
}

// Projector recomputes the attribution of a user's purchases each time an
// event of that user is folded (docs/attribution.md).
//
// It consumes the events topic, whose records are keyed by marketplace and
// user: one user's events are in one partition, in order. For a batch it
// (1) copies the countable purchases and sponsored interactions into its own
// tables, ordered by user (attribution_purchases_raw,
// attribution_touches_raw); (2) for each user with such an event in the
// batch, reads the user's purchases whose attribution those events can
// change and, when there are any, the user's sponsored interactions within
// the longest window before them (a sponsored interaction after a user's
// last purchase, the common case, reads no interactions), applies
// Attribute, and inserts one row per purchased item
// (attributed_purchases_raw); (3) commits. Every earlier record of the user
// was copied before (its batch committed after its copy) or in step 1, so
// the computation triggered by a user's last record sees all of that user's
// events: the final attribution is a function of the set of events, whatever
// the order they arrived in. It reads nothing another projector writes; it
// shares their claims of event ids (Options.Claimer), so that it keeps the
// same record of a duplicated id as they do.
type Projector struct {
	client *kgo.Client
	conn   clickhouse.Conn
	o      Options
	log    *slog.Logger
}

// NewProjector joins the consumer group (it starts consuming on Run).
func NewProjector(o Options) (*Projector, error) {
	if o.Marketplace == nil || o.ClickHouse == nil {
		return nil, errors.New("attribution projector: Marketplace and ClickHouse are required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 50_000
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	cl, err := kafka.NewClient(o.Brokers, o.Log,
		kgo.ConsumerGroup(Group),
		kgo.ConsumeTopics(o.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxBytes(64<<20),
	)
	if err != nil {
		return nil, err
	}
	return &Projector{client: cl, conn: o.ClickHouse, o: o, log: o.Log}, nil
}

// Close leaves the group. Uncommitted records are consumed again by the
// next owner of their partitions (recomputing is idempotent).
func (p *Projector) Close() { p.client.Close() }

// Run consumes until ctx ends: a batch is flushed when it holds MaxRows
// records or its oldest waited FlushInterval; offsets are committed only
// after the flush; a failed flush is retried with backoff, never skipped.
func (p *Projector) Run(ctx context.Context) error {
	var (
		batch []*kgo.Record
		first time.Time
	)
	for {
		wait := p.o.FlushInterval
		if len(batch) > 0 {
			wait = time.Until(first.Add(p.o.FlushInterval))
		}
		if wait > 0 && len(batch) < p.o.MaxRows {
			pctx, cancel := context.WithTimeout(ctx, wait)
			fetches := p.client.PollRecords(pctx, p.o.MaxRows-len(batch))
			cancel()
			if ctx.Err() != nil {
				p.client.AllowRebalance()
				return ctx.Err()
			}
			fetches.EachError(func(t string, part int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					p.log.Warn("attribution projector: fetch error", "topic", t, "partition", part, "err", err)
				}
			})
			fetches.EachPartition(func(ft kgo.FetchTopicPartition) {
				if n := len(ft.Records); n > 0 {
					lag := ft.HighWatermark - (ft.Records[n-1].Offset + 1)
					telemetry.ConsumerLag.WithLabelValues(ft.Topic, Group, strconv.Itoa(int(ft.Partition))).Set(float64(lag))
					telemetry.ConsumedRecords.WithLabelValues(ft.Topic, Group).Add(float64(n))
				}
			})
			recs := fetches.Records()
			if len(recs) > 0 && len(batch) == 0 {
				first = time.Now()
			}
			batch = append(batch, recs...)
			if len(batch) == 0 {
				p.client.AllowRebalance()
				continue
			}
			if len(batch) < p.o.MaxRows && time.Since(first) < p.o.FlushInterval {
				continue
			}
		}
		err := p.flushWithRetry(ctx, batch)
		p.client.AllowRebalance()
		if err != nil {
			return err
		}
		batch = batch[:0]
	}
}

func (p *Projector) flushWithRetry(ctx context.Context, batch []*kgo.Record) error {
	backoff := 200 * time.Millisecond
	for {
		err := p.flush(ctx, batch)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = p.client.CommitRecords(cctx, batch...)
			cancel()
			if err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Error("attribution projector: flush failed, retrying", "records", len(batch), "backoff", backoff, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

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
// (with a readable resolvedBidId, as the interactions projector requires).
func (p *Projector) decode(batch []*kgo.Record) *decoded {
	d := &decoded{work: map[string]map[string]*userWork{}}
	for _, r := range batch {
		var e ingest.Event
		err := ingest.DecodeRecord(r.Value, &e)
		var mp uuid.UUID
		if err == nil {
			mp, err = uuid.Parse(e.MarketplaceID)
		}
		if err != nil || e.ID == "" {
			telemetry.AttributionSkipped.WithLabelValues("undecodable").Inc()
			p.log.Error("attribution projector: undecodable record skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		sponsored := (e.Kind == ingest.KindImpression || e.Kind == ingest.KindClick) && e.ResolvedBidID != ""
		if e.Kind != ingest.KindPurchase && !sponsored {
			continue
		}
		if !e.Countable() {
			telemetry.AttributionSkipped.WithLabelValues("too_old").Inc()
			continue
		}
		if e.Kind == ingest.KindPurchase {
			pu := Purchase{EventID: e.ID, UserID: e.OpaqueUserID, OccurredMs: e.OccurredAtMs, ReceivedMs: e.ReceivedAtMs,
				Items: make([]Item, len(e.Items))}
			for i, it := range e.Items {
				pu.Items[i] = Item{ProductID: it.ProductID, UnitPriceMicros: it.UnitPriceMicros, Quantity: it.Quantity, VendorID: it.VendorID}
			}
			d.purchases = append(d.purchases, purchaseRow{mp: mp, mpID: e.MarketplaceID, p: pu, countable: true, partition: r.Partition, offset: r.Offset})
			continue
		}
		c, err := bidtoken.DecodeUnverified(e.ResolvedBidID)
		if err == nil && c.MarketplaceID != mp {
			err = errors.New("the token names another marketplace")
		}
		if err != nil {
			// The interactions projector logs it (a bug: the API verified
			// the token); it is not a sponsored interaction.
			telemetry.AttributionSkipped.WithLabelValues("bad_token").Inc()
			continue
		}
		d.touches = append(d.touches, touchRow{mp: mp, mpID: e.MarketplaceID, user: e.OpaqueUserID, t: p.touch(&e, &c), partition: r.Partition, offset: r.Offset})
	}
	return d
}

// dedupe drops the rows whose event id another Kafka record claimed first
// (the claims of the events and interactions projectors, with their keys:
// all three keep the same record of a duplicated id), then notes by user
// what the rows kept may change.
func (p *Projector) dedupe(ctx context.Context, d *decoded) error {
	if p.o.Claimer == nil {
		d.index()
		return nil
	}
	keys := make([]projections.ClaimKey, 0, len(d.touches)+len(d.purchases))
	for i := range d.touches {
		r := &d.touches[i]
		keys = append(keys, projections.ClaimKey{Key: r.mpID + ":" + r.t.Kind + ":" + r.t.EventID, Partition: r.partition, Offset: r.offset})
	}
	for i := range d.purchases {
		r := &d.purchases[i]
		keys = append(keys, projections.ClaimKey{Key: r.mpID + ":purchase:" + r.p.EventID, Partition: r.partition, Offset: r.offset})
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	claims, err := p.o.Claimer.Claim(cctx, keys)
	cancel()
	if err != nil {
		return err
	}
	dups := 0
	keep := func(i int) bool {
		if claims[i] == projections.ClaimDuplicate {
			dups++
			return false
		}
		return true
	}
	touches := d.touches[:0]
	for i := range d.touches {
		if keep(i) {
			touches = append(touches, d.touches[i])
		}
	}
	purchases := d.purchases[:0]
	for i := range d.purchases {
		if keep(len(d.touches) + i) {
			purchases = append(purchases, d.purchases[i])
		}
	}
	d.touches, d.purchases = touches, purchases
	if dups > 0 {
		telemetry.Duplicates.WithLabelValues("attribution").Add(float64(dups))
	}
	d.index()
	return nil
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
func (p *Projector) touch(e *ingest.Event, c *bidtoken.Claims) Touch {
	t := Touch{Kind: e.Kind.String(), EventID: e.ID, InteractionID: projections.InteractionID(e.MarketplaceID, e.Kind, e.ID),
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

func (p *Projector) flush(ctx context.Context, batch []*kgo.Record) error {
	d := p.decode(batch)
	if len(d.touches)+len(d.purchases) == 0 {
		return nil
	}
	if err := p.dedupe(ctx, d); err != nil {
		return err
	}
	start := time.Now()
	// The copies first, both at once: the computations below read them.
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var terr error
	var wg sync.WaitGroup
	wg.Go(func() {
		terr = insertRows(ictx, p.conn, "attribution_touches_raw", touchColumns, len(d.touches), func(i int) []any { return d.touches[i].values() })
	})
	perr := insertRows(ictx, p.conn, "attribution_purchases_raw", purchaseColumns, len(d.purchases), func(i int) []any { return d.purchases[i].values() })
	wg.Wait()
	if err := errors.Join(terr, perr); err != nil {
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
	for i := range out {
		telemetry.AttributedItems.WithLabelValues(out[i].res.Reason).Inc()
	}
	telemetry.AttributionBatchSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// maxUsersBytes bounds the user ids of one query (ClickHouse's default
// max_query_size is 256 KiB).
const maxUsersBytes = 64 << 10

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
		for n < len(ids) && (n == 0 || size+len(ids[n]) <= maxUsersBytes) {
			size += len(ids[n]) + 4
			n++
		}
		chunk := ids[:n]
		ids = ids[n:]
		var all span
		for _, u := range chunk {
			all.add(spans[u].lo, spans[u].hi)
		}
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
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
