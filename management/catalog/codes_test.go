package catalog

import (
	"testing"

	"github.com/endcap/endcap/internal/money"
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

// TestPriceMicros: catalog prices follow money's rounding policy for the
// prices a marketplace reports; text that is not a JSON number is refused.
func TestPriceMicros(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   int64
		p      money.Problem
		number bool
	}{
		{"18.99", 18_990_000, money.OK, true},
		{"0.0000005", 1, money.OK, true},
		{"0.00000049", 0, money.TooSmall, true},
		{"1000000000.000001", 0, money.TooLarge, true},
		{"-1", 0, money.NotPositive, true},
		{"abc", 0, money.OK, false},
		{"1.", 0, money.OK, false},
		{".5", 0, money.OK, false},
		{"1e", 0, money.OK, false},
		{"", 0, money.OK, false},
	} {
		got, p, number := priceMicros(c.in)
		if got != c.want || p != c.p || number != c.number {
			t.Errorf("priceMicros(%q) = %d, %v, %v; want %d, %v, %v", c.in, got, p, number, c.want, c.p, c.number)
		}
	}
}
