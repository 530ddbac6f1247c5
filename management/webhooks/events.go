package webhooks

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/json"
	"strings"
	"time"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/google/uuid"
)

// Event is one occurrence webhooks are told about: what the webhook events
// topic carries, and (as {type, timestamp, data}) the body of its
// deliveries.
type Event struct {
	// ID is deterministic (EventID of where the event comes from), so that
	// the same occurrence read again after a crash is the same event: its
	// deliveries are the same, and so is their webhook-id header.
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	MarketplaceID string    `json:"marketplaceId"`
	Timestamp     time.Time `json:"timestamp"`
	// Subject is the id of the resource the event is about (a truncated
	// body names it).
	Subject string          `json:"subject,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// MaxBodyBytes caps a delivery's body: an event whose data is larger is sent
// as {"id": subject, "truncated": true}; the receiver reads the resource
// through the API.
const MaxBodyBytes = 256 << 10

// eventNamespace is the UUIDv5 namespace of event ids.
var eventNamespace = uuid.MustParse("6f0c1d7e-5d0b-4f4e-9a55-2b1f0c8e3a61")

// EventID is the id of the event named by parts (its source, the resource,
// a version): UUIDv5, the same for the same parts.
func EventID(parts ...string) string {
	return uuid.NewSHA1(eventNamespace, []byte(strings.Join(parts, "\x00"))).String()
}

// payload is a delivery's body.
type payload struct {
	Type      string          `json:"type"`
	Timestamp timestamp.Time  `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// Body is the body of the event's deliveries: {type, timestamp, data}, at
// most MaxBodyBytes.
func (e Event) Body() ([]byte, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b, err := json.Marshal(payload{Type: e.Type, Timestamp: timestamp.Of(e.Timestamp), Data: data})
	if err != nil || len(b) <= MaxBodyBytes {
		return b, err
	}
	small, _ := json.Marshal(map[string]any{"id": e.Subject, "truncated": true})
	return json.Marshal(payload{Type: e.Type, Timestamp: timestamp.Of(e.Timestamp), Data: small})
}

// DeliveryID is the id of the delivery of event to a webhook: a UUID
// (version 8) whose first 48 bits are the event's Unix milliseconds, so that
// ids sort by event time, and whose rest is a hash of the event and the
// webhook, so that the same event and webhook always give the same id.
func DeliveryID(eventID, webhookID string, at time.Time) string {
	var u uuid.UUID
	ms := uint64(max(at.UnixMilli(), 0))
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], ms)
	copy(u[:6], t[2:])
	h := sha1.Sum([]byte(eventID + "\x00" + webhookID))
	copy(u[6:], h[:10])
	u[6] = (u[6] & 0x0f) | 0x80 // version 8
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u.String()
}

func marshal(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	return b, err
}
