package localstack

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaSecurity returns the options that make the local broker (kfake)
// require SASL (saslUser: USER:PASSWORD, taken with PLAIN, SCRAM-SHA-256
// and SCRAM-SHA-512) and listen with TLS only (certFile and keyFile), each
// when given: `endcap kafka --sasl-user --tls-cert --tls-key`.
func KafkaSecurity(saslUser, certFile, keyFile string) ([]kfake.Opt, error) {
	var opts []kfake.Opt
	if saslUser != "" {
		user, pass, ok := strings.Cut(saslUser, ":")
		if !ok || user == "" || pass == "" {
			return nil, errors.New("--sasl-user: want USER:PASSWORD")
		}
		opts = append(opts, kfake.EnableSASL(),
			kfake.Superuser("PLAIN", user, pass),
			kfake.Superuser("SCRAM-SHA-256", user, pass),
			kfake.Superuser("SCRAM-SHA-512", user, pass))
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}
	return opts, nil
}
