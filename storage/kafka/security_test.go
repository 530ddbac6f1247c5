package kafka_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/testkit/testenv"
)

// mechanism is the SASL mechanism of the clients s makes.
func mechanism(t *testing.T, s kafka.Security) sasl.Mechanism {
	t.Helper()
	conn, err := s.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(conn.With(kgo.SeedBrokers("127.0.0.1:1"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(ms) != 1 {
		t.Fatalf("mechanisms %v", ms)
	}
	return ms[0]
}

// TestSecurity: a client made with the TLS and SASL settings reaches a
// broker that demands them, and Check ends within its bound with an error
// naming the setting when the password is wrong, the mechanism is not
// taken, the authority is not the brokers' or TLS is off.
func TestSecurity(t *testing.T) {
	files := testenv.MakeTLSFiles(t)
	other := testenv.MakeTLSFiles(t) // an authority that did not sign the broker's certificate
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{files.Server}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "endcap", "s3cret"), kfake.Superuser("PLAIN", "endcap", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := kafka.Security{TLS: true, TLSCA: files.CA, Mechanism: "scram-sha-512", User: "endcap", Password: "s3cret"}
	for _, tc := range []struct {
		name    string
		mutate  func(*kafka.Security)
		setting string // "" when the connection works
	}{
		{"scram-sha-512 over tls", func(*kafka.Security) {}, ""},
		{"plain over tls, password file", func(s *kafka.Security) { s.Mechanism, s.Password, s.PasswordFile = "plain", "", pwFile }, ""},
		{"wrong password", func(s *kafka.Security) { s.Password = "wrong" }, "ENDCAP_KAFKA_SASL_PASSWORD"},
		{"unknown user", func(s *kafka.Security) { s.User = "nobody" }, "ENDCAP_KAFKA_SASL_USER"},
		{"mechanism the broker lacks", func(s *kafka.Security) { s.Mechanism = "scram-sha-256" }, "ENDCAP_KAFKA_SASL"},
		{"untrusted authority", func(s *kafka.Security) { s.TLSCA = other.CA }, "ENDCAP_KAFKA_TLS_CA"},
		{"system authorities", func(s *kafka.Security) { s.TLSCA = "" }, "ENDCAP_KAFKA_TLS_CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.mutate(&s)
			conn, err := s.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = kafka.Check(context.Background(), c.ListenAddrs(), conn, 5*time.Second)
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("Check took %s", took)
			}
			if tc.setting == "" {
				if err != nil {
					t.Fatal(err)
				}
				cl, err := kafka.NewClient(c.ListenAddrs(), nil, conn.With(kgo.DefaultProduceTopic("t"))...)
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Log(err)
			var se *kafka.SettingError
			if !errors.As(err, &se) || !strings.Contains(se.Error(), tc.setting) {
				t.Fatalf("Check: %v, want an error naming %s", err, tc.setting)
			}
			if strings.Contains(se.Error(), "s3cret") || strings.Contains(se.Error(), "wrong") && tc.name == "wrong password" {
				t.Errorf("the error shows the password: %v", se)
			}
		})
	}
	t.Run("plaintext client", func(t *testing.T) {
		start := time.Now()
		err := kafka.Check(context.Background(), c.ListenAddrs(), nil, 3*time.Second)
		t.Log(err)
		var se *kafka.SettingError
		if !errors.As(err, &se) || !strings.Contains(se.Setting, "ENDCAP_KAFKA_TLS") || time.Since(start) > 6*time.Second {
			t.Fatalf("Check of a plaintext client on a TLS broker: %v after %s", err, time.Since(start))
		}
	})
}

// TestSecurityFiles: missing files are errors at start naming the setting;
// the password and token files are read again when they change.
func TestSecurityFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		s       kafka.Security
		setting string
	}{
		{kafka.Security{TLS: true, TLSCA: missing}, "ENDCAP_KAFKA_TLS_CA"},
		{kafka.Security{TLS: true, TLSCert: missing, TLSKey: missing}, "ENDCAP_KAFKA_TLS_CERT"},
		{kafka.Security{Mechanism: "scram-sha-256", User: "u", PasswordFile: missing}, "ENDCAP_KAFKA_SASL_PASSWORD_FILE"},
		{kafka.Security{Mechanism: "oauthbearer", TokenFile: missing}, "ENDCAP_KAFKA_SASL_TOKEN_FILE"},
	} {
		if _, err := tc.s.Conn(context.Background()); err == nil || !strings.Contains(err.Error(), tc.setting) {
			t.Errorf("%+v: %v, want an error naming %s", tc.s, err, tc.setting)
		}
	}

	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := mechanism(t, kafka.Security{Mechanism: "oauthbearer", TokenFile: token})
	first := func() string {
		_, msg, err := m.Authenticate(context.Background(), "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	if got := first(); !strings.Contains(got, "auth=Bearer first-token") {
		t.Fatalf("first message %q", got)
	}
	if err := os.WriteFile(token, []byte("second-token-longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := first(); !strings.Contains(got, "auth=Bearer second-token-longer") {
		t.Fatalf("after the token file changed, first message %q", got)
	}
}

// TestSecurityMSKIAM: aws-msk-iam signs with the credentials of the AWS
// default chain (here the environment).
func TestSecurityMSKIAM(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENDCAPTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	m := mechanism(t, kafka.Security{TLS: true, Mechanism: "aws-msk-iam"})
	if m.Name() != "AWS_MSK_IAM" {
		t.Fatalf("mechanism %s", m.Name())
	}
	_, msg, err := m.Authenticate(context.Background(), "b-1.endcap.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg), "AKIDENDCAPTEST") || !strings.Contains(string(msg), "eu-west-1") {
		t.Fatalf("first message %s: not signed with the environment's key for the broker's region", msg)
	}
}

// TestSecurityMutualTLS: a client certificate (ENDCAP_KAFKA_TLS_CERT,
// _KEY) is shown to a broker that requires one; without it the check names
// the setting.
func TestSecurityMutualTLS(t *testing.T) {
	files := testenv.MakeTLSFiles(t)
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(files.CA)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatal("the test authority", err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{files.Server},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		s       kafka.Security
		setting string
	}{
		{kafka.Security{TLS: true, TLSCA: files.CA, TLSCert: files.Cert, TLSKey: files.Key}, ""},
		{kafka.Security{TLS: true, TLSCA: files.CA}, "ENDCAP_KAFKA_TLS_CERT"},
	} {
		conn, err := tc.s.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = kafka.Check(context.Background(), c.ListenAddrs(), conn, 5*time.Second)
		t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
		if tc.setting == "" {
			if err != nil {
				t.Errorf("with the client certificate: %v", err)
			}
			continue
		}
		if se := (*kafka.SettingError)(nil); !errors.As(err, &se) || !strings.Contains(se.Setting, tc.setting) || time.Since(start) > 4*time.Second {
			t.Errorf("without the client certificate: %v after %s, want an error naming %s at once", err, time.Since(start), tc.setting)
		}
	}
}
