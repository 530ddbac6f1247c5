package testenv

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/spill"
	"github.com/endcap/endcap/storage/statelog"
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
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, partitions, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}
	return cl, topics
}

// StateLogOptions say which changelog StateLog opens.
type StateLogOptions struct {
	Prefix   string       // topic prefix ("test." when empty); the topics are created if missing
	Accounts bool         // the accounts topic (else the entities topic)
	Log      *slog.Logger // nil: discarded
}

// StateLog opens a changelog topic of brokers as a view, the way every
// process does: build constructs the services on it (they register their
// appliers before it runs), then the view runs until the test ends, and
// StateLog returns it once it has caught up with the topic. The Kafka client
// that writes it is closed at the test's end too.
func StateLog(t testing.TB, brokers []string, o StateLogOptions, build func(*statelog.Log)) *statelog.Log {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = "test."
	}
	if o.Log == nil {
		o.Log = quietLog
	}
	cl, err := kafka.NewClient(brokers, o.Log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics := kafka.TopicNames(o.Prefix)
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 1, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}
	topic := topics.Entities
	if o.Accounts {
		topic = topics.Accounts
	}
	l, err := statelog.New(topic, brokers, cl, o.Log)
	if err != nil {
		t.Fatal(err)
	}
	if build != nil {
		build(l)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done; l.Close() })
	if err := l.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// SpillStore opens a spill store (the catalog's texts on disk) in a
// directory of the test's own; it closes when the test ends. Open it before
// the log that fills it (testenv.StateLog), so that it closes after.
func SpillStore(t testing.TB) *spill.Store {
	t.Helper()
	s, err := spill.Open(spill.Options{Dir: t.TempDir(), Log: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
