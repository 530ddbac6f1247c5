package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestBackupFigures measures a backup and a restore of ENDCAP_BACKUP_FIGURES
// events (docs/operations/operations.md, Backup and restore): that many rows made in
// events_raw by INSERT ... SELECT from numbers(), received over the last 30
// days, backed up to file://, backed up again (nothing changed: no
// partition copied), and restored into another database. A manual run:
//
//	ENDCAP_BACKUP_FIGURES=10000000 ENDCAP_TEST_REQUIRE_STACK=1 go test -count=1 -timeout 30m -run TestBackupFigures -v ./e2e
func TestBackupFigures(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ENDCAP_BACKUP_FIGURES"))
	if n <= 0 {
		t.Skip("a manual measurement: set ENDCAP_BACKUP_FIGURES to a number of events")
	}
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RedisAddr, cfg.RedisCluster = testenv.OwnRedis(t).Addr, false
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ch := testenv.ClickHouse(t, ctx, cfg)
	testenv.Topics(t, ctx, cfg, brokers, cfg.KafkaEventsPartitions)
	start := time.Now()
	if err := ch.Exec(ctx, `INSERT INTO events_raw (marketplace_id, kind, event_id, occurred_at, occurred_at_ms, received_at, received_at_ms,
		countable, opaque_user_id, entity_type, entity_id, page_type, device_type, channel, kafka_partition, kafka_offset)
		SELECT toUUID('0190a5a4-0000-7000-8000-000000000001'), 'pageview', concat('ev-', toString(number)),
			toDateTime(now() - intDiv(number * 2592000, ?)) AS at, toInt64(toUnixTimestamp(at)) * 1000, at, toInt64(toUnixTimestamp(at)) * 1000,
			1, concat('u-', toString(number % 200000)), 'product', concat('p-', toString(number % 50000)), 'search', 'mobile', 'web',
			toInt32(number % 3), toInt64(intDiv(number, 3))
		FROM numbers(?)`, n, n); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events made in %s", n, time.Since(start).Round(time.Millisecond))
	if err := ch.Exec(ctx, "OPTIMIZE TABLE events_raw FINAL"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := testenv.Logger(t)
	for _, what := range []string{"backup", "backup again"} {
		m, err := app.CreateBackup(ctx, cfg, "file://"+dir, app.BackupOptions{Timeout: 20 * time.Minute}, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: took %s, %d bytes written, %d bytes reused", what, m.Took, m.Bytes, m.Reused)
	}
	var size int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	t.Logf("backup directory: %d bytes (%.1f MiB)", size, float64(size)/(1<<20))

	_, brokersB := testenv.Kafka(t)
	cfgB := env.Config(t, brokersB)
	cfgB.RedisAddr, cfgB.RedisCluster = testenv.OwnRedis(t).Addr, false
	chB := testenv.ClickHouse(t, ctx, cfgB)
	rep, err := app.RestoreBackup(ctx, cfgB, "file://"+dir, app.RestoreOptions{Timeout: 20 * time.Minute}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: %+v", rep)
	var rows uint64
	if err := chB.QueryRow(ctx, "SELECT count() FROM events_raw").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != uint64(n) {
		t.Fatalf("%d rows restored, want %d", rows, n)
	}
}
