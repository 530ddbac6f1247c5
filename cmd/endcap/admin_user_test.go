package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestAdminUser: `admin user create` makes an admin with a random password
// printed once (or the file's), never prints a hash, refuses a second user
// of an address; `set-password` replaces it; both are audited as the CLI's.
func TestAdminUser(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ctx = audit.WithActor(ctx, audit.Actor{Kind: "cli"})
	var acc *accounts.Service
	var us *users.Service
	var log *audit.Log
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Accounts: true, Log: quiet}, func(l *statelog.Log) {
		acc, us, log = accounts.New(l), users.New(l, nil), audit.New(l)
	})
	m, err := acc.CreateMarketplace(ctx, "m", "USD", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	run := func(verb, email, file string) (userOut, string, error) {
		var out bytes.Buffer
		err := runUser(ctx, acc, us, &out, verb, m.ID, email, file)
		var o userOut
		if err == nil && verb != "list" {
			if jerr := json.Unmarshal(out.Bytes(), &o); jerr != nil {
				t.Fatalf("output %s: %v", out.Bytes(), jerr)
			}
		}
		return o, out.String(), err
	}
	o, raw, err := run("create", "Ops@Example.com", "")
	if err != nil || o.Role != users.RoleAdmin || len(o.Password) != 24 || strings.Contains(raw, "argon2") {
		t.Fatalf("create: %+v %v\n%s", o, err, raw)
	}
	if _, err := us.Authenticate(ctx, m.ID, "ops@example.com", o.Password); err != nil {
		t.Fatalf("the printed password does not sign in: %v", err)
	}
	if _, _, err := run("create", "ops@example.com", ""); err == nil {
		t.Fatal("a second user of the address")
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("a password from a file\nnext line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, _, err = run("set-password", "ops@example.com", file); err != nil || o.Password != "" {
		t.Fatalf("set-password: %+v %v", o, err)
	}
	if _, err := us.Authenticate(ctx, m.ID, "ops@example.com", "a password from a file"); err != nil {
		t.Fatalf("the file's password does not sign in: %v", err)
	}
	if _, _, err := run("set-password", "nobody@example.com", file); err == nil {
		t.Fatal("set-password of nobody")
	}
	if _, raw, err = run("list", "", ""); err != nil || !strings.Contains(raw, "Ops@Example.com") || strings.Contains(raw, "argon2") {
		t.Fatalf("list: %v\n%s", err, raw)
	}
	// The address on a second marketplace: set-password then needs --marketplace.
	m2, err := acc.CreateMarketplace(ctx, "m2", "USD", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if err := runUser(ctx, acc, us, io.Discard, "create", m2.ID, "ops@example.com", file); err != nil {
		t.Fatalf("the address on a second marketplace: %v", err)
	}
	if err := runUser(ctx, acc, us, io.Discard, "set-password", "", "ops@example.com", file); err == nil || !strings.Contains(err.Error(), "--marketplace") {
		t.Fatalf("set-password of an address on two marketplaces without --marketplace: %v", err)
	}
	if err := runUser(ctx, acc, us, io.Discard, "set-password", m2.ID, "ops@example.com", file); err != nil {
		t.Fatalf("set-password --marketplace: %v", err)
	}
	if err := setSSOOnly(ctx, acc, io.Discard, m2.ID, "maybe"); err == nil {
		t.Fatal("set-sso-only maybe")
	}
	if err := setSSOOnly(ctx, acc, io.Discard, m2.ID, "on"); err != nil {
		t.Fatal(err)
	}
	if mm, _ := acc.Marketplace(m2.ID); !mm.SSOOnly {
		t.Fatal("set-sso-only on did not set it")
	}
	es, _ := log.Page(m.ID, "", 10)
	if len(es) != 2 || es[0].Action != "user.password" || es[1].Action != "user.create" || es[0].Actor.Kind != "cli" {
		t.Fatalf("audit %+v", es)
	}
}
