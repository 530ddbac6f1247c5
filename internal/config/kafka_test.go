package config

import (
	"flag"
	"strings"
	"testing"
)

// TestKafkaSecurity: the Kafka TLS and SASL settings parse, and the
// combinations that cannot work are refused naming the settings.
func TestKafkaSecurity(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		check   func(Config) bool
		wantErr string
	}{
		{"plaintext by default", nil, func(c Config) bool { return !c.KafkaTLS && c.KafkaSASLMechanism == "" }, ""},
		{"tls and scram", map[string]string{"ENDCAP_KAFKA_TLS": "true", "ENDCAP_KAFKA_TLS_CA": "/ca.pem",
			"ENDCAP_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "ENDCAP_KAFKA_SASL_USER": "u", "ENDCAP_KAFKA_SASL_PASSWORD": "p"}, func(c Config) bool {
			return c.KafkaTLS && c.KafkaTLSCA == "/ca.pem" && c.KafkaSASLMechanism == "scram-sha-512" && c.KafkaSASLUser == "u" && c.KafkaSASLPassword == "p"
		}, ""},
		{"plain with a password file", map[string]string{"ENDCAP_KAFKA_SASL_MECHANISM": "plain", "ENDCAP_KAFKA_SASL_USER": "u",
			"ENDCAP_KAFKA_SASL_PASSWORD_FILE": "/run/secrets/kafka"}, func(c Config) bool { return c.KafkaSASLPasswordFile == "/run/secrets/kafka" }, ""},
		{"oauthbearer", map[string]string{"ENDCAP_KAFKA_SASL_MECHANISM": "oauthbearer", "ENDCAP_KAFKA_SASL_TOKEN_FILE": "/t"}, func(c Config) bool { return c.KafkaSASLTokenFile == "/t" }, ""},
		{"msk iam", map[string]string{"ENDCAP_KAFKA_TLS": "1", "ENDCAP_KAFKA_SASL_MECHANISM": "aws-msk-iam"}, func(c Config) bool { return c.KafkaSASLMechanism == "aws-msk-iam" }, ""},
		{"mutual tls", map[string]string{"ENDCAP_KAFKA_TLS": "true", "ENDCAP_KAFKA_TLS_CERT": "/c", "ENDCAP_KAFKA_TLS_KEY": "/k"}, func(c Config) bool { return c.KafkaTLSCert == "/c" && c.KafkaTLSKey == "/k" }, ""},
		{"unknown mechanism", map[string]string{"ENDCAP_KAFKA_SASL_MECHANISM": "gssapi"}, nil, "kafka-sasl-mechanism (ENDCAP_KAFKA_SASL_MECHANISM): must be one of plain"},
		{"bad tls flag", map[string]string{"ENDCAP_KAFKA_TLS": "yes please"}, nil, "kafka-tls (ENDCAP_KAFKA_TLS)"},
		{"scram without password", map[string]string{"ENDCAP_KAFKA_SASL_MECHANISM": "scram-sha-256", "ENDCAP_KAFKA_SASL_USER": "u"}, nil, "needs kafka-sasl-user and kafka-sasl-password"},
		{"password and password file", map[string]string{"ENDCAP_KAFKA_SASL_MECHANISM": "plain", "ENDCAP_KAFKA_SASL_USER": "u",
			"ENDCAP_KAFKA_SASL_PASSWORD": "p", "ENDCAP_KAFKA_SASL_PASSWORD_FILE": "/f"}, nil, "set one, not both"},
		{"oauthbearer without token file", map[string]string{"ENDCAP_KAFKA_SASL_MECHANISM": "oauthbearer"}, nil, "needs kafka-sasl-token-file"},
		{"msk iam without tls", map[string]string{"ENDCAP_KAFKA_SASL_MECHANISM": "aws-msk-iam"}, nil, "aws-msk-iam needs kafka-tls=true"},
		{"user without mechanism", map[string]string{"ENDCAP_KAFKA_SASL_USER": "u"}, nil, "need kafka-sasl-mechanism"},
		{"certificate without key", map[string]string{"ENDCAP_KAFKA_TLS": "true", "ENDCAP_KAFKA_TLS_CERT": "/c"}, nil, "kafka-tls-cert and kafka-tls-key go together"},
		{"ca without tls", map[string]string{"ENDCAP_KAFKA_TLS_CA": "/ca.pem"}, nil, "need kafka-tls=true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			resolve := Register(flag.NewFlagSet("x", flag.ContinueOnError))
			cfg, err := resolve()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
		})
	}
}
