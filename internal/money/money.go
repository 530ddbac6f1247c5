// Package money is the one way Endcap reads, rounds and writes amounts of
// money: int64 micro-units (10⁻⁶) of the marketplace currency in memory and
// storage, exact decimal text on the wire, never a float.
//
// The rounding policy is named once, here:
//
//   - RoundHalfAwayFromZero: a price with more than six decimals, in an event
//     (unit prices), an auction request (product prices) or the catalog, is
//     rounded to the nearest micro-unit, halves away from zero ("0.0000005"
//     → 1 µ, "2.4999994" → 2,499,999 µ). These amounts are reported by the
//     marketplace; refusing their seventh decimal would lose events.
//   - Exact: an amount a vendor sets (a bid, a budget) must be a whole number
//     of micro-units; more decimals are refused, so that what is charged is
//     exactly what was set.
package money

import (
	"strconv"
)

// Micros is an amount in micro-units (1/1,000,000) of the marketplace
// currency. On the wire it is a decimal number.
type Micros int64

// PerUnit is the number of micro-units in one currency unit.
const PerUnit = 1_000_000

// String is the exact decimal text of the amount, without trailing zeros
// ("18.99", "5", "0.000001", "-2.5").
func (m Micros) String() string { return string(m.Append(nil)) }

// MarshalJSON writes the amount as an exact JSON number.
func (m Micros) MarshalJSON() ([]byte, error) { return m.Append(nil), nil }

// Append appends String's text to b.
func (m Micros) Append(b []byte) []byte {
	u := uint64(m)
	if m < 0 {
		b = append(b, '-')
		u = uint64(-m) // -MinInt64 wraps to itself: as uint64 it is 2⁶³, right
	}
	b = strconv.AppendUint(b, u/PerUnit, 10)
	return AppendFraction(b, int64(u%PerUnit)*1000)
}

// AppendNanos appends units + nanos/1e9 (0 ≤ nanos < 1e9; units may be
// negative, the value is then floor-split: −1.5 is units −2, nanos 5e8) with
// no trailing zeros and no exponent: "12", "0.4", "5.55556", "-1.5". It is
// the precision of every amount Endcap stores: micro-units plus thousandths
// of a micro-unit (a CPM impression's share of its price).
func AppendNanos(b []byte, units, nanos int64) []byte {
	if units < 0 && nanos > 0 {
		b = append(b, '-')
		units, nanos = -(units + 1), 1_000_000_000-nanos
		return AppendFraction(strconv.AppendUint(b, uint64(units), 10), nanos)
	}
	return AppendFraction(strconv.AppendInt(b, units, 10), nanos)
}

// AppendFraction appends ".ddddddddd", nine digits of frac without their
// trailing zeros (nothing when frac is 0). frac is in [0, 1e9).
func AppendFraction(b []byte, frac int64) []byte {
	if frac == 0 {
		return b
	}
	var d [9]byte
	for i := 8; i >= 0; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 9
	for d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

// Policy is how Parse treats decimals beyond the sixth.
type Policy uint8

const (
	// RoundHalfAwayFromZero rounds to the nearest micro-unit, halves away
	// from zero.
	RoundHalfAwayFromZero Policy = iota
	// Exact refuses an amount that is not a whole number of micro-units.
	Exact
)

// Problem is why Parse refused an amount (OK: it did not).
type Problem uint8

const (
	OK          Problem = iota
	NotPositive         // zero or negative
	TooSmall            // positive, but 0 once rounded to micro-units
	TooLarge            // above the maximum
	TooPrecise          // more than six decimals, under Exact
)

// Parse converts num, the text of a valid JSON number, to micro-units under
// policy; the amount must be positive and at most max.
func Parse(num []byte, policy Policy, max Micros) (Micros, Problem) {
	d := Scale(num, 6, uint64(max))
	switch {
	case d.Zero || d.Neg:
		return 0, NotPositive
	case d.Over:
		return 0, TooLarge
	case !d.Integral && policy == Exact:
		return 0, TooPrecise
	case d.Mag == 0:
		return 0, TooSmall
	}
	return Micros(d.Mag), OK
}

// Scaled is a JSON number scaled to an integer by Scale.
type Scaled struct {
	Neg      bool   // the number has a minus sign
	Zero     bool   // the number is exactly zero
	Integral bool   // the scaled number has no fractional part
	Over     bool   // the rounded magnitude exceeds the limit (Mag is then meaningless)
	Mag      uint64 // |number| × 10^scale, rounded half away from zero
}

// Scale converts num, the text of a valid JSON number, to |num| × 10^scale
// rounded half away from zero, exactly, from its decimal digits (no floating
// point, any exponent): scale 6 gives micro-units, 0 an integer. Magnitudes
// above limit are reported as Over.
func Scale(num []byte, scale int, limit uint64) Scaled {
	var d Scaled
	i := 0
	if num[0] == '-' {
		d.Neg = true
		i++
	}
	is := i
	for i < len(num) && num[i] >= '0' && num[i] <= '9' {
		i++
	}
	intPart := num[is:i]
	var frac []byte
	if i < len(num) && num[i] == '.' {
		i++
		fs := i
		for i < len(num) && num[i] >= '0' && num[i] <= '9' {
			i++
		}
		frac = num[fs:i]
	}
	exp := 0
	if i < len(num) && (num[i] == 'e' || num[i] == 'E') {
		i++
		eneg := false
		if num[i] == '+' {
			i++
		} else if num[i] == '-' {
			eneg = true
			i++
		}
		for ; i < len(num); i++ {
			if exp < 100_000_000 { // saturate: far beyond any digit count we handle
				exp = exp*10 + int(num[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	// The digits are D = intPart ++ frac; the scaled value's decimal point
	// sits after len(intPart)+exp+scale digits of D.
	nd := len(intPart) + len(frac)
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k] - '0'
		}
		return frac[k-len(intPart)] - '0'
	}
	lead := 0
	for lead < nd && digit(lead) == 0 {
		lead++
	}
	if lead == nd {
		d.Zero, d.Integral = true, true
		return d
	}
	m := nd - lead                             // significant digits, the first is non-zero
	point := len(intPart) + exp + scale - lead // relative to the first significant digit
	d.Integral = true
	for j := max(point, 0); j < m; j++ {
		if digit(lead+j) != 0 {
			d.Integral = false
			break
		}
	}
	var mag uint64
	for j := 0; j < point; j++ {
		var dg uint64
		if j < m {
			dg = uint64(digit(lead + j))
		}
		if mag > (limit-dg)/10 {
			d.Over = true
			return d
		}
		mag = mag*10 + dg
	}
	if point >= 0 && point < m && digit(lead+point) >= 5 {
		mag++
		if mag > limit {
			d.Over = true
			return d
		}
	}
	d.Mag = mag
	return d
}
