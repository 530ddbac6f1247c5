package catalog

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/money"
)

// checkDigitOK reports whether the last digit of d (ASCII digits only) is
// its GS1 mod-10 check digit: from the digit left of the check digit
// leftwards, digits are weighted 3, 1, 3, 1, ...; the check digit brings
// the weighted sum to a multiple of ten. EAN-13, UPC-A, JAN, ISBN-13,
// GTIN-8 and GTIN-14 all use it.
func checkDigitOK(d string) bool {
	if len(d) < 2 {
		return false
	}
	sum := 0
	w := 3
	for i := len(d) - 2; i >= 0; i-- {
		c := d[i]
		if c < '0' || c > '9' {
			return false
		}
		sum += int(c-'0') * w
		w = 4 - w
	}
	last := d[len(d)-1]
	if last < '0' || last > '9' {
		return false
	}
	return (10-sum%10)%10 == int(last-'0')
}

// isBlank reports whether s is empty or only white space.
func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// normalizeEAN returns the EAN-13 kept for a product: the value without
// surrounding white space when it is exactly 13 digits with a correct
// check digit, and "" (null) otherwise. It never fails: the spec stores a
// malformed ean as null instead of rejecting the request.
func normalizeEAN(s string) (ean string, dropped bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", false
	}
	if len(s) == 13 && checkDigitOK(s) {
		return s, false
	}
	return "", true
}

// gtinLengths are the digit counts of the accepted GTIN forms: GTIN-8
// (EAN-8), GTIN-12 (UPC-A), GTIN-13 (EAN-13, JAN, ISBN-13) and GTIN-14.
var gtinLengths = [...]int{8, 12, 13, 14}

// normalizeGTIN strips spaces and hyphens from s and checks the digits. It
// returns "" with ok for a blank value (treated as null), and ok=false with
// a message for an invalid one.
func normalizeGTIN(s string) (gtin string, ok bool, msg string) {
	if isBlank(s) {
		return "", true, ""
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == ' ' || r == '-' || r == '\t':
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			return "", false, "GTIN must contain only digits, spaces and hyphens"
		}
	}
	d := b.String()
	lenOK := false
	for _, n := range gtinLengths {
		lenOK = lenOK || len(d) == n
	}
	if !lenOK {
		return "", false, "GTIN must have 8, 12, 13 or 14 digits (GTIN-8, UPC-A, EAN-13/JAN/ISBN-13, GTIN-14), not " + strconv.Itoa(len(d))
	}
	if !checkDigitOK(d) {
		return "", false, "GTIN check digit is wrong"
	}
	return d, true, ""
}

// truncateRunes cuts s to at most n characters (Unicode code points).
func truncateRunes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false // fewer bytes than n: fewer characters too
	}
	i, count := 0, 0
	for i < len(s) {
		if count == n {
			return s[:i], true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s, false
}

// runeLen is the number of characters of s.
func runeLen(s string) int { return utf8.RuneCountInString(s) }

// maxPriceMicros bounds prices (one billion currency units), as
// /v2/events bounds unit prices, so that sums stay far from overflow.
const maxPriceMicros = 1_000_000_000_000_000

// priceMicros converts a JSON number (its text) to micro-units, exactly,
// rounding half away from zero at the sixth decimal (money's policy for the
// prices a marketplace reports).
func priceMicros(num string) (int64, money.Problem, bool) {
	b := []byte(num)
	if len(b) == 0 {
		return 0, money.OK, false
	}
	if end, ok := jsontext.ValidNumber(b, 0); !ok || end != len(b) {
		return 0, money.OK, false
	}
	m, problem := money.Parse(b, money.RoundHalfAwayFromZero, maxPriceMicros)
	return int64(m), problem, true
}

// validScore reports whether a quality score is in (0, 1].
func validScore(f float64) bool { return !math.IsNaN(f) && f > 0 && f <= 1 }
