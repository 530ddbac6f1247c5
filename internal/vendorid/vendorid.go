// Package vendorid gives every vendor of a marketplace its internal id: a
// UUID beside the vendor's catalog id (the id the marketplace upserted it
// with, which the API calls externalVendorId where both appear).
//
// The UUID is derived, not stored: UUIDv5 (RFC 9562, SHA-1) in a fixed
// namespace of "<marketplace id>/<catalog id>". It is therefore
//
//   - the same in every process, after every restart and every replay of the
//     entities log, with nothing written anywhere: state written before it
//     existed (vendors, campaigns, charges in ClickHouse keyed by the catalog
//     id) needs no migration;
//   - fixed for ever: a vendor's catalog id is its entity key and never
//     changes (an upsert with another id is another vendor), and the
//     marketplace id never changes; vendors are never deleted, and one
//     created again with the same catalog id is the same vendor, with the
//     same UUID;
//   - defined for a catalog id that was never upserted as a vendor (a charge
//     recorded before its vendor reached the catalog still has one);
//   - distinct per marketplace (the same catalog id in two marketplaces is two
//     vendors) and, at 122 bits of SHA-1, free of collisions in practice.
//
// It is not a secret: anyone who knows both ids can compute it, as anyone who
// can read a vendor can read its UUID. The namespace below must never change.
package vendorid

import (
	"github.com/google/uuid"
)

// namespace is the UUIDv5 namespace of vendor UUIDs. Changing it would change
// every vendor's id.
var namespace = uuid.MustParse("72645978-4f00-4fc3-ae86-70d720526407")

// UUID is the internal id of the vendor with catalog id catalogID in the
// marketplace marketplaceID (its id as stored: the canonical, lower-case
// UUID text).
func UUID(marketplaceID, catalogID string) uuid.UUID {
	name := make([]byte, 0, len(marketplaceID)+1+len(catalogID))
	name = append(name, marketplaceID...)
	name = append(name, '/')
	name = append(name, catalogID...)
	return uuid.NewSHA1(namespace, name)
}

// String is UUID's canonical text.
func String(marketplaceID, catalogID string) string { return UUID(marketplaceID, catalogID).String() }

// Parse reads s as a vendor UUID in the canonical 36-character form (hex
// digits in either case): the only form the API writes, and so the only one
// it reads as an internal id. ok is false for anything else, which is then a
// catalog id only.
func Parse(s string) (u uuid.UUID, ok bool) {
	if len(s) != 36 {
		return uuid.UUID{}, false
	}
	u, err := uuid.Parse(s)
	return u, err == nil
}

// Cache remembers the UUIDs of one marketplace's vendors: for a response
// that writes the same few vendors many times (vendor charges). Not safe for
// concurrent use.
type Cache struct {
	marketplaceID string
	m             map[string]string
}

// NewCache returns an empty cache for a marketplace.
func NewCache(marketplaceID string) *Cache { return &Cache{marketplaceID: marketplaceID} }

// String is String(marketplace, catalogID), computed once per catalog id;
// "" for an empty catalog id (no vendor).
func (c *Cache) String(catalogID string) string {
	if catalogID == "" {
		return ""
	}
	if s, ok := c.m[catalogID]; ok {
		return s
	}
	if c.m == nil || len(c.m) >= maxCache {
		c.m = make(map[string]string, 16)
	}
	s := String(c.marketplaceID, catalogID)
	c.m[catalogID] = s
	return s
}

// maxCache bounds a cache: past it, it starts again empty.
const maxCache = 10_000
