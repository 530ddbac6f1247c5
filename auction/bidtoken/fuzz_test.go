package bidtoken

import (
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary strings to Decode and DecodeUnverified (they must not panic and must fail
// with ErrInvalid), and, since a fuzzer cannot forge a MAC, also signs the input as a token body to reach
// the body parser: whatever it accepts must re-encode to exactly the same token.
func FuzzDecode(f *testing.F) {
	k := ring(f, 1, 1)
	seeds := []Claims{base()}
	c := base()
	c.BidID, c.PriceMicros, c.AuctionTimeMs = uuid4(4), math.MaxInt64, math.MinInt64
	c.WinnerID, c.VendorID = strings.Repeat("x", 255), "12a55828-8EAD-4299-8327-CEBB002A0FA8"
	seeds = append(seeds, c)
	c = base()
	c.WinnerID, c.VendorID = "12345678-1234-1234-1234-123456789012", strings.Repeat("é", 100)
	seeds = append(seeds, c)
	for _, c := range seeds {
		tok, err := k.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
		raw, _ := base64.RawURLEncoding.DecodeString(tok)
		f.Add(string(raw[:len(raw)-macLen])) // as a body
		f.Add(tok[:len(tok)-1])
		f.Add(tok + "=")
	}
	f.Add("")
	f.Add("AQ")
	f.Add(strings.Repeat("_", MaxLen))

	f.Fuzz(func(t *testing.T, s string) {
		check := func(c Claims, err error, tok string) {
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error outside ErrInvalid: %v", err)
				}
				return
			}
			if len(tok) > MaxLen {
				t.Fatalf("accepted %d characters", len(tok))
			}
			again, err := k.Encode(c)
			if err != nil || again != tok {
				t.Fatalf("accepted a token Encode would not write:\n  in %s\n out %s (%v)", tok, again, err)
			}
		}
		c, err := k.Decode(s, mkt)
		check(c, err, s)
		if err == nil && !strings.HasPrefix(s, "AQE") {
			t.Fatalf("accepted a token of another version or key: %s", s)
		}
		if _, err := DecodeUnverified(s); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}

		if len(s) < 2 || len(s)+macLen > maxBytes {
			return
		}
		body := []byte(s)
		body[0], body[1] = Version, 1
		tok := signRaw(k, body)
		c, err = k.Decode(tok, mkt)
		if errors.Is(err, ErrForeignMarketplace) {
			c, err = k.Decode(tok, [16]byte(body[5:21]))
		}
		if errors.Is(err, ErrForged) || errors.Is(err, ErrUnknownKey) {
			t.Fatalf("a signed body was refused as %v", err)
		}
		check(c, err, tok)
		u, uerr := DecodeUnverified(tok)
		if (uerr == nil) != (err == nil) || (err == nil && u != c) {
			t.Fatalf("DecodeUnverified disagrees: %v vs %v", uerr, err)
		}
	})
}

var sinkClaims Claims
var sinkString string

func benchClaims() Claims {
	c := base()
	c.BidID = uuid4(0xd4)
	c.WinnerID = "sku-000184467-blue-xl"
	c.VendorID = "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"
	return c
}

func BenchmarkEncode(b *testing.B) {
	k := ring(b, 1, 1)
	c := benchClaims()
	b.ReportAllocs()
	for b.Loop() {
		sinkString, _ = k.Encode(c)
	}
	b.ReportMetric(float64(len(sinkString)), "chars")
}

func BenchmarkEncodeLongIDs(b *testing.B) {
	k := ring(b, 1, 1)
	c := benchClaims()
	c.WinnerID, c.VendorID = strings.Repeat("x", 255), strings.Repeat("y", 255)
	b.ReportAllocs()
	for b.Loop() {
		sinkString, _ = k.Encode(c)
	}
	b.ReportMetric(float64(len(sinkString)), "chars")
}

func BenchmarkDecode(b *testing.B) {
	k := ring(b, 1, 1)
	tok, _ := k.Encode(benchClaims())
	b.ReportAllocs()
	for b.Loop() {
		sinkClaims, _ = k.Decode(tok, mkt)
	}
}

func BenchmarkDecodeLongIDs(b *testing.B) {
	k := ring(b, 1, 1)
	c := benchClaims()
	c.WinnerID, c.VendorID = strings.Repeat("x", 255), strings.Repeat("y", 255)
	tok, _ := k.Encode(c)
	b.ReportAllocs()
	for b.Loop() {
		sinkClaims, _ = k.Decode(tok, mkt)
	}
}

func BenchmarkDecodeForged(b *testing.B) {
	k := ring(b, 1, 1)
	tok, _ := k.Encode(benchClaims())
	forged := tok[:len(tok)-2] + "AA"
	b.ReportAllocs()
	for b.Loop() {
		sinkClaims, _ = k.Decode(forged, mkt)
	}
}

func BenchmarkDecodeUnverified(b *testing.B) {
	k := ring(b, 1, 1)
	tok, _ := k.Encode(benchClaims())
	b.ReportAllocs()
	for b.Loop() {
		sinkClaims, _ = DecodeUnverified(tok)
	}
}
