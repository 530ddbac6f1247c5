package retention_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/reporting/retention"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestDropsOldMonths, on a real ClickHouse: the months of the raw tables
// whose whole month is older than their group's bound are dropped; a month
// whose rollup days are not all final is held until they are; the current
// months, a group kept for ever, and the tables invoices and reports read
// (charges, auction winners, rollups) stay. The job runs under its lease.
func TestDropsOldMonths(t *testing.T) {
	env := testenv.Get(t)
	cfg := env.Config(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, cfg)
	exec := func(q string, args ...any) {
		t.Helper()
		if err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	now := time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)
	for i, at := range []string{"2026-01-31 23:59:59", "2026-03-15 00:00:00", "2026-04-01 00:00:00", "2026-06-10 11:00:00"} {
		id := fmt.Sprint("e", i)
		exec("INSERT INTO events_raw (marketplace_id, kind, event_id, received_at) SELECT generateUUIDv4(), 'click', ?, toDateTime(?, 'UTC')", id, at)
		exec("INSERT INTO interactions_raw (marketplace_id, event_id, occurred_at) SELECT generateUUIDv4(), ?, toDateTime(?, 'UTC')", id, at)
		exec("INSERT INTO auctions_raw (auction_id, marketplace_id, at) SELECT generateUUIDv4(), generateUUIDv4(), toDateTime(?, 'UTC')", at)
		exec("INSERT INTO auction_winners_raw (auction_id, marketplace_id, at) SELECT generateUUIDv4(), generateUUIDv4(), toDateTime(?, 'UTC')", at)
		exec("INSERT INTO charges_raw (marketplace_id, interaction_id, timestamp) SELECT generateUUIDv4(), generateUUIDv4(), toDateTime(?, 'UTC')", at)
		exec("INSERT INTO rollup_daily (marketplace_id, day_local) SELECT generateUUIDv4(), toDate(toDateTime(?, 'UTC'))", at)
	}
	// Every rollup day the rollups still recompute (121 days back) final,
	// but April 20, which reads March's auctions.
	final := uint64(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	exec("INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms) SELECT toDate('2026-02-01') + number, toDateTime('2026-06-01 00:00:00', 'UTC'), 0, if(toDate('2026-02-01') + number = toDate('2026-04-20'), 0, ?) FROM system.numbers LIMIT 120", final)

	rdb := env.Redis(t)
	lock := "ec:lock:retention:" + cfg.ClickHouseDatabase
	p := &retention.Partitions{ClickHouse: conn, Log: testenv.Logger(t), Now: func() time.Time { return now },
		Groups: retention.Groups(config.Age{Days: 65}, config.Age{}, config.Age{Months: 2, Days: 5})}
	var res retention.Result
	job := &retention.Job{Name: "partitions", Redis: rdb, LockKey: lock, Interval: time.Hour, Timeout: time.Minute, Log: testenv.Logger(t),
		Step: func(ctx context.Context) (err error) { res, err = p.Once(ctx); return err }}

	// Held by another process: nothing done.
	_, release, err := redisstore.Lease(ctx, rdb, lock, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Once(ctx); !errors.Is(err, redisstore.ErrBusy) {
		t.Fatalf("run under another's lease: %v, want ErrBusy", err)
	}
	release()

	// June 10 less 65 days is April 6: January and March ended before it,
	// but March is held (April 20 is not final).
	if err := job.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Dropped, res.Held); got != "[{events_raw 202601} {interactions_raw 202601}] [{events_raw 202603} {interactions_raw 202603}]" {
		t.Errorf("first run: dropped and held %s", got)
	}
	want := map[string]string{
		"events_raw": "[202603 202604 202606]", "interactions_raw": "[202603 202604 202606]",
		"auctions_raw": "[202601 202603 202604 202606]", "auction_winners_raw": "[202601 202603 202604 202606]",
		"charges_raw": "[202601 202603 202604 202606]",
	}
	checkParts(t, ctx, conn, want)
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM rollup_daily").Scan(&n); err != nil || n != 4 {
		t.Errorf("rollup_daily has %d rows (%v), want 4", n, err)
	}

	// April 20 recomputed once final: March goes too.
	exec("INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms) SELECT toDate('2026-04-20'), toDateTime('2026-06-02 00:00:00', 'UTC'), 0, ?", final)
	if err := job.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Dropped, res.Held); got != "[{events_raw 202603} {interactions_raw 202603}] []" {
		t.Errorf("second run: dropped and held %s", got)
	}
	want["events_raw"], want["interactions_raw"] = "[202604 202606]", "[202604 202606]"
	checkParts(t, ctx, conn, want)
	if err := conn.QueryRow(ctx, "SELECT count() FROM events_raw").Scan(&n); err != nil || n != 2 {
		t.Errorf("events_raw has %d rows (%v), want 2", n, err)
	}
}

func checkParts(t *testing.T, ctx context.Context, conn clickhouse.Conn, want map[string]string) {
	t.Helper()
	for table, w := range want {
		rows, err := conn.Query(ctx, "SELECT DISTINCT partition_id FROM system.parts WHERE database = currentDatabase() AND table = ? AND active ORDER BY partition_id", table)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
		}
		rows.Close()
		if fmt.Sprint(got) != w {
			t.Errorf("%s: partitions %v, want %s", table, got, w)
		}
	}
}
