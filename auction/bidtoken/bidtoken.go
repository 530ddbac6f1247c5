// Package bidtoken encodes and verifies resolvedBidIds: the opaque strings an auction hands out with each
// winner and that clients echo back in impression and click events.
//
// A resolvedBidId is self-contained and signed. It carries what charging needs (marketplace, campaign,
// cleared price, charge type, auction time) and what basic reporting needs (auction, rank, ad format, the
// winning entity, the vendor, the manual bid), authenticated with a truncated HMAC-SHA256 under a key chosen
// by a one-byte key id, so that keys can rotate. It is base64url without padding and at most MaxLen
// characters. See docs/reference/resolved-bid-id.md for the layout, the rotation procedure and the security argument.
//
// Keyring.Encode signs, Keyring.Decode verifies client input; DecodeUnverified reads a token that already
// passed Decode (for example one read back from the events topic) without needing its key.
package bidtoken

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// MaxLen is the longest resolvedBidId Encode produces and Decode accepts, in characters. The wire contract
// asks for "under 200 characters"; MaxLen keeps that reading strictly (149 bytes before base64url).
const MaxLen = 199

// MaxRank is the highest rank a winner can have (an auction has at most 40 slots).
const MaxRank = 40

// Version is the layout version Encode writes (byte 0 of the token).
const Version = 1

const (
	maxBytes   = MaxLen * 6 / 8 // 149: what MaxLen base64url characters can hold
	macLen     = 16             // HMAC-SHA256 truncated to 128 bits
	idLen      = 16             // a UUID
	headerLen  = 5              // version, key id, flags, kinds, rank
	minPayload = headerLen + 3*idLen + 1 + 1 + 2 + 2
	maxPayload = maxBytes - macLen

	flagBid    = 1 << 0 // a 16-byte BidID follows the campaign id
	flagsKnown = flagBid

	// An id (winner, vendor) is a tag byte and its data. Tags 1..maxWhole: the id's bytes, that many.
	maxWhole      = 0x7f
	tagHash       = 0x80 // 16 bytes: IDHash(id)
	tagUUIDLower  = 0x81 // 16 bytes: the id is a UUID in canonical lowercase text (8-4-4-4-12)
	tagUUIDUpper  = 0x82 // 16 bytes: the same, uppercase
	compactIDCost = 1 + 16
)

// ChargeType is how a winner is charged.
type ChargeType uint8

// Charge types.
const (
	CPC ChargeType = 1 // per click; PriceMicros is the price of one click
	CPM ChargeType = 2 // per impression; PriceMicros is the price of 1,000 impressions
)

var chargeTypeNames = [...]string{CPC: "CPC", CPM: "CPM"}

func (t ChargeType) String() string { return nameOf(chargeTypeNames[:], uint8(t), "ChargeType") }

// AdFormat is the kind of auction a winner came from.
type AdFormat uint8

// Ad formats.
const (
	Listings       AdFormat = 1
	Banners        AdFormat = 2
	SponsoredBrand AdFormat = 3
	Hotels         AdFormat = 4
	Flights        AdFormat = 5
)

var adFormatNames = [...]string{Listings: "listings", Banners: "banners", SponsoredBrand: "sponsored_brand", Hotels: "hotels", Flights: "flights"}

func (f AdFormat) String() string { return nameOf(adFormatNames[:], uint8(f), "AdFormat") }

// WinnerType is the kind of entity that won (the winner's "type" on the wire).
type WinnerType uint8

// Winner types.
const (
	WinnerProduct WinnerType = 1
	WinnerVendor  WinnerType = 2
	WinnerBrand   WinnerType = 3
	WinnerURL     WinnerType = 4
)

var winnerTypeNames = [...]string{WinnerProduct: "product", WinnerVendor: "vendor", WinnerBrand: "brand", WinnerURL: "url"}

func (w WinnerType) String() string { return nameOf(winnerTypeNames[:], uint8(w), "WinnerType") }

// nameOf is the name of value v of an enumeration in names, or
// typ(v) when it has none.
func nameOf(names []string, v uint8, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// Claims is what a resolvedBidId asserts about one winner of one auction.
type Claims struct {
	MarketplaceID [16]byte // UUID; never zero
	AuctionID     [16]byte // UUIDv7 of the auction; never zero. (AuctionID, Rank) names the winner in the auctions topic
	CampaignID    [16]byte // UUID; never zero
	BidID         [16]byte // UUID of the manual bid; zero for automated bids
	AuctionTimeMs int64    // when the auction ran, Unix milliseconds (UTC)
	ChargeType    ChargeType
	AdFormat      AdFormat
	Rank          uint8 // 1..MaxRank
	PriceMicros   int64 // cleared price, micro-units of the marketplace currency (CPC: per click; CPM: per 1,000 impressions); >= 0
	WinnerType    WinnerType

	// WinnerID is the winning entity's id (product id, vendor id, brand id or URL); VendorID is the campaign's
	// vendor. Both are required by Encode. An id that is a UUID in canonical text takes 16 bytes; when the two
	// do not fit whole (ids may be 255 characters, up to 1,020 bytes of UTF-8), Encode carries the longer
	// one, or both, as IDHash(id) instead. Decode then returns that id empty, its ...Hashed flag set and its
	// hash in ...Hash; reporting resolves it from the auctions topic record (AuctionID, Rank). Charging
	// never needs either id.
	//
	// Encode accepts Claims as Decode returns them: with WinnerIDHashed set (and WinnerID empty) it carries
	// WinnerIDHash as given; likewise for the vendor.
	WinnerID       string
	WinnerIDHashed bool
	WinnerIDHash   [16]byte
	VendorID       string
	VendorIDHashed bool
	VendorIDHash   [16]byte

	// KeyID is the id of the key that signed the token. Set by Decode (useful to watch an old key drain
	// before it is dropped); ignored by Encode, which always signs with the keyring's current key.
	KeyID uint8
}

// IDHash is how a token carries an id too long to carry whole: the first 16 bytes of SHA-256 of the id's
// UTF-8 bytes. It is unkeyed on purpose, so that a report can compute it from the auctions topic record
// (ClickHouse: substring(SHA256(id), 1, 16)).
func IDHash(id string) [16]byte {
	var sum [sha256.Size]byte
	if len(id) <= 1024 {
		var buf [1024]byte // ids are at most 255 characters (1,020 bytes): hash them without allocating
		sum = sha256.Sum256(buf[:copy(buf[:], id)])
	} else {
		sum = sha256.Sum256([]byte(id))
	}
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}

// Errors. Every error Decode returns satisfies errors.Is(err, ErrInvalid), which the events handler maps to
// invalid_resolved_bid_id; the specific ones say why, for logs and metrics.
var (
	ErrInvalid = errors.New("bidtoken: invalid resolvedBidId")

	// ErrMalformed: not a resolvedBidId of a known version: empty, longer than MaxLen, a character outside
	// the base64url alphabet, padding, non-canonical trailing bits, shorter than a version, a key id and a
	// MAC, an unknown version, or (after a valid MAC) a body that does not parse.
	ErrMalformed = &decodeError{"bidtoken: malformed resolvedBidId"}
	// ErrUnknownKey: the key id is not in the keyring (never issued, or dropped after rotation).
	ErrUnknownKey = &decodeError{"bidtoken: resolvedBidId signed with an unknown key"}
	// ErrForged: the MAC does not match: the token was altered, truncated, extended or made up.
	ErrForged = &decodeError{"bidtoken: resolvedBidId signature mismatch"}
	// ErrForeignMarketplace: a genuine token issued to another marketplace.
	ErrForeignMarketplace = &decodeError{"bidtoken: resolvedBidId belongs to another marketplace"}

	// ErrInvalidClaims is returned (wrapped, with the reason) by Encode for Claims it refuses to sign.
	ErrInvalidClaims = errors.New("bidtoken: invalid claims")
	// ErrTooLong is returned by Encode if a token would exceed MaxLen; the layout makes that unreachable for
	// valid Claims (ids of any length fit, hashed), so it signals a bug.
	ErrTooLong = errors.New("bidtoken: resolvedBidId would exceed MaxLen")
)

type decodeError struct{ msg string }

func (e *decodeError) Error() string        { return e.msg }
func (e *decodeError) Is(target error) bool { return target == ErrInvalid }

var errNilKeyring = errors.New("bidtoken: nil keyring")

func invalidClaims(reason string) error { return fmt.Errorf("%w: %s", ErrInvalidClaims, reason) }

func (c *Claims) validate() error {
	var zero [16]byte
	switch {
	case c.MarketplaceID == zero:
		return invalidClaims("zero MarketplaceID")
	case c.AuctionID == zero:
		return invalidClaims("zero AuctionID")
	case c.CampaignID == zero:
		return invalidClaims("zero CampaignID")
	case c.ChargeType < CPC || c.ChargeType > CPM:
		return invalidClaims("unknown ChargeType")
	case c.AdFormat < Listings || c.AdFormat > Flights:
		return invalidClaims("unknown AdFormat")
	case c.WinnerType < WinnerProduct || c.WinnerType > WinnerURL:
		return invalidClaims("unknown WinnerType")
	case c.Rank < 1 || c.Rank > MaxRank:
		return invalidClaims("Rank out of 1..40")
	case c.PriceMicros < 0:
		return invalidClaims("negative PriceMicros")
	case c.WinnerIDHashed && c.WinnerID != "":
		return invalidClaims("WinnerID set together with WinnerIDHashed")
	case !c.WinnerIDHashed && c.WinnerID == "":
		return invalidClaims("empty WinnerID")
	case c.VendorIDHashed && c.VendorID != "":
		return invalidClaims("VendorID set together with VendorIDHashed")
	case !c.VendorIDHashed && c.VendorID == "":
		return invalidClaims("empty VendorID")
	}
	return nil
}

// uuidMillis is the Unix-millisecond timestamp in the first 48 bits of a UUIDv7. The auction time is
// carried as a (zigzag varint) difference from it, which is 0 (one byte) when the auction id was minted
// at the auction time. Any value round-trips, whatever the id's version.
func uuidMillis(id *[16]byte) int64 {
	return int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// readUvarint reads a minimally encoded uvarint (a non-minimal encoding, which Encode never writes, is
// rejected so that a token has exactly one byte form).
func readUvarint(b []byte) (uint64, int, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 || (n > 1 && b[n-1] == 0) {
		return 0, 0, false
	}
	return v, n, true
}

// Encode signs c with the current key and returns its resolvedBidId (base64url, no padding, at most MaxLen
// characters). It fails only for invalid Claims; ids of any length fit (see Claims.WinnerID).
func (k *Keyring) Encode(c Claims) (string, error) {
	if k == nil {
		return "", errNilKeyring
	}
	if err := c.validate(); err != nil {
		return "", err
	}
	var buf [maxBytes]byte
	n, err := k.sign(&buf, &c)
	if err != nil {
		return "", err
	}
	var out [MaxLen]byte
	m := base64.RawURLEncoding.EncodedLen(n)
	base64.RawURLEncoding.Encode(out[:m], buf[:n])
	return string(out[:m]), nil
}

// sign writes the payload and its MAC into buf and returns the token's length in bytes.
func (k *Keyring) sign(buf *[maxBytes]byte, c *Claims) (int, error) {
	key := k.keys[k.current]
	var zero [16]byte
	hasBid := c.BidID != zero
	timeDelta := zigzag(c.AuctionTimeMs - uuidMillis(&c.AuctionID)) // wraps on overflow; unzigzag wraps back
	price := uint64(c.PriceMicros)

	// Decide which ids go whole and which as IDHash: whole if both fit, else hash the costlier one (the
	// vendor on a tie: it can also be found from the campaign), else both. A UUID-text id always goes as
	// 16 bytes, which is never worse than its hash.
	fixed := headerLen + 3*idLen + uvarintLen(timeDelta) + uvarintLen(price) + macLen
	if hasBid {
		fixed += idLen
	}
	avail := maxBytes - fixed
	w := idForm(c.WinnerIDHashed, c.WinnerID)
	v := idForm(c.VendorIDHashed, c.VendorID)
	if w.cost()+v.cost() > avail {
		if w.cost() > v.cost() {
			w.tag = tagHash
		} else {
			v.tag = tagHash
		}
		if w.cost()+v.cost() > avail {
			w.tag, v.tag = tagHash, tagHash
		}
	}
	if w.cost()+v.cost() > avail {
		return 0, ErrTooLong // unreachable: fixed <= 104 and two hashes take 34 of the remaining 45
	}

	var flags byte
	if hasBid {
		flags |= flagBid
	}
	buf[0] = Version
	buf[1] = k.current
	buf[2] = flags
	buf[3] = byte(c.ChargeType) | byte(c.AdFormat)<<2 | byte(c.WinnerType)<<5
	buf[4] = c.Rank
	n := headerLen
	n += copy(buf[n:], c.MarketplaceID[:])
	n += copy(buf[n:], c.AuctionID[:])
	n += copy(buf[n:], c.CampaignID[:])
	if hasBid {
		n += copy(buf[n:], c.BidID[:])
	}
	n += binary.PutUvarint(buf[n:], timeDelta)
	n += binary.PutUvarint(buf[n:], price)
	n = w.put(buf, n, c.WinnerID, &c.WinnerIDHash)
	n = v.put(buf, n, c.VendorID, &c.VendorIDHash)
	mac := key.mac(buf[:n])
	n += copy(buf[n:], mac[:])
	return n, nil
}

// idEnc is how one id goes into a token: tag (see tagHash) and, for a whole id, its length.
type idEnc struct {
	tag  byte
	size int // bytes after the tag
	uuid [16]byte
}

func idForm(hashed bool, id string) idEnc {
	switch {
	case hashed:
		return idEnc{tag: tagHash, size: 16}
	case len(id) == 36:
		if u, upper, ok := parseUUIDText(id); ok {
			if upper {
				return idEnc{tag: tagUUIDUpper, size: 16, uuid: u}
			}
			return idEnc{tag: tagUUIDLower, size: 16, uuid: u}
		}
	}
	if len(id) > maxWhole {
		return idEnc{tag: tagHash, size: 16}
	}
	return idEnc{tag: byte(len(id)), size: len(id)}
}

func (e *idEnc) cost() int {
	if e.tag == tagHash {
		return compactIDCost
	}
	return 1 + e.size
}

// put writes the id at buf[n:]; given is the hash to carry when id is empty (Claims from Decode).
func (e *idEnc) put(buf *[maxBytes]byte, n int, id string, given *[16]byte) int {
	buf[n] = e.tag
	n++
	switch {
	case e.tag == tagUUIDLower || e.tag == tagUUIDUpper:
		return n + copy(buf[n:], e.uuid[:])
	case e.tag != tagHash:
		return n + copy(buf[n:], id)
	case id != "":
		h := IDHash(id)
		return n + copy(buf[n:], h[:])
	}
	return n + copy(buf[n:], given[:])
}

const hexLower, hexUpper = "0123456789abcdef", "0123456789ABCDEF"

var hexValues = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 16 {
		t[hexLower[i]] = byte(i)
		t[hexUpper[i]] = byte(i)
	}
	return t
}()

// uuidHexAt is where each byte's two hex digits start in 8-4-4-4-12 text.
var uuidHexAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// parseUUIDText parses a UUID in canonical 8-4-4-4-12 text, its letters all lowercase or all uppercase,
// so that formatUUIDText gives back exactly the same string.
func parseUUIDText[T string | []byte](s T) (u [16]byte, upper, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false, false
	}
	var lower bool
	for j, i := range uuidHexAt {
		hi, lo := hexValues[s[i]], hexValues[s[i+1]]
		if hi > 15 || lo > 15 {
			return u, false, false
		}
		for _, ch := range [2]byte{s[i], s[i+1]} {
			switch {
			case ch >= 'a':
				lower = true
			case ch >= 'A':
				upper = true
			}
		}
		u[j] = hi<<4 | lo
	}
	if lower && upper {
		return u, false, false
	}
	return u, upper, true
}

func hasHexLetter(u *[16]byte) bool {
	for _, b := range u {
		if b>>4 > 9 || b&0x0f > 9 {
			return true
		}
	}
	return false
}

func formatUUIDText(dst []byte, u *[16]byte, upper bool) int {
	digits := hexLower
	if upper {
		digits = hexUpper
	}
	n := 0
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[n] = '-'
			n++
		}
		dst[n], dst[n+1] = digits[b>>4], digits[b&0x0f]
		n += 2
	}
	return n
}

// Decode verifies a resolvedBidId received from a client of marketplaceID and returns its claims. Checks,
// in order: the envelope (ErrMalformed), the key id (ErrUnknownKey), the MAC, compared in constant time
// (ErrForged), the body (ErrMalformed), the marketplace (ErrForeignMarketplace). Decode never panics and
// allocates at most once (the ids).
func (k *Keyring) Decode(s string, marketplaceID [16]byte) (Claims, error) {
	if k == nil {
		return Claims{}, errNilKeyring
	}
	var buf [maxBytes]byte
	n, ok := decodeBase64(&buf, s)
	if !ok || n < 2+macLen {
		return Claims{}, ErrMalformed
	}
	if buf[0] != Version {
		return Claims{}, ErrMalformed
	}
	key := k.keys[buf[1]]
	if key == nil {
		return Claims{}, ErrUnknownKey
	}
	body := buf[:n-macLen]
	want := key.mac(body)
	if !equalMAC(&want, buf[n-macLen:n]) {
		return Claims{}, ErrForged
	}
	var c Claims
	if !parse(body, &c) {
		return Claims{}, ErrMalformed
	}
	if c.MarketplaceID != marketplaceID {
		return Claims{}, ErrForeignMarketplace
	}
	return c, nil
}

// DecodeUnverified reads a token WITHOUT checking its MAC or marketplace. Use it only on tokens that
// already passed Decode at the trust boundary — the events topic, where /v2/events writes an event only
// after verifying it — so that replaying the topic still charges correctly after the signing key was
// dropped. Never use it on client input: anyone can make a token it accepts.
func DecodeUnverified(s string) (Claims, error) {
	var buf [maxBytes]byte
	n, ok := decodeBase64(&buf, s)
	if !ok || n < 2+macLen || buf[0] != Version {
		return Claims{}, ErrMalformed
	}
	var c Claims
	if !parse(buf[:n-macLen], &c) {
		return Claims{}, ErrMalformed
	}
	return c, nil
}

// parse reads a version-1 body (everything before the MAC). It accepts exactly the bytes Encode writes:
// known flags and enums, non-zero ids, minimal varints, no trailing bytes.
func parse(b []byte, c *Claims) bool {
	if len(b) < minPayload || len(b) > maxPayload {
		return false
	}
	flags, kinds := b[2], b[3]
	if flags&^flagsKnown != 0 {
		return false
	}
	c.KeyID = b[1]
	c.ChargeType = ChargeType(kinds & 0x03)
	c.AdFormat = AdFormat(kinds >> 2 & 0x07)
	c.WinnerType = WinnerType(kinds >> 5)
	c.Rank = b[4]
	if c.ChargeType < CPC || c.ChargeType > CPM || c.AdFormat < Listings || c.AdFormat > Flights ||
		c.WinnerType < WinnerProduct || c.WinnerType > WinnerURL || c.Rank < 1 || c.Rank > MaxRank {
		return false
	}
	var zero [16]byte
	p := headerLen
	p += copy(c.MarketplaceID[:], b[p:])
	p += copy(c.AuctionID[:], b[p:])
	p += copy(c.CampaignID[:], b[p:])
	if c.MarketplaceID == zero || c.AuctionID == zero || c.CampaignID == zero {
		return false
	}
	if flags&flagBid != 0 {
		if len(b)-p < idLen {
			return false
		}
		p += copy(c.BidID[:], b[p:])
		if c.BidID == zero {
			return false // Encode leaves a zero bid out
		}
	}
	td, m, ok := readUvarint(b[p:])
	if !ok {
		return false
	}
	p += m
	c.AuctionTimeMs = uuidMillis(&c.AuctionID) + unzigzag(td)
	price, m, ok := readUvarint(b[p:])
	if !ok || price > math.MaxInt64 {
		return false
	}
	p += m
	c.PriceMicros = int64(price)

	// Ids: the text ones are gathered into one string (one allocation), then sliced.
	var scratch [2 * maxBytes]byte
	var nw, nv int
	if p, nw, ok = readID(b, p, scratch[:], &c.WinnerIDHashed, &c.WinnerIDHash); !ok {
		return false
	}
	if p, nv, ok = readID(b, p, scratch[nw:], &c.VendorIDHashed, &c.VendorIDHash); !ok {
		return false
	}
	if p != len(b) {
		return false
	}
	if nw+nv > 0 {
		ids := string(scratch[:nw+nv])
		c.WinnerID, c.VendorID = ids[:nw], ids[nw:]
	}
	return true
}

// readID reads the id at b[p:] as Encode writes it: its text goes to dst (returning its length), or its
// hash to *hash with *hashed set. It rejects forms Encode never writes (an empty or over-long whole id,
// a UUID that Encode would have carried as 16 bytes, an unknown tag).
func readID(b []byte, p int, dst []byte, hashed *bool, hash *[16]byte) (next, n int, ok bool) {
	if p >= len(b) {
		return 0, 0, false
	}
	tag := b[p]
	p++
	switch {
	case tag >= 1 && tag <= maxWhole:
		end := p + int(tag)
		if end > len(b) {
			return 0, 0, false
		}
		if tag == 36 {
			if _, _, isUUID := parseUUIDText(b[p:end]); isUUID {
				return 0, 0, false
			}
		}
		return end, copy(dst, b[p:end]), true
	case tag == tagHash || tag == tagUUIDLower || tag == tagUUIDUpper:
		if len(b)-p < 16 {
			return 0, 0, false
		}
		var u [16]byte
		copy(u[:], b[p:p+16])
		if tag == tagHash {
			*hashed, *hash = true, u
			return p + 16, 0, true
		}
		if tag == tagUUIDUpper && !hasHexLetter(&u) {
			return 0, 0, false // Encode writes an all-digit UUID as lowercase
		}
		return p + 16, formatUUIDText(dst, &u, tag == tagUUIDUpper), true
	}
	return 0, 0, false
}
