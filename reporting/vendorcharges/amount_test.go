package vendorcharges

import (
	"encoding/json"
	"math"
	"math/big"
	"testing"
)

func TestAmountString(t *testing.T) {
	for _, tc := range []struct {
		micros int64
		sub    uint16
		want   string
	}{
		{0, 0, "0"},
		{20_000, 0, "0.02"},               // CPC click at 0.02
		{1_000_000, 0, "1"},               // whole unit
		{1234, 567, "0.001234567"},        // CPM 1.234567 per 1,000: one impression
		{0, 1, "0.000000001"},             // the smallest amount
		{0, 999, "0.000000999"},           //
		{5, 0, "0.000005"},                //
		{123_456_789, 100, "123.4567891"}, // trailing zeros trimmed
		{999_999, 1000, "1"},              // a sub-micro carry (not produced, but exact)
		{999_999, 65535, "1.000064535"},   // the largest sub-micro value
		{math.MaxInt64, 999, "9223372036854.775807999"},
		{-20_000, 0, "-0.02"},
		{-1, 500, "-0.0000005"},
		{-1, 1000, "0"},
		{math.MinInt64, 0, "-9223372036854.775808"},
	} {
		a := Amount{Micros: tc.micros, SubMicros: tc.sub}
		if got := a.String(); got != tc.want {
			t.Errorf("Amount{%d, %d} = %s, want %s", tc.micros, tc.sub, got, tc.want)
		}
		// The text is the exact value: (micros×1000 + sub) / 10⁹.
		exact := new(big.Rat).SetFrac(new(big.Int).Add(new(big.Int).Mul(big.NewInt(tc.micros), big.NewInt(1000)), big.NewInt(int64(tc.sub))), big.NewInt(1e9))
		parsed, ok := new(big.Rat).SetString(a.String())
		if !ok || parsed.Cmp(exact) != 0 {
			t.Errorf("Amount{%d, %d} = %s is not %s", tc.micros, tc.sub, a, exact.FloatString(9))
		}
		b, err := json.Marshal(map[string]Amount{"amount": a})
		if err != nil || string(b) != `{"amount":`+tc.want+`}` {
			t.Errorf("JSON %s %v", b, err)
		}
	}
}

// Every non-negative amount round-trips exactly through its text.
func FuzzAmountExact(f *testing.F) {
	f.Add(int64(1234), uint16(567))
	f.Add(int64(math.MaxInt64), uint16(65535))
	f.Fuzz(func(t *testing.T, micros int64, sub uint16) {
		a := Amount{Micros: micros, SubMicros: sub}
		exact := new(big.Rat).SetFrac(new(big.Int).Add(new(big.Int).Mul(big.NewInt(micros), big.NewInt(1000)), big.NewInt(int64(sub))), big.NewInt(1e9))
		parsed, ok := new(big.Rat).SetString(a.String())
		if !ok || parsed.Cmp(exact) != 0 {
			t.Fatalf("Amount{%d, %d} = %s", micros, sub, a)
		}
		if !json.Valid([]byte(a.String())) {
			t.Fatalf("not a JSON number: %s", a)
		}
	})
}
