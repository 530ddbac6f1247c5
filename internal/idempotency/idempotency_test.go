package idempotency

import (
	"strings"
	"testing"
)

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"550e8400-e29b-41d4-a716-446655440000", true},
		{" spaces and ~!@#$%^&*() are printable ", true},
		{strings.Repeat("k", MaxKeyLen), true},
		{"", false},
		{strings.Repeat("k", MaxKeyLen+1), false},
		{"tab\t", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"é", false},
	} {
		if why := CheckKey(tc.key); (why == "") != tc.ok {
			t.Errorf("CheckKey(%q) = %q, want ok=%v", tc.key, why, tc.ok)
		}
	}
}

func TestFingerprint(t *testing.T) {
	base := Fingerprint("POST", "/a", "", []byte(`{"b": [1, 2.50, "x"], "a": {"y": null, "x": true}}`))
	same := []string{
		`{"a":{"x":true,"y":null},"b":[1,2.50,"x"]}`,
		"\n{ \"a\" : { \"y\" : null , \"x\" : true } , \"b\" : [ 1 , 2.50 , \"\\u0078\" ] }\n",
	}
	for _, b := range same {
		if got := Fingerprint("POST", "/a", "", []byte(b)); got != base {
			t.Errorf("%s: another fingerprint for the same JSON value", b)
		}
	}
	other := map[string]string{
		"another number spelling": `{"a":{"x":true,"y":null},"b":[1,2.5,"x"]}`,
		"another value":           `{"a":{"x":false,"y":null},"b":[1,2.50,"x"]}`,
		"array order":             `{"a":{"x":true,"y":null},"b":[2.50,1,"x"]}`,
		"trailing data":           `{"a":{"x":true,"y":null},"b":[1,2.50,"x"]} {}`,
	}
	for name, b := range other {
		if Fingerprint("POST", "/a", "", []byte(b)) == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	if Fingerprint("POST", "/b", "", []byte(`{}`)) == Fingerprint("POST", "/a", "", []byte(`{}`)) ||
		Fingerprint("PUT", "/a", "", []byte(`{}`)) == Fingerprint("POST", "/a", "", []byte(`{}`)) ||
		Fingerprint("POST", "/a", "x=1", []byte(`{}`)) == Fingerprint("POST", "/a", "", []byte(`{}`)) ||
		Fingerprint("POST", "/a", "", []byte("not json")) == Fingerprint("POST", "/a", "", []byte("not  json")) {
		t.Error("different requests share a fingerprint")
	}
	// Fields are length-prefixed: no two splits of the same bytes collide.
	if Fingerprint("POST", "/ab", "", nil) == Fingerprint("POST", "/a", "b", nil) {
		t.Error("path and query run together")
	}
}

func TestSealUnseal(t *testing.T) {
	sec := "whsec_MfKQ9r2/pZ+abc="
	for _, body := range []string{
		`{"secret":"` + sec + `","x":1}`,
		sec,
		`{"a":"` + sec + `","b":"` + sec + sec + `"}`,
	} {
		kept, at, ok := Seal([]byte(body), sec)
		if !ok || strings.Contains(string(kept), "MfKQ9r2") {
			t.Fatalf("%s: kept %s %v", body, kept, ok)
		}
		back, err := Unseal(kept, at, sec)
		if err != nil || string(back) != body {
			t.Fatalf("%s: back %s %v", body, back, err)
		}
	}
	if _, _, ok := Seal([]byte(`{"x":1}`), sec); ok {
		t.Fatal("sealed a body without the secret")
	}
	if _, err := Unseal([]byte("ab"), []int{5}, sec); err == nil {
		t.Fatal("an offset past the body")
	}
	if SecretSum(sec) == SecretSum(sec+"x") || strings.Contains(SecretSum(sec), "MfKQ") {
		t.Fatal("sums")
	}
}
