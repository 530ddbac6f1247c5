package projections

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// BenchmarkInsertServerCPU is ClickHouse's own CPU per row for the fold's two
// largest inserts, events_raw and interactions_raw, one batch of 50,000 events
// each (benchRecords), with the server's default squashing of insert blocks
// ("squashed") and without it ("direct", clickhouse.Insert), the rows in the
// batch's order; and without it, the rows in the order of the tables'
// sorting keys ("sorted": what the fold sends, SortedOrder). The server's CPU comes from /proc, so the benchmark
// needs the test stack's own ClickHouse (not ENDCAP_TEST_REUSE_STACK). Merges
// are stopped while it runs, so that they do not land on either side; run it
// with -count 3 or more to alternate the sides.
func BenchmarkInsertServerCPU(b *testing.B) {
	env := testenv.Get(b)
	if _, ok := env.ServerCPU(localstack.ServiceClickHouse); !ok {
		b.Skip("needs the test stack's own ClickHouse to read its CPU")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(b, ctx, env.Config(b, nil))
	for _, table := range []string{"events_raw", "interactions_raw"} { // this benchmark's database only
		if err := conn.Exec(ctx, "SYSTEM STOP MERGES "+table); err != nil {
			b.Fatal(err)
		}
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := &Interactions{views: testViews(time.UTC), log: log}
	f := &EventFold{log: log}
	const n = 50_000
	events := f.decode(b.Context(), benchRecords(b, n))
	evRows := newEventRows(len(events))
	for i := range events {
		evRows.add(&events[i].E, events[i].Partition, events[i].Offset)
	}
	picked := p.pick(events)
	inRows := newInteractionRows(len(picked))
	for _, d := range picked {
		if _, err := inRows.add(d, &p.views, log); err != nil {
			b.Fatal(err)
		}
	}

	evSorted, err := NewEventsRaw(nil, nil).rows(b.Context(), events)
	if err != nil {
		b.Fatal(err)
	}
	inSorted, _, err := p.build(b.Context(), picked)
	if err != nil {
		b.Fatal(err)
	}

	sides := []struct {
		name   string
		ctx    func(context.Context) context.Context
		evRows *eventRows
		inRows *interactionRows
	}{
		{"squashed", func(ctx context.Context) context.Context { return ctx }, evRows, inRows},
		{"direct", clickhouse.Insert, evRows, inRows},
		{"sorted", clickhouse.Insert, evSorted, inSorted},
	}
	for _, side := range sides {
		b.Run(side.name, func(b *testing.B) {
			var cpu time.Duration
			rows := 0
			for b.Loop() {
				c0, _ := env.ServerCPU(localstack.ServiceClickHouse)
				ictx := side.ctx(ctx)
				if err := insertColumns(ictx, conn, "events_raw", eventColumns, side.evRows.n, side.evRows.columns()); err != nil {
					b.Fatal(err)
				}
				if err := insertColumns(ictx, conn, "interactions_raw", interactionColumns, side.inRows.n, side.inRows.columns()); err != nil {
					b.Fatal(err)
				}
				c1, _ := env.ServerCPU(localstack.ServiceClickHouse)
				cpu += c1 - c0
				rows += side.evRows.n + side.inRows.n
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(rows), "server-ns/row")
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
