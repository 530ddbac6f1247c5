package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/telemetry"
)

// cmdConfigCheck reaches every dependency with the configuration, each
// within --timeout, and prints a line each; an error when any failed.
func cmdConfigCheck(ctx context.Context, w io.Writer, args []string) error {
	var timeout time.Duration
	cfg, _, err := parse("config check", args, func(fs *flag.FlagSet) {
		fs.DurationVar(&timeout, "timeout", 5*time.Second, "longest wait for each dependency")
	})
	if err != nil {
		return err
	}
	if timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", timeout)
	}
	log := newLogger(cfg, "error")
	x := telemetry.NewRedactor(cfg.Secrets())
	results := app.CheckDependencies(ctx, cfg, timeout, log)
	failed := 0
	for _, r := range results {
		state, text := "ok", r.Detail
		if r.Err != nil {
			state, text = "FAIL", r.Err.Error()
			failed++
		}
		fmt.Fprintf(w, "%-10s %-4s %s\n", r.Name, state, x.String(text))
	}
	if failed > 0 {
		return fmt.Errorf("config check: %d of %d dependencies failed", failed, len(results))
	}
	return nil
}
