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
	got, err := parse([]byte("# comment\n\nauction.allocs-per-auction 9\nx 1.5\n"))
	if err != nil || got["auction.allocs-per-auction"] != 9 || got["x"] != 1.5 {
		t.Fatalf("parse = %v, %v", got, err)
	}
	for _, bad := range []string{"a\n", "a b c\n", "a -1\n", "a x\n"} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("parse(%q) took it", bad)
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
