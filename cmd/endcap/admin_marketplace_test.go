package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// testMarketplace is the accounts service of a log of its own (kfake) with a
// marketplace in it, and a context of 30 s.
func testMarketplace(t *testing.T) (context.Context, *accounts.Service, accounts.Marketplace) {
	t.Helper()
	_, brokers := testenv.Kafka(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	var acc *accounts.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Accounts: true, Log: quiet}, func(l *statelog.Log) { acc = accounts.New(l) })
	m, err := acc.CreateMarketplace(ctx, "m", "USD", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, acc, m
}

// TestMarketplaceSettings: `admin marketplace set-reserve`, `set-sso-only`
// and `set-balances` read amounts in the marketplace's currency and on or
// off, change the marketplace and print it; a bad flag is refused by its
// name, and changes nothing.
func TestMarketplaceSettings(t *testing.T) {
	ctx, acc, m := testMarketplace(t)
	printed := func(run func(out io.Writer) error) accounts.Marketplace {
		t.Helper()
		var out bytes.Buffer
		if err := run(&out); err != nil {
			t.Fatal(err)
		}
		var got accounts.Marketplace
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.ID != m.ID || !strings.HasPrefix(out.String(), "{\n  \"") {
			t.Fatalf("output %q: %v", out.String(), err)
		}
		return got
	}
	if got := printed(func(out io.Writer) error { return setReserve(ctx, acc, out, m.ID, "0.25", "1.5") }); got.ReserveCPCMicros != 250_000 || got.ReserveCPMMicros != 1_500_000 {
		t.Errorf("set-reserve 0.25 1.5: %+v", got)
	}
	if got := printed(func(out io.Writer) error { return setSSOOnly(ctx, acc, out, m.ID, "on") }); !got.SSOOnly {
		t.Errorf("set-sso-only on: %+v", got)
	}
	if got := printed(func(out io.Writer) error { return setBalances(ctx, acc, out, m.ID, "on", "12.5") }); !got.Balances || got.LowBalanceMicros != 12_500_000 {
		t.Errorf("set-balances on 12.5: %+v", got)
	}
	if got := printed(func(out io.Writer) error { return setReserve(ctx, acc, out, m.ID, "0", "0.0") }); got.ReserveCPCMicros != 0 || got.ReserveCPMMicros != 0 {
		t.Errorf("set-reserve 0 0.0: %+v", got)
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"a reserve that is not an amount", func() error { return setReserve(ctx, acc, io.Discard, m.ID, "lots", "0") }, `--cpc "lots"`},
		{"a CPM reserve that is not an amount", func() error { return setReserve(ctx, acc, io.Discard, m.ID, "1", "1.2.3") }, `--cpm "1.2.3"`},
		{"no marketplace", func() error { return setReserve(ctx, acc, io.Discard, "", "1", "1") }, "--marketplace is required"},
		{"sso-only neither on nor off", func() error { return setSSOOnly(ctx, acc, io.Discard, m.ID, "yes") }, `--sso-only "yes": want on or off`},
		{"balances neither on nor off", func() error { return setBalances(ctx, acc, io.Discard, m.ID, "maybe", "0") }, `--balances "maybe": want on or off`},
		{"a low balance that is not an amount", func() error { return setBalances(ctx, acc, io.Discard, m.ID, "off", "x") }, `--low-balance "x"`},
	} {
		if err := tc.run(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if got, _ := acc.Marketplace(m.ID); got.ReserveCPCMicros != 0 || !got.SSOOnly || !got.Balances || got.LowBalanceMicros != 12_500_000 {
		t.Errorf("refused flags changed the marketplace: %+v", got)
	}
}
