package validation

import "testing"

func TestQueryLimit(t *testing.T) {
	for _, tc := range []struct {
		s       string
		present bool
		want    int
		errType string
	}{
		{"", false, 50, ""},
		{"1", true, 1, ""},
		{"200", true, 200, ""},
		{"201", true, 50, "less_than_equal"},
		{"0", true, 50, "greater_than_equal"},
		{"-3", true, 50, "greater_than_equal"},
		{"ten", true, 50, "int_parsing"},
		{"", true, 50, "int_parsing"},
		{"99999999999999999999", true, 50, "int_parsing"},
	} {
		var errs Errors
		got := QueryLimit(&errs, tc.s, tc.present, 50, 200)
		var typ string
		if len(errs) > 0 {
			typ = errs[0].Type
			if len(errs[0].Loc) != 2 || errs[0].Loc[0] != "query" || errs[0].Loc[1] != "limit" {
				t.Errorf("%q: loc %v", tc.s, errs[0].Loc)
			}
		}
		if got != tc.want || typ != tc.errType || len(errs) > 1 {
			t.Errorf("%q (present %v): %d %v, want %d %q", tc.s, tc.present, got, errs, tc.want, tc.errType)
		}
	}
}
