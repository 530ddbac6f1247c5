// Command loadgen drives POST /v2/events of an Endcap service (or of the bare Gin baseline) and prints a
// report.
//
//	loadgen -url http://127.0.0.1:8080 -key TSE_... -duration 30s -c 32       # closed loop
//	loadgen -url http://127.0.0.1:8080 -key TSE_... -rate 2000                # open loop, 2000 requests/s
//	loadgen -serve-bare 127.0.0.1:8099                                        # serve the baseline only
//	loadgen -bare -duration 10s                                               # baseline in this process
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/endcap/endcap/loadgen"
)

func main() {
	var cfg loadgen.EventsConfig
	flag.StringVar(&cfg.URL, "url", "", "base URL of the service (posts to URL/v2/events)")
	flag.StringVar(&cfg.APIKey, "key", os.Getenv("ENDCAP_LOADGEN_KEY"), "marketplace API key (default $ENDCAP_LOADGEN_KEY)")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Second, "measured window")
	flag.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "warmup before the window (negative: none)")
	flag.IntVar(&cfg.Concurrency, "c", 32, "workers / connections")
	flag.Float64Var(&cfg.Rate, "rate", 0, "open loop: target requests/s (0: closed loop)")
	flag.IntVar(&cfg.BatchSize, "batch", 50, "events per request (at most 200)")
	flag.IntVar(&cfg.Users, "users", 100000, "distinct opaqueUserIds")
	flag.IntVar(&cfg.Products, "products", 10000, "distinct product ids")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "per-request timeout")
	flag.Int64Var(&cfg.Seed, "seed", 1, "content seed")
	flag.Int64Var(&cfg.MaxRequests, "max", 0, "stop after this many requests (0: no limit)")
	asJSON := flag.Bool("json", false, "print the report as JSON")
	serveBare := flag.String("serve-bare", "", "only serve the bare baseline on this address until interrupted")
	bare := flag.Bool("bare", false, "run against a bare baseline server started in this process on 127.0.0.1")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *serveBare != "" {
		fmt.Fprintf(os.Stderr, "bare baseline on %s\n", *serveBare)
		if err := loadgen.ServeBare(ctx, *serveBare); err != nil {
			fail(err)
		}
		return
	}
	if *bare {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- loadgen.ServeBare(sctx, addr) }()
		defer func() { cancel(); <-done }()
		cfg.URL = "http://" + addr
		waitListening(addr)
	}
	rep, err := loadgen.RunEvents(ctx, cfg)
	if err != nil {
		fail(err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
		return
	}
	fmt.Print(rep)
}

func waitListening(addr string) {
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(1)
}
