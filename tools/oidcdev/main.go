// Command oidcdev is an OpenID provider for the console's tests: zitadel's
// example provider (github.com/zitadel/oidc/v3, example/server), with its
// login form, the users of a JSON file and one web client. It is a module
// of its own, built by the tests (e2e/console_test.go, api/console's SSO
// tests) with `go build`: the endcap binary never links it.
//
//	oidcdev -users users.json -client-id endcap -client-secret-file f -redirect 'http://127.0.0.1:*/console/sso/callback'
//
// A redirect URI with a * is a pattern (path.Match).
//
// It listens on -addr (127.0.0.1:0: a free port) and prints its issuer
// ("issuer http://127.0.0.1:PORT/") on stdout once it serves.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// globStorage gives the clients redirect URI patterns (path.Match: a test's
// console listens on a port chosen when it starts, after the provider).
type globStorage struct {
	*storage.Storage
	globs []string
}

func (s globStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil || len(s.globs) == 0 {
		return c, err
	}
	return globClient{c, s.globs}, nil
}

type globClient struct {
	op.Client
	globs []string
}

func (c globClient) RedirectURIGlobs() []string           { return c.globs }
func (c globClient) PostLogoutRedirectURIGlobs() []string { return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	usersFile := flag.String("users", "", "JSON file of the users: id → {ID, Username, Password, Email, EmailVerified, ...} (required)")
	clientID := flag.String("client-id", "endcap", "the web client's id")
	secretFile := flag.String("client-secret-file", "", "file whose first line is the web client's secret (required)")
	redirect := flag.String("redirect", "", "the web client's redirect URIs, comma-separated (required)")
	flag.Parse()
	if *usersFile == "" || *secretFile == "" || *redirect == "" {
		fmt.Fprintln(os.Stderr, "oidcdev: -users, -client-secret-file and -redirect are required")
		os.Exit(2)
	}
	b, err := os.ReadFile(*secretFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcdev:", err)
		os.Exit(1)
	}
	secret, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	users, err := storage.StoreFromFile(*usersFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcdev: users:", err)
		os.Exit(1)
	}
	var exact, globs []string
	for _, r := range strings.Split(*redirect, ",") {
		if strings.Contains(r, "*") {
			globs = append(globs, r)
		} else {
			exact = append(exact, r)
		}
	}
	storage.RegisterClients(storage.WebClient(*clientID, secret, exact...))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcdev:", err)
		os.Exit(1)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, globStorage{storage.NewStorage(users), globs}, log, false)
	srv := &http.Server{Handler: router, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Println("issuer " + issuer)
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "oidcdev:", err)
		os.Exit(1)
	}
}
