package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestAdminPrivacyRun: endcap admin privacy run applies a pending deletion
// request at once, against the servers its configuration names.
func TestAdminPrivacyRun(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	conn := testenv.ClickHouse(t, ctx, cfg)
	var svc *privacy.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: cfg.KafkaTopicPrefix}, func(l *statelog.Log) { svc = privacy.New(l) })
	mp := uuid.NewString()
	at := time.Now().Add(-time.Minute).UTC()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO events_raw (marketplace_id, kind, event_id, received_at, received_at_ms, opaque_user_id)")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"erased", "kept"} {
		if err := b.Append(mp, "pageview", "pv-"+u, at, at.UnixMilli(), u); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	d, err := svc.Create(ctx, mp, privacy.Input{OpaqueUserIDs: &[]string{"erased"}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"ENDCAP_KAFKA_BROKERS":       strings.Join(brokers, ","),
		"ENDCAP_KAFKA_TOPIC_PREFIX":  cfg.KafkaTopicPrefix,
		"ENDCAP_CLICKHOUSE_ADDR":     cfg.ClickHouseAddr,
		"ENDCAP_CLICKHOUSE_DATABASE": cfg.ClickHouseDatabase,
		"ENDCAP_REDIS_ADDR":          cfg.RedisAddr,
		"ENDCAP_REDIS_CLUSTER":       map[bool]string{true: "true", false: "false"}[cfg.RedisCluster],
		"ENDCAP_S3_ENDPOINT":         cfg.S3Endpoint,
		"ENDCAP_S3_BUCKET":           cfg.S3Bucket,
		"ENDCAP_S3_ACCESS_KEY":       cfg.S3AccessKey,
		"ENDCAP_S3_SECRET_KEY":       cfg.S3SecretKey,
		"ENDCAP_BID_SIGNING_KEYS":    cfg.BidSigningKeys,
		"ENDCAP_LOG_LEVEL":           "warn",
	} {
		t.Setenv(k, v)
	}
	var out bytes.Buffer
	if err := cmdPrivacy(ctx, &out, "run", nil); err != nil {
		t.Fatal(err)
	}
	var res privacy.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res != (privacy.RunResult{Completed: 1}) {
		t.Fatalf("printed %s (%v)", out.Bytes(), err)
	}
	var users []string
	rows, err := conn.Query(ctx, "SELECT opaque_user_id FROM events_raw")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	rows.Close()
	if strings.Join(users, ",") != "kept" {
		t.Errorf("events_raw after the run: %v", users)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if got, err := svc.Get(mp, d.ID); err != nil || got.Status != privacy.StatusCompleted {
			return testenv.Errorf("deletion %+v %v", got, err)
		}
		return nil
	})
	if err := cmdPrivacy(ctx, &out, "erase", nil); err == nil {
		t.Error("an unknown verb runs")
	}
}
