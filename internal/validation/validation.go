// Package validation carries field-level validation errors from the domain
// packages to the HTTP layer, which renders them as the spec's 422 body
// `{"detail": [{"loc", "msg", "type"}]}`.
package validation

import (
	"errors"
	"fmt"
	"strings"

	"github.com/endcap/endcap/internal/errkind"
)

// FieldError is one problem. Loc is the path of the offending value; domain
// packages give it relative to its source ("body", "query" or "path"), which
// they name first.
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// Errors is a list of field errors; it is an error when not empty.
type Errors []FieldError

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		loc := make([]string, len(f.Loc))
		for j, l := range f.Loc {
			loc[j] = fmt.Sprint(l)
		}
		parts[i] = strings.Join(loc, ".") + ": " + f.Msg
	}
	return "validation: " + strings.Join(parts, "; ")
}

// Add appends an error at loc.
func (e *Errors) Add(typ, msg string, loc ...any) {
	*e = append(*e, FieldError{Loc: loc, Msg: msg, Type: typ})
}

// Err returns e as an error, or nil when there is none.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// As extracts validation errors from err.
func As(err error) (Errors, bool) {
	var v Errors
	if errors.As(err, &v) {
		return v, true
	}
	return nil, false
}

// New returns a one-error list.
func New(typ, msg string, loc ...any) Errors {
	return Errors{{Loc: loc, Msg: msg, Type: typ}}
}

// Common error types (pydantic-style names, as the spec's examples use).
const (
	Missing    = "missing"
	TypeError  = "type_error"
	ValueError = "value_error"
	TooShort   = "too_short"
	TooLong    = "too_long"
	Invalid    = "invalid"
	NotFound   = "not_found"
)

// ErrNotFound: the entity does not exist in the caller's marketplace (the
// not-found kind: errors.Is(err, ErrNotFound) holds for every not-found).
var ErrNotFound error = errkind.NotFound

// NotFoundf is a not-found error saying what was not found.
func NotFoundf(format string, args ...any) error {
	return errkind.Newf(errkind.NotFound, "not found: "+format, args...)
}
