// Command endcap is the single Endcap binary: the API, the projector and the
// exporter (`serve`), the local stack (`dev`), schema migrations
// (`migrate`), administration (`admin`) and the load generator (`loadgen`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	_ "time/tzdata" // marketplace time zones must resolve on hosts without zoneinfo

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/gomem"
	"github.com/endcap/endcap/internal/telemetry"
)

const usage = `endcap — the Endcap retail-media platform

Usage:
  endcap serve [--target=all|api|projector|exporter] [flags]   run the service against configured Kafka, ClickHouse, Redis, S3
  endcap migrate [flags]                                        apply ClickHouse migrations
  endcap admin marketplace create --name N --currency USD --timezone America/New_York
  endcap admin marketplace list
  endcap admin marketplace set-reserve --marketplace ID --cpc 0.05 --cpm 1.50
  endcap admin marketplace set-sso-only --marketplace ID --sso-only on|off   # on: console sign-in by single sign-on only
  endcap admin marketplace set-balances --marketplace ID --balances on|off [--low-balance 10.00]   # vendors pay from balances
  endcap admin key create --marketplace ID --type marketplace|advanced
  endcap admin key list --marketplace ID
  endcap admin key revoke --id KEY_ID
  endcap admin user create --marketplace ID --email E [--password-file F]   # a console admin; a random password is printed once
  endcap admin user list --marketplace ID
  endcap admin user set-password --email E [--marketplace ID] [--password-file F]   # --marketplace when E has accounts on several
  endcap admin secrets bid-keys                                 print the resolvedBidId key kept in Redis as ENDCAP_BID_SIGNING_KEYS
  endcap admin secrets wrap-plaintext                           wrap with the master key the keys an earlier version left in Redis in plaintext
  endcap admin report scored-attribution --marketplace ID --date YYYY-MM-DD   (re)produce a day's file now
  endcap admin privacy run                                      apply the pending deletion requests of shoppers now
  endcap admin spend check|fix --marketplace ID                 compare the campaigns' Redis spend with the ClickHouse charges; fix sets it to them
  endcap admin backup create --to file:///path|s3://bucket/prefix   back up the state topics, ClickHouse (incremental by partition), the bucket and Redis's shared secrets
  endcap admin backup restore --from URL [--force]              restore into an empty system whose projectors are stopped; claims, charge markers and spend rebuilt
  endcap config [--markdown]                                    list every setting and its variable
  endcap config check [--timeout 5s] [flags]                    reach Kafka, ClickHouse, Redis, S3 (and SMTP) with these settings, a line each; exit 1 if any fails
%s
Every command takes the configuration flags; each flag also reads an ENDCAP_* variable
(run 'endcap config' for the list).
`

// devCommands are the commands of the development build (-tags dev: the
// local stack, its broker and the load generator), registered by dev.go;
// devUsage describes them. The production build has neither.
var (
	devCommands = map[string]func(context.Context, []string) error{}
	devUsage    = `
The development commands (dev, kafka, loadgen) are in the development build only:
go build -tags dev ./cmd/endcap (make build, make run).
`
)

func main() {
	usage := fmt.Sprintf(usage, devUsage)
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "serve":
		err = cmdServe(ctx, args)
	case "migrate":
		err = cmdMigrate(ctx, args)
	case "admin":
		err = cmdAdmin(ctx, args)
	case "config":
		if len(args) > 0 && args[0] == "check" {
			err = cmdConfigCheck(ctx, os.Stdout, args[1:])
			break
		}
		printConfig(os.Stdout, args)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		run, ok := devCommands[cmd]
		if !ok {
			fmt.Fprintf(os.Stderr, "endcap: unknown command %q\n\n%s", cmd, usage)
			os.Exit(2)
		}
		err = run(ctx, args)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "endcap:", err)
		os.Exit(1)
	}
}

// parse registers the configuration flags (plus the command's own) and
// resolves the configuration.
func parse(name string, args []string, extra func(fs *flag.FlagSet)) (config.Config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("endcap "+name, flag.ContinueOnError)
	resolve := config.Register(fs)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return config.Config{}, fs, err
	}
	cfg, err := resolve()
	return cfg, fs, err
}

func cmdServe(ctx context.Context, args []string) error {
	var target string
	cfg, _, err := parse("serve", args, func(fs *flag.FlagSet) {
		fs.StringVar(&target, "target", envOr("ENDCAP_TARGET", "all"), "what this process runs: all, api, projector or exporter (env ENDCAP_TARGET)")
	})
	if err != nil {
		return err
	}
	if err := cfg.InsecureDefaults(); err != nil {
		return err
	}
	t, err := app.ParseTarget(target)
	if err != nil {
		return err
	}
	log := newLogger(cfg, cfg.LogLevel)
	gomem.Tune(memoryRole(t), log)
	a, err := app.New(cfg, t, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// memoryRole is what the process runs, for the Go runtime's memory settings
// (internal/gomem; docs/operations/operations.md, Memory).
func memoryRole(t app.Target) gomem.Role {
	switch t {
	case app.TargetAll, app.TargetProjector:
		return gomem.Projectors
	case app.TargetAPI:
		return gomem.API
	}
	return gomem.Other
}

func envOr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

// printConfig lists every setting; with --markdown as the table of
// docs/operations/operations.md.
func printConfig(w io.Writer, args []string) {
	md := len(args) > 0 && args[0] == "--markdown"
	for _, row := range config.EnvTable() {
		def := row[2]
		if md {
			if def == "" {
				def = "(empty)"
			}
			fmt.Fprintf(w, "| `%s` | `%s` | `%s` | %s |\n", row[0], row[1], def, strings.ReplaceAll(row[3], "|", "or"))
			continue
		}
		fmt.Fprintf(w, "%-28s %-34s %-24s %s\n", row[0], row[1], def, row[3])
	}
}

// newLogger is the process's logger at this level, every secret of the
// configuration blanked out of its lines.
func newLogger(cfg config.Config, level string) *slog.Logger {
	return telemetry.NewRedactor(cfg.Secrets()).Logger(telemetry.NewLogger(os.Stderr, level, cfg.LogFormat))
}
