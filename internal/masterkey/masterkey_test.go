package masterkey

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	k32 := strings.Repeat("k", 32)
	std := base64.StdEncoding.EncodeToString([]byte(k32))
	for _, tc := range []struct {
		name, text string
		keys       int
		ok         bool
	}{
		{"standard base64", std, 1, true},
		{"trailing newline", std + "\n", 1, true},
		{"url alphabet, no padding", base64.RawURLEncoding.EncodeToString([]byte("\xfb\xff" + k32[2:])), 1, true},
		{"two lines and a comment", "# new\n" + Generate() + "\n\n" + std + "\n", 2, true},
		{"comma-separated", Generate() + "," + std, 2, true},
		{"empty", "", 0, false},
		{"only comments", "# nothing\n\n", 0, false},
		{"16 bytes", base64.StdEncoding.EncodeToString([]byte(k32[:16])), 0, false},
		{"33 bytes", base64.StdEncoding.EncodeToString([]byte(k32 + "x")), 0, false},
		{"not base64", "this is not a key!", 0, false},
		{"raw bytes", k32, 0, false},
		{"second line bad", std + "\nnope", 0, false},
	} {
		k, err := Parse(tc.text)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.name, err)
			continue
		}
		if err != nil {
			if strings.Contains(err.Error(), k32) || strings.Contains(err.Error(), std) {
				t.Errorf("%s: the error repeats key material: %v", tc.name, err)
			}
			continue
		}
		if len(k.aeads) != tc.keys {
			t.Errorf("%s: %d keys, want %d", tc.name, len(k.aeads), tc.keys)
		}
	}
}

func TestWrapUnwrap(t *testing.T) {
	a, _ := Parse(Generate())
	b, _ := Parse(Generate())
	secret := []byte(strings.Repeat("s", 32))
	w := a.Wrap("ec:cursor-key", secret)
	if !Wrapped(w) || strings.Contains(w, "sss") {
		t.Fatalf("wrapped form %q", w)
	}
	if w2 := a.Wrap("ec:cursor-key", secret); w2 == w {
		t.Error("two wraps of one secret are equal: the nonce is not random")
	}
	got, current, err := a.Unwrap("ec:cursor-key", w)
	if err != nil || !current || string(got) != string(secret) {
		t.Fatalf("round trip: %q %v %v", got, current, err)
	}
	fail := func(name string, k *Keys, key, v string) {
		t.Helper()
		if _, _, err := k.Unwrap(key, v); !errors.Is(err, ErrUnwrap) {
			t.Errorf("%s: %v, want ErrUnwrap", name, err)
		}
	}
	fail("another master key", b, "ec:cursor-key", w)
	fail("another Redis key name", a, "ec:bid-signing-key:1", w)
	// Any change of the wrapped bytes (nonce, ciphertext or tag) fails.
	raw, _ := base64.RawURLEncoding.DecodeString(w[len(Prefix):])
	for i := range raw {
		c := append([]byte(nil), raw...)
		c[i] ^= 0x10
		fail("altered byte", a, "ec:cursor-key", Prefix+base64.RawURLEncoding.EncodeToString(c))
	}
	fail("truncated", a, "ec:cursor-key", w[:len(w)-4])
	fail("empty body", a, "ec:cursor-key", Prefix)
	fail("not base64", a, "ec:cursor-key", Prefix+"!!!")
	fail("plaintext hex", a, "ec:cursor-key", strings.Repeat("ab", 32))

	// Rotation: "new, old" opens what old wrapped, and says it is not
	// current; new wraps.
	rot, err := Parse(Generate() + "\n" + "# old\n")
	if err != nil {
		t.Fatal(err)
	}
	rot.aeads = append(rot.aeads, a.aeads[0])
	got, current, err = rot.Unwrap("ec:cursor-key", w)
	if err != nil || current || string(got) != string(secret) {
		t.Fatalf("old key in a rotation: %q current=%v %v", got, current, err)
	}
	if _, current, err := rot.Unwrap("ec:cursor-key", rot.Wrap("ec:cursor-key", secret)); err != nil || !current {
		t.Errorf("new key in a rotation: current=%v %v", current, err)
	}
	if s := a.String(); strings.Contains(s, "s") && !strings.HasPrefix(s, "masterkey.Keys") {
		t.Errorf("String %q", s)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret.key")
	key := Generate()
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := Load("", ""); k != nil || err != nil {
		t.Errorf("nothing configured: %v %v", k, err)
	}
	fromFile, err := Load(file, "")
	if err != nil {
		t.Fatal(err)
	}
	fromValue, err := Load("", key)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fromValue.Unwrap("n", fromFile.Wrap("n", []byte("x"))); err != nil {
		t.Errorf("file and variable of the same key differ: %v", err)
	}
	if _, err := Load(file, key); err == nil {
		t.Error("both file and variable: no error")
	}
	if _, err := Load(filepath.Join(dir, "missing"), ""); err == nil {
		t.Error("missing file: no error")
	}
	bad := filepath.Join(dir, "bad.key")
	_ = os.WriteFile(bad, []byte("short"), 0o600)
	if _, err := Load(bad, ""); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad file: %v", err)
	}
}
