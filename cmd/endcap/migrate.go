package main

import (
	"context"
	"fmt"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/storage/clickhouse"
)

func cmdMigrate(ctx context.Context, args []string) error {
	cfg, _, err := parse("migrate", args, nil)
	if err != nil {
		return err
	}
	log := newLogger(cfg, cfg.LogLevel)
	o := app.ClickHouseOptions(cfg)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := clickhouse.EnsureDatabase(ctx, o); err != nil {
		return err
	}
	conn, err := clickhouse.Open(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	n, err := o.Schema().Migrate(ctx, conn, log)
	if err != nil {
		return err
	}
	v, err := clickhouse.SchemaVersion(ctx, conn)
	if err != nil {
		return err
	}
	fmt.Printf("applied %d migration(s); schema version %d\n", n, v)
	return nil
}
