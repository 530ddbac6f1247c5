package projections

import (
	"strings"
	"testing"
)

// The state copied to ClickHouse has no secret member: a webhook's
// secrets by its type's list, any type's member named like a secret by
// the name rule; everything else is kept as it was.
func TestRedact(t *testing.T) {
	cases := []struct {
		typ, in, want string
	}{
		{"webhook", `{"id":"w","url":"https://x","secret":"whsec_AAAA","previousSecret":"whsec_BBBB","previousSecretUntil":"2026-01-01T00:00:00Z","createdAt":"2026-01-01T00:00:00Z"}`,
			`{"createdAt":"2026-01-01T00:00:00Z","id":"w","url":"https://x"}`},
		{"webhook", `{"id":"w","url":"https://x"}`, `{"id":"w","url":"https://x"}`},
		{"invitation", `{"id":"i","acceptToken":"t0k","vendorEmail":"a@b.c"}`, `{"id":"i","vendorEmail":"a@b.c"}`},
		{"newtype", `{"id":"n","clientSecret":"s3cr","Password":"pw","n":12345678901234567890}`, `{"id":"n","n":12345678901234567890}`},
		{"export", `{"id":"e","key":"exports/e.csv"}`, `{"id":"e","key":"exports/e.csv"}`},
		{"campaign", `null`, `null`},
		{"privacy_deletion", `{"deletionId":"d","status":"pending","opaqueUserIds":["shopper-1"],"idCount":1}`, `{"deletionId":"d","idCount":1,"status":"pending"}`},
	}
	for _, tc := range cases {
		got, ok := Redact(tc.typ, []byte(tc.in))
		if !ok || string(got) != tc.want {
			t.Errorf("%s %s: %s %v, want %s", tc.typ, tc.in, got, ok, tc.want)
		}
		for _, s := range []string{"whsec_", "t0k", "s3cr", `"pw"`, "shopper-1"} {
			if strings.Contains(string(got), s) {
				t.Errorf("%s: %s left in %s", tc.typ, s, got)
			}
		}
	}
	if _, ok := Redact("webhook", []byte(`{"secret":`)); ok {
		t.Error("an undecodable state is copied")
	}
}
