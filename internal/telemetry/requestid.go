package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync/atomic"
)

// Request ids (docs/operations/operations.md, Logs): every HTTP request gets one, echoed
// in the X-Request-Id response header and carried by its context, so that
// every line logged with that context (slog's ...Context methods) names it.
// A caller's own X-Request-Id is kept when it is a plain token.

// RequestIDHeader is the header that carries a request's id both ways.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDLen is the longest id taken from a caller; a longer one, or
// one with other bytes than ValidRequestID allows, is replaced.
const MaxRequestIDLen = 128

type requestIDKey struct{}

// WithRequestID is ctx carrying request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the request id ctx carries, "" if none.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// ValidRequestID says whether a caller's id may be kept: 1 to
// MaxRequestIDLen bytes of letters, digits and - _ . : (no spaces, quotes or
// control bytes: it is written into log lines and a response header).
func ValidRequestID(s string) bool {
	if len(s) == 0 || len(s) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// requestIDs numbers this process's requests after a random prefix, so that
// ids of replicas (and of restarts) do not meet: a counter costs a few
// nanoseconds where a random id a request would cost a system call's worth.
var requestIDs = struct {
	prefix string
	n      atomic.Uint64
}{prefix: newRequestIDPrefix()}

func newRequestIDPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux; zeros would still number requests
	return hex.EncodeToString(b[:]) + "-"
}

// NewRequestID is a new request id, unique across processes in practice:
// 12 random hex digits of the process, a dash, and the request's number in
// base 36.
func NewRequestID() string {
	var buf [32]byte
	b := append(buf[:0], requestIDs.prefix...)
	b = strconv.AppendUint(b, requestIDs.n.Add(1), 36)
	return string(b)
}

// requestIDHandler adds request_id to the records logged with a context
// that carries one.
type requestIDHandler struct{ h slog.Handler }

// WithRequestIDs is l logging each record's context request id as
// request_id (when the context has one).
func WithRequestIDs(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(requestIDHandler); ok {
		return l
	}
	return slog.New(requestIDHandler{h: l.Handler()})
}

func (h requestIDHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.h.Enabled(ctx, l)
}

func (h requestIDHandler) Handle(ctx context.Context, rec slog.Record) error {
	if ctx != nil {
		if id := RequestID(ctx); id != "" {
			rec = rec.Clone()
			rec.AddAttrs(slog.String("request_id", id))
		}
	}
	return h.h.Handle(ctx, rec)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h: h.h.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h: h.h.WithGroup(name)}
}
