package projections_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestEventsViewFromBothTables: beside the interactions sink, events_raw
// keeps no countable impression or click (interactions_raw has them), and
// the view `events` still shows every event exactly as it was sent: row for
// row and column for column what events_raw alone holds when it copies every
// event (the sink without an interactions sink beside it, into a second
// database). The events cover every field interactions_raw replaces or
// derives: a sponsored click that also names an entity, an organic
// impression with object.clickType and an externalVendorId, one too old to
// count, a purchase, a page view. A row written before migration 0007 (in
// both tables, without in_events_raw) shows once.
func TestEventsViewFromBothTables(t *testing.T) {
	s := newChargeStack(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	at := now.Add(-time.Minute)
	auctionAt := at.Add(-time.Minute)
	tok := s.winner(t, uuid.New(), auctionAt, 1, uuid.New(), bidtoken.CPC, 500_000)
	ev := func(kind records.Kind, id string, occurred time.Time) records.Event {
		return records.Event{Kind: kind, MarketplaceID: s.mp, ID: id, OccurredAtMs: occurred.UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "user-1", DeviceType: "mobile", Channel: "onsite"}
	}
	sponsored := ev(records.KindClick, "clk-sponsored", at)
	sponsored.ResolvedBidID, sponsored.ClickType = tok, "add-to-cart"
	sponsored.Entity = &records.Entity{Type: "product", ID: "sku-from-the-page"}
	sponsored.Placement = &records.Placement{Path: "/search", Position: 3, Page: 1, PageSize: 20, CategoryIDs: []string{"c-1"}, SearchQuery: "shoes"}
	organic := ev(records.KindImpression, "imp-organic", at)
	organic.Entity = &records.Entity{Type: "vendor", ID: "v-9"}
	organic.AdditionalAttribution = &records.Entity{Type: "product", ID: "p-3"}
	organic.Object = &records.Object{Type: "listing", AssetID: "a-1", ClickType: "product"}
	organic.ExternalVendorID, organic.ExternalCampaignID = "ext-v", "ext-c"
	organic.Page = &records.Page{Type: "search", ID: "search", Value: []string{"shoes"}}
	old := ev(records.KindImpression, "imp-old", now.Add(-31*24*time.Hour)) // not countable: events_raw only
	old.Entity = &records.Entity{Type: "product", ID: "p-1"}
	purchase := ev(records.KindPurchase, "pur-1", at)
	purchase.Items = []records.Item{{ProductID: "p-1", UnitPriceMicros: 19_990_000, Quantity: 2, VendorID: "v-1"}}
	pageview := ev(records.KindPageView, "pv-1", at)
	pageview.Page = &records.Page{Type: "cart", ID: "cart", Value: []string{"p-1", "p-2"}}
	s.produce(t, sponsored, organic, old, purchase, pageview)

	inter, err := projections.NewInteractions(projections.InteractionsOptions{ClickHouse: s.conn, Redis: s.rdb, Views: s.views(time.UTC), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	fold := func(sinks ...projections.EventSink) {
		t.Helper()
		p, err := projections.NewEventFold(projections.EventFoldOptions{
			Brokers: s.brokers, Topic: s.topics.Events, Claims: openClaims(t, s.brokers, s.topics, time.Hour),
			Sinks: sinks, MaxRows: 50_000, FlushInterval: 100 * time.Millisecond, Log: quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, 5))
	}
	fold(projections.NewEventsRaw(s.conn, inter), inter)
	// Folded again from the start, a replay: FINAL folds the identical rows.
	s.rewind(t, projections.EventsGroup, s.topics.Events)
	fold(projections.NewEventsRaw(s.conn, inter), inter)
	// The reference: every event copied into events_raw of a database of
	// its own (the same records, replayed once more).
	ref := testenv.ClickHouse(t, s.ctx, testenv.Get(t).Config(t, s.brokers))
	s.rewind(t, projections.EventsGroup, s.topics.Events)
	fold(projections.NewEventsRaw(ref, nil))

	if n := s.uint64(t, "SELECT count() FROM events_raw WHERE kind IN ('impression', 'click') AND countable = 1"); n != 0 {
		t.Errorf("events_raw holds %d countable impressions and clicks, want 0 (interactions_raw has them)", n)
	}
	if n := s.uint64(t, "SELECT count() FROM interactions WHERE in_events_raw = 0"); n != 2 {
		t.Errorf("%d interactions with in_events_raw = 0, want 2", n)
	}
	got, want := eventsView(t, s.conn), eventsView(t, ref)
	if len(want) != 5 {
		t.Fatalf("the reference has %d events, want 5: %v", len(want), want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events differs from the copy of every event\n got %q\nwant %q", got, want)
	}

	// A row of a build before migration 0007: in events_raw, and in
	// interactions_raw without in_events_raw (its default, 1).
	for _, q := range []string{
		`INSERT INTO events_raw (marketplace_id, kind, event_id, countable) SELECT toUUID(?), 'impression', 'imp-legacy', 1`,
		`INSERT INTO interactions_raw (marketplace_id, kind, event_id) SELECT toUUID(?), 'impression', 'imp-legacy'`,
	} {
		if err := s.conn.Exec(s.ctx, q, s.mp); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.uint64(t, "SELECT count() FROM events WHERE event_id = 'imp-legacy'"); n != 1 {
		t.Errorf("the legacy event shows %d times in events, want 1", n)
	}
	if n := s.uint64(t, "SELECT count() FROM events"); n != 6 {
		t.Errorf("%d events, want 6", n)
	}
}

// eventsView reads every row of `events` with every column, formatted, in
// (kind, event_id) order.
func eventsView(t *testing.T, conn clickhouse.Conn) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), "SELECT * FROM events ORDER BY kind, event_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var out []string
	for rows.Next() {
		dst := make([]any, len(types))
		for i, ct := range types {
			dst[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dst...); err != nil {
			t.Fatal(err)
		}
		line := ""
		for i, d := range dst {
			line += fmt.Sprintf("%s=%v ", types[i].Name(), reflect.ValueOf(d).Elem().Interface())
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEventsViewColumns: the view `events` names its columns (migration
// 0007 reads two tables), so a column added to events_raw must be added to
// the view too. Its columns are events_raw's, same names, types and order.
func TestEventsViewColumns(t *testing.T) {
	env := testenv.Get(t)
	conn := testenv.ClickHouse(t, t.Context(), env.Config(t, nil))
	columns := func(table string) []string {
		// DESCRIBE lists them in order (18.16's system.columns has no
		// position); its columns are all strings, more of them on newer
		// servers: name and type come first.
		rows, err := conn.Query(t.Context(), "DESCRIBE TABLE "+table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			fields := make([]string, len(rows.Columns()))
			dst := make([]any, len(fields))
			for i := range fields {
				dst[i] = &fields[i]
			}
			if err := rows.Scan(dst...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fields[0]+" "+fields[1])
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	view, table := columns("events"), columns("events_raw")
	if len(table) == 0 || !slices.Equal(view, table) {
		t.Errorf("view events has columns\n%q\nevents_raw has\n%q", view, table)
	}
}
