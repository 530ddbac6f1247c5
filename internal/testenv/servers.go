package testenv

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/config"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// ClickHouse returns a connection to cfg's database, created and migrated;
// when the test ends the database is dropped and the connection closed.
func ClickHouse(t testing.TB, ctx context.Context, cfg config.Config) clickhouse.Conn {
	t.Helper()
	opts := clickhouse.Options{Addr: cfg.ClickHouseAddr, Database: cfg.ClickHouseDatabase, User: "default"}
	if err := clickhouse.EnsureDatabase(ctx, opts); err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = conn.Exec(c, "DROP DATABASE IF EXISTS "+cfg.ClickHouseDatabase)
		_ = conn.Close()
	})
	if _, err := clickhouse.Migrate(ctx, conn, quietLog); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Topics creates cfg's topics (partitions per data topic, one hour of
// retention) on brokers and returns a client of them, closed when the test
// ends.
func Topics(t testing.TB, ctx context.Context, cfg config.Config, brokers []string, partitions int) (*kgo.Client, kafka.Topics) {
	t.Helper()
	cl, err := kafka.NewClient(brokers, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	topics := kafka.TopicNames(cfg.KafkaTopicPrefix)
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, partitions, 1, time.Hour)); err != nil {
		t.Fatal(err)
	}
	return cl, topics
}
