// Package errkind is Endcap's one error vocabulary. A domain package or an
// adapter says what kind of failure it reports (invalid input, not found, a
// conflict, a dependency unavailable, forbidden, too many), with a message fit
// for the API's client; package api maps the kinds to HTTP statuses and error
// bodies in one place (api.Public.Fail). Errors that are none of these are
// internal: logged, and answered 500 without their text.
//
// A kind is itself an error, so `errors.Is(err, errkind.NotFound)` asks
// whether err is a not-found of any package; a package's own sentinel (an
// *Error) is still matched by identity.
package errkind

import (
	"errors"
	"fmt"
	"time"
)

// Kind is a kind of failure.
type Kind uint8

const (
	// Internal is the zero kind: a failure the vocabulary does not name.
	Internal Kind = iota
	// Invalid: the request breaks a rule (400 on /v2, 422 on /public/v1).
	Invalid
	// NotFound: no such resource in the caller's marketplace (404).
	NotFound
	// Conflict: the resource is in a state that refuses the request, or
	// was changed by another request meanwhile (409).
	Conflict
	// Unavailable: a dependency cannot take or give the data right now; a
	// retry may succeed (503 with Retry-After).
	Unavailable
	// Forbidden: the caller may not do this (403).
	Forbidden
	// TooMany: a rate limit or quota is used up (429).
	TooMany
)

var names = [...]string{"internal", "invalid", "not found", "conflict", "unavailable", "forbidden", "too many"}

func (k Kind) String() string {
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("kind %d", k)
}

// Error makes a Kind an error, so that errors.Is can look for a kind.
func (k Kind) Error() string { return k.String() }

// Error is a failure of a kind, with the message the API answers (Msg) and,
// where the API documents one, its own errCode (Code; empty for the kind's).
type Error struct {
	Kind Kind
	Code string
	Msg  string
	// RetryAfter, on a TooMany, is when the request may succeed again (the
	// API's Retry-After; 0: none said).
	RetryAfter time.Duration
}

// New returns an error of kind k whose message, shown to API clients, is msg.
func New(k Kind, msg string) *Error { return &Error{Kind: k, Msg: msg} }

// Newf is New with a formatted message.
func Newf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// WithCode returns the error with the API's errCode code.
func (e *Error) WithCode(code string) *Error {
	return &Error{Kind: e.Kind, Code: code, Msg: e.Msg, RetryAfter: e.RetryAfter}
}

// WithRetryAfter returns the error with a RetryAfter.
func (e *Error) WithRetryAfter(d time.Duration) *Error {
	return &Error{Kind: e.Kind, Code: e.Code, Msg: e.Msg, RetryAfter: d}
}

func (e *Error) Error() string { return e.Msg }

// Is reports whether target is e's kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// Of returns the first *Error of err's chain (the outermost: the most
// specific message); ok is false when there is none (an internal failure).
func Of(err error) (e *Error, ok bool) { return errors.AsType[*Error](err) }

// KindOf is the kind of err (Internal when the vocabulary does not name it).
func KindOf(err error) Kind {
	if e, ok := Of(err); ok {
		return e.Kind
	}
	return Internal
}
