package vendorcharges

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// countingConn counts the queries a store sends.
type countingConn struct {
	clickhouse.Conn
	queries atomic.Int64
}

func (c *countingConn) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	c.queries.Add(1)
	return c.Conn.Query(ctx, q, args...)
}

// testDB opens a fresh, migrated database of the test stack.
func testDB(t *testing.T) clickhouse.Conn {
	t.Helper()
	env := testenv.Get(t)
	cfg := env.Config(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, cfg)
	return conn
}

// testRow is a charges_raw row and, for a hashed product, its auction winner.
type testRow struct {
	mp      string
	c       Charge
	ext     string // the row's external_vendor_id (the event's): never read
	winType string // "": no auction_winners row; else its type
	winID   string
}

const chargeInsert = `INSERT INTO charges_raw (marketplace_id, interaction_id, timestamp, timestamp_ms, day_local, kind,
	event_id, currency_code, campaign_id, product_id, vendor_id, external_vendor_id, global_id, charge_type, price_micros,
	amount_micros, amount_sub_micros, auction_id, rank, auction_at)`

func insertCharges(t *testing.T, conn clickhouse.Conn, rows []testRow) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := conn.PrepareBatch(ctx, chargeInsert)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		at := time.UnixMilli(r.c.TimestampMs).UTC()
		if err := b.Append(uuid.MustParse(r.mp), uuid.MustParse(r.c.InteractionID), at, r.c.TimestampMs, at, "click",
			"e-"+r.c.InteractionID, "USD", r.c.CampaignID, r.c.ProductID, r.c.VendorID, r.ext, r.c.GlobalID,
			"CPC", int64(30_000), r.c.Amount.Micros, r.c.Amount.SubMicros, uuid.MustParse(r.c.auctionID), r.c.rank, r.c.auctionAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	w, err := conn.PrepareBatch(ctx, "INSERT INTO auction_winners_raw (auction_id, marketplace_id, at, at_ms, kind, rank, type, entity_id)")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.winType == "" {
			continue
		}
		if err := w.Append(uuid.MustParse(r.c.auctionID), uuid.MustParse(r.mp), r.c.auctionAt, r.c.auctionAt.UnixMilli(), "listings",
			uint16(r.c.rank), r.winType, r.winID); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Send(); err != nil {
		t.Fatal(err)
	}
}

var base = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// dataset makes the rows of two marketplaces: a dense second (1,200
// charges), 60 charges on one millisecond, charges spread over three days,
// charges on the window's edges and one far out; hashed products with and
// without their auction record; vendor winners (no product).
func dataset(mpA, mpB string) (rows []testRow) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	add := func(mp string, ms int64) *testRow {
		n++
		auctionAt := time.UnixMilli(ms - rng.Int64N(3_600_000)).UTC().Truncate(time.Second)
		r := testRow{mp: mp, c: Charge{
			InteractionID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d", n)).String(), TimestampMs: ms,
			CampaignID: uuid.NewSHA1(uuid.NameSpaceDNS, fmt.Appendf(nil, "c%d", n%7)).String(),
			ProductID:  fmt.Sprintf("p-%d", n%13), VendorID: fmt.Sprintf("v-%d", n%5),
			Amount:    Amount{Micros: rng.Int64N(1_000_000_000), SubMicros: uint16(rng.IntN(1000))},
			auctionID: uuid.New().String(), rank: uint8(1 + n%3), auctionAt: auctionAt,
		}, ext: fmt.Sprintf("ext-%d", n%5)}
		if n%4 == 0 {
			r.c.GlobalID = fmt.Sprintf("G-%d", n%5)
		}
		rows = append(rows, r)
		return &rows[len(rows)-1]
	}
	for i := 0; i < 1200; i++ {
		add(mpA, base+3_600_000+rng.Int64N(1000))
	}
	for i := 0; i < 60; i++ {
		add(mpA, base+7_200_500)
	}
	for i := 0; i < 400; i++ {
		add(mpA, base+rng.Int64N(3*86_400_000))
		add(mpB, base+rng.Int64N(3*86_400_000))
	}
	add(mpA, base)                       // on the start
	add(mpA, base+3*86_400_000-1)        // the last millisecond
	add(mpA, base+3*86_400_000)          // on the end: out
	add(mpA, base-1)                     // before: out
	add(mpA, base+13*86_400_000)         // far out
	add(mpB, base+3_600_000+500)         // the other marketplace in the dense second
	for i := 0; i < len(rows); i += 17 { // hashed products: most with their winner
		switch r := &rows[i]; i % 3 {
		case 0:
			r.winType, r.winID, r.c.ProductID = "product", "long-product-"+r.c.ProductID, ""
		case 1:
			r.winType, r.winID, r.c.ProductID = "vendor", r.c.VendorID, "" // a vendor winner: no product
		default:
			r.c.ProductID = "" // the auction record never arrived
		}
	}
	return rows
}

// expected is what the store must return for mp and w: the charges in the
// window, each once, sorted by timestamp then interaction id, with hashed
// products resolved.
func expected(rows []testRow, mp string, w Window) []Charge {
	seen := map[string]bool{}
	var out []Charge
	for _, r := range rows {
		if r.mp != mp || r.c.TimestampMs < w.StartMs || r.c.TimestampMs >= w.EndMs || seen[r.c.InteractionID] {
			continue
		}
		seen[r.c.InteractionID] = true
		c := r.c
		if r.winType == "product" {
			c.ProductID = r.winID
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Charge) int {
		return cmp.Or(cmp.Compare(a.TimestampMs, b.TimestampMs), cmp.Compare(a.InteractionID, b.InteractionID))
	})
	return out
}

// public strips the fields only the store uses.
func public(cs []Charge) []Charge {
	out := make([]Charge, len(cs))
	for i, c := range cs {
		out[i] = Charge{InteractionID: c.InteractionID, TimestampMs: c.TimestampMs, CampaignID: c.CampaignID, ProductID: c.ProductID,
			VendorID: c.VendorID, Amount: c.Amount, GlobalID: c.GlobalID, RefusedReason: c.RefusedReason}
	}
	return out
}

func sameCharges(t *testing.T, what string, got, want []Charge) {
	t.Helper()
	got, want = public(got), public(want)
	if len(got) != len(want) {
		t.Fatalf("%s: %d charges, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: charge %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// TestStoreScan reads windows whole and page by page with several batch
// sizes and first spans: the same charges in the same order every time, no
// loss, no duplicate (rows inserted twice are folded), no other
// marketplace, exact amounts, hashed products resolved.
func TestStoreScan(t *testing.T) {
	conn := testDB(t)
	mpA, mpB := uuid.NewString(), uuid.NewString()
	rows := dataset(mpA, mpB)
	insertCharges(t, conn, rows)
	var again []testRow // replays: the same rows in another part
	for i := 0; i < len(rows); i += 5 {
		again = append(again, rows[i])
	}
	insertCharges(t, conn, again)
	ctx := t.Context()

	full := Window{StartMs: base, EndMs: base + 3*86_400_000}
	windows := []Window{
		full,
		{base + 3_600_000 + 250, base + 3_600_000 + 750}, // inside the dense second
		{base + 7_200_500, base + 7_200_501},             // one millisecond
		{base + 86_400_000, base + 86_400_000 + 1},       // probably empty
		{base - 86_400_000, base + 14*86_400_000},        // everything of mpA
	}
	for _, w := range windows {
		want := expected(rows, mpA, w)
		for _, cfg := range []struct {
			batch int
			span  time.Duration
		}{{5000, 5 * time.Minute}, {7, time.Second}, {100, time.Hour}, {1, 24 * time.Hour}} {
			if cfg.batch == 1 && len(want) > 300 {
				continue // one query per charge: too slow for the big windows
			}
			cc := &countingConn{Conn: conn}
			s := New(cc, WithBatch(cfg.batch), WithFirstSpan(cfg.span))
			it := s.Scan(mpA, w, nil)
			var got []Charge
			for {
				b, err := it.Next(ctx, cfg.batch)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) > cfg.batch {
					t.Fatalf("a batch of %d, more than %d", len(b), cfg.batch)
				}
				if len(b) == 0 {
					break
				}
				got = append(got, b...)
			}
			what := fmt.Sprintf("window %v, batch %d, first span %s", w, cfg.batch, cfg.span)
			sameCharges(t, what, got, want)
			t.Logf("%s: %d charges in %d queries", what, len(got), cc.queries.Load())
		}
		for _, limit := range []int{1, 3, 250, MaxLimit} {
			if limit == 1 && len(want) > 300 {
				continue
			}
			s := New(conn, WithBatch(100))
			var got []Charge
			r := Request{Window: w, Limit: limit}
			for pages := 0; ; pages++ {
				page, more, err := s.Page(ctx, mpA, r)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit || (more && len(page) != limit) {
					t.Fatalf("page of %d (limit %d, more %v)", len(page), limit, more)
				}
				got = append(got, page...)
				if !more {
					break
				}
				last := page[len(page)-1].Position()
				r.After = &last
			}
			sameCharges(t, fmt.Sprintf("window %v, pages of %d", w, limit), got, want)
		}
	}
	// The other marketplace sees its own only.
	s := New(conn)
	got, more, err := s.Page(ctx, mpB, Request{Window: full, Limit: MaxLimit})
	if err != nil || more {
		t.Fatal(err, more)
	}
	sameCharges(t, "marketplace B", got, expected(rows, mpB, full))

	// The streamed body is the page body of the whole window, byte for byte.
	env := Envelope{MarketplaceID: mpA, Window: full, CurrencyCode: "USD"}
	for _, batch := range []int{3, 5000} {
		s := New(conn, WithBatch(batch))
		st, err := s.OpenStream(ctx, mpA, env)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		flushes := 0
		if err := st.WriteTo(ctx, &buf, func() error { flushes++; return nil }); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(PageBody(env, expected(rows, mpA, full), nil))
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("batch %d: stream differs from the page body:\n got %.400s\nwant %.400s", batch, buf.Bytes(), want)
		}
		if batch == 3 && flushes < len(expected(rows, mpA, full))/3 {
			t.Fatalf("%d flushes: the stream was not written batch by batch", flushes)
		}
		// The vendor's two ids: vendorId its UUID, externalVendorId its
		// catalog id (the charge's vendor_id, not the event's
		// external_vendor_id, "ext-…").
		var body struct {
			Data []struct{ VendorID, ExternalVendorID string }
		}
		if err := json.Unmarshal(buf.Bytes(), &body); err != nil || len(body.Data) == 0 {
			t.Fatalf("body: %v", err)
		}
		for _, c := range body.Data {
			if !strings.HasPrefix(c.ExternalVendorID, "v-") || c.VendorID != vendorid.String(mpA, c.ExternalVendorID) {
				t.Fatalf("charge of vendorId %s, externalVendorId %s", c.VendorID, c.ExternalVendorID)
			}
		}
	}
}

// TestStoreEmptyAndFailing: an empty window streams a complete empty body; a
// ClickHouse that cannot be reached is ErrUnavailable; a writer that fails
// stops the stream with its error.
func TestStoreEmptyAndFailing(t *testing.T) {
	conn := testDB(t)
	ctx := t.Context()
	env := Envelope{Window: Window{StartMs: base, EndMs: base + 1000}, CurrencyCode: "EUR"}
	st, err := New(conn).OpenStream(ctx, uuid.NewString(), env)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := st.WriteTo(ctx, &buf, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if want := `{"startDate":"2026-03-01T00:00:00.000Z","endDate":"2026-03-01T00:00:01.000Z","currencyCode":"EUR","hasMore":false,"nextPage":null,"data":[]}`; buf.String() != want {
		t.Fatalf("empty stream %s, want %s", buf.String(), want)
	}

	// An empty window of 32 days: spans of 5 min, ×4 each time, 8 queries.
	cc := &countingConn{Conn: conn}
	if page, more, err := New(cc).Page(ctx, uuid.NewString(), Request{Window: Window{StartMs: base, EndMs: base + MaxWindow.Milliseconds()}, Limit: 10}); err != nil || more || len(page) != 0 {
		t.Fatal(page, more, err)
	}
	if n := cc.queries.Load(); n != 8 {
		t.Fatalf("an empty 32-day window took %d queries, want 8", n)
	}

	down, err := clickhouse.Open(clickhouse.Options{Addr: "127.0.0.1:1", Database: "endcap"})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, _, err := New(down, WithQueryTimeout(2*time.Second)).Page(ctx, uuid.NewString(), Request{Window: env.Window, Limit: 10}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ClickHouse down: %v, want ErrUnavailable", err)
	}

	mp := uuid.NewString()
	var rows []testRow
	for i := 0; i < 50; i++ {
		rows = append(rows, testRow{mp: mp, c: Charge{InteractionID: uuid.NewString(), TimestampMs: base + int64(i)*10,
			CampaignID: "c", VendorID: "v", auctionID: uuid.NewString(), auctionAt: time.UnixMilli(base).UTC()}})
	}
	insertCharges(t, conn, rows)
	st, err = New(conn, WithBatch(10)).OpenStream(ctx, mp, env)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("client gone")
	if err := st.WriteTo(ctx, failAfter{n: 2000, err: boom}, func() error { return nil }); !errors.Is(err, boom) {
		t.Fatalf("write failure: %v", err)
	}
}

type failAfter struct {
	n   int
	err error
}

func (f failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, f.err
	}
	return len(p), nil
}

// TestStoreLoad streams a large window (ENDCAP_TEST_LOAD=1; figures in
// docs/reference/vendor-charges.md): 1,000,000 charges over a day, half of them in
// one dense hour, the rest spread out. It reports the rate, the queries and
// the process's heap while streaming, which must stay bounded.
func TestStoreLoad(t *testing.T) {
	if os.Getenv("ENDCAP_TEST_LOAD") != "1" {
		t.Skip("load test: set ENDCAP_TEST_LOAD=1")
	}
	conn := testDB(t)
	mp := uuid.NewString()
	const total = 1_000_000
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(3, 4))
	for done := 0; done < total; {
		b, err := conn.PrepareBatch(ctx, chargeInsert)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100_000; i++ {
			ms := base + rng.Int64N(86_400_000)
			if done%2 == 0 {
				ms = base + 36_000_000 + rng.Int64N(3_600_000)
			}
			at := time.UnixMilli(ms).UTC()
			if err := b.Append(uuid.MustParse(mp), uuid.New(), at, ms, at, "impression", "e", "USD", "c", "p", "v", "v", "",
				"CPM", int64(1_234_567), int64(1234), uint16(567), uuid.New(), uint8(1), at); err != nil {
				t.Fatal(err)
			}
			done++
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	cc := &countingConn{Conn: conn}
	st, err := New(cc).OpenStream(ctx, mp, Envelope{Window: Window{StartMs: base, EndMs: base + 86_400_000}, CurrencyCode: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		maxHeap uint64
		ms      runtime.MemStats
		out     countWriter
	)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapAlloc
	start := time.Now()
	if err := st.WriteTo(ctx, &out, func() error {
		runtime.ReadMemStats(&ms)
		maxHeap = max(maxHeap, ms.HeapAlloc-min(ms.HeapAlloc, baseline))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("streamed %d MB in %s (%.0f charges/s), %d queries, heap allocated above the start at most %d MB (garbage included)",
		out.n>>20, d.Round(time.Millisecond), float64(total)/d.Seconds(), cc.queries.Load(), maxHeap>>20)
	if maxHeap > 200<<20 {
		t.Errorf("the heap grew by %d MB while streaming", maxHeap>>20)
	}

	// The same window in pages of MaxLimit.
	r := Request{Window: Window{StartMs: base, EndMs: base + 86_400_000}, Limit: MaxLimit}
	s := New(conn)
	start, pages, got := time.Now(), 0, 0
	var slowest time.Duration
	for {
		t0 := time.Now()
		page, more, err := s.Page(ctx, mp, r)
		if err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(t0))
		pages, got = pages+1, got+len(page)
		if !more {
			break
		}
		last := page[len(page)-1].Position()
		r.After = &last
	}
	d = time.Since(start)
	t.Logf("paged %d charges in %d pages of %d in %s (%.0f charges/s), slowest page %s",
		got, pages, MaxLimit, d.Round(time.Millisecond), float64(got)/d.Seconds(), slowest.Round(time.Millisecond))
	if got != total {
		t.Errorf("paged %d charges, want %d", got, total)
	}
}

// countWriter counts bytes and keeps none.
type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
