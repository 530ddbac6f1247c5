// Package testapp starts an in-process Endcap (app.New, Listen, Run) for a
// test, against the real servers of testenv, and stops it when the test
// ends. It is the one way a test starts the whole process; what differs
// from test to test is an option: the target, the configuration (or changes
// to the test one), a marketplace with its keys.
package testapp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/testkit/testenv"
)

// How long a process may take to be ready, and to stop once cancelled.
const (
	readyWithin = 90 * time.Second
	stopWithin  = 20 * time.Second
)

// App is a running process.
type App struct {
	*app.App
	// URL is the API's base URL ("http://127.0.0.1:port").
	URL string
	// Cfg is the configuration it runs with.
	Cfg config.Config
	// Brokers are the Kafka brokers of the configuration testapp made
	// (nil when the test gave its own, WithConfig).
	Brokers []string
	// Marketplace and its keys, with WithMarketplace.
	Marketplace    accounts.Marketplace
	MarketplaceKey string
	AdvancedKey    string

	stop func()
}

// Stop cancels the process and waits for it to end; a test may call it
// before the cleanup does (the second call does nothing).
func (a *App) Stop() { a.stop() }

// An Option is what differs between two starts.
type Option func(*options)

type options struct {
	target  app.Target
	cfg     *config.Config
	changes []func(*config.Config, []string)
	mp      *[3]string
}

// Target runs the process of one target (app.TargetAll by default).
func Target(t app.Target) Option { return func(o *options) { o.target = t } }

// WithConfig runs on cfg rather than on the test configuration testapp
// makes (testenv's servers, a kfake broker of the test's own).
func WithConfig(cfg config.Config) Option { return func(o *options) { c := cfg; o.cfg = &c } }

// Configure changes the configuration before the process starts; brokers
// are those of the configuration (nil with WithConfig). Changes apply in
// their order.
func Configure(change func(c *config.Config, brokers []string)) Option {
	return func(o *options) { o.changes = append(o.changes, change) }
}

// WithMarketplace makes a marketplace once the process is ready, with a
// marketplace key and an advanced key (App.Marketplace, MarketplaceKey,
// AdvancedKey); the keys authenticate on the process before Start returns.
func WithMarketplace(name, currency, timezone string) Option {
	return func(o *options) { o.mp = &[3]string{name, currency, timezone} }
}

// Config is the test configuration: testenv's servers and a kfake broker
// of the test's own, whose addresses it returns too.
func Config(t testing.TB) (config.Config, []string) {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	return env.Config(t, brokers), brokers
}

// Start runs a process and returns once it is ready (its state loaded, its
// /readyz answering 200), its marketplace made when asked. It is stopped
// when the test ends. A process that ends before it is ready fails the test
// with its error.
func Start(t testing.TB, opts ...Option) *App {
	t.Helper()
	o := options{target: app.TargetAll}
	for _, opt := range opts {
		opt(&o)
	}
	var cfg config.Config
	var brokers []string
	if o.cfg != nil {
		cfg = *o.cfg
	} else {
		cfg, brokers = Config(t)
	}
	for _, change := range o.changes {
		change(&cfg, brokers)
	}
	a, err := app.New(cfg, o.target, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	ended := false // Run has returned (and done is read)
	var once sync.Once
	s := &App{App: a, URL: "http://" + addr.String(), Cfg: cfg, Brokers: brokers}
	s.stop = func() {
		once.Do(func() {
			cancel()
			if ended {
				return
			}
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Logf("%s process ended: %v", o.target, err)
				}
			case <-time.After(stopWithin):
				t.Errorf("%s process did not stop within %s", o.target, stopWithin)
			}
		})
	}
	t.Cleanup(s.stop)

	// Ready: the state loaded, unless the process ends first.
	wctx, wcancel := context.WithTimeout(ctx, readyWithin)
	defer wcancel()
	ready := make(chan error, 1)
	go func() { ready <- a.WaitReady(wctx) }()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("%s process not ready: %v", o.target, err)
		}
	case err := <-done:
		ended = true
		wcancel()
		if werr := <-ready; werr != nil && !errors.Is(werr, context.Canceled) {
			t.Logf("waiting for it to be ready: %v", werr)
		}
		t.Fatalf("%s process ended before it was ready: %v", o.target, err)
	}
	testenv.Eventually(t, readyWithin, func() error {
		if st, body := Readyz(s.URL); st != http.StatusOK {
			return testenv.Errorf("%s /readyz %d %s", o.target, st, body)
		}
		return nil
	})
	if o.mp != nil {
		s.makeMarketplace(t, wctx, o.mp[0], o.mp[1], o.mp[2])
	}
	return s
}

func (s *App) makeMarketplace(t testing.TB, ctx context.Context, name, currency, timezone string) {
	t.Helper()
	var err error
	if s.Marketplace, err = s.Accounts.CreateMarketplace(ctx, name, currency, timezone); err != nil {
		t.Fatal(err)
	}
	if s.MarketplaceKey, _, err = s.Accounts.CreateKey(ctx, s.Marketplace.ID, accounts.KeyMarketplace); err != nil {
		t.Fatal(err)
	}
	if s.AdvancedKey, _, err = s.Accounts.CreateKey(ctx, s.Marketplace.ID, accounts.KeyAdvanced); err != nil {
		t.Fatal(err)
	}
	// The keys authenticate once this process's view has them.
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, k := range []string{s.MarketplaceKey, s.AdvancedKey} {
			if _, ok := s.Accounts.Authenticate(k); !ok {
				return errors.New("a key is not in the view yet")
			}
		}
		return nil
	})
}

// Readyz is the status and body of GET url/readyz (0 and the error when
// it does not answer within 2 s).
func Readyz(url string) (int, string) {
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

// Fail runs a process of cfg that must end by itself with an error within
// the given time, and returns that error (New's, when New refuses cfg). A
// process still running then, or ending without an error, fails the test.
func Fail(t testing.TB, cfg config.Config, target app.Target, within time.Duration) error {
	t.Helper()
	a, err := app.New(cfg, target, testenv.Logger(t))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case err = <-done:
	case <-time.After(within):
		cancel()
		select {
		case err = <-done:
		case <-time.After(stopWithin):
		}
		t.Fatalf("the %s process still runs %s after its start (stopped: %v)", target, within, err)
	}
	if err == nil {
		t.Fatalf("the %s process ended without an error", target)
	}
	return err
}
