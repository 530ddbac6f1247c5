package redisstore_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/masterkey"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestSharedSecret: the secret is kept in Redis only wrapped; every caller
// gets the same one; a plaintext secret (an earlier version's, or planted)
// is refused and left alone until WrapPlaintextSecret adopts it; a master key rotation rewraps; a wrong master key or an
// altered value is ErrSecret and leaves the value alone.
func TestSharedSecret(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	defer rdb.Close()
	ctx := t.Context()
	mk := func() *masterkey.Keys {
		k, err := masterkey.Parse(masterkey.Generate())
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	name := func() string { return "test:secret:" + uuid.NewString() }
	stored := func(key string) string { return rdb.Get(ctx, key).Val() }

	t.Run("new", func(t *testing.T) {
		k, key := mk(), name()
		var wg sync.WaitGroup
		got := make([][]byte, 8)
		for i := range got {
			wg.Go(func() {
				var err error
				if got[i], err = redisstore.SharedSecret(ctx, rdb, key, k); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for i := range got {
			if len(got[i]) != 32 || string(got[i]) != string(got[0]) {
				t.Fatalf("caller %d got another secret", i)
			}
		}
		v := stored(key)
		if !masterkey.Wrapped(v) || strings.Contains(v, hex.EncodeToString(got[0])) {
			t.Errorf("stored %q: not wrapped", v)
		}
	})

	t.Run("plaintext is refused until wrapped deliberately", func(t *testing.T) {
		k, key := mk(), name()
		old := []byte(strings.Repeat("p", 32))
		plain := hex.EncodeToString(old)
		rdb.Set(ctx, key, plain, 0)
		got, err := redisstore.SharedSecret(ctx, rdb, key, k)
		if !errors.Is(err, redisstore.ErrPlaintextSecret) || !errors.Is(err, redisstore.ErrSecret) || got != nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("a plaintext secret: %q %v", got, err)
		}
		if v := stored(key); v != plain {
			t.Fatalf("the refused value was changed: %q", v)
		}
		if ok, err := redisstore.WrapPlaintextSecret(ctx, rdb, key, k); !ok || err != nil {
			t.Fatalf("WrapPlaintextSecret: %v %v", ok, err)
		}
		if v := stored(key); !masterkey.Wrapped(v) || strings.Contains(v, plain) {
			t.Errorf("not rewritten wrapped: %q", v)
		}
		if got, err := redisstore.SharedSecret(ctx, rdb, key, k); err != nil || string(got) != string(old) {
			t.Errorf("read once wrapped: %q %v", got, err)
		}
		// Wrapped already, or absent: nothing to do.
		if ok, err := redisstore.WrapPlaintextSecret(ctx, rdb, key, k); ok || err != nil {
			t.Errorf("wrapping a wrapped secret: %v %v", ok, err)
		}
		if ok, err := redisstore.WrapPlaintextSecret(ctx, rdb, name(), k); ok || err != nil {
			t.Errorf("wrapping an absent secret: %v %v", ok, err)
		}
	})

	t.Run("master key rotation", func(t *testing.T) {
		oldText, newText, key := masterkey.Generate(), masterkey.Generate(), name()
		oldK, _ := masterkey.Parse(oldText)
		first, err := redisstore.SharedSecret(ctx, rdb, key, oldK)
		if err != nil {
			t.Fatal(err)
		}
		both, _ := masterkey.Parse(newText + "\n" + oldText)
		if got, err := redisstore.SharedSecret(ctx, rdb, key, both); err != nil || string(got) != string(first) {
			t.Fatalf("new+old: %v", err)
		}
		newK, _ := masterkey.Parse(newText)
		if got, err := redisstore.SharedSecret(ctx, rdb, key, newK); err != nil || string(got) != string(first) {
			t.Fatalf("new alone after the rewrap: %v", err)
		}
	})

	t.Run("unusable", func(t *testing.T) {
		k := mk()
		wrapped := name()
		if _, err := redisstore.SharedSecret(ctx, rdb, wrapped, k); err != nil {
			t.Fatal(err)
		}
		v := stored(wrapped)
		altered := name()
		raw := []byte(v)
		raw[len(raw)-3] ^= 1
		rdb.Set(ctx, altered, string(raw), 0)
		moved := name()
		rdb.Set(ctx, moved, v, 0) // another key name: the additional data differs
		garbage := name()
		rdb.Set(ctx, garbage, "not a secret", 0)
		short := name()
		rdb.Set(ctx, short, "abcd", 0)
		for what, c := range map[string]struct {
			key  string
			keys *masterkey.Keys
		}{
			"another master key": {wrapped, mk()},
			"altered":            {altered, k},
			"moved":              {moved, k},
			"garbage":            {garbage, k},
			"short plaintext":    {short, k},
			"no master key":      {wrapped, nil},
		} {
			before := stored(c.key)
			if _, err := redisstore.SharedSecret(ctx, rdb, c.key, c.keys); !errors.Is(err, redisstore.ErrSecret) {
				t.Errorf("%s: %v, want ErrSecret", what, err)
			}
			if after := stored(c.key); after != before {
				t.Errorf("%s: the stored value changed", what)
			}
		}
	})
}
