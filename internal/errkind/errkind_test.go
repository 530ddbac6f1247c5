package errkind

import (
	"errors"
	"fmt"
	"testing"
)

func TestKinds(t *testing.T) {
	busy := New(Unavailable, "the log cannot take the write right now")
	wrapped := fmt.Errorf("append: %w: %v", busy, errors.New("broker timeout"))
	cases := []struct {
		name string
		err  error
		kind Kind
		msg  string
	}{
		{"sentinel", busy, Unavailable, "the log cannot take the write right now"},
		{"wrapped keeps the public message, not the cause's text", wrapped, Unavailable, "the log cannot take the write right now"},
		{"formatted", Newf(NotFound, "no campaign %q", "c-1"), NotFound, `no campaign "c-1"`},
		{"with a code", New(Conflict, "disabled").WithCode("webhook_disabled"), Conflict, "disabled"},
		{"plain error", errors.New("boom"), Internal, ""},
		{"nil", nil, Internal, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if k := KindOf(c.err); k != c.kind {
				t.Errorf("kind %v, want %v", k, c.kind)
			}
			e, ok := Of(c.err)
			if ok != (c.kind != Internal) || (ok && e.Msg != c.msg) {
				t.Errorf("Of: %v %v", e, ok)
			}
			if c.kind != Internal && !errors.Is(c.err, c.kind) {
				t.Errorf("errors.Is(err, %v) is false", c.kind)
			}
			for _, other := range []Kind{Invalid, NotFound, Conflict, Unavailable, Forbidden, TooMany} {
				if other != c.kind && errors.Is(c.err, other) {
					t.Errorf("errors.Is(err, %v) is true", other)
				}
			}
		})
	}
	if !errors.Is(wrapped, busy) {
		t.Error("a sentinel is no longer matched by identity")
	}
}
