package accounts_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// open starts a view of the accounts topic on brokers and waits until it
// caught up.
func open(t *testing.T, brokers []string) (*accounts.Service, *statelog.Log) {
	t.Helper()
	var acc *accounts.Service
	sl := testenv.StateLog(t, brokers, testenv.StateLogOptions{Accounts: true}, func(l *statelog.Log) { acc = accounts.New(l) })
	return acc, sl
}

func TestMarketplaceValidation(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	acc, _ := open(t, brokers)
	ctx := t.Context()
	for _, c := range []struct{ name, cur, tz, want string }{
		{"", "USD", "UTC", "name"},
		{strings.Repeat("n", 201), "USD", "UTC", "name"},
		{"m", "XYZ", "UTC", "currency"},
		{"m", "usd", "UTC", ""},
		{"m", "USD", "Mars/Olympus", "timezone"},
		{"m", "USD", "", "timezone"},
		{"m", "EUR", "Europe/Paris", ""},
	} {
		m, err := acc.CreateMarketplace(ctx, c.name, c.cur, c.tz)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q %q %q: %v", c.name, c.cur, c.tz, err)
			} else if m.Currency != strings.ToUpper(c.cur) {
				t.Errorf("currency %q stored as %q", c.cur, m.Currency)
			}
			continue
		}
		if !errors.Is(err, accounts.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q %q: err %v, want invalid %s", c.name, c.cur, c.tz, err, c.want)
		}
	}
}

// TestKeysRebuildAndRevoke: keys authenticate at once (read-your-writes),
// a fresh process rebuilds the same view from Kafka, and a revocation made
// by one process is seen by another.
func TestKeysRebuildAndRevoke(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	a1, _ := open(t, brokers)
	ctx := t.Context()
	m, err := a1.CreateMarketplace(ctx, "Shop", "USD", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	mk, key, err := a1.CreateKey(ctx, m.ID, accounts.KeyMarketplace)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(mk, "ecm_") || len(mk) != 44 || strings.Contains(key.Hash, mk) {
		t.Fatalf("key %q / stored %+v", mk, key)
	}
	if p, ok := a1.Authenticate(mk); !ok || p.Marketplace.ID != m.ID || p.Key.Type != accounts.KeyMarketplace {
		t.Fatalf("authenticate right after create: %v %+v", ok, p)
	}
	if _, _, err := a1.CreateKey(ctx, "no-such-marketplace", accounts.KeyAdvanced); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("key for unknown marketplace: %v", err)
	}
	for _, bad := range []string{"", "short", mk + "x", strings.ToUpper(mk), strings.Repeat("a", 300)} {
		if _, ok := a1.Authenticate(bad); ok {
			t.Errorf("authenticated %q", bad)
		}
	}

	a2, _ := open(t, brokers)
	if p, ok := a2.Authenticate(mk); !ok || p.Marketplace.Name != "Shop" || p.Marketplace.Location().String() != "America/New_York" {
		t.Fatalf("rebuilt view: %v %+v", ok, p)
	}
	if _, err := a2.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := a2.Authenticate(mk); ok {
		t.Error("revoked key still authenticates in the revoking process")
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if _, ok := a1.Authenticate(mk); ok {
			return errors.New("revoked key still authenticates in the other process")
		}
		return nil
	})
	if k, err := a1.RevokeKey(ctx, key.ID); err != nil || k.RevokedAt == nil {
		t.Errorf("revoking twice: %v %+v", err, k)
	}
}

// TestConcurrentWritesOneEntity: of concurrent writes expecting the same
// version, exactly one wins and the others get ErrConflict.
func TestConcurrentWritesOneEntity(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	_, sl := open(t, brokers)
	ctx := t.Context()
	if _, err := sl.Append(ctx, "thing", "x", 0, map[string]int{"v": 0}, false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sl.Append(ctx, "thing", "x", 1, map[string]int{"v": i}, false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, statelog.ErrConflict):
				conflicts++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != 7 || sl.Version("thing", "x") != 2 {
		t.Errorf("wins %d conflicts %d version %d", wins, conflicts, sl.Version("thing", "x"))
	}
}

// TestVendorScopedKey: an advanced key may be scoped to a vendor; the scope
// is on the key a process rebuilds from Kafka; a marketplace key, or a vendor
// id that is not short text, is refused.
func TestVendorScopedKey(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	a1, _ := open(t, brokers)
	ctx := t.Context()
	m, err := a1.CreateMarketplace(ctx, "Shop", "EUR", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	secret, k, err := a1.CreateKeyWith(ctx, m.ID, accounts.KeyAdvanced, accounts.KeyOptions{VendorID: " v-1 "})
	if err != nil || k.VendorID != "v-1" {
		t.Fatalf("vendor-scoped key: %v %+v", err, k)
	}
	a2, _ := open(t, brokers)
	if p, ok := a2.Authenticate(secret); !ok || p.Key.VendorID != "v-1" || p.Key.Type != accounts.KeyAdvanced {
		t.Fatalf("rebuilt: %v %+v", ok, p)
	}
	if _, _, err := a1.CreateKey(ctx, m.ID, accounts.KeyAdvanced); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		typ    accounts.KeyType
		vendor string
	}{
		{accounts.KeyMarketplace, "v-1"},
		{accounts.KeyAdvanced, strings.Repeat("v", accounts.MaxKeyVendor+1)},
		{accounts.KeyAdvanced, "v\x00"},
		{accounts.KeyAdvanced, "\xff"},
	} {
		if _, _, err := a1.CreateKeyWith(ctx, m.ID, bad.typ, accounts.KeyOptions{VendorID: bad.vendor}); !errors.Is(err, accounts.ErrInvalid) {
			t.Errorf("%s key scoped to %q: %v", bad.typ, bad.vendor, err)
		}
	}
}
