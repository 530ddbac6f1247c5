package vendorcharges

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/storage/clickhouse"
)

// Charge is one vendor charge (the spec's fields as stored: the vendor by its
// catalog id, from which the response derives its UUID).
type Charge struct {
	InteractionID string
	TimestampMs   int64
	CampaignID    string
	ProductID     string // "" when the winner was not a product
	VendorID      string // the campaign's vendor: its catalog id (externalVendorId on the wire)
	Amount        Amount
	GlobalID      string // "" when the vendor has none
	// RefusedReason is "" for a charge; for an interaction whose charge was
	// refused for a budget (listed only on request, Amount 0), daily_budget,
	// weekly_budget, monthly_budget or total_budget.
	RefusedReason string

	// For the product of a winner whose id the token carried hashed.
	auctionID string
	rank      uint8
	auctionAt time.Time
}

// Position is where c is in the list's order.
func (c Charge) Position() Position {
	return Position{Ms: c.TimestampMs, InteractionID: c.InteractionID}
}

// Store reads charges from ClickHouse.
type Store struct {
	conn         clickhouse.Conn
	batch        int
	queryTimeout time.Duration
	firstSpan    time.Duration
}

// Option configures a Store.
type Option func(*Store)

// WithBatch sets how many charges one query returns at most (default 5,000):
// what the process holds in memory per request.
func WithBatch(n int) Option { return func(s *Store) { s.batch = max(n, 1) } }

// WithQueryTimeout sets the deadline of each ClickHouse query (default 15 s).
func WithQueryTimeout(d time.Duration) Option { return func(s *Store) { s.queryTimeout = d } }

// WithFirstSpan sets the time span of the first query of a scan (default 5 min).
func WithFirstSpan(d time.Duration) Option {
	return func(s *Store) { s.firstSpan = max(d, time.Second) }
}

// New returns a store on conn.
func New(conn clickhouse.Conn, opts ...Option) *Store {
	s := &Store{conn: conn, batch: 5000, queryTimeout: 15 * time.Second, firstSpan: 5 * time.Minute}
	for _, o := range opts {
		o(s)
	}
	return s
}

// ErrUnavailable wraps a failure to read ClickHouse (down, slow, or the
// query failed): the caller may retry.
var ErrUnavailable = errkind.New(errkind.Unavailable, "charges cannot be read right now; retry later")

// Page returns the charges of r's window after r.After, at most r.Limit of
// them, and whether more follow (with the refused ones when
// r.IncludeRefused).
func (s *Store) Page(ctx context.Context, marketplaceID string, r Request) ([]Charge, bool, error) {
	it := s.scan(marketplaceID, r.Window, r.After, r.IncludeRefused)
	var out []Charge
	for len(out) <= r.Limit && !it.Done() {
		b, err := it.Next(ctx, r.Limit+1-len(out))
		if err != nil {
			return nil, false, err
		}
		out = append(out, b...)
	}
	if len(out) > r.Limit {
		return out[:r.Limit], true, nil
	}
	return out, false, nil
}

// Scan returns an iterator over the charges of the marketplace in w, in
// order, after the position after (nil: from the start of w).
func (s *Store) Scan(marketplaceID string, w Window, after *Position) *Iter {
	return s.scan(marketplaceID, w, after, false)
}

// ScanWithRefused is Scan with the charges refused for a budget among them
// (RefusedReason set, Amount 0), in the same order.
func (s *Store) ScanWithRefused(marketplaceID string, w Window, after *Position) *Iter {
	return s.scan(marketplaceID, w, after, true)
}

func (s *Store) scan(marketplaceID string, w Window, after *Position, refused bool) *Iter {
	it := &Iter{s: s, mp: marketplaceID, w: w, span: int64(s.firstSpan / time.Second), refused: refused}
	// The position doubles as the window's start: "after (start, "")" keeps
	// every charge at the start millisecond.
	it.pos = Position{Ms: w.StartMs}
	if after != nil && (after.Ms > it.pos.Ms || after.Ms == it.pos.Ms && after.InteractionID > "") {
		it.pos = *after
	}
	// Seconds, the unit of the table's sort key (and of its DateTime
	// column): charges with timestamp_ms in [pos.Ms, EndMs) have timestamp
	// in [from, end).
	it.from = clampSec(floorDiv(it.pos.Ms, 1000))
	it.end = clampSec(floorDiv(w.EndMs-1, 1000) + 1)
	it.done = w.EndMs <= it.pos.Ms || it.from >= it.end
	return it
}

// Iter reads a window in batches. Each query covers a span of seconds
// [from, from+span) of the table's sort key, ordered and limited, so that
// neither ClickHouse nor this process holds more than a batch of rows and
// the time span it was read from. The span follows the density of charges:
// after a full batch, the time that batch covered; after a short one, wider
// in proportion (at most fourfold).
type Iter struct {
	s         *Store
	mp        string
	w         Window
	pos       Position // the last charge returned (or the window's start)
	from, end int64    // seconds still to read: [from, end)
	span      int64    // seconds per query
	done      bool
	refused   bool // list the refused charges too
}

// Done says whether the window has been read to its end.
func (it *Iter) Done() bool { return it.done }

// Next returns the next charges, at most n (and at most the store's batch).
// It returns an empty batch only when the window is done.
func (it *Iter) Next(ctx context.Context, n int) ([]Charge, error) {
	n = max(min(n, it.s.batch), 1)
	for !it.done {
		to := min(it.from+it.span, it.end)
		rows, err := it.s.query(ctx, it.mp, it.w.EndMs, it.from, to, it.pos, n, it.refused)
		if err != nil {
			return nil, err
		}
		if len(rows) == n {
			// More may follow in this span: go on from the last charge's
			// second, with the span this batch took.
			it.pos = rows[n-1].Position()
			last := clampSec(floorDiv(it.pos.Ms, 1000))
			it.span = max(last-it.from+1, 1)
			it.from = last
		} else {
			// This span is read to its end. Widen the next one towards a
			// full batch (at most fourfold).
			if len(rows) > 0 {
				it.pos = rows[len(rows)-1].Position()
			}
			grow := 4.0
			if len(rows) > 0 {
				grow = min(grow, 0.9*float64(n)/float64(len(rows)))
			}
			it.from = to
			it.done = to >= it.end
			it.span = max(min(int64(float64(it.span)*max(grow, 1)), it.end-it.from), 1)
		}
		if len(rows) > 0 {
			if err := it.s.resolveProducts(ctx, it.mp, rows); err != nil {
				return nil, err
			}
			return rows, nil
		}
	}
	return nil, nil
}

// chargesQuery reads one span. charges_raw FINAL is queried directly rather
// than the view `charges`, so that the WHERE clause reaches the sort key
// (marketplace_id, timestamp, interaction_id) on every server version.
// Replays inserted identical rows: FINAL folds them, and filtering before the
// fold cannot pick a different copy (refused_reason too is the same in
// every copy). The rows of charges refused for a budget (refused_reason
// set) are left out unless asked for (%s).
const chargesQuery = `SELECT toString(interaction_id), timestamp_ms, campaign_id, product_id, vendor_id,
       global_id, amount_micros, amount_sub_micros,
       toString(auction_id), rank, auction_at, refused_reason
FROM charges_raw FINAL
WHERE marketplace_id = ?
  AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?)
  AND timestamp_ms < ?
  AND (timestamp_ms > ? OR (timestamp_ms = ? AND toString(interaction_id) > ?))%s
ORDER BY timestamp_ms, toString(interaction_id)
LIMIT %d`

// chargedOnly is the condition that leaves the refused charges out.
const chargedOnly = `
  AND refused_reason = ''`

func (s *Store) query(ctx context.Context, mp string, endMs, from, to int64, after Position, n int, refused bool) ([]Charge, error) {
	ctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	cond := chargedOnly
	if refused {
		cond = ""
	}
	rows, err := s.conn.Query(ctx, fmt.Sprintf(chargesQuery, cond, n), mp, from, to, endMs, after.Ms, after.Ms, after.InteractionID)
	if err != nil {
		return nil, fmt.Errorf("%w: query charges: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	out := make([]Charge, 0, min(n, 1024))
	for rows.Next() {
		var c Charge
		if err := rows.Scan(&c.InteractionID, &c.TimestampMs, &c.CampaignID, &c.ProductID, &c.VendorID,
			&c.GlobalID, &c.Amount.Micros, &c.Amount.SubMicros,
			&c.auctionID, &c.rank, &c.auctionAt, &c.RefusedReason); err != nil {
			return nil, fmt.Errorf("%w: read charges: %w", ErrUnavailable, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: read charges: %w", ErrUnavailable, err)
	}
	return out, nil
}

// resolveChunk bounds the ids of one lookup query (ClickHouse limits the
// size of a query's text).
const resolveChunk = 500

// resolveProducts fills the product of charges whose token carried the
// winner's id as a hash (charges_raw.product_id is empty then): the auction
// record has it, in auction_winners (marketplace_id, auction_id, rank). A
// charge of a vendor, brand or URL winner has no product and stays empty,
// as does one whose auction record never arrived.
func (s *Store) resolveProducts(ctx context.Context, mp string, rows []Charge) error {
	type key struct {
		auction string
		rank    uint8
	}
	var (
		want      = map[key][]int{}
		auctions  []string
		seen      = map[string]bool{}
		first, lt time.Time
	)
	for i, c := range rows {
		if c.ProductID != "" || c.auctionID == "" || c.auctionID == uuid.Nil.String() {
			continue
		}
		k := key{c.auctionID, c.rank}
		want[k] = append(want[k], i)
		if !seen[c.auctionID] {
			seen[c.auctionID] = true
			auctions = append(auctions, c.auctionID)
		}
		if first.IsZero() || c.auctionAt.Before(first) {
			first = c.auctionAt
		}
		if c.auctionAt.After(lt) {
			lt = c.auctionAt
		}
	}
	for len(auctions) > 0 {
		chunk := auctions[:min(resolveChunk, len(auctions))]
		auctions = auctions[len(chunk):]
		found, err := s.winnerProducts(ctx, mp, chunk, first.Add(-24*time.Hour), lt.Add(24*time.Hour))
		if err != nil {
			return err
		}
		for _, w := range found {
			for _, i := range want[key{w.auction, w.rank}] {
				rows[i].ProductID = w.product
			}
		}
	}
	return nil
}

type winnerProduct struct {
	auction, product string
	rank             uint8
}

// winnerProducts reads the product winners of the given auctions. The
// auction time bounds (with a day's margin) let ClickHouse skip the other
// months' partitions.
func (s *Store) winnerProducts(ctx context.Context, mp string, auctions []string, from, to time.Time) ([]winnerProduct, error) {
	ctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	args := []any{mp, clampSec(from.Unix()), clampSec(to.Unix())}
	marks := make([]string, len(auctions))
	for i, a := range auctions {
		marks[i] = "toUUID(?)"
		args = append(args, a)
	}
	q := `SELECT toString(auction_id), toUInt8(rank), entity_id FROM auction_winners_raw FINAL
WHERE marketplace_id = ? AND at >= toDateTime(?) AND at <= toDateTime(?) AND type = 'product'
  AND auction_id IN (` + strings.Join(marks, ", ") + `)`
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%w: query auction winners: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	var out []winnerProduct
	for rows.Next() {
		var w winnerProduct
		if err := rows.Scan(&w.auction, &w.rank, &w.product); err != nil {
			return nil, fmt.Errorf("%w: read auction winners: %w", ErrUnavailable, err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: read auction winners: %w", ErrUnavailable, err)
	}
	return out, nil
}

// floorDiv is a/b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// clampSec keeps a second within ClickHouse's DateTime range (UInt32).
func clampSec(s int64) int64 { return min(max(s, 0), math.MaxUint32) }
