package console

import "testing"

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		m    int64
		want string
	}{{0, "0.00"}, {500_000, "0.50"}, {1_234_567_891, "1,234.567891"}, {-12_345_000_000, "-12,345.00"}, {999_000_000, "999.00"}, {1_000_000_000, "1,000.00"}} {
		if got := formatMicros(tc.m); got != tc.want {
			t.Errorf("formatMicros(%d) = %q, want %q", tc.m, got, tc.want)
		}
	}
	for _, tc := range []struct {
		n    any
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {int64(-1234567), "-1,234,567"}, {uint64(12345678901), "12,345,678,901"}, {"x", "?"}} {
		if got := formatInt(tc.n); got != tc.want {
			t.Errorf("formatInt(%v) = %q, want %q", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{{"/console/keys", "/console/keys"}, {"//evil.example/", ""}, {"https://evil.example/console/", ""},
		{"/console/x\r\nSet-Cookie: a", ""}, {"/consolex", ""}, {"/console/a\\b", ""}} {
		if got := safeNext(tc.in); got != tc.want {
			t.Errorf("safeNext(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
