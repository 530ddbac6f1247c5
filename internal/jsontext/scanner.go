package jsontext

import "bytes"

// MaxDepth is encoding/json's limit on nested arrays and objects.
const MaxDepth = 10000

// Span is the byte range B[Lo:Hi] of one JSON value in a body. The zero Span
// (Hi == 0) stands for an absent value: no value ends at offset 0.
type Span struct{ Lo, Hi int }

// Scanner checks a JSON body once and then walks it by hand, for the /v2
// parsers: Valid accepts what json.Valid accepts, several times faster, less
// the strings that break the text rule (StringProblem), and records where
// every array and object ends; after it, the walking methods (Fields,
// Elements, SkipValue...) trust the grammar and skip a container in O(1)
// instead of reading it again. The walking methods must only be called
// after Valid reported true for the body they walk.
//
// A parser embeds a Scanner and keeps it in a sync.Pool: the recorded spans
// and the scratch buffer are reused from one body to the next.
type Scanner struct {
	B []byte // the body

	// cont holds every array and object of B in order of their start,
	// with next, the index in cont of the first container that starts
	// after it ends (its next sibling or an ancestor's).
	cont []container
	hint int    // index in cont of the container found last
	tmp  []byte // decoded keys and strings with escapes (UnquoteTmp)
}

type container struct{ lo, hi, next int }

// Release drops the body and the buffers that grew too large to keep in a
// pool.
func (s *Scanner) Release() {
	s.B = nil
	if cap(s.cont) > 1<<16 {
		s.cont = nil
	}
	if cap(s.tmp) > 64<<10 {
		s.tmp = nil
	}
}

// Valid reports whether b is one JSON value with optional surrounding
// whitespace whose strings follow the text rule. It agrees with json.Valid
// but for those strings (ValidString), and is several times faster. It makes
// b the body the other methods walk.
func (s *Scanner) Valid(b []byte) bool {
	s.B, s.cont, s.hint = b, s.cont[:0], 0
	i, ok := s.validValue(SkipWS(b, 0), 0)
	return ok && SkipWS(b, i) == len(b)
}

func (s *Scanner) validValue(i, depth int) (int, bool) {
	b := s.B
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return ValidString(b, i)
	case '{', '[':
		if depth++; depth > MaxDepth {
			return i, false
		}
		obj, closer := b[i] == '{', byte(']')
		if obj {
			closer = '}'
		}
		if len(s.cont) == cap(s.cont) {
			s.grow()
		}
		ci := len(s.cont)
		s.cont = append(s.cont, container{lo: i})
		i = SkipWS(b, i+1)
		if i < len(b) && b[i] == closer {
			s.closeContainer(ci, i+1)
			return i + 1, true
		}
		for {
			var ok bool
			if obj {
				if i >= len(b) || b[i] != '"' {
					return i, false
				}
				if i, ok = ValidString(b, i); !ok {
					return i, false
				}
				if i = SkipWS(b, i); i >= len(b) || b[i] != ':' {
					return i, false
				}
				i = SkipWS(b, i+1)
			}
			if i, ok = s.validValue(i, depth); !ok {
				return i, false
			}
			if i = SkipWS(b, i); i >= len(b) {
				return i, false
			}
			switch b[i] {
			case closer:
				s.closeContainer(ci, i+1)
				return i + 1, true
			case ',':
				i = SkipWS(b, i+1)
			default:
				return i, false
			}
		}
	case 't':
		return ValidLiteral(b, i, "true")
	case 'f':
		return ValidLiteral(b, i, "false")
	case 'n':
		return ValidLiteral(b, i, "null")
	default:
		return ValidNumber(b, i)
	}
}

// grow makes room for more containers. Past a thousand, it counts the
// brackets of the body and makes room for that many at once: a 1 MiB body of
// empty arrays then costs one 8 MB allocation instead of 44 MB of doublings.
func (s *Scanner) grow() {
	n := 2*cap(s.cont) + 16
	if cap(s.cont) >= 1024 {
		n = max(n, bytes.Count(s.B, []byte{'{'})+bytes.Count(s.B, []byte{'['}))
	}
	c := make([]container, len(s.cont), n)
	copy(c, s.cont)
	s.cont = c
}

func (s *Scanner) closeContainer(ci, end int) {
	c := &s.cont[ci]
	c.hi, c.next = end, len(s.cont)
}

// SkipValue returns the offset just past the value starting at B[i].
func (s *Scanner) SkipValue(i int) int {
	b := s.B
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		return s.containerEnd(i)
	default:
		return skipScalar(b, i)
	}
}

// skipScalar returns the offset just past the number, true, false or null
// starting at b[i].
func skipScalar(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// containerEnd returns the offset just past the array or object starting at
// lo, from the spans Valid recorded. A walk mostly goes forward: the
// container wanted is usually the first child or the next sibling of the one
// found last, else a little further on; going back costs a binary search.
// (For a /v2/events batch of 50 events: 61 first children, 49 next
// siblings, 52 short gallops forward, 2 binary searches.)
func (s *Scanner) containerEnd(lo int) int {
	c := s.cont
	h := s.hint
	if k := h + 1; k < len(c) && c[k].lo == lo {
		s.hint = k
		return c[k].hi
	}
	if k := c[h].next; k < len(c) && c[k].lo == lo {
		s.hint = k
		return c[k].hi
	}
	k, n := 0, len(c)
	if c[h].lo < lo {
		// Gallop forward from the hint: the answer is in [k, n).
		k = h + 1
		for step := 2; h+step < n; step *= 2 {
			j := h + step
			if c[j].lo >= lo {
				n = j
				break
			}
			k = j + 1
		}
	} else {
		n = h
	}
	for k < n {
		m := int(uint(k+n) >> 1)
		if c[m].lo < lo {
			k = m + 1
		} else {
			n = m
		}
	}
	s.hint = k
	return c[k].hi
}

// Fields scans the object at B[lo] == '{' and stores in out[k] the span of
// the value of key names[k] (case-sensitive); a repeated key keeps its last
// value, and out[k] of a key not given is left as it was.
func (s *Scanner) Fields(lo int, names []string, out []Span) {
	b := s.B
	i := SkipWS(b, lo+1)
	if b[i] == '}' {
		return
	}
	for {
		ks := i + 1
		i = SkipString(b, i)
		key := b[ks : i-1]
		if !PlainString(key) {
			s.tmp = AppendUnquoted(s.tmp[:0], key)
			key = s.tmp
		}
		i = SkipWS(b, i) + 1 // ':'
		i = SkipWS(b, i)
		vs := i
		i = s.SkipValue(i)
		for k, name := range names {
			if string(key) == name {
				out[k] = Span{vs, i}
				break
			}
		}
		i = SkipWS(b, i)
		if b[i] != ',' {
			return // '}'
		}
		i = SkipWS(b, i+1)
	}
}

// Elements appends to dst the spans of the elements of the array at
// B[lo] == '['. It stops and reports over when there are more than max.
func (s *Scanner) Elements(lo int, dst []Span, max int) ([]Span, bool) {
	b := s.B
	i := SkipWS(b, lo+1)
	if b[i] == ']' {
		return dst, false
	}
	for n := 0; ; n++ {
		if n == max {
			return dst, true
		}
		vs := i
		i = s.SkipValue(i)
		dst = append(dst, Span{vs, i})
		i = SkipWS(b, i)
		if b[i] != ',' {
			return dst, false // ']'
		}
		i = SkipWS(b, i+1)
	}
}

// Present reports whether a key was given with a value other than null.
func (s *Scanner) Present(sp Span) bool { return sp.Hi != 0 && s.B[sp.Lo] != 'n' }

// Unquote appends the value of the string at sp to dst.
func (s *Scanner) Unquote(dst []byte, sp Span) []byte {
	raw := s.B[sp.Lo+1 : sp.Hi-1]
	if PlainString(raw) {
		return append(dst, raw...)
	}
	return AppendUnquoted(dst, raw)
}

// UnquoteTmp returns the value of the string at sp, without copying when it
// has no escapes. The result is valid until the next call of UnquoteTmp or
// Fields.
func (s *Scanner) UnquoteTmp(sp Span) []byte {
	raw := s.B[sp.Lo+1 : sp.Hi-1]
	if PlainString(raw) {
		return raw
	}
	s.tmp = AppendUnquoted(s.tmp[:0], raw)
	return s.tmp
}

// IsNumberStart reports whether c starts a JSON number.
func IsNumberStart(c byte) bool { return c == '-' || c >= '0' && c <= '9' }
