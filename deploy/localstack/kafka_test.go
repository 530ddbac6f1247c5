package localstack

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/endcap/endcap/storage/kafka"
)

// TestKafkaSecurity: `endcap kafka --sasl-user USER:PASSWORD` takes the
// user with PLAIN and both SCRAMs and refuses a client without SASL or
// with another password; bad flags are refused.
func TestKafkaSecurity(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		user, cert, key, want string
	}{
		{"endcap", "", "", "USER:PASSWORD"},
		{"endcap:", "", "", "USER:PASSWORD"},
		{":pw", "", "", "USER:PASSWORD"},
		{"", missing, "", "go together"},
		{"", missing, missing, "--tls-cert, --tls-key"},
	} {
		if _, err := KafkaSecurity(c.user, c.cert, c.key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("KafkaSecurity(%q, %q, %q): %v, want %q", c.user, c.cert, c.key, err, c.want)
		}
	}

	opts, err := KafkaSecurity("endcap:pw:with:colons", "", "")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	for _, c := range []struct {
		s  kafka.Security
		ok bool
	}{
		{kafka.Security{Mechanism: "plain", User: "endcap", Password: "pw:with:colons"}, true},
		{kafka.Security{Mechanism: "scram-sha-256", User: "endcap", Password: "pw:with:colons"}, true},
		{kafka.Security{Mechanism: "scram-sha-512", User: "endcap", Password: "pw:with:colons"}, true},
		{kafka.Security{Mechanism: "scram-sha-512", User: "endcap", Password: "pw"}, false},
		{kafka.Security{}, false},
	} {
		conn, err := c.s.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		err = kafka.Check(context.Background(), cluster.ListenAddrs(), conn, 3*time.Second)
		if (err == nil) != c.ok {
			t.Errorf("%s with password %q: %v", c.s.Mechanism, c.s.Password, err)
		}
	}
}
