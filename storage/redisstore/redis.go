// Package redisstore is the adapter to Redis: the client with Endcap's
// timeouts. Key layouts belong to the packages that own the keys.
package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/masterkey"
)

// Options say where Redis is.
type Options struct {
	// Addr is one address (host:port) of a Redis server or, with Cluster,
	// the seed nodes of a Redis Cluster separated by commas (any of them
	// is enough; the client learns the others from it).
	Addr string
	// Username is the ACL user (empty: the default user, as with a
	// password alone).
	Username string
	Password string
	// PasswordFile, when set, is a file whose first line is the password;
	// it is read again for every new connection, so a rotated secret is
	// taken without a restart. It replaces Password.
	PasswordFile string
	DB           int // 0 on a cluster
	// TLS, when set, makes every connection (to each node of a cluster)
	// TLS, verifying the server's certificate (TLSConfig).
	TLS *tls.Config
	// Cluster makes the client a Redis Cluster client, which sends each
	// command to the master of its key's slot and follows the cluster
	// when slots move or a replica takes over a failed master.
	Cluster bool
}

// Addrs are the addresses of Addr, without blanks and empty entries.
func (o Options) Addrs() []string {
	var out []string
	for _, a := range strings.Split(o.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Open returns a pooled client: a *redis.Client for one server, a
// *redis.ClusterClient with Options.Cluster. Every command is bounded by
// the caller's context deadline and by these socket timeouts, whichever
// comes first: without ContextTimeoutEnabled go-redis would apply only the
// socket timeouts to a reply being read, so a frozen Redis would hold a
// caller that gave itself 150 ms for the full ReadTimeout. A context that
// is cancelled without a deadline still waits for the socket timeout.
func Open(o Options) redis.UniversalClient {
	var creds func(context.Context) (string, string, error)
	if o.PasswordFile != "" {
		creds = func(context.Context) (string, string, error) {
			pw, err := ReadPasswordFile(o.PasswordFile)
			return o.Username, pw, err
		}
	}
	if o.Cluster {
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                      o.Addrs(),
			Username:                   o.Username,
			Password:                   o.Password,
			CredentialsProviderContext: creds,
			TLSConfig:                  o.TLS,
			DisableIdentity:            true, // no CLIENT SETINFO (Redis 7.2+), which the ACL rule would have to allow
			DialTimeout:                2 * time.Second,
			ReadTimeout:                3 * time.Second,
			WriteTimeout:               3 * time.Second,
			ContextTimeoutEnabled:      true,
			PoolSize:                   32, // per node
			MaxRetries:                 1,
			// A command sent to a node that no longer serves its slot is
			// redirected (MOVED, ASK) up to this many times; between
			// attempts the client re-reads the cluster's layout.
			MaxRedirects: 4,
			// The layout is also read again this often (go-redis: 60 s).
			ClusterStateReloadInterval: 10 * time.Second,
		})
		cc.AddHook(reloadOnFailure{cc})
		return cc
	}
	addr := o.Addr
	if a := o.Addrs(); len(a) > 0 {
		addr = a[0]
	}
	return redis.NewClient(&redis.Options{
		Addr:                       addr,
		Username:                   o.Username,
		Password:                   o.Password,
		CredentialsProviderContext: creds,
		TLSConfig:                  o.TLS,
		DisableIdentity:            true, // no CLIENT SETINFO (Redis 7.2+), which the ACL rule would have to allow
		DB:                         o.DB,
		DialTimeout:                2 * time.Second,
		ReadTimeout:                3 * time.Second,
		WriteTimeout:               3 * time.Second,
		ContextTimeoutEnabled:      true,
		PoolSize:                   32,
		MaxRetries:                 1,
	})
}

// TLSConfig is the TLS configuration of connections to Redis: TLS 1.2 or
// later, the server's certificate verified against the authorities of the
// PEM file ca (empty: the system's) and the host name of each address.
func TLSConfig(ca string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca == "" {
		return c, nil
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("redis: TLS authorities: %w", err)
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("redis: TLS authorities: no certificate in %s", ca)
	}
	return c, nil
}

// ReadPasswordFile returns the first line of the file at path, which must
// not be empty.
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("redis password file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return "", fmt.Errorf("redis password file %s: the first line is empty", path)
	}
	return line, nil
}

// reloadOnFailure makes a cluster client read the cluster's layout again
// (in the background, coalesced) when a command or a pipeline fails to
// reach a node: after a master failed and a replica took over its slots,
// go-redis would send pipelines to the dead node until its periodic reload
// (it reloads at once only on MOVED and on failures of single commands).
type reloadOnFailure struct{ cc *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) check(ctx context.Context, err error) {
	if ConnectionFailed(ctx, err) {
		h.cc.ReloadState(ctx)
	}
}

// ConnectionFailed says whether err is a failure to reach or hear from the
// server (which another connection, or another node, may not meet), not an
// error Redis answered, nor the end of ctx.
func ConnectionFailed(ctx context.Context, err error) bool {
	var rerr redis.Error
	return err != nil && err != redis.Nil && ctx.Err() == nil && !errors.As(err, &rerr) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// IsCluster says whether rdb is a Redis Cluster client.
func IsCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// ForEachMaster calls fn for every master: the server itself for a
// *redis.Client, each master of the cluster (concurrently) for a
// *redis.ClusterClient. It returns the first error.
func ForEachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, master *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.Client:
		return fn(ctx, c)
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	}
	return fmt.Errorf("redisstore: unsupported client %T", rdb)
}

// MasterFor returns the client of the server that holds key: rdb itself
// for a *redis.Client, the master of key's slot (as the cluster client
// last learnt it) for a *redis.ClusterClient.
func MasterFor(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("redisstore: unsupported client %T", rdb)
}

// ErrSecret means the value at a shared secret's key cannot be used: it does
// not unwrap with the master keys (wrapped with another master key, or
// altered), or it is not a wrapped secret at all. Waiting does not fix it.
var ErrSecret = errors.New("unusable shared secret")

// ErrPlaintextSecret (an ErrSecret) means the value at a shared secret's key
// is a secret in plaintext (the form of earlier versions, 64 hexadecimal
// digits). It is refused: whoever can write Redis could plant a key of
// their choosing, and rewrapping it would make it the processes' own.
// WrapPlaintextSecret adopts one deliberately.
var ErrPlaintextSecret = fmt.Errorf("%w: a plaintext secret", ErrSecret)

var replaceScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("SET", KEYS[1], ARGV[2]) return 1 else return 0 end`)

// plaintextSecret decodes v when it is a secret in the plaintext form of
// earlier versions.
func plaintextSecret(v string) ([]byte, bool) {
	b, err := hex.DecodeString(v)
	return b, err == nil && len(b) == 32
}

// SharedSecret returns the 32-byte secret stored at key, creating it with
// random bytes when absent (SET NX), so that every process shares it. Redis
// holds it only wrapped with the master keys (package masterkey, the key's
// name as additional data). A value wrapped with a master key other than
// the first is returned and rewritten wrapped with the first, so that what
// was signed with it stays valid. A plaintext value is ErrPlaintextSecret
// and is left as it is.
func SharedSecret(ctx context.Context, rdb redis.UniversalClient, key string, keys *masterkey.Keys) ([]byte, error) {
	if keys == nil {
		return nil, fmt.Errorf("%w: %s: no master key to wrap it with", ErrSecret, key)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	if err := rdb.SetNX(ctx, key, keys.Wrap(key, b[:]), 0).Err(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		v, err := rdb.Get(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		var secret []byte
		current := false
		if masterkey.Wrapped(v) {
			if secret, current, err = keys.Unwrap(key, v); err != nil {
				return nil, fmt.Errorf("%w: %s in Redis %w", ErrSecret, key, err)
			}
		} else if _, ok := plaintextSecret(v); ok {
			return nil, fmt.Errorf("%w: %s in Redis is not wrapped with the master key", ErrPlaintextSecret, key)
		} else {
			return nil, fmt.Errorf("%w: %s in Redis is not a wrapped secret", ErrSecret, key)
		}
		if current {
			return secret, nil
		}
		// Rewrite it wrapped with the first master key, unless another
		// process changed it meanwhile (then read it again).
		n, err := replaceScript.Run(ctx, rdb, []string{key}, v, keys.Wrap(key, secret)).Int()
		if err != nil {
			return nil, err
		}
		if n == 1 || attempt == 3 {
			return secret, nil
		}
	}
}

// WrapPlaintextSecret rewrites the plaintext secret at key (the form of
// earlier versions) wrapped with the first master key, so that what it
// signed stays valid: the operator's deliberate adoption of a key that
// SharedSecret refuses. It reports whether it rewrote one; an absent or
// already wrapped value is left alone.
func WrapPlaintextSecret(ctx context.Context, rdb redis.UniversalClient, key string, keys *masterkey.Keys) (bool, error) {
	if keys == nil {
		return false, fmt.Errorf("%w: %s: no master key to wrap it with", ErrSecret, key)
	}
	v, err := rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	secret, ok := plaintextSecret(v)
	if !ok {
		return false, nil
	}
	n, err := replaceScript.Run(ctx, rdb, []string{key}, v, keys.Wrap(key, secret)).Int()
	if err != nil {
		return false, err
	}
	if n != 1 {
		return false, fmt.Errorf("%s changed while it was being wrapped; run the command again", key)
	}
	return true, nil
}
