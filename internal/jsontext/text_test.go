package jsontext

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestTextRule(t *testing.T) {
	for _, tc := range []struct {
		body    string
		ok      bool
		path    []any
		key     bool
		problem StringProblem
	}{
		{`{"a":"plain","b":["é","日本","😀"]}`, true, nil, false, NoProblem},
		{`{"a":"\ud83d\ude00 \uD83D\uDE00 \u00e9 \u0001 \\u0000 \\\\"}`, true, nil, false, NoProblem},
		{`"\u0000"`, false, nil, false, NULCharacter},
		{`{"a":[1,{"b":"x\u0000"}]}`, false, []any{"a", 1, "b"}, false, NULCharacter},
		{`{"a":"\ud800"}`, false, []any{"a"}, false, LoneSurrogate},
		{`{"a":"\udfff\ud800"}`, false, []any{"a"}, false, LoneSurrogate},
		{`{"a":"\ud800\u0041"}`, false, []any{"a"}, false, LoneSurrogate},
		{`{"a":"\ud800\\udc00"}`, false, []any{"a"}, false, LoneSurrogate},
		{"{\"a\":[\"ok\",\"\xff\"]}", false, []any{"a", 1}, false, InvalidUTF8},
		{"{\"a\":\"\xed\xa0\x80\"}", false, []any{"a"}, false, InvalidUTF8},
		{"{\"a\":\"\xf4\x90\x80\x80\"}", false, []any{"a"}, false, InvalidUTF8}, // above U+10FFFF
		{"{\"x\":{\"k\xff\":1}}", false, []any{"x"}, true, InvalidUTF8},
		{`{"x":{"\u0000":1}}`, false, []any{"x"}, true, NULCharacter},
		{`{"\u0061":{"b\u00e9":["\ud800"]}}`, false, []any{"a", "bé", 0}, false, LoneSurrogate},
		{`{"a":"\u0000","b":"\ud800"}`, false, []any{"a"}, false, NULCharacter},
	} {
		b := []byte(tc.body)
		if !json.Valid(b) {
			t.Fatalf("%s: not JSON", tc.body)
		}
		if got := TextOK(b); got != tc.ok {
			t.Errorf("TextOK(%q) = %v", tc.body, got)
		}
		bad, found := FindBadString(b)
		if found == tc.ok {
			t.Errorf("FindBadString(%q): found %v", tc.body, found)
			continue
		}
		if found && (!reflect.DeepEqual(bad.Path, tc.path) || bad.Key != tc.key || bad.Problem != tc.problem) {
			t.Errorf("FindBadString(%q) = %+v, want path %v key %v problem %v", tc.body, bad, tc.path, tc.key, tc.problem)
		}
	}
	if got := FormatPath([]any{"impressions", 3, "placement", "categoryIds", 1}); got != "impressions[3].placement.categoryIds[1]" {
		t.Errorf("FormatPath: %q", got)
	}
	if got := FormatPath([]any{2, "a"}); got != "[2].a" {
		t.Errorf("FormatPath: %q", got)
	}
}

// FuzzTextRule: ValidString accepts a string exactly when encoding/json
// does and the text rule holds, and DecodeString with it; FindBadString finds a string exactly then
// not; decoding an accepted string never produces U+FFFD unless the text
// holds one.
func FuzzTextRule(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u0000"`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", "\"é\"", `"\\"`, `"\ufffd"`, `{"a\u0000":1}`, `["x","\udc00"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := json.Valid(b)
		if len(b) > 0 && b[0] == '"' {
			end, ok := ValidString(b, 0)
			whole := ok && SkipWS(b, end) == len(b)
			if whole != (valid && TextOK(b)) {
				t.Fatalf("ValidString(%q) = %v, json.Valid %v, TextOK %v", b, ok, valid, TextOK(b))
			}
			if valid && !ok {
				if _, found := FindBadString(b); !found {
					t.Fatalf("ValidString refused %q, which FindBadString finds fine", b)
				}
			}
			dec, dend, dok := DecodeString([]byte("x"), b, 0)
			if dok != ok || ok && (dend != end || string(dec[1:]) != string(AppendUnquoted(nil, b[1:end-1]))) || !ok && string(dec) != "x" {
				t.Fatalf("DecodeString(%q) = %q, %d, %v; ValidString %d, %v", b, dec, dend, dok, end, ok)
			}
			if whole {
				dec := AppendUnquoted(nil, b[1:end-1])
				if !utf8.Valid(dec) {
					t.Fatalf("accepted %q decodes to invalid UTF-8", b)
				}
				var ref string
				if err := json.Unmarshal(b, &ref); err != nil || ref != string(dec) {
					t.Fatalf("accepted %q: AppendUnquoted %q, encoding/json %q %v", b, dec, ref, err)
				}
			}
		}
		if valid {
			_, found := FindBadString(b)
			if found == TextOK(b) {
				t.Fatalf("%q: FindBadString found %v, TextOK %v", b, found, TextOK(b))
			}
		}
	})
}

// TestUTF8LenMatchesDecodeRune checks utf8Len against utf8.DecodeRune for
// every lead byte >= 0x80 and every two following bytes, whole and cut.
func TestUTF8LenMatchesDecodeRune(t *testing.T) {
	buf := make([]byte, 4)
	for c := 0x80; c <= 0xff; c++ {
		for b1 := 0; b1 <= 0xff; b1++ {
			for b2 := 0; b2 <= 0xff; b2++ {
				buf[0], buf[1], buf[2], buf[3] = byte(c), byte(b1), byte(b2), 0x80
				for _, n := range []int{1, 2, 3, 4} {
					r, size := utf8.DecodeRune(buf[:n])
					want := size
					if r == utf8.RuneError && size == 1 {
						want = 0
					}
					if got := utf8Len(buf[:n], 0); got != want {
						t.Fatalf("% x: utf8Len %d, DecodeRune %d", buf[:n], got, want)
					}
				}
			}
		}
	}
}
