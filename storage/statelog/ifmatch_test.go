package statelog

import "testing"

func TestIfMatch(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   IfMatch
	}{
		{"", MatchAny}, {"*", MatchAny}, {"  ", MatchAny},
		{`"7"`, 7}, {`W/"7"`, 7}, {"7", 7}, {` "12" `, 12},
		{`"0"`, MatchNone}, {`"-1"`, MatchNone}, {`"abc"`, MatchNone}, {`"1", "2"`, MatchNone},
		{"99999999999999999999", MatchNone},
	} {
		if got := ParseIfMatch(tc.header); got != tc.want {
			t.Errorf("ParseIfMatch(%q) = %d, want %d", tc.header, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ifMatch      IfMatch
		ver          int64
		exists, want bool
	}{
		{MatchAny, 3, true, true}, {MatchAny, 0, false, true},
		{3, 3, true, true}, {3, 4, true, false}, {3, 0, false, false},
		{MatchNone, 3, true, false}, {MatchNone, 0, false, false},
	} {
		if got := Matches(tc.ifMatch, tc.exists, tc.ver); got != tc.want {
			t.Errorf("Matches(%d, %v, %d) = %v, want %v", tc.ifMatch, tc.exists, tc.ver, got, tc.want)
		}
	}
	if int64(MatchNone) == AnyVersion {
		t.Fatal("MatchNone passed on as Expected would overwrite")
	}
}
