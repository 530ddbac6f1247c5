package bidtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MinKeyLen is the shortest signing key accepted, in bytes (256 bits).
const MinKeyLen = 32

// keyLabel separates this use of a signing key from any other: tokens are MACed with
// HMAC-SHA256(key, keyLabel), never with the configured key itself.
const keyLabel = "endcap/bidtoken/resolvedBidId/v1"

// Keyring holds the HMAC-SHA256 keys that sign and verify resolvedBidIds, by one-byte key id. Encode signs
// with the current key; Decode accepts any key in the ring. A Keyring is immutable and safe for concurrent
// use; rotate by building a new one (see docs/reference/resolved-bid-id.md). Its String form never shows key material.
type Keyring struct {
	keys    [256]*macKey
	ids     []uint8 // sorted
	current uint8
}

// macKey is one key, prepared for HMAC: the derived key XORed with the inner and outer pads.
type macKey struct {
	ipad, opad [sha256.BlockSize]byte
}

func newMACKey(secret []byte) *macKey {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(keyLabel))
	derived := h.Sum(nil) // 32 bytes, shorter than a block: used as is
	k := &macKey{}
	for i := range sha256.BlockSize {
		var b byte
		if i < len(derived) {
			b = derived[i]
		}
		k.ipad[i] = b ^ 0x36
		k.opad[i] = b ^ 0x5c
	}
	return k
}

// mac is HMAC-SHA256 (RFC 2104) of msg under the prepared key, truncated to 16 bytes. It is written out
// with sha256.Sum256 over stack buffers so that it allocates nothing and needs no per-goroutine state.
func (k *macKey) mac(msg []byte) [macLen]byte {
	var in [sha256.BlockSize + maxBytes]byte
	copy(in[:], k.ipad[:])
	n := copy(in[sha256.BlockSize:], msg)
	inner := sha256.Sum256(in[:sha256.BlockSize+n])
	var out [sha256.BlockSize + sha256.Size]byte
	copy(out[:], k.opad[:])
	copy(out[sha256.BlockSize:], inner[:])
	sum := sha256.Sum256(out[:])
	var t [macLen]byte
	copy(t[:], sum[:macLen])
	return t
}

func equalMAC(want *[macLen]byte, got []byte) bool {
	return subtle.ConstantTimeCompare(want[:], got) == 1
}

// NewKeyring builds a keyring from keys by id (each at least MinKeyLen bytes); current signs. The key
// bytes are copied.
func NewKeyring(keys map[uint8][]byte, current uint8) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("bidtoken: keyring needs at least one key")
	}
	k := &Keyring{current: current}
	for id, secret := range keys {
		if len(secret) < MinKeyLen {
			return nil, fmt.Errorf("bidtoken: key %d is %d bytes, need at least %d", id, len(secret), MinKeyLen)
		}
		k.keys[id] = newMACKey(secret)
		k.ids = append(k.ids, id)
	}
	if k.keys[current] == nil {
		return nil, fmt.Errorf("bidtoken: current key %d is not in the keyring", current)
	}
	slices.Sort(k.ids)
	return k, nil
}

// ParseKeyring reads a keyring from its configuration form (ENDCAP_BID_SIGNING_KEYS):
// comma-separated "id:key" entries, id a decimal 0..255, key base64url of at least MinKeyLen bytes (padding
// and the standard base64 alphabet are accepted too). The first entry is the current key. Spaces around
// entries are ignored. Error messages never include key material.
//
//	ENDCAP_BID_SIGNING_KEYS="2:<new key>,1:<old key>"
func ParseKeyring(spec string) (*Keyring, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("bidtoken: empty keyring spec")
	}
	keys := map[uint8][]byte{}
	var current uint8
	for i, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		idText, keyText, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("bidtoken: keyring entry %d: want id:key", i+1)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 8)
		if err != nil {
			return nil, fmt.Errorf("bidtoken: keyring entry %d: key id must be 0..255", i+1)
		}
		if _, dup := keys[uint8(id)]; dup {
			return nil, fmt.Errorf("bidtoken: keyring entry %d: key id %d repeated", i+1, id)
		}
		keyText = strings.TrimRight(strings.TrimSpace(keyText), "=")
		keyText = strings.NewReplacer("+", "-", "/", "_").Replace(keyText)
		secret, err := base64.RawURLEncoding.DecodeString(keyText)
		if err != nil {
			return nil, fmt.Errorf("bidtoken: keyring entry %d (key id %d): key is not base64url", i+1, id)
		}
		if len(secret) < MinKeyLen {
			return nil, fmt.Errorf("bidtoken: keyring entry %d (key id %d): key is %d bytes, need at least %d",
				i+1, id, len(secret), MinKeyLen)
		}
		keys[uint8(id)] = secret
		if i == 0 {
			current = uint8(id)
		}
	}
	return NewKeyring(keys, current)
}

// Current is the id of the key Encode signs with.
func (k *Keyring) Current() uint8 { return k.current }

// KeyIDs lists the ids of every key Decode accepts, in increasing order.
func (k *Keyring) KeyIDs() []uint8 { return slices.Clone(k.ids) }

// String describes the keyring without its key material.
func (k *Keyring) String() string {
	if k == nil {
		return "bidtoken.Keyring(nil)"
	}
	return fmt.Sprintf("bidtoken.Keyring{current: %d, ids: %v}", k.current, k.ids)
}

// GoString keeps %#v from printing key material.
func (k *Keyring) GoString() string { return k.String() }
