package auction

import (
	"strings"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/money"
)

// emptyString reports whether the value at sp is "".
func (p *parser) emptyString(sp jsontext.Span) bool {
	return sp.Hi-sp.Lo == 2 && p.B[sp.Lo] == '"'
}

// emptyArray reports whether the array at sp has no elements.
func (p *parser) emptyArray(sp jsontext.Span) bool { return p.B[jsontext.SkipWS(p.B, sp.Lo+1)] == ']' }

// decode appends the decoded string at sp (known to be a string) to the arena
// and returns its range there.
func (p *parser) decode(sp jsontext.Span) (lo, hi int) {
	lo = len(p.arena)
	p.arena = p.Unquote(p.arena, sp)
	return lo, len(p.arena)
}

// object reads the object at sp, when it is given, into the spans f of its
// fields names; a value that is not an object is refused at path.
func (p *parser) object(sp jsontext.Span, i int, path fpath, names []string, f []jsontext.Span) (given bool, err *ValidationError) {
	if !p.Present(sp) {
		return false, nil
	}
	if p.B[sp.Lo] != '{' {
		return false, fail(CodeBadRequest, i, path, "must be an object")
	}
	p.Fields(sp.Lo, names, f)
	return true, nil
}

// arrayRule is what an array of the request holds: elements of a kind (for
// the message of a value that is not an array), at least one and at most
// max of them.
type arrayRule struct {
	of                   string // "strings": "must be an array of strings"
	max                  int
	tooManyCode, tooMany string // more than max: tooMany's %d is max
	noneCode, none       string // none ("": tooMany's code and message)
}

// array checks the array at sp (given) against a and leaves the spans of its
// elements in *list.
func (p *parser) array(sp jsontext.Span, i int, path fpath, list *[]jsontext.Span, a *arrayRule) *ValidationError {
	if p.B[sp.Lo] != '[' {
		return fail(CodeBadRequest, i, path, "must be an array of %s", a.of)
	}
	var over bool
	*list, over = p.Elements(sp.Lo, (*list)[:0], a.max)
	switch {
	case over, len(*list) == 0 && a.none == "":
		return fail(a.tooManyCode, i, path, a.tooMany, a.max)
	case len(*list) == 0:
		return fail(a.noneCode, i, path, "%s", a.none)
	}
	return nil
}

// stringList validates the elements of the array at path, whose spans are
// list: strings of at most max characters, and not "" unless emptyCode is
// "" (emptyCode's error otherwise). dst's elements get them when the
// request is committed.
func (p *parser) stringList(list []jsontext.Span, i int, path fpath, max int, emptyCode string, dst []string) *ValidationError {
	off := len(p.offs)
	for k, esp := range list {
		if p.B[esp.Lo] != '"' {
			return fail(CodeBadRequest, i, path.el(k), "must be a string")
		}
		lo, hi := p.decode(esp)
		if lo == hi && emptyCode != "" {
			return fail(emptyCode, i, path.el(k), "must not be empty")
		}
		if err := p.checkLen(lo, hi, max, CodeBadRequest, i, path, k); err != nil {
			return err
		}
		p.offs = append(p.offs, lo, hi)
	}
	p.lists = append(p.lists, listFixup{dst, off})
	return nil
}

// keep arranges for *dst to get arena[lo:hi] when the request is committed.
func (p *parser) keep(dst *string, lo, hi int) {
	if lo == hi {
		return
	}
	p.fix = append(p.fix, strFixup{dst, lo, hi})
}

// checkLen checks that arena[lo:hi] has at most max code points; k >= 0 is
// the index of the element of path, for the message.
func (p *parser) checkLen(lo, hi, max int, code string, i int, path fpath, k int) *ValidationError {
	if hi-lo <= max || utf8.RuneCount(p.arena[lo:hi]) <= max {
		return nil
	}
	if k >= 0 {
		path = path.el(k)
	}
	return fail(code, i, path, "must be at most %d characters", max)
}

// str validates an optional string field of at most max characters (maxCode
// when longer) and keeps it in *dst; "" leaves *dst empty.
func (p *parser) str(sp jsontext.Span, i int, path fpath, max int, maxCode string, dst *string) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return fail(CodeBadRequest, i, path, "must be a string")
	}
	lo, hi := p.decode(sp)
	if err := p.checkLen(lo, hi, max, maxCode, i, path, -1); err != nil {
		return err
	}
	if dst != nil { // nil: validated only
		p.keep(dst, lo, hi)
	}
	return nil
}

// enum validates a string against its allowed values and returns the
// matching constant (no allocation).
func (p *parser) enum(sp jsontext.Span, i int, path fpath, values []string) (string, *ValidationError) {
	if p.B[sp.Lo] != '"' {
		return "", fail(CodeBadRequest, i, path, "must be a string")
	}
	raw := p.UnquoteTmp(sp)
	for _, v := range values {
		if string(raw) == v {
			return v, nil
		}
	}
	return "", fail(CodeBadRequest, i, path, "must be one of %s", strings.Join(values, ", "))
}

// integerLimit bounds the magnitude integer() reports exactly; anything
// larger is reported as ±(integerLimit+1).
const integerLimit = 1 << 40

// integer converts the JSON number at sp: ok is false when it is not a
// number; integral is false when it has a fractional part.
func (p *parser) integer(sp jsontext.Span) (v int64, integral, ok bool) {
	if !jsontext.IsNumberStart(p.B[sp.Lo]) {
		return 0, false, false
	}
	d := money.Scale(p.B[sp.Lo:sp.Hi], 0, integerLimit)
	if !d.Integral {
		return 0, false, true
	}
	v = int64(d.Mag)
	if d.Over {
		v = integerLimit + 1
	}
	if d.Neg {
		v = -v
	}
	return v, true, true
}
