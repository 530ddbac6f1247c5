package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/deploy/localstack"
)

// OIDCUser is a user of the test OpenID provider.
type OIDCUser struct {
	ID            string
	Username      string // the provider's login form's name; its preferred_username claim
	Password      string
	Email         string
	EmailVerified bool
}

// OIDCProvider is a running OpenID provider: zitadel's example provider
// (tools/oidcdev, a module of its own, built here with `go build`), with
// a web client of ClientID and the secret in SecretFile whose redirect
// URIs are http://127.0.0.1:*/console/sso/callback.
type OIDCProvider struct {
	Issuer, ClientID, SecretFile string
}

var (
	oidcBuild    sync.Once
	oidcBin      string
	oidcBuildErr error
)

// OIDC builds (once per test binary) and starts an OpenID provider with
// users; it stops at the test's end.
func OIDC(t testing.TB, users []OIDCUser) OIDCProvider {
	t.Helper()
	oidcBuild.Do(func() {
		root, err := localstack.RepoRoot()
		if err != nil {
			oidcBuildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "endcap-oidcdev-")
		if err != nil {
			oidcBuildErr = err
			return
		}
		oidcBin = filepath.Join(dir, "oidcdev")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", oidcBin, ".")
		cmd.Dir = filepath.Join(root, "tools", "oidcdev")
		// Its own module, as tools/lint: GOWORK=off so that a go.work at the root cannot pull it into the main build.
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			oidcBuildErr = &buildError{err: err, out: string(out)}
		}
	})
	if oidcBuildErr != nil {
		t.Fatalf("building tools/oidcdev: %v", oidcBuildErr)
	}
	dir := t.TempDir()
	m := map[string]any{}
	for _, u := range users {
		m[u.ID] = map[string]any{"ID": u.ID, "Username": u.Username, "Password": u.Password, "FirstName": u.Username, "LastName": "Test",
			"Email": u.Email, "EmailVerified": u.EmailVerified, "PreferredLanguage": "en"}
	}
	b, _ := json.Marshal(m)
	usersFile, secretFile := filepath.Join(dir, "users.json"), filepath.Join(dir, "secret")
	if err := os.WriteFile(usersFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte(randomKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, oidcBin, "-users", usersFile, "-client-id", "endcap-console", "-client-secret-file", secretFile,
		"-redirect", "http://127.0.0.1:*/console/sso/callback")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stderr = &logWriter{t: t}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "issuer ") {
				lines <- strings.TrimPrefix(l, "issuer ")
			}
		}
		close(lines)
	}()
	select {
	case issuer, ok := <-lines:
		if !ok {
			t.Fatal("tools/oidcdev stopped before it served")
		}
		return OIDCProvider{Issuer: issuer, ClientID: "endcap-console", SecretFile: secretFile}
	case <-time.After(30 * time.Second):
		t.Fatal("tools/oidcdev did not start in 30 s")
	}
	return OIDCProvider{}
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// logWriter writes a child's output to the test's log.
type logWriter struct{ t testing.TB }

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
