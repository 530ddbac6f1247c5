package money

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestParse: the two policies, at their edges.
func TestParse(t *testing.T) {
	const max = 1_000_000_000_000_000 // a billion currency units
	for _, c := range []struct {
		in     string
		policy Policy
		want   Micros
		p      Problem
	}{
		{"18.99", RoundHalfAwayFromZero, 18_990_000, OK},
		{"1", RoundHalfAwayFromZero, 1_000_000, OK},
		{"0.000001", RoundHalfAwayFromZero, 1, OK},
		{"0.0000005", RoundHalfAwayFromZero, 1, OK}, // half: away from zero
		{"0.00000049", RoundHalfAwayFromZero, 0, TooSmall},
		{"2.4999994", RoundHalfAwayFromZero, 2_499_999, OK},
		{"2.9999995", RoundHalfAwayFromZero, 3_000_000, OK},
		{"0.30000000000000004", RoundHalfAwayFromZero, 300_000, OK},
		{"1e-7", RoundHalfAwayFromZero, 0, TooSmall},
		{"1.5e2", RoundHalfAwayFromZero, 150_000_000, OK},
		{"15E-1", RoundHalfAwayFromZero, 1_500_000, OK},
		{"1000000000", RoundHalfAwayFromZero, max, OK},
		{"1000000000.000001", RoundHalfAwayFromZero, 0, TooLarge},
		{"1e400", RoundHalfAwayFromZero, 0, TooLarge},
		{"0", RoundHalfAwayFromZero, 0, NotPositive},
		{"-0.0", RoundHalfAwayFromZero, 0, NotPositive},
		{"-1", RoundHalfAwayFromZero, 0, NotPositive},
		{"0.05", Exact, 50_000, OK},
		{"0.0000005", Exact, 0, TooPrecise},
		{"1.1234567", Exact, 0, TooPrecise},
		{"1.1234560", Exact, 1_123_456, OK}, // trailing zeros are not precision
		{"1e-7", Exact, 0, TooPrecise},
		{"1e9", Exact, max, OK},
		{"1e10", Exact, 0, TooLarge},
		{"-0.05", Exact, 0, NotPositive},
	} {
		got, p := Parse([]byte(c.in), c.policy, max)
		if got != c.want || p != c.p {
			t.Errorf("Parse(%q, %v) = %d, %v; want %d, %v", c.in, c.policy, got, p, c.want, c.p)
		}
	}
}

func TestMicrosString(t *testing.T) {
	for m, want := range map[Micros]string{
		18_990_000: "18.99", 5_000_000: "5", 1: "0.000001", 1_000_000_000_000_000: "1000000000",
		123_456_789: "123.456789", 0: "0", -2_500_000: "-2.5", math.MinInt64: "-9223372036854.775808",
		math.MaxInt64: "9223372036854.775807",
	} {
		if got := m.String(); got != want {
			t.Errorf("Micros(%d).String() = %q, want %q", int64(m), got, want)
		}
		if b, _ := m.MarshalJSON(); string(b) != want {
			t.Errorf("Micros(%d).MarshalJSON() = %s", int64(m), b)
		}
	}
}

func TestAppendNanos(t *testing.T) {
	for _, c := range []struct {
		units, nanos int64
		want         string
	}{{12, 0, "12"}, {0, 400_000_000, "0.4"}, {5, 555_560_000, "5.55556"}, {-2, 500_000_000, "-1.5"}, {-1, 999_999_999, "-0.000000001"}} {
		if got := string(AppendNanos(nil, c.units, c.nanos)); got != c.want {
			t.Errorf("AppendNanos(%d, %d) = %q, want %q", c.units, c.nanos, got, c.want)
		}
	}
}

// TestScaleAgainstBig compares Scale with math/big on random
// decimal texts.
func TestScaleAgainstBig(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	for range 20000 {
		var s string
		if r.IntN(2) == 0 {
			s = "-"
		}
		ip := digits(1 + r.IntN(12))
		ip = strings.TrimLeft(ip, "0")
		if ip == "" {
			ip = "0"
		}
		s += ip
		if r.IntN(2) == 0 {
			s += "." + digits(1+r.IntN(12))
		}
		if r.IntN(3) == 0 {
			s += "e" + []string{"", "+", "-"}[r.IntN(3)] + fmt.Sprint(r.IntN(20))
		}
		scale := []int{0, 6}[r.IntN(2)]
		limit := uint64(1+r.IntN(1000)) * uint64(math.Pow10(r.IntN(16)))
		got := Scale([]byte(s), scale, limit)

		rat, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big cannot parse %q", s)
		}
		rat.Mul(rat, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
		neg := strings.HasPrefix(s, "-")
		abs := new(big.Rat).Abs(rat)
		// round half away from zero: floor(abs + 1/2)
		half := new(big.Rat).Add(abs, big.NewRat(1, 2))
		rounded := new(big.Int).Quo(half.Num(), half.Denom())
		want := Scaled{Neg: neg, Zero: rat.Sign() == 0, Integral: rat.IsInt()}
		if rounded.Cmp(new(big.Int).SetUint64(limit)) > 0 {
			want.Over = true
		} else {
			want.Mag = rounded.Uint64()
		}
		if want.Zero {
			want.Mag, want.Over = 0, false
		}
		if got != want {
			t.Fatalf("Scale(%q, %d, %d) = %+v, want %+v", s, scale, limit, got, want)
		}
	}
}
