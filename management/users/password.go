package users

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/endcap/endcap/internal/errkind"
)

// Argon2id parameters (the OWASP minimum for argon2id: 19 MiB, 2 passes,
// one lane), about 30 ms of one core each.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
)

// hashing bounds the hashes computed at once (each holds argonMemoryKiB):
// a burst of sign-ins waits here instead of taking the process's memory,
// for hashSlotWait at most: a flood of attempts is answered "busy" at once
// rather than holding every request behind it for its whole deadline.
var hashing = make(chan struct{}, 4)

// hashSlotWait is the longest wait for a hashing slot (a hash takes about
// 30 ms: four slots serve about 130 a second).
const hashSlotWait = 250 * time.Millisecond

// ErrBusy means the process could not start a hash within hashSlotWait
// (or before ctx ended).
var ErrBusy = errkind.New(errkind.Unavailable, "too many sign-ins at once; retry in a moment")

func withHashSlot(ctx context.Context, fn func()) error {
	select {
	case hashing <- struct{}{}:
	default:
		wait := time.NewTimer(hashSlotWait)
		defer wait.Stop()
		select {
		case hashing <- struct{}{}:
		case <-wait.C:
			return ErrBusy
		case <-ctx.Done():
			return ErrBusy
		}
	}
	defer func() { <-hashing }()
	fn()
	return nil
}

// HashPassword returns the PHC string of an argon2id hash of p with a
// random salt: $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func HashPassword(ctx context.Context, p string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	var key []byte
	if err := withHashSlot(ctx, func() { key = argon2.IDKey([]byte(p), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen) }); err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// VerifyPassword says whether p matches a PHC string of HashPassword (with
// the parameters it records, so that they can be raised later).
func VerifyPassword(ctx context.Context, p, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, fmt.Errorf("users: not an argon2id hash")
	}
	var version int
	var mem, iter uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, fmt.Errorf("users: argon2 version %q", parts[2])
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &iter, &threads); err != nil || mem == 0 || mem > 1<<20 || iter == 0 || iter > 20 || threads == 0 {
		return false, fmt.Errorf("users: argon2 parameters %q", parts[3])
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, fmt.Errorf("users: argon2 salt: %w", err)
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 64 {
		return false, fmt.Errorf("users: argon2 hash")
	}
	var got []byte
	if err := withHashSlot(ctx, func() { got = argon2.IDKey([]byte(p), salt, iter, mem, threads, uint32(len(want))) }); err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

var (
	dummyOnce sync.Once
	dummy     string
)

// dummyHash is a hash to verify against when there is no user, so that an
// unknown address takes as long as a wrong password.
func dummyHash() string {
	dummyOnce.Do(func() {
		dummy, _ = HashPassword(context.Background(), "no user has this password: it only costs time")
	})
	return dummy
}

func decode(b []byte, v any) error { return json.Unmarshal(b, v) }
