// Package pagination makes opaque list cursors: the position (and the
// filters of the list it belongs to) signed with HMAC-SHA256, so that a
// cursor the service did not issue, or one altered or moved to another list
// or marketplace, is rejected.
package pagination

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync/atomic"
)

// ErrInvalid means the cursor was not issued by the service for this list.
var ErrInvalid = errors.New("invalid cursor")

// Signer signs and verifies cursors.
type Signer struct{ key atomic.Pointer[[]byte] }

// NewSigner returns a signer with key (every API replica must use the same
// key; it may be set later with SetKey).
func NewSigner(key []byte) *Signer {
	s := &Signer{}
	s.SetKey(key)
	return s
}

// SetKey replaces the signing key.
func (s *Signer) SetKey(key []byte) {
	k := append([]byte(nil), key...)
	s.key.Store(&k)
}

// Cursor is the content of a cursor.
type Cursor struct {
	List        string `json:"l"` // which list, e.g. "vendors"
	Marketplace string `json:"m"`
	Scope       string `json:"s,omitempty"` // the list's filters (e.g. global_id), so a cursor only continues its own list
	After       string `json:"a"`           // last id of the previous page
}

// Encode returns the opaque cursor.
func (s *Signer) Encode(c Cursor) string {
	payload, _ := json.Marshal(c)
	mac := hmac.New(sha256.New, *s.key.Load())
	mac.Write(payload)
	sum := mac.Sum(nil)[:16]
	return base64.RawURLEncoding.EncodeToString(append(sum, payload...))
}

// Decode verifies a cursor and checks it belongs to list/marketplace/scope.
func (s *Signer) Decode(token, list, marketplace, scope string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 17 || len(token) > 2048 {
		return Cursor{}, ErrInvalid
	}
	sum, payload := raw[:16], raw[16:]
	mac := hmac.New(sha256.New, *s.key.Load())
	mac.Write(payload)
	if !hmac.Equal(sum, mac.Sum(nil)[:16]) {
		return Cursor{}, ErrInvalid
	}
	var c Cursor
	if err := json.Unmarshal(payload, &c); err != nil || c.List != list || c.Marketplace != marketplace || c.Scope != scope {
		return Cursor{}, ErrInvalid
	}
	return c, nil
}
