package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/endcap/endcap/app"
)

// privacyTimeout bounds one run by hand: the start-up steps, then the
// batches (each table's mutation has ENDCAP_PRIVACY_MUTATION_TIMEOUT).
const privacyTimeout = 6 * time.Hour

// cmdPrivacy is `endcap admin privacy run`: apply every pending deletion
// request of shoppers now, as the exporter's job does every
// ENDCAP_PRIVACY_INTERVAL (docs/operations/privacy.md). It prints what it did.
func cmdPrivacy(ctx context.Context, out io.Writer, verb string, args []string) error {
	if verb != "run" {
		return errors.New("usage: endcap admin privacy run")
	}
	cfg, _, err := parse("admin privacy run", args, nil)
	if err != nil {
		return err
	}
	log := newLogger(cfg, cfg.LogLevel)
	a, err := app.New(cfg, app.TargetExporter, log)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, privacyTimeout)
	defer cancel()
	res, err := a.RunPrivacyDeletions(rctx)
	if err != nil {
		return err
	}
	return printJSON(out, res)
}
