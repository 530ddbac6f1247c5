package exports

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestMoneyDecimal(t *testing.T) {
	for _, tc := range []struct {
		micros int64
		sub    uint64
		want   string
	}{
		{0, 0, "0"},
		{1, 0, "0.000001"},
		{0, 1, "0.000000001"},
		{5_555_560, 0, "5.55556"},
		{400_000, 0, "0.4"},
		{12_000_000, 0, "12"},
		{2_345, 670, "0.00234567"},
		{1, 1999, "0.000002999"},                 // sub-micros carry into micros
		{-1, 0, "-0.000001"},                     // never produced by charges; still exact
		{-1_500_000, 0, "-1.5"},                  //
		{9_223_372_036_854, 0, "9223372.036854"}, //
		{9_000_000_000_000_000, 999, "9000000000.000000999"},
	} {
		m := moneyOf(tc.micros, tc.sub)
		if got := m.String(); got != tc.want {
			t.Errorf("moneyOf(%d, %d) = %s, want %s", tc.micros, tc.sub, got, tc.want)
		}
		// The Parquet DECIMAL(38,9) bytes are the same amount in nanos.
		var b [16]byte
		m.scaled(&b)
		got := new(big.Int).SetBytes(b[:])
		if b[0]&0x80 != 0 {
			got.Sub(got, new(big.Int).Lsh(big.NewInt(1), 128))
		}
		want := new(big.Int).Mul(big.NewInt(tc.micros), big.NewInt(1000))
		want.Add(want, new(big.Int).SetUint64(tc.sub))
		if got.Cmp(want) != 0 {
			t.Errorf("scaled(%d, %d) = %s nanos, want %s", tc.micros, tc.sub, got, want)
		}
	}
}

func TestPerUnitAndRatios(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    cell
		want string // "" = null
	}{
		{"cpc exact", perUnitCell(moneyOf(1_000_000, 0), 4, 1), "0.25"},
		{"cpc rounds half up", perUnitCell(moneyOf(0, 5), 10, 1), "0.000000001"},    // 0.5 nano
		{"cpc rounds down", perUnitCell(moneyOf(0, 4), 10, 1), "0"},                 // 0.4 nano
		{"cpc thirds", perUnitCell(moneyOf(1_000_000, 0), 3, 1), "0.333333333"},     //
		{"cpm", perUnitCell(moneyOf(2_345, 670), 1, 1000), "2.34567"},               // one impression at 2.34567 CPM
		{"cpc without clicks", perUnitCell(moneyOf(5, 0), 0, 1), ""},                //
		{"ctr", ratioCell(1, 4), "0.25"},                                            //
		{"ctr without impressions", ratioCell(3, 0), ""},                            //
		{"roas", moneyRatioCell(moneyOf(3_000_000, 0), moneyOf(1_000_000, 0)), "3"}, //
		{"acos without sales", moneyRatioCell(moneyOf(1, 0), amount{}), ""},         //
	} {
		var got string
		if !tc.c.null {
			kind := KindRatio
			if tc.name[:3] == "cpc" || tc.name[:3] == "cpm" {
				kind = KindPrice
			}
			got = string(appendText(nil, kind, &tc.c, true))
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAppendDate(t *testing.T) {
	for _, tc := range []struct {
		days int64
		want string
	}{{0, "1970-01-01"}, {-1, "1969-12-31"}, {11016, "2000-02-29"}, {20778, "2026-11-21"}, {49710, "2106-02-07"}} {
		if got := string(appendDate(nil, tc.days)); got != tc.want {
			t.Errorf("appendDate(%d) = %s, want %s", tc.days, got, tc.want)
		}
	}
}

func TestCSVFields(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"", ""},
		{"a,b", `"a,b"`},
		{`say "hi"`, `"say ""hi"""`},
		{"two\nlines", "\"two\nlines\""},
		{" padded", `" padded"`},
		{"émoji 🛒", "émoji 🛒"},
	} {
		if got := string(appendCSVField(nil, tc.in)); got != tc.want {
			t.Errorf("appendCSVField(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	c := cell{ss: []string{"a", `b"c`, "d,e", "\x01"}}
	if got, want := string(appendText(nil, KindStrings, &c, true)), `"[""a"",""b\""c"",""d,e"",""\u0001""]"`; got != want {
		t.Errorf("array cell %s, want %s", got, want)
	}
	if got := string(appendText(nil, KindStrings, &cell{}, true)); got != "[]" {
		t.Errorf("empty array cell %s, want []", got)
	}
}

// The 128-bit path of perUnitCell agrees with exact rational rounding.
func TestPerUnitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		micros := r.Int64N(1 << uint(r.IntN(62)+1))
		sub := r.Uint64N(1 << uint(r.IntN(40)+1))
		n := r.Uint64N(1<<uint(r.IntN(63)+1)) + 1
		mult := []int64{1, 1000}[i%2]
		m := moneyOf(micros, sub)
		got := perUnitCell(m, n, mult).m
		// Exact: round(mult·nanos / n) half up.
		num := new(big.Int).Mul(m.big(), big.NewInt(mult))
		num.Mul(num, big.NewInt(2)).Add(num, new(big.Int).SetUint64(n))
		want := moneyFromNanos(num.Quo(num, new(big.Int).Mul(new(big.Int).SetUint64(n), big.NewInt(2))))
		if got != want {
			t.Fatalf("perUnitCell(%s, %d, %d) = %s, want %s", m, n, mult, got, want)
		}
	}
}
