package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/statelog"
)

// EntitiesGroup is the consumer group of the entity-state projector.
const EntitiesGroup = "endcap-projector-entities"

// excludedTypes never leave Kafka: API keys and console users (key and
// password hashes) have no place in reporting.
var excludedTypes = map[string]bool{"apikey": true, "user": true}

// redactedFields are the members of an entity type's state that never leave
// Kafka: a webhook's signing secrets (current and previous), the opaque
// user ids of a shopper's deletion request (management/privacy: the ids
// the request erases are not copied anywhere else). Besides them,
// every top-level member whose name holds "secret", "password" or "token"
// (any case) is removed from the state of every type, so that a secret a
// type adds later is not copied by default.
var redactedFields = map[string][]string{
	"webhook":          {"secret", "previousSecret"},
	"privacy_deletion": {"opaqueUserIds"},
}

// secretWords make a member secret by its name (lower case).
var secretWords = []string{"secret", "password", "token"}

// Redact returns the state of an entity of type typ as it is copied to
// ClickHouse: without its secret members (redactedFields and secretWords).
// A state that is not a JSON object is returned as it is; one that cannot
// be decoded is not copied at all (ok false).
func Redact(typ string, state []byte) (out []byte, ok bool) {
	trimmed := bytes.TrimSpace(state)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return state, true
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return nil, false
	}
	drop := false
	for k := range m {
		if isSecretMember(typ, k) {
			delete(m, k)
			drop = true
		}
	}
	if !drop {
		return state, true
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	return b, true
}

func isSecretMember(typ, name string) bool {
	for _, f := range redactedFields[typ] {
		if f == name {
			return true
		}
	}
	low := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(low, w) {
			return true
		}
	}
	return false
}

// EntitiesProjector copies entity state from the changelog topics into
// ClickHouse table entity_state_raw (view entity_state), for reporting
// dimensions. Rows are versioned: a replay inserts identical rows that the
// ReplacingMergeTree and the FINAL view fold.
type EntitiesProjector struct {
	b  *batcher
	ch clickhouse.Conn
}

// NewEntitiesProjector consumes topics (the accounts and entities changelogs).
func NewEntitiesProjector(brokers, topics []string, conn clickhouse.Conn, maxRows int, flushInterval time.Duration, group GroupOptions, log *slog.Logger) (*EntitiesProjector, error) {
	p := &EntitiesProjector{ch: conn}
	var err error
	if p.b, err = newBatcher(brokers, EntitiesGroup, topics, maxRows, flushInterval, group, log, p.flush); err != nil {
		return nil, err
	}
	return p, nil
}

// Health is the projector's consume loop, for readiness checks.
func (p *EntitiesProjector) Health() Health { return p.b }

// Run consumes until ctx ends.
func (p *EntitiesProjector) Run(ctx context.Context) error { return p.b.run(ctx) }

// Close leaves the group.
func (p *EntitiesProjector) Close() { p.b.client.Close() }

func (p *EntitiesProjector) flush(ctx context.Context, batch []*kgo.Record) error {
	var typ, mp, id, state []string
	var version []int64
	var deleted []uint8
	var at []time.Time
	for _, r := range batch {
		var rec statelog.Record
		if err := json.Unmarshal(r.Value, &rec); err != nil || rec.Type == "" || excludedTypes[rec.Type] {
			continue
		}
		m, eid := rec.ID, rec.ID // marketplaces are keyed by their own id
		if x, y, ok := strings.Cut(rec.ID, "/"); ok {
			m, eid = x, y
		}
		var del uint8
		if rec.Deleted {
			del = 1
		}
		st, ok := Redact(rec.Type, rec.State)
		if !ok {
			continue
		}
		typ, mp, id, state = append(typ, rec.Type), append(mp, m), append(id, eid), append(state, string(st))
		version, deleted, at = append(version, rec.Version), append(deleted, del), append(at, time.UnixMilli(rec.AtMs).UTC())
	}
	if len(typ) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	b, err := p.ch.PrepareBatch(clickhouse.Insert(ctx), "INSERT INTO entity_state_raw (type, marketplace_id, id, version, deleted, state, updated_at)")
	if err != nil {
		telemetry.InsertBatches.WithLabelValues("entity_state_raw", "error").Inc()
		return fmt.Errorf("prepare entity_state insert: %w", err)
	}
	for i, col := range []any{typ, mp, id, version, deleted, state, at} {
		if err := b.Column(i).Append(col); err != nil {
			_ = b.Abort()
			return fmt.Errorf("entity_state column %d: %w", i, err)
		}
	}
	if err := b.Send(); err != nil {
		telemetry.InsertBatches.WithLabelValues("entity_state_raw", "error").Inc()
		return fmt.Errorf("send entity_state insert: %w", err)
	}
	telemetry.InsertBatches.WithLabelValues("entity_state_raw", "ok").Inc()
	telemetry.InsertRows.WithLabelValues("entity_state_raw").Add(float64(len(typ)))
	telemetry.InsertDuration.WithLabelValues("entity_state_raw").Observe(time.Since(start).Seconds())
	return nil
}
