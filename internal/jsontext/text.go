package jsontext

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The text rule: every string of a request body, object keys included, must
// be well-formed Unicode text without NUL. The JSON grammar (and
// encoding/json, which turns the first two into U+FFFD) accepts:
//
//   - bytes that are not UTF-8: RFC 8259 §8.1 makes such a text not JSON
//     at all, and decoded as U+FFFD two distinct ids would become one;
//   - an unpaired surrogate escape ("\ud800"): no Unicode character, the
//     same collision once decoded;
//   - "\u0000": a valid character that no id or name legitimately holds,
//     and that C strings, logs and files downstream cut at.
//
// Endcap refuses all three, in every string of the body (naming the field),
// not only in ids: the check costs the same, and a body with such a string
// anywhere was made by a broken or hostile client.

// StringProblem says why a string is refused.
type StringProblem uint8

const (
	NoProblem     StringProblem = iota
	InvalidUTF8                 // bytes that are not UTF-8
	LoneSurrogate               // \ud800-\udfff escape not part of a pair
	NULCharacter                // \u0000
	InvalidEscape               // not JSON at all (only for callers' completeness)
)

// Rule is what a string must be, for error messages ("must be valid UTF-8").
func (p StringProblem) Rule() string {
	switch p {
	case InvalidUTF8:
		return "must be valid UTF-8"
	case LoneSurrogate:
		return `must not contain an unpaired surrogate escape (\ud800 to \udfff): a character outside the Basic Multilingual Plane is written as a pair`
	case NULCharacter:
		return `must not contain the NUL character (\u0000)`
	case InvalidEscape:
		return "must be a valid JSON string"
	}
	return ""
}

// TextOK reports whether every string of b, a text that encoding/json
// accepts, follows the text rule. It reads b once (UTF-8 validation and a
// search for backslashes, both word at a time), without allocating.
func TextOK(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for i := 0; ; {
		k := bytes.IndexByte(b[i:], '\\')
		if k < 0 {
			return true
		}
		i += k
		if i+1 >= len(b) {
			return false
		}
		if b[i+1] != 'u' {
			i += 2 // in valid JSON every backslash starts an escape
			continue
		}
		n, p := unicodeEscape(b, i)
		if p != NoProblem {
			return false
		}
		i += n
	}
}

// BadString is the first string of a text that breaks the text rule.
type BadString struct {
	// Path leads from the top value to the string: object keys (string)
	// and array indexes (int). For a key, it leads to the object holding
	// the key.
	Path    []any
	Key     bool // the string is an object key
	Problem StringProblem
}

// FindBadString returns the first string of b that breaks the text rule,
// with its path, for the error message once TextOK or ValidString has
// refused b. b must be a text that encoding/json accepts; found is false
// when no string breaks the rule (or b is not such a text).
func FindBadString(b []byte) (bad BadString, found bool) {
	f := finder{b: b}
	f.value(SkipWS(b, 0))
	return f.bad, f.found
}

type finder struct {
	b     []byte
	path  []any
	bad   BadString
	found bool
	fail  bool // malformed input: give up
}

func (f *finder) report(key bool, p StringProblem) {
	f.bad = BadString{Path: append([]any(nil), f.path...), Key: key, Problem: p}
	f.found = true
}

// str checks the string at b[i] == '"' and returns the offset past it and
// its problem.
func (f *finder) str(i int) (int, StringProblem) {
	b := f.b
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, NoProblem
		case c == '\\':
			if i+1 >= len(b) {
				f.fail = true
				return i, InvalidEscape
			}
			if b[i+1] != 'u' {
				i += 2
				continue
			}
			n, p := unicodeEscape(b, i)
			if p != NoProblem {
				return i, p
			}
			i += n
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, InvalidUTF8
			}
			i += size
		default:
			i++
		}
	}
	f.fail = true
	return i, InvalidEscape
}

// value walks the value at b[i] and returns the offset past it; it stops
// at the first bad string.
func (f *finder) value(i int) int {
	b := f.b
	if f.found || f.fail || i >= len(b) {
		f.fail = f.fail || i >= len(b)
		return i
	}
	switch b[i] {
	case '"':
		end, p := f.str(i)
		if p != NoProblem && !f.fail {
			f.report(false, p)
		}
		return end
	case '{':
		i = SkipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1
		}
		for !f.found && !f.fail {
			if i >= len(b) || b[i] != '"' {
				f.fail = true
				return i
			}
			ks := i
			end, p := f.str(i)
			if p != NoProblem {
				if !f.fail {
					f.report(true, p)
				}
				return end
			}
			f.path = append(f.path, string(AppendUnquoted(nil, b[ks+1:end-1])))
			i = SkipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				f.fail = true
				return i
			}
			i = SkipWS(b, f.value(SkipWS(b, i+1)))
			f.path = f.path[:len(f.path)-1]
			if f.found || f.fail || i >= len(b) {
				return i
			}
			if b[i] == '}' {
				return i + 1
			}
			i = SkipWS(b, i+1) // ','
		}
		return i
	case '[':
		i = SkipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for n := 0; !f.found && !f.fail; n++ {
			f.path = append(f.path, n)
			i = SkipWS(b, f.value(i))
			f.path = f.path[:len(f.path)-1]
			if f.found || f.fail || i >= len(b) {
				return i
			}
			if b[i] == ']' {
				return i + 1
			}
			i = SkipWS(b, i+1) // ','
		}
		return i
	default:
		return skipScalar(b, i)
	}
}

// FormatPath writes a path the way /v2 messages name fields:
// impressions[3].id ("" for the top value).
func FormatPath(path []any) string {
	var sb strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(p))
			sb.WriteByte(']')
		case string:
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(p)
		}
	}
	return sb.String()
}

// Refusal is why a JSON body that a fast syntax check refused is not
// accepted: a syntax error (Syntax), or a string the JSON grammar accepts and
// the text rule does not, at Path (FormatPath; "" for the top value).
type Refusal struct {
	Syntax bool
	Path   string
	Msg    string
}

// Explain says why body, refused by ValidJSON-style checks, is refused: the
// first syntax error as encoding/json reports it, else the first string
// that breaks the text rule (FindBadString). The /v2 parsers answer the first
// with invalid_json and the second with bad_request.
func Explain(body []byte) Refusal {
	var raw json.RawMessage
	err := json.Unmarshal(body, &raw)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return Refusal{Syntax: true, Msg: fmt.Sprintf("request body is not valid JSON: %s (at byte %d)", se.Error(), se.Offset)}
	}
	if bad, found := FindBadString(body); err == nil && found {
		path := FormatPath(bad.Path)
		if bad.Key {
			return Refusal{Path: path, Msg: "an object key " + bad.Problem.Rule()}
		}
		if path == "" {
			path = "request body"
		}
		return Refusal{Path: path, Msg: bad.Problem.Rule()}
	}
	return Refusal{Syntax: true, Msg: "request body is not valid JSON"}
}
