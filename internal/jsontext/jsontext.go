// Package jsontext holds the byte-level JSON scanning and decoding shared by
// the hand-written decoders of /v2/events (ingest), /v2/auctions (auction)
// and the catalog's products: the Scanner that checks a body once and then
// walks it, syntax checks that agree with encoding/json, the text rule,
// string decoding, and calendar arithmetic
// for RFC 3339.
//
// The catalog's two decoders (management/catalog: DecodeProducts for the
// bulk upsert's body, Product.UnmarshalJSON for the log's records) use this
// package's pieces (DecodeString, ValidNumber, AppendString) but not the
// Scanner: its first pass, Valid, alone costs about as much as either of
// them does whole, and a parser on the Scanner walks the body again after
// it. Each reads its input in one pass instead, and leaves any form it does
// not read exactly to encoding/json: DecodeProducts checks the syntax as it
// goes (json.Valid only over values it skips), and the records' decoder
// matches the encoder's own form literally (the log holds only what the
// encoder wrote, already checked). Instructions under callgrind (GOMAXPROCS=1)
// per call: a body of 500 products (225 KB), DecodeProducts 9.06 M,
// Scanner.Valid alone 6.63 M (73 %); a product's record (870 B),
// Product.UnmarshalJSON 13.6 k, Scanner.Valid alone 13.9 k (102 %).
// `go test ./management/catalog -run x -bench 'DecodeProducts|ProductDecode'`
// shows the same side by side ("scanner Valid" sub-benchmarks).
package jsontext

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnquoted appends the value of the raw content of a valid JSON string
// to dst, with encoding/json's semantics: invalid UTF-8 bytes and unpaired
// surrogate escapes become U+FFFD.
func AppendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			e := raw[i+1]
			i += 2
			switch e {
			case 'u':
				r := Hex4(raw[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					r = utf8.RuneError
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if r2 := utf16.DecodeRune(Hex4(raw[i-4:]), Hex4(raw[i+2:])); r2 != utf8.RuneError {
							r = r2
							i += 6
						}
					}
				}
				dst = utf8.AppendRune(dst, r)
			default:
				dst = append(dst, unescape[e])
			}
		case c < utf8.RuneSelf:
			j := i + 1
			for j < len(raw) && raw[j] != '\\' && raw[j] < utf8.RuneSelf {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

// DecodeString reads the JSON string at b[i] == '"', checking it as
// ValidString does (the grammar and the text rule), appends its value to dst
// and returns the offset just past it, in one pass. When ok is false, dst is
// returned unchanged.
func DecodeString(dst, b []byte, i int) (out []byte, end int, ok bool) {
	n0 := len(dst)
	i++
	for {
		j := i
		for len(b)-j >= 8 && !MayStopString(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		for j < len(b) && !stringStop[b[j]] {
			j++
		}
		dst = append(dst, b[i:j]...)
		if i = j; i >= len(b) {
			return dst[:n0], i, false
		}
		switch c := b[i]; {
		case c == '"':
			return dst, i + 1, true
		case c < 0x20:
			return dst[:n0], i, false
		case c >= utf8.RuneSelf:
			n := utf8Len(b, i)
			if n == 0 {
				return dst[:n0], i, false
			}
			dst = append(dst, b[i:i+n]...)
			i += n
			continue
		}
		// backslash
		if i+1 >= len(b) {
			return dst[:n0], i, false
		}
		if e := unescape[b[i+1]]; e != 0 {
			dst = append(dst, e)
			i += 2
			continue
		}
		if b[i+1] != 'u' {
			return dst[:n0], i, false
		}
		n, p := unicodeEscape(b, i)
		if p != NoProblem {
			return dst[:n0], i, false
		}
		r := Hex4(b[i+2:])
		if n == 12 {
			r = utf16.DecodeRune(r, Hex4(b[i+8:]))
		}
		dst = utf8.AppendRune(dst, r)
		i += n
	}
}

// unescape maps the letter of a one-character escape (\n...) to the byte it
// stands for, and the other bytes to 0.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// DaysFromCivil returns the number of days from 1970-01-01 to the given
// proleptic Gregorian date (H. Hinnant's algorithm).
func DaysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := m + 9
	if m > 2 {
		mp = m - 3
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// Date reads the calendar date YYYY-MM-DD (proleptic Gregorian) that s
// starts with.
func Date(s []byte) (y, m, d int, ok bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, false
	}
	y, m, d = Digits(s[0:4]), Digits(s[5:7]), Digits(s[8:10])
	if y < 0 || m < 1 || m > 12 || d < 1 || d > DaysIn(m, y) {
		return 0, 0, 0, false
	}
	return y, m, d, true
}

// Digits is the number that s writes in decimal digits, or -1 when s has
// another byte.
func Digits(s []byte) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func DaysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func DigitAt(b []byte, i int) bool { return i < len(b) && b[i] >= '0' && b[i] <= '9' }

func HasEscape(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' {
			return true
		}
	}
	return false
}

func Hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default: // 'A'-'F'
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func IsHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// MayStopString reports whether one of the 8 bytes in x may be a quote, a
// backslash, a control character or a byte of a non-ASCII character (no
// false negatives).
func MayStopString(x uint64) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	q := x ^ lsb*'"'
	bs := x ^ lsb*'\\'
	return ((x-lsb*0x20)&^x|(q-lsb)&^q|(bs-lsb)&^bs|x)&msb != 0
}

// PlainEnd returns the offset of the first byte at or after b[i] that ends
// the plain run of a JSON string's content (a quote, a backslash, a control
// character or a byte of a non-ASCII character), or len(b): eight bytes a
// step, the stopping one found within its word.
func PlainEnd(b []byte, i int) int {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	for ; len(b)-i >= 8; i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ lsb*'"'
		bs := x ^ lsb*'\\'
		// The lowest byte marked is one that stops: a byte is marked
		// wrongly only by a borrow from a lower one that stops.
		if m := ((x-lsb*0x20)&^x | (q-lsb)&^q | (bs-lsb)&^bs | x) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && !stringStop[b[i]] {
		i++
	}
	return i
}

// PlainString reports whether the raw content of a JSON string is its own
// value: no escapes and valid UTF-8 (json.Valid has ruled out control
// characters).
func PlainString(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			return !HasEscape(raw) && utf8.Valid(raw)
		}
	}
	return true
}

// SkipString returns the offset just past the string starting at b[i] == '"'.
func SkipString(b []byte, i int) int {
	i++
	for {
		q := i + bytes.IndexByte(b[i:], '"')
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		n := 0
		for q-1-n >= i && b[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

func SkipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func ValidLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

func ValidNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	if !DigitAt(b, i) {
		return i, false
	}
	if b[i] == '0' {
		i++
	} else {
		for DigitAt(b, i) {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !DigitAt(b, i) {
			return i, false
		}
		for DigitAt(b, i) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !DigitAt(b, i) {
			return i, false
		}
		for DigitAt(b, i) {
			i++
		}
	}
	return i, true
}

// ValidString checks the JSON string at b[i] == '"' and returns the offset
// just past it. ok is false when it breaks the JSON grammar, and also when
// the grammar accepts it but Endcap does not (see StringProblem): a byte
// sequence that is not UTF-8, an unpaired surrogate escape, or \u0000.
// A caller that must tell the two apart asks encoding/json (which accepts
// the second kind) and FindBadString.
func ValidString(b []byte, i int) (int, bool) {
	i++
	for {
		for len(b)-i >= 8 && !MayStopString(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			return i, false
		}
		c := b[i]
		if !stringStop[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c >= utf8.RuneSelf:
			n := utf8Len(b, i)
			if n == 0 {
				return i, false
			}
			i += n
			continue
		}
		// backslash
		if i+1 >= len(b) {
			return i, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			n, p := unicodeEscape(b, i)
			if p != NoProblem {
				return i, false
			}
			i += n
		default:
			return i, false
		}
	}
}

// utf8Len returns the length of the UTF-8 encoded character at b[i] (a
// byte >= 0x80), or 0 when the bytes there are not UTF-8: two- and
// three-byte characters (Latin, Cyrillic, CJK...) are checked inline, the
// others by utf8.DecodeRune.
func utf8Len(b []byte, i int) int {
	c := b[i]
	switch {
	case c >= 0xc2 && c <= 0xdf:
		if i+1 < len(b) && b[i+1]&0xc0 == 0x80 {
			return 2
		}
		return 0
	case c >= 0xe0 && c <= 0xef && i+2 < len(b):
		lo, hi := byte(0x80), byte(0xbf)
		switch c {
		case 0xe0:
			lo = 0xa0 // no overlong form
		case 0xed:
			hi = 0x9f // no surrogate
		}
		if b[i+1] >= lo && b[i+1] <= hi && b[i+2]&0xc0 == 0x80 {
			return 3
		}
		return 0
	}
	r, size := utf8.DecodeRune(b[i:])
	if r == utf8.RuneError && size == 1 {
		return 0
	}
	return size
}

// unicodeEscape reads the \u escape at b[i] and returns its length (6, or
// 12 for a surrogate pair) and what is wrong with it; a malformed escape
// is InvalidEscape.
func unicodeEscape(b []byte, i int) (int, StringProblem) {
	if len(b)-i < 6 || !IsHex(b[i+2]) || !IsHex(b[i+3]) || !IsHex(b[i+4]) || !IsHex(b[i+5]) {
		return 0, InvalidEscape
	}
	switch r := Hex4(b[i+2:]); {
	case r == 0:
		return 6, NULCharacter
	case r >= 0xdc00 && r <= 0xdfff:
		return 6, LoneSurrogate
	case r >= 0xd800 && r <= 0xdbff:
		if len(b)-i >= 12 && b[i+6] == '\\' && b[i+7] == 'u' &&
			IsHex(b[i+8]) && IsHex(b[i+9]) && IsHex(b[i+10]) && IsHex(b[i+11]) {
			if lo := Hex4(b[i+8:]); lo >= 0xdc00 && lo <= 0xdfff {
				return 12, NoProblem
			}
		}
		return 6, LoneSurrogate
	}
	return 6, NoProblem
}

// stringStop marks the bytes that end the plain run of a JSON string.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()
