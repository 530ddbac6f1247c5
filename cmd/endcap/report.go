package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/s3store"
)

// reportTimeout bounds one re-run by hand.
const reportTimeout = 30 * time.Minute

// cmdReport is `endcap admin report scored-attribution --marketplace ID
// --date YYYY-MM-DD`: (re)produce one local day's scored-attribution file
// now, replacing the previous one (docs/reference/scored-attribution.md).
func cmdReport(ctx context.Context, verb string, args []string) error {
	if verb != "scored-attribution" {
		return errors.New("usage: endcap admin report scored-attribution --marketplace ID --date YYYY-MM-DD")
	}
	var marketplace, date string
	cfg, _, err := parse("admin report "+verb, args, func(fs *flag.FlagSet) {
		fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
		fs.StringVar(&date, "date", "", "marketplace-local date YYYY-MM-DD (required)")
	})
	if err != nil {
		return err
	}
	day, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return fmt.Errorf("--date %q: want YYYY-MM-DD", date)
	}
	sess, err := openAdmin(ctx, cfg)
	if err != nil {
		return err
	}
	defer sess.cancel()
	m, ok := sess.acc.Marketplace(marketplace)
	if !ok {
		return fmt.Errorf("--marketplace %q: no such marketplace", marketplace)
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
	st := s3store.Open(app.S3Options(cfg))
	log := newLogger(cfg, cfg.LogLevel)
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	res, err := scoredfiles.New(ch, st, rdb, log).Produce(rctx, scoredfiles.Marketplace{ID: m.ID, Location: m.Location()}, day)
	if err != nil {
		return err
	}
	return printJSON(os.Stdout, res)
}
