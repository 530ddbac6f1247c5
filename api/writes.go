package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/validation"
)

// Writes of /public/v1 (docs/reference/management-api.md):
//
//   - Every write (POST, PUT, PATCH, DELETE) has WriteTimeout of server time:
//     its context ends that long after the request body was read (at once for
//     a request without a body; the time the handler spends waiting for the
//     client's body does not count). Every wait on Kafka, Redis or the view
//     honours it, and the answer is then 503 with Retry-After: the write may
//     or may not have been applied. The context does not end when the client
//     goes away: a write that started completes or fails on its own.
//   - A POST with an Idempotency-Key runs once per key and marketplace for
//     24 h: a retry gets the first result again (Idempotent-Replayed: true),
//     and the ids it creates are derived from the key (idempotency.NewID).

// ErrWriteDeadline is the cause of a write's context that ended at its
// deadline.
var ErrWriteDeadline = errors.New("the write did not complete in time")

// Idempotency headers.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// errorStyle answers the errors of the write middleware in a route's shape.
type errorStyle struct {
	abort func(c *gin.Context, status int, code, msg string)
	// invalidHeader answers 422 for a header (typ: the detail's type).
	invalidHeader func(c *gin.Context, header, typ, msg string)
}

var defaultErrorStyle = errorStyle{
	abort: abortV2,
	invalidHeader: func(c *gin.Context, header, typ, msg string) {
		abort422(c, validation.New(typ, msg, "header", header))
	},
}

// setErrorStyle makes the routes under prefix answer the write middleware's
// errors with style (route sets call it while they install their routes).
func (p *Public) setErrorStyle(prefix string, style errorStyle) {
	if p.styles == nil {
		p.styles = map[string]errorStyle{}
	}
	p.styles[prefix] = style
}

// Limit is the rate limit of a class ("catalog", "default") on a route of
// /public/v1: its 429 in the route's error shape.
func (p *Public) Limit(class string) gin.HandlerFunc {
	return p.Limits.LimitWith(class, p.abort)
}

// abort answers an error in the route's shape (setErrorStyle).
func (p *Public) abort(c *gin.Context, status int, code, msg string) {
	p.style(c).abort(c, status, code, msg)
}

func (p *Public) style(c *gin.Context) errorStyle {
	route := c.FullPath()
	for prefix, s := range p.styles {
		if strings.HasPrefix(route, prefix) {
			return s
		}
	}
	return defaultErrorStyle
}

// Refiller gives back, to the replay of a kept answer, the secret that
// answer showed (idempotency.Refill): args and sum as the handler gave them
// to AnswersSecret. An error (errkind) is answered instead of the replay.
type Refiller func(c *gin.Context, args []string, sum string) (string, error)

// setRefiller registers the Refiller of a kind (route sets call it while
// they install their routes).
func (p *Public) setRefiller(kind string, fn Refiller) {
	if p.refills == nil {
		p.refills = map[string]Refiller{}
	}
	p.refills[kind] = fn
}

const secretAnswerKey = "endcap.secretAnswer"

type secretAnswer struct {
	secret string
	refill idempotency.Refill
}

// answersSecret says that the answer the handler is writing shows secret:
// when the request has an Idempotency-Key, its result is kept without the
// secret, and a replay gets it back from the Refiller of kind.
func answersSecret(c *gin.Context, secret, kind string, args ...string) {
	c.Set(secretAnswerKey, secretAnswer{secret: secret, refill: idempotency.Refill{Kind: kind, Args: args, Sum: idempotency.SecretSum(secret)}})
}

// withoutIdempotencyKey marks a POST route that takes no Idempotency-Key:
// a streamed upload that the middleware cannot fingerprint without reading
// it all, and that is idempotent by nature. The header is ignored there.
func (p *Public) withoutIdempotencyKey(route string) {
	if p.noKey == nil {
		p.noKey = map[string]bool{}
	}
	p.noKey[route] = true
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Writes returns the middleware of the /public/v1 group.
func (p *Public) Writes() gin.HandlerFunc {
	return func(c *gin.Context) {
		if !isWrite(c.Request.Method) {
			c.Next()
			return
		}
		if p.WriteTimeout > 0 {
			// A copy of the request: the server's own keeps its body (net/http
			// looks at its type to decide what to do with unread bytes).
			clock := startWriteClock(c.Request.Context(), p.WriteTimeout)
			defer clock.stop()
			req := c.Request.WithContext(clock.ctx)
			if req.Body != nil && req.Body != http.NoBody {
				req.Body = &clockedBody{ReadCloser: req.Body, w: clock}
			}
			c.Request = req
		} else {
			c.Request = c.Request.WithContext(context.WithoutCancel(c.Request.Context()))
		}
		if c.Request.Method == http.MethodPost && p.Idempotency != nil && !p.noKey[c.FullPath()] {
			if keys, present := c.Request.Header[headerIdempotencyKey]; present {
				p.idempotent(c, keys)
				return
			}
		}
		c.Next()
	}
}

// writeClock ends a write's context once the handler has spent d without
// waiting for the request body.
type writeClock struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	d      time.Duration

	mu      sync.Mutex
	timer   *time.Timer
	last    time.Time // end of the last read of the body (or the start)
	reading int       // reads of the body under way
	stopped bool
}

func startWriteClock(parent context.Context, d time.Duration) *writeClock {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	w := &writeClock{ctx: ctx, cancel: cancel, d: d, last: time.Now()}
	w.mu.Lock()
	w.timer = time.AfterFunc(d, w.check)
	w.mu.Unlock()
	return w
}

func (w *writeClock) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if w.reading > 0 {
		w.timer.Reset(w.d) // waiting for the client: its time does not count
		return
	}
	if since := time.Since(w.last); since < w.d {
		w.timer.Reset(w.d - since)
		return
	}
	w.cancel(ErrWriteDeadline)
}

func (w *writeClock) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel(context.Canceled)
}

type clockedBody struct {
	io.ReadCloser
	w *writeClock
}

func (b *clockedBody) Read(p []byte) (int, error) {
	b.w.mu.Lock()
	b.w.reading++
	b.w.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	b.w.mu.Lock()
	b.w.reading--
	b.w.last = time.Now()
	b.w.mu.Unlock()
	return n, err
}

// writeDeadlinePassed reports whether c's write context ended at its deadline.
func writeDeadlinePassed(c *gin.Context) bool {
	return errors.Is(context.Cause(c.Request.Context()), ErrWriteDeadline)
}

// idempotent runs a POST that carries an Idempotency-Key.
func (p *Public) idempotent(c *gin.Context, keys []string) {
	st := p.style(c)
	if len(keys) != 1 {
		st.invalidHeader(c, headerIdempotencyKey, validation.ValueError, "give one Idempotency-Key header, not "+strconv.Itoa(len(keys)))
		return
	}
	key := keys[0]
	if why := idempotency.CheckKey(key); why != "" {
		typ := validation.ValueError
		switch {
		case key == "":
			typ = validation.TooShort
		case len(key) > idempotency.MaxKeyLen:
			typ = validation.TooLong
		}
		st.invalidHeader(c, headerIdempotencyKey, typ, "Idempotency-Key "+why)
		return
	}
	body, ok := p.bufferBody(c)
	if !ok {
		c.Next() // too large or unreadable: the handler answers, and creates nothing
		return
	}
	ctx := c.Request.Context()
	mp := Marketplace(c).ID
	fp := idempotency.Fingerprint(c.Request.Method, c.Request.URL.EscapedPath(), c.Request.URL.Query().Encode(), body)
	// A healthy Redis answers in a millisecond: a second at most, so that
	// one out of reach is a quick 503 and leaves the write its time.
	bctx, cancel := context.WithTimeout(ctx, time.Second)
	begun, err := p.Idempotency.Begin(bctx, mp, key, fp)
	cancel()
	if err != nil {
		p.Log.WarnContext(c, "idempotency keys unavailable", "path", c.Request.URL.Path, "err", err)
		setRetryAfter(c, p.RetryAfter)
		st.abort(c, http.StatusServiceUnavailable, "service_unavailable", "the Idempotency-Key cannot be checked right now, so the request was not run; retry later")
		return
	}
	switch begun.Outcome {
	case idempotency.Replay:
		p.replay(c, begun.Result)
		return
	case idempotency.InProgress:
		// Retry-After: when the first request's claim ends, it having
		// finished (its result kept) or died with its process (the key
		// free again).
		setRetryAfterCeil(c, begun.RetryAfter)
		st.abort(c, http.StatusConflict, "idempotency_key_in_progress", "a request with this Idempotency-Key is in progress, or stopped without an answer; retry after Retry-After seconds to get its result (or to run it, if it never finished)")
		return
	case idempotency.Full:
		setRetryAfter(c, begun.RetryAfter)
		st.abort(c, http.StatusTooManyRequests, "too_many_requests", "this marketplace keeps as many results of requests with an Idempotency-Key as it may (the oldest expire 24 h after their request), so the request was not run; retry after Retry-After")
		return
	case idempotency.Mismatch:
		st.abort(c, http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used for a different request (method, path or body) in the last 24 h; use a new key for a new request")
		return
	}
	claim := begun.Claim
	c.Request = c.Request.WithContext(idempotency.WithRequest(ctx, mp, key, fp, claim.Seed))
	real := c.Writer
	rec := &recorder{ResponseWriter: real, status: http.StatusOK}
	c.Writer = rec
	defer func() { c.Writer = real }()
	c.Next()
	c.Writer = real

	// Kept: every answer the handler gave but a 5xx and a 429 (the request
	// did not run, or may not have: a retry must run it again, and derives
	// the same ids).
	keep := rec.status < 500 && rec.status != http.StatusTooManyRequests && rec.body.Len() <= idempotency.MaxResultBytes
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	var res idempotency.Result
	if keep {
		res = idempotency.Result{Status: rec.status, Header: keptHeader(real.Header()), Body: rec.body.Bytes()}
		// An answer that shows a secret is kept without it: the
		// secret lives in the entities log only.
		if v, ok := c.Get(secretAnswerKey); ok {
			sa := v.(secretAnswer)
			kept, at, found := idempotency.Seal(res.Body, sa.secret)
			switch _, known := p.refills[sa.refill.Kind]; {
			case !known:
				keep = false // never keep a secret
			case found:
				r := sa.refill
				r.At = at
				res.Body, res.Refill = kept, &r
			}
		}
	}
	if keep {
		if err := p.Idempotency.Complete(ectx, claim, res); err != nil {
			p.Log.WarnContext(c, "idempotent result not kept; a retry runs the request again", "path", c.Request.URL.Path, "err", err)
		}
		rec.flush(real)
		return
	}
	rec.flush(real)
	if err := p.Idempotency.Release(ectx, claim); err != nil {
		p.Log.WarnContext(c, "idempotency key not released; it is free again once its claim runs out", "path", c.Request.URL.Path, "err", err)
	}
}

// bufferBody reads the request body into memory (up to MaxBodyBytes) and
// puts it back for the handler. ok is false when it is larger or could not
// be read: the body the handler then reads is the same as the client's.
func (p *Public) bufferBody(c *gin.Context) ([]byte, bool) {
	r := c.Request
	if r.ContentLength > p.MaxBodyBytes {
		return nil, false
	}
	orig := r.Body
	if orig == nil {
		return nil, true
	}
	body, err := io.ReadAll(io.LimitReader(orig, p.MaxBodyBytes+1))
	if err != nil || int64(len(body)) > p.MaxBodyBytes {
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), errReader{err}, orig), orig}
		return nil, false
	}
	r.Body = readCloser{bytes.NewReader(body), orig}
	return body, true
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errReader returns err (when not nil) once the bytes before it were read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// keptHeader is what of a response's header is replayed: not the headers
// of the moment (rate limits, dates, lengths).
func keptHeader(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		switch {
		case strings.HasPrefix(k, "X-Ratelimit-"), k == "Retry-After", k == "Date", k == "Content-Length", k == headerReplayed:
			continue
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

func (p *Public) replay(c *gin.Context, r *idempotency.Result) {
	if r.Refill != nil {
		fn := p.refills[r.Refill.Kind]
		if fn == nil {
			p.Fail(c, fmt.Errorf("idempotency: no refiller of kind %q", r.Refill.Kind))
			return
		}
		secret, err := fn(c, r.Refill.Args, r.Refill.Sum)
		if err != nil {
			p.Fail(c, err)
			return
		}
		body, err := idempotency.Unseal(r.Body, r.Refill.At, secret)
		if err != nil {
			p.Fail(c, err)
			return
		}
		r.Body = body
	}
	h := c.Writer.Header()
	for k, v := range r.Header {
		h[k] = v
	}
	h.Set(headerReplayed, "true")
	c.Status(r.Status)
	if len(r.Body) > 0 {
		_, _ = c.Writer.Write(r.Body)
	}
	c.Abort()
}

func setRetryAfter(c *gin.Context, d time.Duration) {
	c.Header("Retry-After", strconv.Itoa(max(int(d.Round(time.Second)/time.Second), 1)))
}

// setRetryAfterCeil is setRetryAfter rounded up: a retry after it comes
// after d.
func setRetryAfterCeil(c *gin.Context, d time.Duration) {
	setRetryAfter(c, (d + time.Second - 1).Truncate(time.Second))
}

// recorder holds a handler's response until its result is kept.
type recorder struct {
	gin.ResponseWriter
	status  int
	written bool
	body    bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if code > 0 && !r.written {
		r.status = code
	}
}

func (r *recorder) WriteHeaderNow() { r.written = true }

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	return r.body.Write(b)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.written = true
	return r.body.WriteString(s)
}

func (r *recorder) Status() int { return r.status }

func (r *recorder) Size() int {
	if !r.written {
		return -1
	}
	return r.body.Len()
}

func (r *recorder) Written() bool { return r.written }

func (r *recorder) Flush() {}

// flush writes the held response.
func (r *recorder) flush(w gin.ResponseWriter) {
	w.WriteHeader(r.status)
	if r.body.Len() > 0 {
		_, _ = w.Write(r.body.Bytes())
		return
	}
	w.WriteHeaderNow()
}
