// Package chdb runs SQL on a current ClickHouse embedded as a library
// (chDB's libchdb.so, installed by deploy/local/install.sh into
// .endcap/chdb), for tests that check a statement on both the local stack's
// ClickHouse 18.16 and a current version: see docs/design/clickhouse.md.
//
// The library is driven by chdb-go in a child process of its own
// (chdbserve), which Start builds and runs: chdb-go loads the library when
// it is initialised and panics if it cannot, so no test binary imports it.
package chdb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// LibEnv is the variable chdb-go reads the library's path from.
const LibEnv = "CHDB_LIB_PATH"

// libRel is where deploy/local/install.sh puts the library, under the
// repository's root.
var libRel = filepath.Join(".endcap", "chdb", "node_modules", "@chdb", "lib-linux-x64-gnu", "libchdb.so")

// ErrMissing: the library is not installed.
var ErrMissing = errors.New("chdb: libchdb.so not installed (run deploy/local/install.sh)")

// LibPath returns the library's path: $CHDB_LIB_PATH when set, else the
// one deploy/local/install.sh installs.
func LibPath() (string, error) {
	if p := os.Getenv(LibEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrMissing, LibEnv, p, err)
		}
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, libRel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return p, nil
}

// repoRoot is the module's root: the directory of this file, two levels up.
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("chdb: cannot locate the repository")
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file))), nil
}

// Engine is one embedded chDB engine in a child process. Its methods are safe for
// concurrent use; statements run one at a time.
type Engine struct {
	replayMu sync.Mutex // one replay at a time: each sets the engine's current database
	mu       sync.Mutex
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	stderr   *strings.Builder
	done     chan struct{}
	version  string
}

// Error is a statement the engine refused.
type Error struct {
	Query string
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

// Start builds chdbserve and starts it on a data directory of its own under
// dir. It needs the go command (the tests run under it).
func Start(ctx context.Context, dir string) (*Engine, error) {
	lib, err := LibPath()
	if err != nil {
		return nil, err
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go" // where the project's scripts put it on PATH
	}
	bin := filepath.Join(dir, "chdbserve")
	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(bctx, goBin, "build", "-o", bin, "./testkit/chdb/chdbserve")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("chdb: build chdbserve: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), LibEnv+"="+lib)
	e := &Engine{cmd: cmd, stderr: &strings.Builder{}, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{b: e.stderr}
	if e.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	e.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chdb: start chdbserve: %w", err)
	}
	go func() { _ = cmd.Wait(); close(e.done) }()
	v, err := e.Query(ctx, "SELECT version()", "TabSeparated")
	if err != nil {
		e.Close()
		return nil, err
	}
	e.version = strings.TrimSpace(v)
	return e, nil
}

// Version is the engine's version() (26.7.2.1 for chdb 3.4.0).
func (e *Engine) Version() string { return e.version }

// Query runs one statement and returns its result in format (TabSeparated
// when empty). A statement the engine refuses is an *Error. The context
// bounds the wait: past its deadline the child process is killed, as a
// statement cannot be cancelled inside the library.
func (e *Engine) Query(ctx context.Context, query, format string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.done:
		return "", fmt.Errorf("chdb: chdbserve exited: %s", e.stderrText())
	default:
	}
	req, _ := json.Marshal(map[string]string{"query": query, "format": format})
	type result struct {
		line []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		if _, err := e.in.Write(append(req, '\n')); err != nil {
			ch <- result{err: err}
			return
		}
		line, err := e.out.ReadBytes('\n')
		ch <- result{line, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		_ = e.cmd.Process.Kill()
		<-e.done
		return "", fmt.Errorf("chdb: %w (chdbserve killed)", ctx.Err())
	}
	if r.err != nil {
		<-e.done
		return "", fmt.Errorf("chdb: chdbserve: %v: %s", r.err, e.stderrText())
	}
	var a struct{ Out, Error string }
	if err := json.Unmarshal(r.line, &a); err != nil {
		return "", fmt.Errorf("chdb: bad answer %.200q: %w", r.line, err)
	}
	if a.Error != "" {
		return "", &Error{Query: query, Msg: a.Error}
	}
	return a.Out, nil
}

// Exec is Query for a statement whose result is not read.
func (e *Engine) Exec(ctx context.Context, query string) error {
	_, err := e.Query(ctx, query, "TabSeparated")
	return err
}

// Close ends the child process.
func (e *Engine) Close() {
	_ = e.in.Close()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

func (e *Engine) stderrText() string {
	lw := e.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return strings.TrimSpace(e.stderr.String())
}

type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 64<<10 {
		w.b.Write(p)
	}
	return len(p), nil
}

// ForTest starts an engine for one test, stopped when the test ends. When
// the library is not installed the test is skipped, unless
// ENDCAP_TEST_REQUIRE_STACK=1 (as `make test` sets), which makes it fail.
func ForTest(t testing.TB) *Engine {
	t.Helper()
	if testing.Short() {
		t.Skip("needs chDB (not in -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, err := Start(ctx, t.TempDir())
	if err != nil {
		if errors.Is(err, ErrMissing) && os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}
