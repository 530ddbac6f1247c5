package campaigns

import (
	"encoding/json"
	"testing"

	"github.com/endcap/endcap/internal/validation"
)

func TestParseMoney(t *testing.T) {
	cases := []struct {
		in      string
		want    Micros
		errType string
	}{
		{"1", 1_000_000, ""},
		{"0.01", 10_000, ""},
		{"12.345678", 12_345_678, ""},
		{"0.000001", 1, ""},
		{"1.10", 1_100_000, ""},
		{"1e2", 100_000_000, ""},
		{"2.5E-3", 2_500, ""},
		{"1000000000", 1_000_000_000_000_000, ""},
		{"0.1000000", 100_000, ""},
		{"0", 0, "greater_than"},
		{"-1", 0, "greater_than"},
		{"0.0000001", 0, "decimal_max_places"},
		{"1000000000.000001", 0, "less_than_equal"},
		{"1e300", 0, "less_than_equal"},
		{`"12"`, 0, "decimal_type"},
		{"", 0, "decimal_type"},
		{"1e", 0, "decimal_type"},
		{"-", 0, "decimal_type"},
		{"true", 0, "decimal_type"},
		{"[1]", 0, "decimal_type"},
	}
	for _, c := range cases {
		var errs validation.Errors
		got, ok := parseMoney(json.RawMessage(c.in), &errs, "body", "x")
		if c.errType == "" {
			if !ok || got != c.want || len(errs) != 0 {
				t.Errorf("%s: got %d ok=%v errs=%v, want %d", c.in, got, ok, errs, c.want)
			}
			continue
		}
		if ok || len(errs) != 1 || errs[0].Type != c.errType {
			t.Errorf("%s: got %d ok=%v errs=%v, want error %s", c.in, got, ok, errs, c.errType)
		}
		if len(errs) == 1 && (len(errs[0].Loc) != 2 || errs[0].Loc[1] != "x") {
			t.Errorf("%s: loc %v", c.in, errs[0].Loc)
		}
	}
}
