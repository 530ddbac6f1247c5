package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/masterkey"
	"github.com/endcap/endcap/storage/redisstore"
)

// Redis keys of the secrets shared by every API process when the
// configuration does not give them (wrapped with the master key).
const (
	bidKeyName    = "ec:bid-signing-key:1"
	cursorKeyName = "ec:cursor-key"
)

var errNoMasterKey = errors.New("a master key is required (ENDCAP_SECRET_KEY_FILE or ENDCAP_SECRET_KEY): without both ENDCAP_BID_SIGNING_KEYS and ENDCAP_CURSOR_SECRET the resolvedBidId and list cursor keys are kept in Redis, and Redis holds them only wrapped with it. Make one with `head -c 32 /dev/urandom | base64 > secret.key` (mode 0600) and give every api process the same file; a plaintext key an earlier version left in Redis is refused until `endcap admin secrets wrap-plaintext` wraps it (docs/operations/operations.md, Secrets)")

// sharedSecret returns the secret every API process shares through Redis
// under name, wrapped with the master key. A value that no master key
// opens stops the process with what to do: waiting cannot fix it, and a
// new secret would silently invalidate everything signed with the old one.
func (a *App) sharedSecret(ctx context.Context, name, what string) ([]byte, error) {
	key, err := redisstore.SharedSecret(ctx, a.Redis, name, a.master)
	if errors.Is(err, redisstore.ErrPlaintextSecret) {
		return nil, permanentError{fmt.Errorf("%w, and a plaintext key is refused: whoever can write Redis could have planted it. "+
			"If an earlier version of Endcap wrote it, run `endcap admin secrets wrap-plaintext` once with this configuration (it wraps it with the master key, and what it signed stays valid); "+
			"otherwise delete %s from Redis (a new %s key is made, and every one signed with the old key stops verifying)", err, name, what)}
	}
	if errors.Is(err, redisstore.ErrSecret) {
		return nil, permanentError{fmt.Errorf("%w. Start with the master key that wrapped it (while rotating, list it after the new one). Deleting %s from Redis makes a new %s key, and every one signed with the old key stops verifying", err, name, what)}
	}
	return key, err
}

// SharedBidKeys returns the resolvedBidId keyring kept in Redis (wrapped
// with the master key), as ENDCAP_BID_SIGNING_KEYS would give it: for
// moving to configured keys, to rotate them (docs/reference/resolved-bid-id.md).
func SharedBidKeys(ctx context.Context, cfg config.Config) (string, error) {
	master, err := masterkey.Load(cfg.SecretKeyFile, cfg.SecretKey)
	if err != nil {
		return "", err
	}
	if master == nil {
		return "", errNoMasterKey
	}
	rdb, err := OpenRedis(cfg)
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	v, err := rdb.Exists(ctx, bidKeyName).Result()
	if err != nil {
		return "", err
	}
	if v == 0 {
		return "", fmt.Errorf("no resolvedBidId key in Redis (%s): none was made yet, or the processes use ENDCAP_BID_SIGNING_KEYS", bidKeyName)
	}
	key, err := redisstore.SharedSecret(ctx, rdb, bidKeyName, master)
	if err != nil {
		return "", err
	}
	return "1:" + base64.RawURLEncoding.EncodeToString(key), nil
}

// WrapPlaintextSecrets wraps with the master key the shared secrets an
// earlier version left in Redis in plaintext, which the api otherwise
// refuses to start with, and returns the names of those it wrapped.
func WrapPlaintextSecrets(ctx context.Context, cfg config.Config) ([]string, error) {
	master, err := masterkey.Load(cfg.SecretKeyFile, cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	if master == nil {
		return nil, errNoMasterKey
	}
	rdb, err := OpenRedis(cfg)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	var wrapped []string
	for _, name := range []string{bidKeyName, cursorKeyName} {
		ok, err := redisstore.WrapPlaintextSecret(ctx, rdb, name, master)
		if err != nil {
			return wrapped, err
		}
		if ok {
			wrapped = append(wrapped, name)
		}
	}
	return wrapped, nil
}
