package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
)

// cmdSpend is `endcap admin spend check|fix --marketplace ID`: compare the
// campaigns' spend in Redis with their charges in ClickHouse, and with fix
// set the differing counters to the charges (docs/design/charges.md, Operations).
func cmdSpend(ctx context.Context, verb string, args []string) error {
	if verb != "check" && verb != "fix" {
		return errors.New("usage: endcap admin spend check|fix --marketplace ID")
	}
	var marketplace string
	cfg, _, err := parse("admin spend "+verb, args, func(fs *flag.FlagSet) {
		fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
	})
	if err != nil {
		return err
	}
	if marketplace == "" {
		return errors.New("--marketplace is required")
	}
	ch, err := clickhouse.Open(app.ClickHouseOptions(cfg))
	if err != nil {
		return err
	}
	defer ch.Close()
	rdb, err := app.OpenRedis(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	diffs, err := projections.ReconcileSpend(rctx, ch, rdb, marketplace, time.Now(), verb == "fix")
	if err != nil {
		return err
	}
	if diffs == nil {
		diffs = []projections.SpendDiff{}
	}
	if err := printJSON(os.Stdout, struct {
		Marketplace string                  `json:"marketplace"`
		Differences []projections.SpendDiff `json:"differences"`
		Fixed       bool                    `json:"fixed"`
	}{marketplace, diffs, verb == "fix" && len(diffs) > 0}); err != nil {
		return err
	}
	if verb == "check" && len(diffs) > 0 {
		return fmt.Errorf("%d spend counters differ from the charges", len(diffs))
	}
	return nil
}
