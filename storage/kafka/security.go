package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security says how every client of the process connects to the brokers:
// TLS (verifying the brokers' certificates, optionally with a client
// certificate) and SASL. The zero value is plaintext without
// authentication.
type Security struct {
	TLS     bool
	TLSCA   string // PEM file of the CAs that sign the brokers' certificates; empty: the system's
	TLSCert string // PEM files of a client certificate and its key (mutual TLS)
	TLSKey  string

	// Mechanism: "", plain, scram-sha-256, scram-sha-512, oauthbearer or
	// aws-msk-iam.
	Mechanism    string
	User         string
	Password     string
	PasswordFile string // instead of Password; read again when it changes
	TokenFile    string // oauthbearer: the bearer token; read again when it changes
}

// Conn is the options every Kafka client of the process is made with (TLS
// and SASL): Security.Conn builds them, NewClient takes them first.
type Conn []kgo.Opt

// With returns the connection options followed by opts.
func (c Conn) With(opts ...kgo.Opt) []kgo.Opt {
	return slices.Concat([]kgo.Opt(c), opts)
}

// Conn returns the client options of s. Files are read now, so that a
// missing or unreadable one is an error at start naming its setting; the
// password and token files are read again (when they change) at each new
// connection.
func (s Security) Conn(ctx context.Context) (Conn, error) {
	var opts Conn
	if s.TLS {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.Mechanism == "" {
		return opts, nil
	}
	m, err := s.mechanism(ctx)
	if err != nil {
		return nil, err
	}
	return append(opts, kgo.SASL(m)), nil
}

func (s Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLSCA != "" {
		pem, err := os.ReadFile(s.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("ENDCAP_KAFKA_TLS_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ENDCAP_KAFKA_TLS_CA: %s holds no PEM certificate", s.TLSCA)
		}
		cfg.RootCAs = pool
	}
	if s.TLSCert != "" || s.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(s.TLSCert, s.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("ENDCAP_KAFKA_TLS_CERT, ENDCAP_KAFKA_TLS_KEY: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (s Security) mechanism(ctx context.Context) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "plain", "scram-sha-256", "scram-sha-512":
		password := func() (string, error) { return s.Password, nil }
		if s.PasswordFile != "" {
			f := &secretFile{path: s.PasswordFile, setting: "ENDCAP_KAFKA_SASL_PASSWORD_FILE"}
			if _, err := f.get(); err != nil {
				return nil, err
			}
			password = f.get
		}
		switch s.Mechanism {
		case "plain":
			return plain.Plain(func(context.Context) (plain.Auth, error) {
				p, err := password()
				return plain.Auth{User: s.User, Pass: p}, err
			}), nil
		case "scram-sha-256":
			return scram.Sha256(func(context.Context) (scram.Auth, error) {
				p, err := password()
				return scram.Auth{User: s.User, Pass: p}, err
			}), nil
		default:
			return scram.Sha512(func(context.Context) (scram.Auth, error) {
				p, err := password()
				return scram.Auth{User: s.User, Pass: p}, err
			}), nil
		}
	case "oauthbearer":
		f := &secretFile{path: s.TokenFile, setting: "ENDCAP_KAFKA_SASL_TOKEN_FILE"}
		if _, err := f.get(); err != nil {
			return nil, err
		}
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := f.get()
			return oauth.Auth{Token: tok}, err
		}), nil
	case "aws-msk-iam":
		// The default credential chain: the environment, the shared files,
		// web identity (Kubernetes service accounts), the instance or task
		// role. Loading makes no network call; credentials are fetched (and
		// refreshed before they expire) when a connection authenticates.
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("ENDCAP_KAFKA_SASL_MECHANISM aws-msk-iam: the AWS configuration: %w", err)
		}
		return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
			c, err := cfg.Credentials.Retrieve(ctx)
			if err != nil {
				return aws.Auth{}, fmt.Errorf("AWS credentials for MSK IAM: %w", err)
			}
			return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "endcap"}, nil
		}), nil
	}
	return nil, fmt.Errorf("ENDCAP_KAFKA_SASL_MECHANISM: unknown mechanism %q", s.Mechanism)
}

// secretFile is a file whose first line is a secret, read again when its
// size or modification time changes (a rotated Kubernetes secret, a
// refreshed token).
type secretFile struct {
	path, setting string

	mu    sync.Mutex
	mod   time.Time
	size  int64
	value string
}

func (f *secretFile) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.setting, err)
	}
	if f.value != "" && st.ModTime().Equal(f.mod) && st.Size() == f.size {
		return f.value, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.setting, err)
	}
	v, _, _ := strings.Cut(string(b), "\n")
	if v = strings.TrimSpace(v); v == "" {
		return "", fmt.Errorf("%s: %s is empty", f.setting, f.path)
	}
	f.value, f.mod, f.size = v, st.ModTime(), st.Size()
	return v, nil
}

// Check asks brokers for the cluster's metadata with a client of conn of
// its own, within timeout, and says which setting is wrong when the brokers
// refuse the client's credentials or the client refuses the brokers'
// certificate: waiting cannot mend those, and such an error (a
// *SettingError) comes as soon as the first connection fails. Brokers that
// close every connection at once (TLS or SASL missing, or a proxy with no
// broker behind it) are asked again until timeout, and are then a
// *SettingError too. Any other failure (the brokers unreachable, still
// starting) is returned as it is when timeout runs out.
func Check(ctx context.Context, brokers []string, conn Conn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := checkOnce(ctx, brokers, conn, timeout)
		if _, closed := errors.AsType[*kgo.ErrFirstReadEOF](err); !closed {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func checkOnce(ctx context.Context, brokers []string, conn Conn, timeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &connWatch{cancel: cancel}
	cl, err := kgo.NewClient(conn.With(kgo.SeedBrokers(brokers...), kgo.DialTimeout(min(2*time.Second, timeout)),
		kgo.RetryTimeout(timeout), kgo.WithHooks(w))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if se := w.failed(); se != nil {
		return se
	}
	if se := settingOf(err); se != nil {
		return se
	}
	if err != nil {
		return fmt.Errorf("kafka at %v: %w", brokers, err)
	}
	return nil
}

// connWatch keeps the first connection failure a setting causes, and then
// ends the check at once.
type connWatch struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	err    *SettingError
}

func (w *connWatch) failed() *SettingError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *connWatch) set(se *SettingError) {
	w.mu.Lock()
	if w.err == nil {
		w.err = se
	}
	w.mu.Unlock()
	w.cancel()
}

// OnBrokerConnect sees the dial and TLS handshake errors.
func (w *connWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if se := settingOf(err); se != nil {
		w.set(se)
	}
}

// OnBrokerE2E sees the SASL exchange: a broker that refuses credentials
// either answers an error code (settingOf) or closes the connection.
// A TLS 1.3 broker that refuses the client's certificate says so at the
// first read, which this sees too.
func (w *connWatch) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	err := e2e.Err()
	if err == nil {
		return
	}
	se := settingOf(err)
	if se == nil {
		if key != kmsg.SASLHandshake.Int16() && key != kmsg.SASLAuthenticate.Int16() {
			return
		}
		se = &SettingError{"ENDCAP_KAFKA_SASL_USER / ENDCAP_KAFKA_SASL_PASSWORD / ENDCAP_KAFKA_SASL_MECHANISM (the brokers closed the connection during SASL authentication: the credentials or the mechanism were refused)", err}
	}
	w.set(se)
}

// SettingError is a connection failure that a setting causes: Setting
// names it.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("kafka: %s: %v", e.Setting, e.Err)
}

func (e *SettingError) Unwrap() error { return e.Err }

// settingOf names the setting an error of a connection points at, or
// returns nil.
func settingOf(err error) *SettingError {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		alert     tls.AlertError
		opErr     *net.OpError
		firstEOF  *kgo.ErrFirstReadEOF
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return &SettingError{"ENDCAP_KAFKA_SASL_USER / ENDCAP_KAFKA_SASL_PASSWORD (the brokers refused the credentials)", err}
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return &SettingError{"ENDCAP_KAFKA_SASL_MECHANISM (the brokers do not take it)", err}
	case errors.As(err, &unknownCA):
		return &SettingError{"ENDCAP_KAFKA_TLS_CA (the brokers' certificate is signed by an authority it does not hold)", err}
	case errors.As(err, &hostname):
		return &SettingError{"ENDCAP_KAFKA_BROKERS (the brokers' certificate is not for that name)", err}
	case errors.As(err, &invalid), errors.As(err, &verify):
		return &SettingError{"ENDCAP_KAFKA_TLS_CA (the brokers' certificate does not verify)", err}
	case errors.As(err, &firstEOF):
		return &SettingError{"ENDCAP_KAFKA_TLS / ENDCAP_KAFKA_SASL_MECHANISM (the brokers closed the first connection at once)", err}
	case errors.As(err, &record):
		return &SettingError{"ENDCAP_KAFKA_TLS (the brokers do not speak TLS on that port)", err}
	case errors.As(err, &alert), errors.As(err, &opErr) && opErr.Op == "remote error":
		return &SettingError{"ENDCAP_KAFKA_TLS_CERT / ENDCAP_KAFKA_TLS_KEY (the brokers refused the TLS handshake)", err}
	}
	return nil
}
