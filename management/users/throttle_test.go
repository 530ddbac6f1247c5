package users

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/testkit/testenv"
)

// testThrottle is a throttle on the shared Redis with a namespace of its
// own and a clock the test moves.
type testThrottle struct {
	*Throttle
	mu  sync.Mutex
	at  time.Time
	ctx context.Context
}

func newTestThrottle(t *testing.T) *testThrottle {
	t.Helper()
	rdb := testenv.Get(t).Redis(t)
	tt := &testThrottle{Throttle: NewThrottle(rdb, "test-"+RandomToken()[:12]+"."), at: time.Now()}
	tt.now = func() time.Time { tt.mu.Lock(); defer tt.mu.Unlock(); return tt.at }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	tt.ctx = ctx
	return tt
}

func (tt *testThrottle) advance(d time.Duration) { tt.mu.Lock(); tt.at = tt.at.Add(d); tt.mu.Unlock() }

// try is one attempt: the wait it was refused with (0: let through, and
// its outcome recorded).
func (tt *testThrottle) try(t *testing.T, email, client string, outcome error) time.Duration {
	t.Helper()
	err := tt.Allow(tt.ctx, email, client)
	var te *ThrottledError
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := tt.Record(tt.ctx, email, client, outcome); err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestThrottlePair: one client's failures on one account are free up to
// Pair.Free, then each waits twice as long as the one before, up to the
// cap; the wait passed, one more attempt goes through; a success starts
// the pair again. Another client of the same account is not held back.
func TestThrottlePair(t *testing.T) {
	tt := newTestThrottle(t)
	tt.Pair = Delay{Free: 5, Base: time.Second, Cap: 8 * time.Second, Forget: time.Hour}
	const acct, attacker, owner = "owner@throttle.test", "192.0.2.1", "198.51.100.7"
	for i := 0; i < 5; i++ {
		if w := tt.try(t, acct, attacker, ErrBadPassword); w != 0 {
			t.Fatalf("failure %d waited %s", i+1, w)
		}
	}
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		if w := tt.try(t, acct, attacker, ErrBadPassword); w != want {
			t.Fatalf("after the failures, the wait is %s, want %s", w, want)
		}
		tt.advance(want - time.Millisecond)
		if w := tt.try(t, acct, attacker, ErrBadPassword); w != time.Second { // a wait under a second is said as one
			t.Fatalf("1 ms before the end of the wait: %s", w)
		}
		tt.advance(time.Millisecond)
		if w := tt.try(t, acct, attacker, ErrBadPassword); w != 0 {
			t.Fatalf("at the end of the wait: refused (%s)", w)
		}
	}
	// The owner, from another address, signs in at once, with a typo first.
	if w := tt.try(t, acct, owner, ErrBadPassword); w != 0 {
		t.Fatalf("the owner's typo: %s", w)
	}
	if w := tt.try(t, acct, owner, nil); w != 0 {
		t.Fatalf("the owner's sign-in: %s", w)
	}
	// A success resets its pair: the attacker's address, once it signs
	// in, has its free failures again.
	tt.advance(time.Minute)
	if w := tt.try(t, acct, attacker, nil); w != 0 {
		t.Fatalf("a success after the wait: %s", w)
	}
	for i := 0; i < 5; i++ {
		if w := tt.try(t, acct, attacker, ErrBadPassword); w != 0 {
			t.Fatalf("after a success, failure %d waited %s", i+1, w)
		}
	}
}

// TestThrottleOnlyFailures: successes and attempts that were no guess
// (the service unavailable) count nothing.
func TestThrottleOnlyFailures(t *testing.T) {
	tt := newTestThrottle(t)
	tt.Pair.Free, tt.Account.Free, tt.Client.Free = 2, 2, 2
	for i := 0; i < 20; i++ {
		outcome := error(nil)
		if i%2 == 1 {
			outcome = ErrBusy
		}
		if w := tt.try(t, "busy@throttle.test", "192.0.2.9", outcome); w != 0 {
			t.Fatalf("attempt %d (no failure so far) waited %s", i+1, w)
		}
	}
}

// TestThrottleAccountCeiling: failures from many unfamiliar addresses slow
// every unfamiliar address of the account past Account.Free, but not an
// address the owner signed in from before; a client's failures on many
// accounts slow that client past Client.Free, but not on an account it
// signed in to before (behind a proxy that is not trusted, its users).
func TestThrottleAccountCeiling(t *testing.T) {
	tt := newTestThrottle(t)
	tt.Account = Delay{Free: 3, Base: time.Second, Cap: time.Minute, Forget: time.Hour}
	tt.Client = Delay{Free: 4, Base: time.Second, Cap: time.Minute, Forget: time.Hour}
	const acct, home = "sprayed@throttle.test", "203.0.113.5"
	if w := tt.try(t, acct, home, nil); w != 0 {
		t.Fatal(w)
	}
	for _, c := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		if w := tt.try(t, acct, c, ErrBadPassword); w != 0 {
			t.Fatalf("failure from %s: %s", c, w)
		}
	}
	if w := tt.try(t, acct, "192.0.2.4", ErrBadPassword); w != time.Second {
		t.Fatalf("a fresh address past the account's ceiling: %s, want 1s", w)
	}
	if w := tt.try(t, acct, home, nil); w != 0 {
		t.Fatalf("the owner from a familiar address: %s", w)
	}
	// Another account is not slowed by this one's ceiling; the client's
	// own count is.
	spray := "192.0.2.66"
	// A user who signed in through the same address before (a proxy
	// that is not trusted: every user shares its address).
	if w := tt.try(t, "f@throttle.test", spray, nil); w != 0 {
		t.Fatal(w)
	}
	for i, a := range []string{"a@throttle.test", "b@throttle.test", "c@throttle.test", "d@throttle.test"} {
		if w := tt.try(t, a, spray, ErrBadPassword); w != 0 {
			t.Fatalf("account %d from one client: %s", i+1, w)
		}
	}
	if w := tt.try(t, "e@throttle.test", spray, ErrBadPassword); w != time.Second {
		t.Fatalf("a fifth account from one client: %s, want 1s", w)
	}
	if w := tt.try(t, "f@throttle.test", spray, nil); w != 0 {
		t.Fatalf("a user familiar with the address after its failures on other accounts: %s", w)
	}
}

// TestThrottleIPv6: an IPv6 client is its /64; IPv4 addresses are
// themselves.
func TestThrottleIPv6(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:fffe"}, {"::ffff:192.0.2.1", "192.0.2.1"}} {
		if Client(tc.a) != Client(tc.b) {
			t.Errorf("%s and %s are two clients (%s, %s)", tc.a, tc.b, Client(tc.a), Client(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{{"2001:db8:1:2::1", "2001:db8:1:3::1"}, {"192.0.2.1", "192.0.2.2"}} {
		if Client(tc.a) == Client(tc.b) {
			t.Errorf("%s and %s are one client", tc.a, tc.b)
		}
	}
	tt := newTestThrottle(t)
	tt.Pair.Free = 3
	for i := 0; i < 3; i++ {
		if w := tt.try(t, "v6@throttle.test", "2001:db8:7:7::"+string(rune('a'+i)), ErrBadPassword); w != 0 {
			t.Fatalf("failure %d: %s", i+1, w)
		}
	}
	if w := tt.try(t, "v6@throttle.test", "2001:db8:7:7::ffff", ErrBadPassword); w == 0 {
		t.Fatal("another address of the same /64 is not held back")
	}
}

// TestThrottleConcurrent: when the next failure brings a delay, of
// attempts let through at once only one goes on.
func TestThrottleConcurrent(t *testing.T) {
	tt := newTestThrottle(t)
	tt.Pair.Free = 1
	const acct, c = "race@throttle.test", "192.0.2.50"
	if err := tt.Allow(tt.ctx, acct, c); err != nil {
		t.Fatal(err)
	}
	var te *ThrottledError
	if err := tt.Allow(tt.ctx, acct, c); !errors.As(err, &te) {
		t.Fatalf("a second attempt while the first is checked: %v", err)
	}
	// The first one succeeds: the pair is free again.
	if err := tt.Record(tt.ctx, acct, c, nil); err != nil {
		t.Fatal(err)
	}
	if err := tt.Allow(tt.ctx, acct, c); err != nil {
		t.Fatalf("after the success: %v", err)
	}
}

// TestSlots: a user runs Limit downloads at once; one more is refused
// (TooMany, with a wait) until one ends; another user is not held back;
// a slot never given back is forgotten after Hold.
func TestSlots(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	s := NewSlots(rdb, "test-"+RandomToken()[:12]+".", 2, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r1, err := s.Take(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	var be *BusyError
	if _, err := s.Take(ctx, "u1"); !errors.As(err, &be) || !errors.Is(err, errkind.TooMany) || be.Wait() <= 0 {
		t.Fatalf("a third download: %v", err)
	}
	if _, err := s.Take(ctx, "u2"); err != nil {
		t.Fatalf("another user: %v", err)
	}
	r1()
	if _, err := s.Take(ctx, "u1"); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	short := NewSlots(rdb, s.ns, 1, 200*time.Millisecond)
	if _, err := short.Take(ctx, "u3"); err != nil {
		t.Fatal(err)
	}
	if _, err := short.Take(ctx, "u3"); err == nil {
		t.Fatal("a second slot of one")
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := short.Take(ctx, "u3"); err != nil {
		t.Fatalf("a slot past its hold: %v", err)
	}
}
