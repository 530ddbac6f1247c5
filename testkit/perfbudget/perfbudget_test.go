package perfbudget

import (
	"strings"
	"testing"
)

func TestInclusive(t *testing.T) {
	ann := []byte(`--------------------------------------------------------------------------------
868,350,858 (100.0%)  PROGRAM TOTALS
 38,945,281 ( 4.48%)  auction/engine.go:github.com/endcap/endcap/auction.(*auctionEnv).budgetAllows [/tmp/auction.test]
 24,559,854 ( 2.83%)  /work/spend/cache.go:github.com/endcap/endcap/spend.(*Cache).Spend
 16,347,868 ( 1.88%)  spend/cache.go:github.com/endcap/endcap/spend.(*Cache).Spend [/tmp/auction.test]
 97,588 ( 0.01%)  		return a.budgetAllows(ce)
`)
	for _, tc := range []struct {
		fn   string
		want uint64
		ok   bool
	}{
		{"github.com/endcap/endcap/auction.(*auctionEnv).budgetAllows", 38945281, true},
		{"github.com/endcap/endcap/spend.(*Cache).Spend", 24559854, true},
		{"github.com/endcap/endcap/spend.(*Cache).RefreshNow", 0, false},
	} {
		if got, ok := inclusive(ann, tc.fn); got != tc.want || ok != tc.ok {
			t.Errorf("inclusive(%s) = %d, %v; want %d, %v", tc.fn, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParse(t *testing.T) {
	got, err := parse([]byte("# comment\n\nauction.allocs-per-auction 9\nx 1.5\ny 1000 4%\nz 200 2.5%\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]budget{
		"auction.allocs-per-auction": {value: 9},
		"x":                          {value: 1.5},
		"y":                          {value: 1000, tolerance: 0.04},
		"z":                          {value: 200, tolerance: 0.025},
	} {
		if got[name] != want {
			t.Errorf("parse: %s = %+v, want %+v", name, got[name], want)
		}
	}
	if len(got) != 4 {
		t.Errorf("parse = %v", got)
	}
	for _, bad := range []string{"a\n", "a b c\n", "a -1\n", "a x\n", "a 1 4\n", "a 1 0%\n", "a 1 -3%\n",
		"a 1 x%\n", "a 1 101%\n", "a 1 4% 5%\n"} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("parse(%q) took it", bad)
		}
	}
}

// TestLimit: a budget without its own tolerance lets Tolerance above it
// pass, one with a tolerance that much; format writes what parse reads back,
// tolerances kept.
func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		b    budget
		want float64
	}{
		{budget{value: 1000}, 1100},
		{budget{value: 1000, tolerance: 0.04}, 1040},
		{budget{value: 13590, tolerance: 0.04}, 14133.6},
	} {
		if got := tc.b.limit(); got < tc.want-1e-6 || got > tc.want+1e-6 {
			t.Errorf("%+v: limit %v, want %v", tc.b, got, tc.want)
		}
	}
	in := map[string]budget{"b.x": {value: 7}, "a.y": {value: 13590, tolerance: 0.04}, "c.z": {value: 3, tolerance: 0.125}}
	text := format(in)
	if !strings.HasSuffix(string(text), "a.y 13590 4%\nb.x 7\nc.z 3 12.5%\n") || !strings.HasPrefix(string(text), header) {
		t.Fatalf("format:\n%s", text)
	}
	back, err := parse(text)
	if err != nil || len(back) != len(in) {
		t.Fatalf("parse(format) = %v, %v", back, err)
	}
	for n, b := range in {
		if back[n] != b {
			t.Errorf("%s: %+v read back as %+v", n, b, back[n])
		}
	}
}

func TestParseTotals(t *testing.T) {
	dump := "version: 1\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nfn=(1)\n16 3 1\nsummary: 900 5 5 1 2 3 4 5 6\ntotals: 120 40 20 1 7 3 0 5 2\n"
	got, err := parseTotals(strings.NewReader(dump), "dump")
	if err != nil {
		t.Fatal(err)
	}
	c := Counts{Events: got}
	if got["Ir"] != 120 || got["Dr"] != 40 || c.D1() != 10 || c.LL() != 7 {
		t.Fatalf("parseTotals = %v (D1 %d, LL %d)", got, c.D1(), c.LL())
	}
	// Without the cache simulation: one event, Ir.
	if got, err := parseTotals(strings.NewReader("events: Ir\ntotals: 42\n"), "dump"); err != nil || got["Ir"] != 42 || len(got) != 1 {
		t.Fatalf("parseTotals = %v, %v", got, err)
	}
	for _, bad := range []string{"events: Ir\n", "events: Ir\ntotals: x\n", "events: Dr\ntotals: 1\n"} {
		if _, err := parseTotals(strings.NewReader(bad), "dump"); err == nil {
			t.Errorf("parseTotals(%q) took it", bad)
		}
	}
}
