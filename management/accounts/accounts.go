// Package accounts owns marketplaces and their API keys. Both are
// event-sourced on the accounts changelog topic (storage/statelog); every
// process holds the whole view in memory. Keys are random, shown once,
// stored only as a SHA-256 hash, and compared in constant time.
package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/text/currency"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/storage/statelog"
)

// KeyType is the kind of an API key.
type KeyType string

const (
	// KeyMarketplace is for POST /v2/auctions and /v2/events.
	KeyMarketplace KeyType = "marketplace"
	// KeyAdvanced is for /public/v1.
	KeyAdvanced KeyType = "advanced"
)

// ParseKeyType validates a key type name.
func ParseKeyType(s string) (KeyType, error) {
	switch KeyType(s) {
	case KeyMarketplace, KeyAdvanced:
		return KeyType(s), nil
	}
	return "", fmt.Errorf("key type must be %q or %q, got %q", KeyMarketplace, KeyAdvanced, s)
}

// Marketplace is one tenant.
type Marketplace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Currency  string    `json:"currency"`
	Timezone  string    `json:"timezone"`
	CreatedAt time.Time `json:"createdAt"`
	// Reserve prices of the marketplace's auctions, micro-units: a CPC bid
	// (per click) or CPM bid (per 1,000 impressions) below its reserve does
	// not compete, and no winner pays less. 0: no reserve.
	ReserveCPCMicros int64 `json:"reserveCpcMicros,omitempty"`
	ReserveCPMMicros int64 `json:"reserveCpmMicros,omitempty"`
	// Attribution overrides the default purchase-attribution rules
	// (docs/design/attribution.md); nil: the defaults.
	Attribution *AttributionSettings `json:"attribution,omitempty"`
	// SSOOnly: the marketplace's console users sign in by single sign-on
	// only; passwords are refused (docs/guide/console.md).
	SSOOnly bool `json:"ssoOnly,omitempty"`
	// Balances: the marketplace's vendors pay from balances (top-ups and
	// credit limits, docs/reference/balances.md): a charge draws on its vendor's
	// funds and is refused when they do not cover it. Off: no change.
	Balances bool `json:"balances,omitempty"`
	// LowBalanceMicros: a vendor.balance_low webhook event goes out when a
	// vendor's available funds fall below it (0: when they run out).
	LowBalanceMicros int64 `json:"lowBalanceMicros,omitempty"`

	loc *time.Location
}

// AttributionSettings are a marketplace's purchase-attribution windows and
// halo rule. The attribution package owns the defaults and the meaning.
type AttributionSettings struct {
	// Windows by ad format (listings, banners, sponsored_brand, hotels,
	// flights). A format not listed uses the default windows.
	Windows map[string]AttributionWindow `json:"windows,omitempty"`
	// NoHalo turns same-vendor (halo) attribution off.
	NoHalo bool `json:"noHalo,omitempty"`
	// Revision counts the changes of these settings (SetAttribution adds
	// one): a purchase attributed under newer settings replaces its older
	// attribution whatever the order of the computations.
	Revision int64 `json:"revision"`
}

// AttributionWindow is how long after a click, or after an impression, a
// purchase may be attributed to it. 0: never.
type AttributionWindow struct {
	ClickSeconds      int64 `json:"clickSeconds"`
	ImpressionSeconds int64 `json:"impressionSeconds"`
}

// AttributionAdFormats are the ad formats an attribution window can be set
// for (the auction's formats).
var AttributionAdFormats = []string{"listings", "banners", "sponsored_brand", "hotels", "flights"}

// MaxAttributionWindowSeconds is the longest window (30 days): older
// interactions are past the horizon of late events.
const MaxAttributionWindowSeconds = 30 * 24 * 60 * 60

// Location is the marketplace's time zone, which defines day_local.
func (m Marketplace) Location() *time.Location {
	if m.loc != nil {
		return m.loc
	}
	loc, err := time.LoadLocation(m.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// APIKey is a stored key: never the key itself, only its hash.
type APIKey struct {
	ID            string     `json:"id"`
	MarketplaceID string     `json:"marketplaceId"`
	Type          KeyType    `json:"type"`
	Hash          string     `json:"hash"`   // hex SHA-256 of the whole key
	Prefix        string     `json:"prefix"` // first characters, to recognise a key in lists
	CreatedAt     time.Time  `json:"createdAt"`
	RevokedAt     *time.Time `json:"revokedAt,omitempty"`
	// Name is a label given at creation, to tell keys apart in lists.
	Name string `json:"name,omitempty"`
	// ExpiresAt, when set, is when the key stops authenticating.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// VendorID, when set, scopes an advanced key to one vendor (its
	// catalog id): it reads that vendor's reports and nothing else
	// (docs/reference/reporting-api.md).
	VendorID string `json:"vendorId,omitempty"`
}

// Live says whether the key authenticates at now: not revoked, not expired.
func (k APIKey) Live(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// Errors of the service.
var (
	ErrInvalid  error = errkind.Invalid
	ErrNotFound error = errkind.NotFound
)

const (
	typeMarketplace = "marketplace"
	typeKey         = "apikey"
)

// Service is the accounts view plus its write operations.
type Service struct {
	log *statelog.Log
	now func() time.Time

	mu           sync.RWMutex
	marketplaces map[string]*Marketplace
	keysByID     map[string]*APIKey
	keysByHash   map[[sha256.Size]byte]*APIKey
}

// Ready reports whether every marketplace and key in the log has been
// loaded (Authenticate answers for all of them).
func (s *Service) Ready() bool { return s.log.Ready() }

// New registers the service's appliers on log. Call before log.Run.
func New(log *statelog.Log) *Service {
	s := &Service{
		log:          log,
		now:          time.Now,
		marketplaces: map[string]*Marketplace{},
		keysByID:     map[string]*APIKey{},
		keysByHash:   map[[sha256.Size]byte]*APIKey{},
	}
	log.Register(typeMarketplace, s.applyMarketplace)
	log.Register(typeKey, s.applyKey)
	return s
}

func (s *Service) applyMarketplace(r statelog.Record) {
	var m Marketplace
	if err := json.Unmarshal(r.State, &m); err != nil {
		return
	}
	if loc, err := time.LoadLocation(m.Timezone); err == nil {
		m.loc = loc
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Deleted {
		delete(s.marketplaces, r.ID)
		return
	}
	s.marketplaces[r.ID] = &m
}

func (s *Service) applyKey(r statelog.Record) {
	var k APIKey
	if err := json.Unmarshal(r.State, &k); err != nil {
		return
	}
	h, err := hex.DecodeString(k.Hash)
	if err != nil || len(h) != sha256.Size {
		return
	}
	var hk [sha256.Size]byte
	copy(hk[:], h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.keysByID[r.ID]; old != nil {
		delete(s.keysByHash, hashKey(old.Hash))
	}
	if r.Deleted {
		delete(s.keysByID, r.ID)
		return
	}
	s.keysByID[r.ID] = &k
	s.keysByHash[hk] = &k
}

func hashKey(h string) [sha256.Size]byte {
	var out [sha256.Size]byte
	b, _ := hex.DecodeString(h)
	copy(out[:], b)
	return out
}

// CreateMarketplace validates and creates a marketplace. currency is an ISO
// 4217 code, timezone an IANA zone name.
func (s *Service) CreateMarketplace(ctx context.Context, name, cur, tz string) (Marketplace, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		return Marketplace{}, fmt.Errorf("%w: name must be 1 to 200 characters", ErrInvalid)
	}
	unit, err := currency.ParseISO(cur)
	if err != nil || unit.String() != strings.ToUpper(cur) {
		return Marketplace{}, fmt.Errorf("%w: currency %q is not an ISO 4217 code", ErrInvalid, cur)
	}
	if tz == "" || tz == "Local" {
		return Marketplace{}, fmt.Errorf("%w: timezone must be an IANA zone name such as America/New_York", ErrInvalid)
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return Marketplace{}, fmt.Errorf("%w: timezone %q is not an IANA zone name", ErrInvalid, tz)
	}
	m := Marketplace{ID: uuid.NewString(), Name: name, Currency: unit.String(), Timezone: tz, CreatedAt: s.now().UTC().Truncate(time.Second)}
	if _, err := s.log.Append(ctx, typeMarketplace, m.ID, 0, m, false); err != nil {
		return Marketplace{}, err
	}
	return m, nil
}

// SetReserve sets a marketplace's reserve prices (micro-units, 0 = none).
func (s *Service) SetReserve(ctx context.Context, marketplaceID string, cpcMicros, cpmMicros int64) (Marketplace, error) {
	if cpcMicros < 0 || cpmMicros < 0 {
		return Marketplace{}, fmt.Errorf("%w: reserve prices cannot be negative", ErrInvalid)
	}
	m, ok := s.Marketplace(marketplaceID)
	if !ok {
		return Marketplace{}, fmt.Errorf("%w: marketplace %s", ErrNotFound, marketplaceID)
	}
	old := m
	m.ReserveCPCMicros, m.ReserveCPMMicros = cpcMicros, cpmMicros
	detail := fmt.Sprintf("reserve CPC %d → %d micros, CPM %d → %d micros", old.ReserveCPCMicros, cpcMicros, old.ReserveCPMMicros, cpmMicros)
	if err := s.writeMarketplace(ctx, m, "settings.reserve", detail); err != nil {
		return Marketplace{}, err
	}
	return m, nil
}

// SetSSOOnly turns the marketplace's password sign-in off (on: its console
// users sign in by single sign-on only) or back on.
func (s *Service) SetSSOOnly(ctx context.Context, marketplaceID string, on bool) (Marketplace, error) {
	m, ok := s.Marketplace(marketplaceID)
	if !ok {
		return Marketplace{}, fmt.Errorf("%w: marketplace %s", ErrNotFound, marketplaceID)
	}
	if m.SSOOnly == on {
		return m, nil
	}
	m.SSOOnly = on
	if err := s.writeMarketplace(ctx, m, "settings.sso_only", fmt.Sprintf("single sign-on only: %v", on)); err != nil {
		return Marketplace{}, err
	}
	return m, nil
}

// SetBalances turns vendor balances on or off for a marketplace and sets
// the available funds below which a vendor.balance_low event goes out
// (micro-units, 0: when they run out).
func (s *Service) SetBalances(ctx context.Context, marketplaceID string, on bool, lowMicros int64) (Marketplace, error) {
	if lowMicros < 0 {
		return Marketplace{}, fmt.Errorf("%w: the low-balance threshold cannot be negative", ErrInvalid)
	}
	m, ok := s.Marketplace(marketplaceID)
	if !ok {
		return Marketplace{}, fmt.Errorf("%w: marketplace %s", ErrNotFound, marketplaceID)
	}
	if m.Balances == on && m.LowBalanceMicros == lowMicros {
		return m, nil
	}
	m.Balances, m.LowBalanceMicros = on, lowMicros
	if err := s.writeMarketplace(ctx, m, "settings.balances", fmt.Sprintf("vendor balances: %v, low-balance threshold %d micros", on, lowMicros)); err != nil {
		return Marketplace{}, err
	}
	return m, nil
}

// writeMarketplace writes a changed marketplace, with its audit entry when
// ctx carries an actor.
func (s *Service) writeMarketplace(ctx context.Context, m Marketplace, action, detail string) error {
	changes := []statelog.Change{{Type: typeMarketplace, ID: m.ID, Expected: s.log.Version(typeMarketplace, m.ID), State: m}}
	if c, ok := audit.Change(ctx, m.ID, action, m.ID, detail, s.now()); ok {
		changes = append(changes, c)
	}
	_, err := s.log.AppendBatch(ctx, changes)
	return err
}

// SetAttribution replaces a marketplace's attribution settings (windows
// and halo) and increments their revision.
func (s *Service) SetAttribution(ctx context.Context, marketplaceID string, windows map[string]AttributionWindow, noHalo bool) (Marketplace, error) {
	for f, w := range windows {
		if !slices.Contains(AttributionAdFormats, f) {
			return Marketplace{}, fmt.Errorf("%w: ad format %q is not one of %s", ErrInvalid, f, strings.Join(AttributionAdFormats, ", "))
		}
		for _, sec := range []int64{w.ClickSeconds, w.ImpressionSeconds} {
			if sec < 0 || sec > MaxAttributionWindowSeconds {
				return Marketplace{}, fmt.Errorf("%w: %s attribution windows must be 0 to 30 days", ErrInvalid, f)
			}
		}
	}
	m, ok := s.Marketplace(marketplaceID)
	if !ok {
		return Marketplace{}, fmt.Errorf("%w: marketplace %s", ErrNotFound, marketplaceID)
	}
	a := &AttributionSettings{Windows: maps.Clone(windows), NoHalo: noHalo}
	if m.Attribution != nil {
		a.Revision = m.Attribution.Revision
	}
	a.Revision++
	m.Attribution = a
	if err := s.writeMarketplace(ctx, m, "settings.attribution", fmt.Sprintf("attribution settings revision %d", a.Revision)); err != nil {
		return Marketplace{}, err
	}
	return m, nil
}

// CreateKey creates an API key of a marketplace and returns the key itself,
// which is never stored and cannot be shown again.
func (s *Service) CreateKey(ctx context.Context, marketplaceID string, typ KeyType) (string, APIKey, error) {
	return s.CreateKeyWith(ctx, marketplaceID, typ, KeyOptions{})
}

// KeyOptions are the optional settings of a new key.
type KeyOptions struct {
	// Name labels the key in lists (at most 100 characters).
	Name string
	// ExpiresAt, when set, must be in the future.
	ExpiresAt *time.Time
	// VendorID scopes an advanced key to a vendor (its catalog id, at most
	// MaxKeyVendor characters).
	VendorID string
}

// MaxKeyVendor is the longest vendor id of a vendor-scoped key.
const MaxKeyVendor = 200

// MaxKeyName is the longest key name, in characters.
const MaxKeyName = 100

// CreateKeyWith is CreateKey with a name and an expiry.
func (s *Service) CreateKeyWith(ctx context.Context, marketplaceID string, typ KeyType, o KeyOptions) (string, APIKey, error) {
	o.Name = strings.TrimSpace(o.Name)
	if utf8.RuneCountInString(o.Name) > MaxKeyName || !utf8.ValidString(o.Name) || strings.ContainsRune(o.Name, 0) {
		return "", APIKey{}, fmt.Errorf("%w: a key name is at most %d characters of text", ErrInvalid, MaxKeyName)
	}
	now := s.now().UTC().Truncate(time.Second)
	if o.ExpiresAt != nil {
		exp := o.ExpiresAt.UTC().Truncate(time.Second)
		if !exp.After(now) {
			return "", APIKey{}, fmt.Errorf("%w: a key's expiry must be in the future", ErrInvalid)
		}
		o.ExpiresAt = &exp
	}
	o.VendorID = strings.TrimSpace(o.VendorID)
	switch {
	case o.VendorID != "" && typ != KeyAdvanced:
		return "", APIKey{}, fmt.Errorf("%w: only an advanced key can be scoped to a vendor", ErrInvalid)
	case utf8.RuneCountInString(o.VendorID) > MaxKeyVendor || !utf8.ValidString(o.VendorID) || strings.ContainsRune(o.VendorID, 0):
		return "", APIKey{}, fmt.Errorf("%w: a key's vendor id is at most %d characters of text", ErrInvalid, MaxKeyVendor)
	}
	if _, ok := s.Marketplace(marketplaceID); !ok {
		return "", APIKey{}, fmt.Errorf("%w: marketplace %s", ErrNotFound, marketplaceID)
	}
	if _, err := ParseKeyType(string(typ)); err != nil {
		return "", APIKey{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	secret, err := newSecret(typ)
	if err != nil {
		return "", APIKey{}, err
	}
	sum := sha256.Sum256([]byte(secret))
	k := APIKey{
		ID:            uuid.NewString(),
		MarketplaceID: marketplaceID,
		Type:          typ,
		Hash:          hex.EncodeToString(sum[:]),
		Prefix:        secret[:10],
		CreatedAt:     now,
		Name:          o.Name,
		ExpiresAt:     o.ExpiresAt,
		VendorID:      o.VendorID,
	}
	changes := []statelog.Change{{Type: typeKey, ID: k.ID, Expected: 0, State: k}}
	detail := fmt.Sprintf("%s key %s…", typ, k.Prefix)
	if k.Name != "" {
		detail += " " + strconv.Quote(k.Name)
	}
	if k.ExpiresAt != nil {
		detail += ", expires " + k.ExpiresAt.Format(time.RFC3339)
	}
	if k.VendorID != "" {
		detail += ", vendor " + strconv.Quote(k.VendorID)
	}
	if c, ok := audit.Change(ctx, marketplaceID, "key.create", k.ID, detail, now); ok {
		changes = append(changes, c)
	}
	if _, err := s.log.AppendBatch(ctx, changes); err != nil {
		return "", APIKey{}, err
	}
	return secret, k, nil
}

// RevokeKey revokes a key; revoking a revoked key changes nothing.
func (s *Service) RevokeKey(ctx context.Context, keyID string) (APIKey, error) {
	s.mu.RLock()
	cur, ok := s.keysByID[keyID]
	var k APIKey
	if ok {
		k = *cur
	}
	s.mu.RUnlock()
	if !ok {
		return APIKey{}, fmt.Errorf("%w: key %s", ErrNotFound, keyID)
	}
	if k.RevokedAt != nil {
		return k, nil
	}
	now := s.now().UTC().Truncate(time.Second)
	k.RevokedAt = &now
	changes := []statelog.Change{{Type: typeKey, ID: k.ID, Expected: s.log.Version(typeKey, k.ID), State: k}}
	if c, ok := audit.Change(ctx, k.MarketplaceID, "key.revoke", k.ID, fmt.Sprintf("%s key %s…", k.Type, k.Prefix), now); ok {
		changes = append(changes, c)
	}
	if _, err := s.log.AppendBatch(ctx, changes); err != nil {
		return APIKey{}, err
	}
	return k, nil
}

const keyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newSecret returns "ecm_" (marketplace) or "eca_" (advanced) followed by 40
// random base-62 characters (about 238 bits).
func newSecret(typ KeyType) (string, error) {
	prefix := "ecm_"
	if typ == KeyAdvanced {
		prefix = "eca_"
	}
	b := make([]byte, 0, len(prefix)+40)
	b = append(b, prefix...)
	var buf [64]byte
	for len(b) < cap(b) {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", err
		}
		for _, c := range buf {
			// 248 = 4*62: reject the top values to stay uniform.
			if c < 248 && len(b) < cap(b) {
				b = append(b, keyAlphabet[int(c)%62])
			}
		}
	}
	return string(b), nil
}

// Principal is who a request is: a key and its marketplace.
type Principal struct {
	Key         APIKey
	Marketplace Marketplace
}

// Authenticate finds the live key whose hash matches token.
func (s *Service) Authenticate(token string) (Principal, bool) {
	if len(token) < 8 || len(token) > 256 {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	s.mu.RLock()
	k := s.keysByHash[sum]
	var p Principal
	ok := false
	if k != nil {
		stored := hashKey(k.Hash)
		m := s.marketplaces[k.MarketplaceID]
		if subtle.ConstantTimeCompare(stored[:], sum[:]) == 1 && k.RevokedAt == nil && m != nil &&
			(k.ExpiresAt == nil || s.now().Before(*k.ExpiresAt)) {
			p, ok = Principal{Key: *k, Marketplace: *m}, true
		}
	}
	s.mu.RUnlock()
	return p, ok
}

// Marketplace returns a marketplace by id.
func (s *Service) Marketplace(id string) (Marketplace, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.marketplaces[id]
	if !ok {
		return Marketplace{}, false
	}
	return *m, true
}

// Reserve returns a marketplace's reserve prices, micro-units (0: none; an
// unknown marketplace has none). It is the campaigns' entityref.Marketplaces.
func (s *Service) Reserve(id string) (cpcMicros, cpmMicros int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m := s.marketplaces[id]; m != nil {
		return m.ReserveCPCMicros, m.ReserveCPMMicros
	}
	return 0, 0
}

// Marketplaces lists every marketplace by name.
func (s *Service) Marketplaces() []Marketplace {
	s.mu.RLock()
	out := make([]Marketplace, 0, len(s.marketplaces))
	for _, m := range s.marketplaces {
		out = append(out, *m)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		return out[i].Name < out[j].Name || (out[i].Name == out[j].Name && out[i].ID < out[j].ID)
	})
	return out
}

// Key returns a key by id.
func (s *Service) Key(id string) (APIKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keysByID[id]
	if !ok {
		return APIKey{}, false
	}
	return *k, true
}

// Keys lists the keys of a marketplace, oldest first.
func (s *Service) Keys(marketplaceID string) []APIKey {
	s.mu.RLock()
	var out []APIKey
	for _, k := range s.keysByID {
		if k.MarketplaceID == marketplaceID {
			out = append(out, *k)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		return out[i].CreatedAt.Before(out[j].CreatedAt) || (out[i].CreatedAt.Equal(out[j].CreatedAt) && out[i].ID < out[j].ID)
	})
	return out
}
