package bidtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

// testKey is key id's deterministic 32-byte test secret.
func testKey(id uint8) []byte {
	s := sha256.Sum256([]byte{'k', id})
	return s[:]
}

func ring(t testing.TB, current uint8, ids ...uint8) *Keyring {
	t.Helper()
	keys := map[uint8][]byte{}
	for _, id := range ids {
		keys[id] = testKey(id)
	}
	k, err := NewKeyring(keys, current)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// v7 is a UUIDv7 with the given Unix-millisecond time and filler bytes.
func v7(ms int64, fill byte) [16]byte {
	var u [16]byte
	for i := range u {
		u[i] = fill + byte(i)
	}
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u
}

func uuid4(fill byte) [16]byte {
	var u [16]byte
	for i := range u {
		u[i] = fill ^ byte(i*37)
	}
	u[6] = 0x40 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u
}

const auctionMs = 1_751_000_000_123 // 2025-06-27

var (
	mkt      = uuid4(0xa1)
	otherMkt = uuid4(0xb2)
)

func base() Claims {
	return Claims{
		MarketplaceID: mkt,
		AuctionID:     v7(auctionMs, 0x11),
		CampaignID:    uuid4(0xc3),
		AuctionTimeMs: auctionMs,
		ChargeType:    CPC,
		AdFormat:      Listings,
		Rank:          3,
		PriceMicros:   1_250_000, // 1.25 per click
		WinnerType:    WinnerProduct,
		WinnerID:      "p_Mfk15",
		VendorID:      "v_42",
	}
}

// expect is what Decode returns for c encoded with key id kid (and the id forms the token chose).
func expect(c Claims, kid uint8, wHashed, vHashed bool) Claims {
	c.KeyID = kid
	if wHashed && !c.WinnerIDHashed {
		c.WinnerIDHashed, c.WinnerIDHash, c.WinnerID = true, IDHash(c.WinnerID), ""
	}
	if vHashed && !c.VendorIDHashed {
		c.VendorIDHashed, c.VendorIDHash, c.VendorID = true, IDHash(c.VendorID), ""
	}
	return c
}

func checkToken(t *testing.T, tok string) {
	t.Helper()
	if len(tok) > MaxLen {
		t.Fatalf("token is %d characters, more than %d: %s", len(tok), MaxLen, tok)
	}
	for i := range len(tok) {
		if !strings.ContainsRune(b64alphabet, rune(tok[i])) {
			t.Fatalf("token has %q at %d, outside base64url", tok[i], i)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 255)
	longUnicode := strings.Repeat("𝔘", 255) // 255 characters, 1,020 bytes
	longURL := "https://shop.example/brand/" + strings.Repeat("a", 228)
	tests := []struct {
		name             string
		mod              func(c *Claims)
		wHashed, vHashed bool
	}{
		{"typical", func(c *Claims) {}, false, false},
		{"manual bid", func(c *Claims) { c.BidID = uuid4(0xd4) }, false, false},
		{"max price", func(c *Claims) { c.PriceMicros = math.MaxInt64 }, false, false},
		{"zero price", func(c *Claims) { c.PriceMicros = 0 }, false, false},
		{"rank 1", func(c *Claims) { c.Rank = 1 }, false, false},
		{"rank 40", func(c *Claims) { c.Rank = 40 }, false, false},
		{"CPM banner vendor", func(c *Claims) {
			c.ChargeType, c.AdFormat, c.WinnerType, c.WinnerID = CPM, Banners, WinnerVendor, "v_42"
		}, false, false},
		{"sponsored brand url", func(c *Claims) {
			c.AdFormat, c.WinnerType, c.WinnerID = SponsoredBrand, WinnerURL, "https://shop.example/b/acme?x=1"
		}, false, false},
		{"flights", func(c *Claims) { c.AdFormat, c.ChargeType = Flights, CPM }, false, false},
		{"time min int64", func(c *Claims) { c.AuctionTimeMs = math.MinInt64 }, false, false},
		{"time max int64", func(c *Claims) { c.AuctionTimeMs = math.MaxInt64 }, false, false},
		{"time zero", func(c *Claims) { c.AuctionTimeMs = 0 }, false, false},
		{"time before the id", func(c *Claims) { c.AuctionTimeMs -= 3_600_000 }, false, false},
		{"auction id not v7", func(c *Claims) { c.AuctionID = uuid4(0x5e) }, false, false},
		{"auction id all ones", func(c *Claims) {
			for i := range c.AuctionID {
				c.AuctionID[i] = 0xff
			}
		}, false, false},
		{"uuid ids lowercase", func(c *Claims) {
			c.WinnerID, c.VendorID = "12a55828-8ead-4299-8327-cebb002a0fa8", "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"
		}, false, false},
		{"uuid ids uppercase, with bid", func(c *Claims) {
			c.BidID = uuid4(0xd4)
			c.WinnerID, c.VendorID = "12A55828-8EAD-4299-8327-CEBB002A0FA8", "0190A1B2-C3D4-7E5F-8A6B-7C8D9E0F1A2B"
		}, false, false},
		{"uuid all digits", func(c *Claims) { c.WinnerID = "12345678-1234-1234-1234-123456789012" }, false, false},
		{"uuid mixed case stays text", func(c *Claims) { c.WinnerID = "12a55828-8EAD-4299-8327-cebb002a0fa8" }, false, false},
		{"not quite a uuid", func(c *Claims) { c.WinnerID = "12a55828-8ead-4299-8327_cebb002a0fa8" }, false, false},
		{"unicode ids", func(c *Claims) { c.WinnerID, c.VendorID = "商品-42 ✓", "продавец" }, false, false},
		{"255-char winner", func(c *Claims) { c.WinnerID = long }, true, false},
		{"255-char vendor", func(c *Claims) { c.VendorID = long }, false, true},
		{"255-char both, bid, max price", func(c *Claims) {
			c.WinnerID, c.VendorID, c.BidID, c.PriceMicros = long, long+"", uuid4(0xd4), math.MaxInt64
			c.AuctionTimeMs = math.MinInt64
		}, true, true},
		{"255-char unicode winner", func(c *Claims) { c.WinnerID = longUnicode }, true, false},
		{"255-char unicode both", func(c *Claims) { c.WinnerID, c.VendorID = longUnicode, "ü"+longUnicode[4:] }, true, true},
		{"long url winner", func(c *Claims) { c.WinnerType, c.WinnerID = WinnerURL, longURL }, true, false},
		{"tie hashes the vendor", func(c *Claims) {
			c.WinnerID, c.VendorID = strings.Repeat("w", 40), strings.Repeat("v", 40)
		}, false, true},
		{"given hashes", func(c *Claims) {
			c.WinnerID, c.WinnerIDHashed, c.WinnerIDHash = "", true, IDHash("somewhere")
			c.VendorID, c.VendorIDHashed, c.VendorIDHash = "", true, IDHash("else")
		}, true, true},
	}
	k := ring(t, 7, 7)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mod(&c)
			tok, err := k.Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			checkToken(t, tok)
			got, err := k.Decode(tok, c.MarketplaceID)
			if err != nil {
				t.Fatal(err)
			}
			if want := expect(c, 7, tt.wHashed, tt.vHashed); got != want {
				t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
			}
			again, err := k.Encode(got)
			if err != nil || again != tok {
				t.Fatalf("re-encoding the decoded claims: %v\n got %s\nwant %s", err, again, tok)
			}
			un, err := DecodeUnverified(tok)
			if err != nil || un != got {
				t.Fatalf("DecodeUnverified: %v %+v", err, un)
			}
		})
	}
}

func TestEveryKind(t *testing.T) {
	k := ring(t, 1, 1)
	for ct := CPC; ct <= CPM; ct++ {
		for af := Listings; af <= Flights; af++ {
			for wt := WinnerProduct; wt <= WinnerURL; wt++ {
				for _, rank := range []uint8{1, 2, 39, 40} {
					c := base()
					c.ChargeType, c.AdFormat, c.WinnerType, c.Rank = ct, af, wt, rank
					tok, err := k.Encode(c)
					if err != nil {
						t.Fatal(err)
					}
					got, err := k.Decode(tok, mkt)
					if err != nil || got != expect(c, 1, false, false) {
						t.Fatalf("%v %v %v %d: %v %+v", ct, af, wt, rank, err, got)
					}
				}
			}
		}
	}
}

func TestEncodeRejectsInvalidClaims(t *testing.T) {
	k := ring(t, 1, 1)
	tests := map[string]func(c *Claims){
		"zero marketplace":   func(c *Claims) { c.MarketplaceID = [16]byte{} },
		"zero auction":       func(c *Claims) { c.AuctionID = [16]byte{} },
		"zero campaign":      func(c *Claims) { c.CampaignID = [16]byte{} },
		"charge type 0":      func(c *Claims) { c.ChargeType = 0 },
		"charge type 3":      func(c *Claims) { c.ChargeType = 3 },
		"ad format 0":        func(c *Claims) { c.AdFormat = 0 },
		"ad format 6":        func(c *Claims) { c.AdFormat = 6 },
		"winner type 0":      func(c *Claims) { c.WinnerType = 0 },
		"winner type 5":      func(c *Claims) { c.WinnerType = 5 },
		"rank 0":             func(c *Claims) { c.Rank = 0 },
		"rank 41":            func(c *Claims) { c.Rank = 41 },
		"negative price":     func(c *Claims) { c.PriceMicros = -1 },
		"empty winner":       func(c *Claims) { c.WinnerID = "" },
		"empty vendor":       func(c *Claims) { c.VendorID = "" },
		"winner and hashed":  func(c *Claims) { c.WinnerIDHashed = true },
		"vendor and hashed":  func(c *Claims) { c.VendorIDHashed = true },
		"min int64 price":    func(c *Claims) { c.PriceMicros = math.MinInt64 },
		"rank 255":           func(c *Claims) { c.Rank = 255 },
		"charge type 255":    func(c *Claims) { c.ChargeType = 255 },
		"winner type 8 bits": func(c *Claims) { c.WinnerType = 9 },
	}
	for name, mod := range tests {
		c := base()
		mod(&c)
		if tok, err := k.Encode(c); !errors.Is(err, ErrInvalidClaims) {
			t.Errorf("%s: got %q, %v; want ErrInvalidClaims", name, tok, err)
		}
	}
	var nilRing *Keyring
	if _, err := nilRing.Encode(base()); err == nil {
		t.Error("nil keyring encoded")
	}
	if _, err := nilRing.Decode("AAAA", mkt); err == nil {
		t.Error("nil keyring decoded")
	}
}

// TestLengthSweep encodes every winner length 1..255 against a spread of vendor lengths, in ASCII and in
// 4-byte UTF-8, with the smallest and the largest fixed part: the token always fits and round-trips, and
// ids stay whole whenever they fit whole.
func TestLengthSweep(t *testing.T) {
	k := ring(t, 200, 200)
	vendorLens := []int{1, 2, 15, 16, 17, 30, 36, 40, 45, 60, 73, 74, 75, 100, 127, 128, 200, 254, 255}
	for _, worst := range []bool{false, true} {
		for _, r := range []string{"x", "é", "𝔘"} {
			for wl := 1; wl <= 255; wl++ {
				for _, vl := range vendorLens {
					c := base()
					if worst {
						c.BidID, c.PriceMicros, c.AuctionTimeMs = uuid4(9), math.MaxInt64, math.MinInt64
					}
					c.WinnerID, c.VendorID = strings.Repeat(r, wl), strings.Repeat("v", vl)
					tok, err := k.Encode(c)
					if err != nil {
						t.Fatalf("worst=%v %q×%d vendor %d: %v", worst, r, wl, vl, err)
					}
					if len(tok) > MaxLen {
						t.Fatalf("worst=%v %q×%d vendor %d: %d characters", worst, r, wl, vl, len(tok))
					}
					got, err := k.Decode(tok, mkt)
					if err != nil {
						t.Fatal(err)
					}
					if got != expect(c, 200, got.WinnerIDHashed, got.VendorIDHashed) {
						t.Fatalf("round trip: %+v", got)
					}
					// Independent budget: 149 bytes minus the fixed part.
					fixed := 5 + 48 + 1 + 3 + 16 // header, 3 uuids, time delta 0, price 1.25 (3 bytes), MAC
					if worst {
						fixed = 5 + 64 + 10 + 9 + 16
					}
					wb, vb := len(c.WinnerID), len(c.VendorID)
					if 1+wb+1+vb <= 149-fixed && (got.WinnerIDHashed || got.VendorIDHashed) {
						t.Fatalf("worst=%v winner %d bytes, vendor %d bytes fit whole but were hashed", worst, wb, vb)
					}
					if !got.WinnerIDHashed && !got.VendorIDHashed && 1+wb+1+vb > 149-fixed {
						t.Fatalf("over budget but whole")
					}
				}
			}
		}
	}
}

func TestTamperEveryByte(t *testing.T) {
	k := ring(t, 5, 5)
	c := base()
	c.BidID = uuid4(0xd4)
	tok, err := k.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			mod := append([]byte(nil), raw...)
			mod[i] ^= 1 << bit
			_, err := k.Decode(base64.RawURLEncoding.EncodeToString(mod), mkt)
			want := ErrForged
			switch i {
			case 0:
				want = ErrMalformed // another version
			case 1:
				want = ErrUnknownKey // another key id
			}
			if !errors.Is(err, want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("byte %d bit %d flipped: got %v, want %v", i, bit, err, want)
			}
		}
	}
	// With every key id known, a flipped key id is a MAC mismatch too.
	all := make([]uint8, 256)
	for i := range all {
		all[i] = uint8(i)
	}
	kAll := ring(t, 5, all...)
	for bit := range 8 {
		mod := append([]byte(nil), raw...)
		mod[1] ^= 1 << bit
		if _, err := kAll.Decode(base64.RawURLEncoding.EncodeToString(mod), mkt); !errors.Is(err, ErrForged) {
			t.Fatalf("key id bit %d: %v", bit, err)
		}
	}
	// Every character replaced by every other character of the alphabet, or by a non-alphabet byte.
	for i := range len(tok) {
		for _, r := range b64alphabet + "=+/ \n\r.\x00\xff" {
			if byte(r) == tok[i] {
				continue
			}
			s := tok[:i] + string(rune(r)) + tok[i+1:]
			if r > 0x7f {
				s = tok[:i] + "\xff" + tok[i+1:]
			}
			if _, err := k.Decode(s, mkt); !errors.Is(err, ErrInvalid) {
				t.Fatalf("char %d → %q accepted: %v", i, r, err)
			}
		}
	}
}

func TestForeignMarketplace(t *testing.T) {
	k := ring(t, 1, 1)
	tok, err := k.Encode(base())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Decode(tok, otherMkt); !errors.Is(err, ErrForeignMarketplace) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	if _, err := k.Decode(tok, [16]byte{}); !errors.Is(err, ErrForeignMarketplace) {
		t.Fatalf("zero marketplace: got %v", err)
	}
}

func TestUnknownKey(t *testing.T) {
	tok, err := ring(t, 1, 1).Encode(base())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring(t, 2, 2).Decode(tok, mkt); !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	// Same id, different secret: a forgery as far as the verifier can tell.
	other, err := NewKeyring(map[uint8][]byte{1: testKey(99)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Decode(tok, mkt); !errors.Is(err, ErrForged) {
		t.Fatalf("got %v", err)
	}
}

// TestRotation walks the operator procedure of docs/reference/resolved-bid-id.md.
func TestRotation(t *testing.T) {
	c := base()
	before := ring(t, 1, 1)     // only key 1
	phase1 := ring(t, 1, 1, 2)  // key 2 added everywhere, 1 still signs
	phase2 := ring(t, 2, 2, 1)  // 2 signs, 1 still verifies
	phase3 := ring(t, 2, 2)     // after the attribution window: 1 dropped
	old, _ := before.Encode(c)  // issued before the rotation
	mid, _ := phase1.Encode(c)  // during phase 1: still key 1
	next, _ := phase2.Encode(c) // signed with key 2
	if old != mid {
		t.Fatal("phase 1 must still sign with the old key")
	}
	for name, k := range map[string]*Keyring{"phase1": phase1, "phase2": phase2} {
		for _, tok := range []string{old, next} {
			got, err := k.Decode(tok, mkt)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if tok == next && got.KeyID != 2 || tok == old && got.KeyID != 1 {
				t.Fatalf("%s: KeyID %d", name, got.KeyID)
			}
		}
	}
	if _, err := before.Decode(next, mkt); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a verifier that skipped phase 1 must not know key 2: %v", err)
	}
	if _, err := phase3.Decode(old, mkt); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("dropped key: %v", err)
	}
	if _, err := phase3.Decode(next, mkt); err != nil {
		t.Fatal(err)
	}
	// The events topic keeps the old token; replaying it needs no key.
	if got, err := DecodeUnverified(old); err != nil || got.CampaignID != c.CampaignID || got.PriceMicros != c.PriceMicros {
		t.Fatalf("DecodeUnverified after the key was dropped: %v", err)
	}
}

// signRaw signs an arbitrary body (byte 1 picks the key) as Encode would.
func signRaw(k *Keyring, body []byte) string {
	mac := k.keys[body[1]].mac(body)
	return base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), body...), mac[:]...))
}

func rawBody(t *testing.T, k *Keyring, c Claims) []byte {
	t.Helper()
	tok, err := k.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	return raw[:len(raw)-macLen]
}

func TestMalformed(t *testing.T) {
	k := ring(t, 1, 1)
	tok, err := k.Encode(base())
	if err != nil {
		t.Fatal(err)
	}
	body := rawBody(t, k, base())
	// A token whose length leaves unused bits in its last character (len % 4 == 2 or 3).
	canonicalTail := tok
	for extra := 0; len(canonicalTail)%4 == 0; extra++ {
		c := base()
		c.WinnerID += strings.Repeat("z", extra+1)
		canonicalTail, _ = k.Encode(c)
	}
	last := strings.IndexByte(b64alphabet, canonicalTail[len(canonicalTail)-1])
	nonCanonical := canonicalTail[:len(canonicalTail)-1] + string(b64alphabet[last|1])

	v2 := append([]byte(nil), body...)
	v2[0] = 2
	tests := map[string]string{
		"empty":               "",
		"one char":            "A",
		"padding":             tok + "=",
		"padding only":        "====",
		"double padding":      tok + "==",
		"standard alphabet +": strings.Replace(tok, tok[:1], "+", 1),
		"standard alphabet /": tok[:10] + "/" + tok[11:],
		"newline":             tok[:20] + "\n" + tok[20:],
		"crlf":                tok[:20] + "\r\n" + tok[20:],
		"space":               " " + tok,
		"too long":            strings.Repeat("A", MaxLen+1),
		"len 1 mod 4":         tok[:len(tok)/4*4+1],
		"non-canonical tail":  nonCanonical,
		"version 2, signed":   signRaw(k, v2),
		"version 0":           base64.RawURLEncoding.EncodeToString(append([]byte{0}, body[1:]...)),
		"short envelope":      base64.RawURLEncoding.EncodeToString(body[:17]),
		"utf-8":               "é" + tok[2:],
		"trailing bytes":      signRaw(k, append(append([]byte(nil), body...), 0)),
	}
	for name, s := range tests {
		if _, err := k.Decode(s, mkt); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	if nonCanonical == canonicalTail {
		t.Fatal("test setup: no unused bits")
	}
	// Every truncation is rejected: malformed when the length cannot be base64url or holds no envelope,
	// forged otherwise (the MAC is checked before the body is read).
	for i := range len(tok) {
		_, err := k.Decode(tok[:i], mkt)
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrForged) {
			t.Fatalf("truncated to %d: %v", i, err)
		}
	}
	// Appended bytes that are not signed.
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	if _, err := k.Decode(base64.RawURLEncoding.EncodeToString(append(raw, 0)), mkt); !errors.Is(err, ErrForged) {
		t.Fatalf("appended byte: %v", err)
	}
}

// TestBodyRejected: bodies with a valid MAC that Encode never writes are malformed.
func TestBodyRejected(t *testing.T) {
	k := ring(t, 1, 1)
	withBid := base()
	withBid.BidID = uuid4(0xd4)
	uuidWinner := base()
	uuidWinner.WinnerID = "12345678-1234-1234-1234-123456789012"
	b := rawBody(t, k, base())
	bb := rawBody(t, k, withBid)
	bu := rawBody(t, k, uuidWinner)
	timeAt := 5 + 48 // time delta, then price (3 bytes), winner tag
	priceAt := timeAt + 1
	winnerAt := priceAt + 3
	if b[winnerAt] != byte(len("p_Mfk15")) {
		t.Fatalf("layout assumption broken: %v", b)
	}
	edit := func(src []byte, f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), src...))
	}
	zero := func(from int) func([]byte) []byte {
		return func(b []byte) []byte {
			clear(b[from : from+16])
			return b
		}
	}
	// splice replaces b[from:to] with bs.
	splice := func(from, to int, bs ...byte) func([]byte) []byte {
		return func(b []byte) []byte { return append(b[:from], append(bs, b[to:]...)...) }
	}
	maxVarint := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	p := b[priceAt : priceAt+3]
	set := func(at int, v byte) func([]byte) []byte {
		return func(b []byte) []byte { b[at] = v; return b }
	}
	tests := map[string][]byte{
		"unknown flag":           edit(b, set(2, 0x02)),
		"charge type 0":          edit(b, set(3, b[3]&^0x03)),
		"charge type 3":          edit(b, set(3, b[3]|0x03)),
		"ad format 0":            edit(b, set(3, b[3]&^0x1c)),
		"ad format 7":            edit(b, set(3, b[3]|0x1c)),
		"winner type 0":          edit(b, set(3, b[3]&0x1f)),
		"winner type 7":          edit(b, set(3, b[3]|0xe0)),
		"rank 0":                 edit(b, set(4, 0)),
		"rank 41":                edit(b, set(4, 41)),
		"zero marketplace":       edit(b, zero(5)),
		"zero auction":           edit(b, zero(21)),
		"zero campaign":          edit(b, zero(37)),
		"zero bid":               edit(bb, zero(53)),
		"bid flag, no bid":       edit(b, set(2, flagBid)),
		"non-minimal time":       edit(b, splice(timeAt, timeAt+1, 0x80|b[timeAt], 0)),
		"non-minimal price":      edit(b, splice(priceAt, priceAt+3, p[0], p[1], 0x80|p[2], 0)),
		"price over int64":       edit(b, splice(priceAt, priceAt+3, append(maxVarint, 0x01)...)),
		"varint overflow":        edit(b, splice(priceAt, priceAt+3, append(maxVarint, 0x02)...)),
		"id tag 0":               edit(b, set(winnerAt, 0)),
		"id tag 0x83":            edit(b, set(winnerAt, 0x83)),
		"id tag 0xff":            edit(b, set(winnerAt, 0xff)),
		"id longer than body":    edit(b, set(winnerAt, 100)),
		"uuid as text":           edit(b, splice(winnerAt, winnerAt+8, append([]byte{36}, uuidWinner.WinnerID...)...)),
		"digit uuid upper tag":   edit(bu, set(winnerAt, tagUUIDUpper)),
		"hash cut short":         edit(b, splice(winnerAt, len(b), tagHash, 1, 2, 3)),
		"vendor missing":         edit(b, splice(winnerAt+8, len(b))),
		"trailing byte":          append(append([]byte(nil), b...), 'x'),
		"shortest header only":   b[:minPayload-1],
		"longer than a token":    append(append([]byte(nil), b...), make([]byte, maxPayload)...),
		"everything cut at time": b[:timeAt],
	}
	for name, body := range tests {
		if len(body) < 2 {
			continue
		}
		s := signRaw(k, body)
		if _, err := k.Decode(s, mkt); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
		if len(s) <= MaxLen {
			if _, err := DecodeUnverified(s); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: DecodeUnverified: got %v", name, err)
			}
		}
	}
}

func TestDecodeUnverifiedRejectsMalformed(t *testing.T) {
	for _, s := range []string{"", "A", "AAAA", strings.Repeat("A", 40), strings.Repeat("_", MaxLen)} {
		if _, err := DecodeUnverified(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestMACIsHMACSHA256(t *testing.T) {
	secret := testKey(3)
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(keyLabel))
	derived := h.Sum(nil)
	mk := newMACKey(secret)
	for _, n := range []int{0, 1, 55, 56, 63, 64, 65, 120, maxBytes} {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		h := hmac.New(sha256.New, derived)
		h.Write(msg)
		want := h.Sum(nil)[:macLen]
		got := mk.mac(msg)
		if !hmac.Equal(got[:], want) {
			t.Fatalf("len %d: mac differs from crypto/hmac", n)
		}
	}
}

// TestGoldenToken pins the layout: a change here breaks every token in flight and must come with a new
// Version. The same vector is in docs/reference/resolved-bid-id.md.
func TestGoldenToken(t *testing.T) {
	k, err := ParseKeyring("1:" + base64.RawURLEncoding.EncodeToString([]byte("endcap-test-key-0123456789abcdef")))
	if err != nil {
		t.Fatal(err)
	}
	c := Claims{
		MarketplaceID: [16]byte{0x0b, 0x6e, 0x5e, 0x1a, 0x4c, 0x3d, 0x4e, 0x8f, 0x9a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71},
		AuctionID:     v7(1_751_000_000_123, 0x11),
		CampaignID:    [16]byte{0xc0, 0xff, 0xee, 0x00, 0x11, 0x22, 0x43, 0x33, 0x84, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa},
		AuctionTimeMs: 1_751_000_000_123,
		ChargeType:    CPC,
		AdFormat:      Listings,
		Rank:          1,
		PriceMicros:   1_250_000,
		WinnerType:    WinnerProduct,
		WinnerID:      "p_Mfk15",
		VendorID:      "v_42",
	}
	tok, err := k.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = "AQEAJQELbl4aTD1Oj5obLD1OX2BxAZevu6Z7dxiZGhscHR4fIMD_7gARIkMzhERVZneImaoA0KVMB3BfTWZrMTUEdl80MqR8GRCwKGJgTaEpGGnBzp8"
	if tok != want {
		t.Fatalf("golden token changed:\n got %s\nwant %s", tok, want)
	}
	t.Logf("golden token (%d characters): %s", len(tok), tok)
}

func TestParseKeyring(t *testing.T) {
	k1 := base64.RawURLEncoding.EncodeToString(testKey(1))
	k2 := base64.RawURLEncoding.EncodeToString(testKey(2))
	k2std := base64.StdEncoding.EncodeToString(testKey(2))
	good := map[string]struct {
		current uint8
		ids     []uint8
	}{
		"2:" + k2 + ",1:" + k1:              {2, []uint8{1, 2}},
		" 1:" + k1 + " , 2:" + k2std + "\n": {1, []uint8{1, 2}},
		"0:" + k1:                           {0, []uint8{0}},
		"255:" + k1 + "==":                  {255, []uint8{255}},
	}
	for spec, want := range good {
		k, err := ParseKeyring(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if k.Current() != want.current || fmt.Sprint(k.KeyIDs()) != fmt.Sprint(want.ids) {
			t.Fatalf("%q: %v", spec, k)
		}
	}
	// The parsed keys are the configured ones: a token from NewKeyring verifies.
	k, _ := ParseKeyring("2:" + k2 + ",1:" + k1)
	tok, _ := ring(t, 1, 1).Encode(base())
	if _, err := k.Decode(tok, mkt); err != nil {
		t.Fatal(err)
	}

	short := base64.RawURLEncoding.EncodeToString(testKey(1)[:31])
	bad := []string{
		"", " ", k1, "1" + k1, "x:" + k1, "256:" + k1, "-1:" + k1, "1:", "1:" + short,
		"1:" + k1 + ",1:" + k2, "1:" + k1 + ",", ",1:" + k1, "1:" + k1 + "!", "1:" + k1[:10] + " " + k1[10:],
	}
	for _, spec := range bad {
		_, err := ParseKeyring(spec)
		if err == nil {
			t.Errorf("%q accepted", spec)
			continue
		}
		for _, secret := range []string{k1, k2, k1[:12], k2[:12], short[:12]} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error for %q shows key material: %v", spec, err)
			}
		}
	}
}

func TestNewKeyring(t *testing.T) {
	if _, err := NewKeyring(nil, 1); err == nil {
		t.Error("empty keyring accepted")
	}
	if _, err := NewKeyring(map[uint8][]byte{1: make([]byte, 31)}, 1); err == nil {
		t.Error("31-byte key accepted")
	}
	if _, err := NewKeyring(map[uint8][]byte{1: testKey(1)}, 2); err == nil {
		t.Error("missing current key accepted")
	}
	secret := testKey(1)
	k, err := NewKeyring(map[uint8][]byte{1: secret}, 1)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := k.Encode(base())
	secret[0] ^= 1 // the keyring copied (derived) its key
	if _, err := k.Decode(tok, mkt); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{k.String(), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(s, base64.RawURLEncoding.EncodeToString(testKey(1))[:8]) || strings.Contains(s, "ipad") {
			t.Fatalf("keyring printed key material: %s", s)
		}
	}
	ids := k.KeyIDs()
	ids[0] = 9
	if k.KeyIDs()[0] != 1 {
		t.Fatal("KeyIDs exposes internal state")
	}
}

func TestIDHash(t *testing.T) {
	sum := sha256.Sum256([]byte("p_Mfk15"))
	if h := IDHash("p_Mfk15"); string(h[:]) != string(sum[:16]) {
		t.Fatal("IDHash is not the SHA-256 prefix")
	}
}

func TestStrings(t *testing.T) {
	got := fmt.Sprint(CPC, CPM, ChargeType(9), Listings, Banners, SponsoredBrand, Hotels, Flights, AdFormat(0),
		WinnerProduct, WinnerVendor, WinnerBrand, WinnerURL, WinnerType(7))
	want := "CPC CPM ChargeType(9) listings banners sponsored_brand hotels flights AdFormat(0) product vendor brand url WinnerType(7)"
	if got != want {
		t.Fatalf("got %s", got)
	}
}

func TestAllocations(t *testing.T) {
	k := ring(t, 1, 1)
	c := base()
	c.BidID = uuid4(1)
	tok, _ := k.Encode(c)
	long := base()
	long.WinnerID, long.VendorID = strings.Repeat("x", 255), strings.Repeat("y", 255)
	longTok, _ := k.Encode(long)
	forged := tok[:len(tok)-2] + "AA"
	cases := []struct {
		name string
		max  float64
		f    func()
	}{
		{"Encode", 1, func() { _, _ = k.Encode(c) }},
		{"Encode long ids", 1, func() { _, _ = k.Encode(long) }},
		{"Decode", 1, func() { _, _ = k.Decode(tok, mkt) }},
		{"Decode hashed ids", 0, func() { _, _ = k.Decode(longTok, mkt) }},
		{"Decode forged", 0, func() { _, _ = k.Decode(forged, mkt) }},
		{"DecodeUnverified", 1, func() { _, _ = DecodeUnverified(tok) }},
	}
	for _, tc := range cases {
		if n := testing.AllocsPerRun(200, tc.f); n > tc.max {
			t.Errorf("%s: %.0f allocations, want at most %.0f", tc.name, n, tc.max)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	k := ring(t, 1, 1, 2)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				c := base()
				c.Rank = uint8(1 + (g+i)%40)
				tok, err := k.Encode(c)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := k.Decode(tok, mkt); err != nil || got.Rank != c.Rank {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
