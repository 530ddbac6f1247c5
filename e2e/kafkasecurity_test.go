package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

// ksBroker starts the local broker as `endcap kafka --sasl-user
// endcap:kafka-pw --tls-cert --tls-key` does, with certificates the test
// makes, and returns a configuration pointed at it with TLS and
// SCRAM-SHA-512, and the files.
func ksBroker(t *testing.T) (config.Config, testenv.TLSFiles) {
	t.Helper()
	files := testenv.MakeTLSFiles(t)
	opts, err := localstack.KafkaSecurity("endcap:kafka-pw", files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	_, brokers := testenv.Kafka(t, opts...)
	cfg := testenv.Get(t).Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.KafkaTLS, cfg.KafkaTLSCA = true, files.CA
	cfg.KafkaSASLMechanism, cfg.KafkaSASLUser, cfg.KafkaSASLPassword = "scram-sha-512", "endcap", "kafka-pw"
	return cfg, files
}

// TestKafkaTLSAndSCRAM: the whole path (catalog, campaign, auction, click,
// its charge in ClickHouse, the spend in Redis) through a broker that
// requires TLS and SCRAM-SHA-512: every Kafka client of the process (the
// producers, the state logs, the projectors' groups, the claims) connects
// with the settings.
func TestKafkaTLSAndSCRAM(t *testing.T) {
	cfg, _ := ksBroker(t)
	s := startSystem(t, cfg)
	key, mp := s.AdvancedKey, s.Marketplace.ID
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const price = 700_000
	if _, err := s.App.Accounts.SetReserve(ctx, mp, price, 1_000_000); err != nil {
		t.Fatal(err)
	}
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v1","name":"Vendor One"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, nil), 200)
	campaign := auCampaign(t, s, "v1", `{"name":"Secure","type":"listings","chargeType":"CPC","dailyBudget":30,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, campaign, "product", "p1", "1")
	var tokens []string
	testenv.Eventually(t, 30*time.Second, func() error { // the campaign reaches the auction through the entities log
		res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}}]}`)
		if len(res) != 1 || len(res[0].Winners) != 1 {
			return fmt.Errorf("auction: %+v", res)
		}
		tokens = []string{res[0].Winners[0].ResolvedBidID}
		return nil
	})
	occurred := time.Now().UTC().Truncate(time.Millisecond)
	bcSendClicks(t, s, []bcClick{{"ks-1", occurred.Format(time.RFC3339Nano), "u-1", tokens[0]}})
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM charges WHERE marketplace_id = ? AND campaign_id = ? AND amount_micros = ?", mp, campaign, price); n != 1 {
			return fmt.Errorf("%d charges of the click", n)
		}
		return nil
	})
}

// TestKafkaRefusedEndsTheProcess: credentials the broker refuses, or a
// broker certificate the configured authority did not sign, end the
// process within 10 s with an error naming the setting, instead of
// retrying for ever.
func TestKafkaRefusedEndsTheProcess(t *testing.T) {
	cfg, _ := ksBroker(t)
	other := testenv.MakeTLSFiles(t)
	for _, c := range []struct {
		name    string
		mutate  func(*config.Config)
		setting string
	}{
		{"wrong password", func(c *config.Config) { c.KafkaSASLPassword = "not-the-password" }, "ENDCAP_KAFKA_SASL_PASSWORD"},
		{"untrusted certificate", func(c *config.Config) { c.KafkaTLSCA = other.CA }, "ENDCAP_KAFKA_TLS_CA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			c.mutate(&cfg)
			start := time.Now()
			err := testapp.Fail(t, cfg, app.TargetAll, 10*time.Second) // it ends by itself, within 10 s
			t.Logf("ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
			if !strings.Contains(err.Error(), c.setting) {
				t.Fatalf("Run: %v, want an error naming %s", err, c.setting)
			}
			if strings.Contains(err.Error(), "not-the-password") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}
