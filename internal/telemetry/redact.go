package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Redacted is what a secret's value reads as once redacted.
const Redacted = "[redacted]"

// Redactor blanks the values of secrets out of text shown to others: log
// lines, /readyz. Values shorter than four characters are left, since
// blanking them would garble the text rather than hide anything. The zero
// or nil Redactor changes nothing.
type Redactor struct {
	r *strings.Replacer
}

// NewRedactor blanks out these values (config.Config.Secrets).
func NewRedactor(secrets []string) *Redactor {
	var pairs []string
	for _, s := range secrets {
		if len(s) >= 4 {
			pairs = append(pairs, s, Redacted)
		}
	}
	if len(pairs) == 0 {
		return &Redactor{}
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// String is s with every secret blanked out.
func (x *Redactor) String(s string) string {
	if x == nil || x.r == nil {
		return s
	}
	return x.r.Replace(s)
}

// Logger is l with every secret blanked out of its messages and attributes
// (strings, errors, anything printed).
func (x *Redactor) Logger(l *slog.Logger) *slog.Logger {
	if x == nil || x.r == nil {
		return l
	}
	return slog.New(&redactHandler{h: l.Handler(), x: x})
}

type redactHandler struct {
	h slog.Handler
	x *Redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.x.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.x.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.x.attr(a)
	}
	return &redactHandler{h: h.h.WithAttrs(red), x: h.x}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: h.h.WithGroup(name), x: h.x}
}

func (x *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, x.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = x.attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		s := fmt.Sprint(v.Any())
		if r := x.String(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
