package vendorcharges

import (
	"math/big"
	"strconv"

	"github.com/endcap/endcap/internal/money"
)

// Amount is the exact amount of one charge: Micros + SubMicros/1000
// micro-units of the marketplace currency (docs/design/charges.md, Amounts). A CPC
// click has SubMicros 0; a CPM impression costs price/1000 and keeps the
// thousandths of a micro-unit in SubMicros.
type Amount struct {
	Micros    int64
	SubMicros uint16
}

// String is the amount in currency units as an exact decimal: at most 9
// decimal places, no trailing zeros, no exponent ("0.001234567", "0.02",
// "3"). It never goes through a float.
func (a Amount) String() string { return string(a.Append(nil)) }

// MarshalJSON writes the amount as a JSON number with the digits of String.
func (a Amount) MarshalJSON() ([]byte, error) { return a.Append(nil), nil }

// Append appends String's text to b.
func (a Amount) Append(b []byte) []byte {
	if a.Micros < 0 {
		return appendBig(b, a)
	}
	// nano-units (10⁻⁹ currency units) = Micros×1000 + SubMicros, split so
	// that nothing overflows: whole units, then the 9 fractional digits.
	units := a.Micros / 1_000_000
	frac := (a.Micros%1_000_000)*1000 + int64(a.SubMicros) // < 1e9 + 65535
	units += frac / 1_000_000_000
	frac %= 1_000_000_000
	b = strconv.AppendInt(b, units, 10)
	return money.AppendFraction(b, frac)
}

// appendBig handles negative amounts (no charge is negative; a corrected
// row could be) with exact big-integer arithmetic.
func appendBig(b []byte, a Amount) []byte {
	nanos := new(big.Int).Mul(big.NewInt(a.Micros), big.NewInt(1000))
	nanos.Add(nanos, big.NewInt(int64(a.SubMicros)))
	if nanos.Sign() < 0 {
		b = append(b, '-')
		nanos.Neg(nanos)
	}
	units, frac := new(big.Int).QuoRem(nanos, big.NewInt(1_000_000_000), new(big.Int))
	b = units.Append(b, 10)
	return money.AppendFraction(b, frac.Int64())
}
