package catalog

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCheckDigit(t *testing.T) {
	for _, c := range []struct {
		code string
		ok   bool
	}{
		{"4006381333931", true},  // EAN-13
		{"4006381333932", false}, // wrong check digit
		{"036000291452", true},   // UPC-A
		{"036000291453", false},
		{"9780306406157", true},  // ISBN-13
		{"4901234567894", true},  // JAN
		{"96385074", true},       // GTIN-8 (EAN-8)
		{"96385075", false},      // wrong GTIN-8
		{"00012345678905", true}, // GTIN-14
		{"10012345678902", true}, // GTIN-14 with an indicator digit
		{"10012345678903", false},
		{"0", false},
		{"12a4", false},
	} {
		if got := checkDigitOK(c.code); got != c.ok {
			t.Errorf("checkDigitOK(%q) = %v, want %v", c.code, got, c.ok)
		}
	}
}

func TestNormalizeGTIN(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"   ", "", true},
		{"4006381333931", "4006381333931", true},
		{"400-6381-33393-1", "4006381333931", true},
		{" 978 0 306 40615 7 ", "9780306406157", true},
		{"0 36000 29145 2", "036000291452", true},
		{"9638-5074", "96385074", true},
		{"0001234567890-5", "00012345678905", true},
		{"4006381333932", "", false},   // check digit
		{"40063813339", "", false},     // 11 digits
		{"400638133393100", "", false}, // 15 digits
		{"4006381333931X", "", false},  // letter
		{"400.638.133.393.1", "", false},
	} {
		got, ok, msg := normalizeGTIN(c.in)
		if got != c.want || ok != c.ok || (ok != (msg == "")) {
			t.Errorf("normalizeGTIN(%q) = %q, %v, %q; want %q, %v", c.in, got, ok, msg, c.want, c.ok)
		}
	}
}

func TestNormalizeEAN(t *testing.T) {
	for _, c := range []struct {
		in, want string
		dropped  bool
	}{
		{"", "", false},
		{"  ", "", false},
		{"4003994155486", "4003994155486", false},
		{" 4003994155486 ", "4003994155486", false},
		{"4003994155487", "", true},  // check digit
		{"400399415548", "", true},   // 12 digits: a UPC-A is not an EAN-13
		{"400-3994155486", "", true}, // separators are not part of an EAN
		{"abcdefghijklm", "", true},
	} {
		got, dropped := normalizeEAN(c.in)
		if got != c.want || dropped != c.dropped {
			t.Errorf("normalizeEAN(%q) = %q, %v; want %q, %v", c.in, got, dropped, c.want, c.dropped)
		}
	}
}

func TestTruncateRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"ééé", 3, "ééé", false}, // 6 bytes, 3 characters
		{"éééé", 3, "ééé", true},
		{"🍺🍺", 1, "🍺", true},
		{"", 5, "", false},
	} {
		got, cut := truncateRunes(c.in, c.n)
		if got != c.want || cut != c.cut {
			t.Errorf("truncateRunes(%q, %d) = %q, %v; want %q, %v", c.in, c.n, got, cut, c.want, c.cut)
		}
	}
}

func TestPriceMicros(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		res  int
	}{
		{"18.99", 18_990_000, priceOK},
		{"1", 1_000_000, priceOK},
		{"0.000001", 1, priceOK},
		{"0.0000005", 1, priceOK}, // rounds half away from zero
		{"0.00000049", 0, priceTooSmall},
		{"0.0000000001", 0, priceTooSmall},
		{"1e-7", 0, priceTooSmall},
		{"1.5e2", 150_000_000, priceOK},
		{"15E-1", 1_500_000, priceOK},
		{"2.9999999", 3_000_000, priceOK},
		{"0.30000000000000004", 300_000, priceOK},
		{"1000000000", 1_000_000_000_000_000, priceOK},
		{"1000000000.000001", 0, priceTooLarge},
		{"1e10", 0, priceTooLarge},
		{"1e400", 0, priceTooLarge},
		{"0", 0, priceNotPositive},
		{"0.0", 0, priceNotPositive},
		{"-1", 0, priceNotPositive},
		{"-0.5", 0, priceNotPositive},
		{"abc", 0, priceNotNumber},
		{"1.", 0, priceNotNumber},
		{".5", 0, priceNotNumber},
		{"1e", 0, priceNotNumber},
	} {
		got, res := priceMicros(c.in)
		if got != c.want || res != c.res {
			t.Errorf("priceMicros(%q) = %d, %d; want %d, %d", c.in, got, res, c.want, c.res)
		}
	}
}

// TestPriceMicrosAgainstBig checks the exact conversion against math/big.
func TestPriceMicrosAgainstBig(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return b.String()
	}
	for range 20000 {
		s := strings.TrimLeft(digits(1+r.IntN(10)), "0")
		if s == "" {
			s = "0"
		}
		if r.IntN(2) == 0 {
			s += "." + digits(1+r.IntN(10))
		}
		if r.IntN(3) == 0 {
			s += fmt.Sprintf("e%d", r.IntN(20)-10)
		}
		got, res := priceMicros(s)
		rat, _ := new(big.Rat).SetString(s)
		rat.Mul(rat, big.NewRat(1_000_000, 1))
		// round half away from zero (positive numbers): floor(x + 1/2)
		rat.Add(rat, big.NewRat(1, 2))
		want := new(big.Int).Quo(rat.Num(), rat.Denom())
		switch {
		case rat.Sign() == 0 || want.Sign() == 0 && res == priceNotPositive:
			// zero
		case want.Sign() == 0:
			if res != priceTooSmall && res != priceNotPositive {
				t.Fatalf("%s: got %d %d, want too small", s, got, res)
			}
		case want.Cmp(big.NewInt(maxPriceMicros)) > 0:
			if res != priceTooLarge {
				t.Fatalf("%s: got %d %d, want too large", s, got, res)
			}
		default:
			if res != priceOK || got != want.Int64() {
				t.Fatalf("%s: got %d %d, want %s", s, got, res, want)
			}
		}
	}
}

func TestFormatMicros(t *testing.T) {
	for m, want := range map[int64]string{18_990_000: "18.99", 5_000_000: "5", 1: "0.000001", 1_000_000_000_000_000: "1000000000", 123_456_789: "123.456789"} {
		if got := formatMicros(m); got != want {
			t.Errorf("formatMicros(%d) = %q, want %q", m, got, want)
		}
	}
}
