// Package decimal writes exact amounts of money as decimal text: whole
// units and nine fractional digits (nano-units), the precision of every
// amount Endcap stores (micro-units plus thousandths of a micro-unit). It
// never goes through a float.
package decimal

import "strconv"

// AppendNanos appends units + nanos/1e9 (0 ≤ nanos < 1e9; units may be
// negative, the value is then floor-split: −1.5 is units −2, nanos 5e8) with
// no trailing zeros and no exponent: "12", "0.4", "5.55556", "-1.5".
func AppendNanos(b []byte, units, nanos int64) []byte {
	if units < 0 && nanos > 0 {
		b = append(b, '-')
		units, nanos = -(units + 1), 1_000_000_000-nanos
		return AppendFraction(strconv.AppendUint(b, uint64(units), 10), nanos)
	}
	return AppendFraction(strconv.AppendInt(b, units, 10), nanos)
}

// AppendFraction appends ".ddddddddd" without its trailing zeros (nothing
// when frac is 0). frac is in [0, 1e9).
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
