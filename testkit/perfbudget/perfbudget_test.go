package perfbudget

import "testing"

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
