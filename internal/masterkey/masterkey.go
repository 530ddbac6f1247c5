// Package masterkey wraps the secrets Endcap shares between its processes
// through Redis (the resolvedBidId signing key, the list cursor key) with a
// master key that only the processes hold: AES-256-GCM, the secret's Redis
// key name as additional data, so that a wrapped value is useless to whoever
// can read Redis, and cannot be moved to another name or altered unnoticed.
//
// The master key comes from a file (ENDCAP_SECRET_KEY_FILE) or a variable
// (ENDCAP_SECRET_KEY): 32 random bytes in base64. To rotate it, a file (or
// the variable, comma-separated) may list several: the first wraps, every
// one unwraps, and a secret found wrapped with another than the first is
// wrapped again with the first (docs/operations/operations.md, Secrets).
package masterkey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Size is the length of a master key in bytes.
const Size = 32

// Prefix starts every wrapped value (a plaintext secret of earlier versions
// is 64 hexadecimal digits, so the two cannot be confused).
const Prefix = "ecw1:"

// ErrUnwrap means a wrapped value does not open with any configured master
// key: it was wrapped with another master key, or altered, or moved from
// another Redis key name.
var ErrUnwrap = errors.New("cannot be unwrapped with the configured master key: it was wrapped with another master key, or altered")

// derivation labels the AES key made from a master key, so that a master
// key that is (wrongly) also used for something else never gives the same
// key.
const derivation = "endcap/masterkey/wrap/v1"

// Keys are the configured master keys: the first wraps, all unwrap.
type Keys struct {
	aeads []cipher.AEAD
}

// String never shows key material.
func (k *Keys) String() string { return fmt.Sprintf("masterkey.Keys{%d}", len(k.aeads)) }

// Generate returns a new master key in its text form (base64).
func Generate() string {
	var b [Size]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("masterkey: no randomness: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(b[:])
}

// Parse reads master keys: base64 (standard or URL alphabet, padding
// optional) of exactly 32 bytes each, separated by newlines or commas;
// blank lines and lines starting with # are skipped.
func Parse(text string) (*Keys, error) {
	var k Keys
	n := 0
	for _, line := range strings.Split(strings.ReplaceAll(text, ",", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		raw, err := decode(line)
		if err != nil || len(raw) != Size {
			return nil, fmt.Errorf("master key %d: must be %d random bytes in base64 (head -c %d /dev/urandom | base64)", n, Size, Size)
		}
		mac := hmac.New(sha256.New, raw)
		mac.Write([]byte(derivation))
		block, err := aes.NewCipher(mac.Sum(nil))
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		k.aeads = append(k.aeads, aead)
	}
	if n == 0 {
		return nil, errors.New("no master key given")
	}
	return &k, nil
}

func decode(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// Load reads the master keys from file or, when file is empty, from value.
// Both empty: nil, nil (no master key). Both given is an error: which one
// is meant would be a guess.
func Load(file, value string) (*Keys, error) {
	switch {
	case file != "" && value != "":
		return nil, errors.New("give the master key as ENDCAP_SECRET_KEY_FILE or ENDCAP_SECRET_KEY, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("master key file: %w", err)
		}
		k, err := Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("master key file %s: %w", file, err)
		}
		return k, nil
	case value != "":
		k, err := Parse(value)
		if err != nil {
			return nil, fmt.Errorf("ENDCAP_SECRET_KEY: %w", err)
		}
		return k, nil
	}
	return nil, nil
}

// Wrap seals secret for the Redis key name with the first master key.
func (k *Keys) Wrap(name string, secret []byte) string {
	aead := k.aeads[0]
	buf := make([]byte, aead.NonceSize(), aead.NonceSize()+len(secret)+aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		panic("masterkey: no randomness: " + err.Error())
	}
	buf = aead.Seal(buf, buf, secret, []byte(name))
	return Prefix + base64.RawURLEncoding.EncodeToString(buf)
}

// Wrapped reports whether a stored value is in the wrapped form.
func Wrapped(value string) bool { return strings.HasPrefix(value, Prefix) }

// Unwrap opens a value that Wrap made for name. current is false when a
// master key other than the first opened it: the caller should wrap the
// secret again (rotation).
func (k *Keys) Unwrap(name, value string) (secret []byte, current bool, err error) {
	if !Wrapped(value) {
		return nil, false, ErrUnwrap
	}
	raw, err := base64.RawURLEncoding.DecodeString(value[len(Prefix):])
	if err != nil {
		return nil, false, ErrUnwrap
	}
	for i, aead := range k.aeads {
		ns := aead.NonceSize()
		if len(raw) < ns+aead.Overhead() {
			return nil, false, ErrUnwrap
		}
		if secret, err := aead.Open(nil, raw[:ns], raw[ns:], []byte(name)); err == nil {
			return secret, i == 0, nil
		}
	}
	return nil, false, ErrUnwrap
}
