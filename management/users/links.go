package users

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/endcap/endcap/management/invitations"
)

// Links signs and checks the links of invitation e-mails:
// <console>/invite/<marketplace>/<invitation>/<signature>, the signature an
// HMAC-SHA-256 of the marketplace, the invitation and its creation time. A
// link works while its invitation is pending: accepting it once, or its
// expiry, ends it (single use without storing the link).
type Links struct {
	mu   sync.RWMutex
	key  []byte
	base string // the console's URL, without a trailing slash
}

// NewLinks returns links under base (the console's public URL).
func NewLinks(base string) *Links { return &Links{base: strings.TrimRight(base, "/")} }

// SetKey sets the signing key (known once the process has its secrets).
func (l *Links) SetKey(key []byte) {
	l.mu.Lock()
	l.key = append([]byte(nil), key...)
	l.mu.Unlock()
}

// SetBase sets the console's public URL.
func (l *Links) SetBase(base string) {
	l.mu.Lock()
	l.base = strings.TrimRight(base, "/")
	l.mu.Unlock()
}

// Ready says whether the key is set.
func (l *Links) Ready() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.key) > 0
}

func (l *Links) sign(mp string, inv invitations.Invitation) string {
	l.mu.RLock()
	m := hmac.New(sha256.New, l.key)
	l.mu.RUnlock()
	m.Write([]byte("endcap invitation link\x00" + mp + "\x00" + inv.ID + "\x00" + strconv.FormatInt(inv.CreatedAt.UnixNano(), 10)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// URL is the acceptance link of an invitation of mp.
func (l *Links) URL(mp string, inv invitations.Invitation) string {
	l.mu.RLock()
	base := l.base
	l.mu.RUnlock()
	return base + "/invite/" + url.PathEscape(mp) + "/" + url.PathEscape(inv.ID) + "/" + l.sign(mp, inv)
}

// Verify says whether sig is the signature of the invitation's link.
func (l *Links) Verify(mp string, inv invitations.Invitation, sig string) bool {
	if !l.Ready() {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(l.sign(mp, inv)))
}
