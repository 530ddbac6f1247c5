package clickhouse

import "testing"

func TestKeyExpr(t *testing.T) {
	for in, want := range map[string]string{
		"day_local":                 "day_local",
		"toYYYYMM(occurred_at)":     "toYYYYMM(occurred_at)",
		"marketplace_id, day_local": "(marketplace_id, day_local)",
		"tuple()":                   "tuple()",
		"f(a, b)":                   "f(a, b)",
		"f(a, b), c":                "(f(a, b), c)",
		"arrayJoin([1, 2])":         "arrayJoin([1, 2])",
	} {
		if got := keyExpr(in); got != want {
			t.Errorf("keyExpr(%q) = %q, want %q", in, got, want)
		}
	}
}
