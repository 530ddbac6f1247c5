//go:build dev

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/deploy/loadgen"
)

func cmdLoadgen(ctx context.Context, args []string) error {
	if len(args) < 1 {
		return errors.New("usage: endcap loadgen events|products|seed|auctions|bare [flags]")
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
		fs.DurationVar(&cfg.SlowAfter, "slow", 10*time.Millisecond, "a request slower than this counts as slow in the report's per-second timeline (--json)")
		fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "per request")
		fs.StringVar(&cfg.IDPrefix, "id-prefix", "", "1-8 lowercase hex digits that start every event id of the run (default: random), to count its events where they are stored")
		failures := fs.String("failures", "", "file to write the key of every request not answered 2xx to, one a line with its status (0: transport error, -1: unanswered at the end); an event id starts with its request's key")
		var sp loadgen.SponsoredConfig
		fs.Float64Var(&sp.Share, "sponsored-share", 0, "share of impressions and clicks carrying a real auction winner's resolvedBidId (0-1; >0 runs listings auctions first)")
		fs.IntVar(&sp.Auctions, "sponsored-auctions", 300, "auctions run before the load to collect winners (with --sponsored-share)")
		fs.DurationVar(&sp.Refresh, "sponsored-refresh", time.Second, "interval of fresh auctions during the run (negative = never)")
		mintKeys := fs.String("bid-signing-keys", os.Getenv("ENDCAP_BID_SIGNING_KEYS"), "the API's resolvedBidId keys (as ENDCAP_BID_SIGNING_KEYS, its default): each sponsored impression then gets a winner of its own, a pool winner re-signed with a fresh auction id, so that every one is charged as in production (empty: the pool's winners are reused, and most of their charges are duplicates)")
		asJSON := fs.Bool("json", false, "print the report as JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if cfg.APIKey == "" {
			if c, err := readCredentials(*creds); err == nil {
				cfg.APIKey = c.MarketplaceKey
			}
		}
		cfg.RecordFailures = *failures != ""
		if *mintKeys != "" {
			kr, err := bidtoken.ParseKeyring(*mintKeys)
			if err != nil {
				return fmt.Errorf("--bid-signing-keys: %w", err)
			}
			sp.Mint = kr
		}
		if sp.Share > 0 {
			srep, err := loadgen.RunSponsoredEvents(ctx, cfg, sp)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "loadgen events: sponsored share %.2f, %d winners before the load, %d from refreshes, a fresh auction per sponsored impression: %v\n", sp.Share, srep.PoolWinners, srep.RefreshWinners, sp.Mint != nil)
			if err := writeFailures(*failures, srep.Failures); err != nil {
				return err
			}
			if *asJSON {
				return json.NewEncoder(os.Stdout).Encode(srep.Report)
			}
			fmt.Println(srep.Report.String())
			return nil
		}
		rep, err := loadgen.RunEvents(ctx, cfg)
		if err != nil {
			return err
		}
		if err := writeFailures(*failures, rep.Failures); err != nil {
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
	case "seed":
		return cmdLoadgenSeed(ctx, args[1:])
	case "auctions":
		return cmdLoadgenAuctions(ctx, args[1:])
	}
	return fmt.Errorf("unknown loadgen mode %q (events, products, seed, auctions or bare)", args[0])
}

// writeFailures writes fs to path (nothing when path is empty).
func writeFailures(path string, fs []loadgen.Failure) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := loadgen.WriteFailures(f, fs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// defaultSeedManifest is where `loadgen seed` writes its manifest and `loadgen auctions` reads it: beside
// the dev credentials, so that `make clean-dev` removes it with the marketplace it describes.
const defaultSeedManifest = ".endcap/dev/auction-seed.json"

func cmdLoadgenSeed(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("endcap loadgen seed", flag.ContinueOnError)
	var cfg loadgen.SeedConfig
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "base URL of the API")
	fs.StringVar(&cfg.APIKey, "key", "", "advanced API key (default: advancedKey of --credentials)")
	creds := fs.String("credentials", ".endcap/dev/credentials.json", "credentials file written by `endcap dev`")
	fs.StringVar(&cfg.MarketplaceID, "marketplace", "", "marketplace id recorded in the manifest (default: marketplaceId of --credentials when the key comes from it)")
	fs.IntVar(&cfg.Vendors, "vendors", 10_000, "vendors (v-0...)")
	fs.IntVar(&cfg.Products, "products", 1_000_000, "products (p-000000000...), each with 1-2 vendors and 1-3 categories")
	fs.IntVar(&cfg.Campaigns, "campaigns", 100_000, "campaigns (names seed-0...), about 5% automated, the rest listings with 1-5 product bids")
	fs.IntVar(&cfg.CappedPercent, "capped-percent", 0, "percent of the campaigns given a frequency cap (3 impressions a day per shopper)")
	fs.IntVar(&cfg.Categories, "categories", 2_000, "categories (c-0...)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "requests in flight")
	fs.IntVar(&cfg.BatchSize, "batch", 500, "entities per catalog upsert (at most 500)")
	fs.IntVar(&cfg.NameLen, "name-len", 60, "characters of each product name")
	fs.IntVar(&cfg.DescriptionLen, "description-len", 200, "characters of each product description")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the content")
	fs.StringVar(&cfg.Manifest, "manifest", defaultSeedManifest, "manifest file to write (and to read: phases done are skipped)")
	fs.BoolVar(&cfg.Force, "force", false, "redo every phase even if the manifest says it is done")
	fs.DurationVar(&cfg.ProgressEvery, "progress", 5*time.Second, "interval of progress lines on stderr")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.APIKey == "" {
		if c, err := readCredentials(*creds); err == nil {
			cfg.APIKey = c.AdvancedKey
			if cfg.MarketplaceID == "" {
				cfg.MarketplaceID = c.MarketplaceID
			}
		}
	}
	cfg.Progress = os.Stderr
	rep, err := loadgen.RunSeed(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Println(rep.String())
	}
	if !rep.Manifest.Complete {
		return fmt.Errorf("seed incomplete (stopped: %s); run it again to finish", rep.Stopped)
	}
	return nil
}

func cmdLoadgenAuctions(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("endcap loadgen auctions", flag.ContinueOnError)
	var cfg loadgen.AuctionsConfig
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "base URL of the API")
	fs.StringVar(&cfg.APIKey, "key", "", "marketplace API key (default: marketplaceKey of --credentials)")
	creds := fs.String("credentials", ".endcap/dev/credentials.json", "credentials file written by `endcap dev`")
	manifest := fs.String("manifest", defaultSeedManifest, "manifest written by `loadgen seed` (missing: the default seed's id space)")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "measured duration")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "warmup before measuring")
	fs.IntVar(&cfg.Concurrency, "concurrency", 32, "concurrent connections")
	fs.Float64Var(&cfg.Rate, "rate", 0, "requests per second, open loop (= auctions/s with --auctions 1); 0 = closed loop")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "per request")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", 0, "stop after this many requests (0 = no limit)")
	fs.DurationVar(&cfg.SlowAfter, "slow", 10*time.Millisecond, "a request slower than this counts as slow in the report's per-second timeline (--json)")
	fs.IntVar(&cfg.IDs, "ids", 500, "product ids per auction (1-10000)")
	fs.IntVar(&cfg.Slots, "slots", 5, "slots per auction (1-40)")
	fs.IntVar(&cfg.Auctions, "auctions", 1, "auctions per request (1-5)")
	fs.Float64Var(&cfg.BidShare, "bid-share", 0.25, "share of ids drawn from products with a product bid (the rest uniformly from all products)")
	fs.Float64Var(&cfg.Zipf, "zipf", 0, "when > 1, draw the other ids by popularity (Zipf exponent, e.g. 1.1) instead of uniformly")
	fs.BoolVar(&cfg.QualityScores, "quality-scores", false, "send products.qualityScores")
	fs.Float64Var(&cfg.CategoryShare, "category-share", 0, "share of auctions that also carry a category")
	fs.Float64Var(&cfg.QueryShare, "query-share", 0, "share of auctions that also carry a searchQuery")
	fs.IntVar(&cfg.Shoppers, "shoppers", 0, "when > 0, every auction carries an opaqueUserId drawn from u-0..u-<shoppers-1> (frequency caps read their counts)")
	fs.BoolVar(&cfg.Check, "check", false, "decode every answer and check it against the contract (costs client CPU)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the drawing of ids")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, credErr := readCredentials(*creds)
	if cfg.APIKey == "" && credErr == nil {
		cfg.APIKey = c.MarketplaceKey
	}
	switch m, err := loadgen.ReadSeedManifest(*manifest); {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(os.Stderr, "loadgen auctions: no manifest at %s: drawing ids from the default seed's space (run `endcap loadgen seed` first to give them bids)\n", *manifest)
	case err != nil:
		return err
	default:
		if !m.Complete {
			fmt.Fprintf(os.Stderr, "loadgen auctions: WARNING: the seed of %s is not complete (phases done: %v)\n", *manifest, m.Phases)
		}
		if credErr == nil && m.MarketplaceID != "" && m.MarketplaceID != c.MarketplaceID {
			fmt.Fprintf(os.Stderr, "loadgen auctions: WARNING: %s was written for marketplace %s, the credentials are of %s\n", *manifest, m.MarketplaceID, c.MarketplaceID)
		}
		cfg.Manifest = &m
	}
	rep, err := loadgen.RunAuctions(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(rep)
	}
	fmt.Println(rep.String())
	return nil
}
