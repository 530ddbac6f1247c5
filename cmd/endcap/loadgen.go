package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/endcap/endcap/loadgen"
)

func cmdLoadgen(ctx context.Context, args []string) error {
	if len(args) < 1 {
		return errors.New("usage: endcap loadgen events|products|bare [flags]")
	}
	switch args[0] {
	case "bare":
		fs := flag.NewFlagSet("endcap loadgen bare", flag.ContinueOnError)
		addr := fs.String("addr", "127.0.0.1:18099", "listen address of the bare baseline server")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bare Gin baseline listening on http://%s/v2/events\n", *addr)
		return loadgen.ServeBare(ctx, *addr)
	case "events":
		fs := flag.NewFlagSet("endcap loadgen events", flag.ContinueOnError)
		var cfg loadgen.EventsConfig
		fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "base URL of the API")
		fs.StringVar(&cfg.APIKey, "key", "", "marketplace API key (default: marketplaceKey of --credentials)")
		creds := fs.String("credentials", ".endcap/dev/credentials.json", "credentials file written by `endcap dev`")
		fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "measured duration")
		fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "warmup before measuring")
		fs.IntVar(&cfg.Concurrency, "concurrency", 32, "concurrent connections")
		fs.Float64Var(&cfg.Rate, "rate", 0, "requests per second (0 = closed loop, as fast as answered)")
		fs.IntVar(&cfg.BatchSize, "batch", 50, "events per request")
		fs.IntVar(&cfg.Users, "users", 100000, "distinct opaqueUserIds")
		fs.Int64Var(&cfg.MaxRequests, "max-requests", 0, "stop after this many requests (0 = no limit)")
		asJSON := fs.Bool("json", false, "print the report as JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if cfg.APIKey == "" {
			if c, err := readCredentials(*creds); err == nil {
				cfg.APIKey = c.MarketplaceKey
			}
		}
		rep, err := loadgen.RunEvents(ctx, cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(rep)
		}
		fmt.Println(rep.String())
		return nil
	case "products":
		fs := flag.NewFlagSet("endcap loadgen products", flag.ContinueOnError)
		var cfg loadgen.ProductsConfig
		fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "base URL of the API")
		fs.StringVar(&cfg.APIKey, "key", "", "advanced API key (default: advancedKey of --credentials)")
		creds := fs.String("credentials", ".endcap/dev/credentials.json", "credentials file written by `endcap dev`")
		fs.IntVar(&cfg.Count, "count", 1_000_000, "products to upsert")
		fs.IntVar(&cfg.BatchSize, "batch", 500, "products per request (at most 500)")
		fs.IntVar(&cfg.Concurrency, "concurrency", 4, "requests in flight")
		fs.IntVar(&cfg.Start, "start", 0, "index of the first product (ids p-000000000...)")
		fs.IntVar(&cfg.NameLen, "name-len", 60, "characters of each name")
		fs.IntVar(&cfg.DescriptionLen, "description-len", 500, "characters of each description")
		fs.IntVar(&cfg.Categories, "categories", 3, "categories per product")
		asJSON := fs.Bool("json", false, "print the report as JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if cfg.APIKey == "" {
			if c, err := readCredentials(*creds); err == nil {
				cfg.APIKey = c.AdvancedKey
			}
		}
		rep, err := loadgen.RunProducts(ctx, cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(rep)
		}
		fmt.Println(rep.String())
		return nil
	}
	return fmt.Errorf("unknown loadgen mode %q (events, products or bare)", args[0])
}
