package exports

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/endcap/endcap/internal/money"
)

// part is one sum a row's metrics are computed from; each maps to one or
// two aggregate columns of the export query.
type part uint8

const (
	pImpressions part = iota
	pClicks
	pChargedImpressions
	pChargedClicks
	pSpentImpressions // micros in sums.i, sub-micros in sums.u
	pSpentClicks      // same
	pPurchases
	pQuantity       // sums.i
	pPurchaseAmount // micros, sums.i
	pRefusedImpressions
	pRefusedClicks
	pInvalidClicks
	numParts
)

// sums holds the aggregates of one exported row.
type sums struct {
	u [numParts]uint64
	i [numParts]int64
}

func (s *sums) spentClicks() amount { return moneyOf(s.i[pSpentClicks], s.u[pSpentClicks]) }
func (s *sums) spentImpressions() amount {
	return moneyOf(s.i[pSpentImpressions], s.u[pSpentImpressions])
}
func (s *sums) spend() amount {
	return moneyOf(s.i[pSpentClicks]+s.i[pSpentImpressions], s.u[pSpentClicks]+s.u[pSpentImpressions])
}

// amount is an exact amount: units plus nanos (billionths of a unit,
// 0 ≤ nanos < 1e9). Charges are micro-units plus thousandths of a
// micro-unit, so nine decimals hold every amount exactly.
type amount struct {
	units int64
	nanos int64
}

const nanosPerUnit = 1_000_000_000

// moneyOf is micros micro-units plus sub thousandths of a micro-unit.
func moneyOf(micros int64, sub uint64) amount {
	micros += int64(sub / 1000)
	units, rem := micros/1_000_000, micros%1_000_000
	if rem < 0 {
		units, rem = units-1, rem+1_000_000
	}
	return amount{units: units, nanos: rem*1000 + int64(sub%1000)}
}

func microsOf(micros int64) amount { return moneyOf(micros, 0) }

// appendDecimal appends the amount as a decimal with the fewest digits
// that keep it exact ("12", "0.4", "5.55556", "-0.000000001").
func (m amount) appendDecimal(b []byte) []byte { return money.AppendNanos(b, m.units, m.nanos) }

// String is the decimal form.
func (m amount) String() string { return string(m.appendDecimal(nil)) }

// scaled is the amount in nanos as a 128-bit two's complement big-endian
// integer: the Parquet DECIMAL(38,9) representation.
func (m amount) scaled(dst *[16]byte) {
	neg := m.units < 0
	u := uint64(m.units)
	if neg {
		u = uint64(-m.units)
	}
	hi, lo := bits.Mul64(u, nanosPerUnit)
	if neg {
		// −(u·1e9) + nanos = −(u·1e9 − nanos)
		var borrow uint64
		lo, borrow = bits.Sub64(lo, uint64(m.nanos), 0)
		hi -= borrow
		lo, hi = ^lo, ^hi
		var c uint64
		lo, c = bits.Add64(lo, 1, 0)
		hi += c
	} else {
		var c uint64
		lo, c = bits.Add64(lo, uint64(m.nanos), 0)
		hi += c
	}
	for i := range 8 {
		dst[i] = byte(hi >> (56 - 8*i))
		dst[8+i] = byte(lo >> (56 - 8*i))
	}
}

// big is the amount in nanos.
func (m amount) big() *big.Int {
	v := big.NewInt(m.units)
	v.Mul(v, big.NewInt(nanosPerUnit))
	return v.Add(v, big.NewInt(m.nanos))
}

// float is the amount in nanos as a float64 (for ratios).
func (m amount) float() float64 { return float64(m.units)*nanosPerUnit + float64(m.nanos) }

// moneyFromNanos is the inverse of big.
func moneyFromNanos(n *big.Int) amount {
	q, r := new(big.Int).DivMod(n, big.NewInt(nanosPerUnit), new(big.Int))
	return amount{units: q.Int64(), nanos: r.Int64()}
}

// cell is one value of a row, typed by its column's Kind.
type cell struct {
	s    string
	ss   []string
	i    int64
	f    float64
	m    amount
	b    bool
	null bool
}

func intCell(n uint64) cell   { return cell{i: int64(n)} }
func moneyCell(m amount) cell { return cell{m: m} }

// ratioCell is num/den, null when den is 0.
func ratioCell(num, den float64) cell {
	if den == 0 {
		return cell{null: true}
	}
	return cell{f: num / den}
}

func moneyRatioCell(num, den amount) cell { return ratioCell(num.float(), den.float()) }

// perUnitCell is mult × m / n rounded half up to nanos (half away from
// zero), null when n is 0. It runs once per row and price column, so the
// usual case is done in 128-bit integers; math/big only past that.
func perUnitCell(m amount, n uint64, mult int64) cell {
	if n == 0 {
		return cell{null: true}
	}
	if m.units >= 0 && mult > 0 {
		// v = (units·1e9 + nanos)·mult, then q = (2v + n) / 2n.
		hi, lo := bits.Mul64(uint64(m.units), nanosPerUnit)
		var c uint64
		lo, c = bits.Add64(lo, uint64(m.nanos), 0)
		hi += c
		mh, ml := bits.Mul64(lo, uint64(mult))
		hh, hl := bits.Mul64(hi, uint64(mult))
		hi, c = bits.Add64(hl, mh, 0)
		lo = ml
		if hh == 0 && c == 0 && hi>>62 == 0 && n < 1<<63 {
			hi, lo = hi<<1|lo>>63, lo<<1 // 2v
			lo, c = bits.Add64(lo, n, 0)
			hi += c
			d := 2 * n
			if hi < d {
				q, _ := bits.Div64(hi, lo, d)
				if q <= math.MaxInt64 {
					return cell{m: moneyFromNanosInt(int64(q))}
				}
			}
		}
	}
	v := m.big()
	v.Mul(v, big.NewInt(mult))
	d := new(big.Int).SetUint64(n)
	neg := v.Sign() < 0
	v.Abs(v)
	v.Lsh(v, 1).Add(v, d)
	v.Quo(v, d.Lsh(d, 1))
	if neg {
		v.Neg(v)
	}
	return cell{m: moneyFromNanos(v)}
}

func moneyFromNanosInt(n int64) amount {
	return amount{units: n / nanosPerUnit, nanos: n % nanosPerUnit}
}
