package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/management/accounts"
)

// normalizePath makes the paths real clients send routable without a
// redirect: duplicate slashes are folded (`//v2/events`), a path prefix in
// front of /v2 is dropped (`/prefix/v2/events`), and a trailing slash is
// removed.
func normalizePath(p string) string {
	if strings.Contains(p, "//") {
		var b strings.Builder
		b.Grow(len(p))
		prev := byte(0)
		for i := 0; i < len(p); i++ {
			if p[i] == '/' && prev == '/' {
				continue
			}
			prev = p[i]
			b.WriteByte(p[i])
		}
		p = b.String()
	}
	if !strings.HasPrefix(p, "/v2/") && p != "/v2" {
		if i := strings.Index(p, "/v2/"); i > 0 && !strings.HasPrefix(p, "/public/") {
			p = p[i:]
		}
	}
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		p = strings.TrimRight(p, "/")
		if p == "" {
			p = "/"
		}
	}
	return p
}

type normalizer struct{ next *gin.Engine }

// Routes lists the routes of the handler: the OpenAPI document's tests
// compare them with the paths it describes.
func (n normalizer) Routes() gin.RoutesInfo { return n.next.Routes() }

// ServeHTTP normalises the escaped path, so that an id holding an escaped
// slash (`/products/a%2Fb`) stays one path segment.
func (n normalizer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	esc := r.URL.EscapedPath()
	if np := normalizePath(esc); np != esc {
		if p, err := url.PathUnescape(np); err == nil {
			r.URL.Path, r.URL.RawPath = p, np
		}
	}
	n.next.ServeHTTP(w, r)
}

// pathText refuses a path that is not UTF-8 text or holds NUL (the path's
// ids follow the text rule of bodies: docs/reference/errors.md): decoded, two such ids
// could become one, and no entity can have such an id.
func pathText(c *gin.Context) {
	if p := c.Request.URL.Path; !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 {
		abortV2(c, http.StatusBadRequest, "bad_request", "the request path must be UTF-8 text without NUL characters (check the percent-encoding of its ids)")
		return
	}
	c.Next()
}

// securityHeaders marks every answer, errors, 404s and 405s included, as
// not to be content-sniffed (a JSON error that echoes input must never be
// run as HTML) nor stored by a browser or proxy cache (answers hold
// tenant data and are made for one API key). Health and metrics answers
// get them too: they change from one second to the next.
func securityHeaders(c *gin.Context) {
	setSecurityHeaders(c.Writer.Header())
	c.Next()
}

// The values are shared (no allocation per answer): a header's values
// are only ever replaced or appended to, never written in place.
var (
	hdrNosniff = []string{"nosniff"}
	hdrNoStore = []string{"no-store"}
)

func setSecurityHeaders(h http.Header) {
	h["X-Content-Type-Options"] = hdrNosniff
	h["Cache-Control"] = hdrNoStore
}

// cors answers preflights and marks responses of the /v2 routes as readable
// from any origin: they authenticate with a bearer key, never with cookies.
func cors(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", "Retry-After")
	if c.Request.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, X-UA")
		h.Set("Access-Control-Max-Age", "86400")
		c.AbortWithStatus(http.StatusNoContent)
		return
	}
	c.Next()
}

// requestID gives the request its id (docs/operations/operations.md, Logs): the
// caller's X-Request-Id when it is a plain token, else a new one; echoed in
// the response's X-Request-Id and carried by the request's context, so that
// every line logged about the request names it.
func requestID(c *gin.Context) {
	id := c.Request.Header.Get(telemetry.RequestIDHeader)
	if !telemetry.ValidRequestID(id) {
		id = telemetry.NewRequestID()
	}
	c.Writer.Header()[telemetry.RequestIDHeader] = []string{id}
	c.Request = c.Request.WithContext(telemetry.WithRequestID(c.Request.Context(), id))
	c.Next()
}

func observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	telemetry.HTTPRequests.WithLabelValues(route, c.Request.Method, statusText(c.Writer.Status())).Inc()
	telemetry.HTTPDuration.WithLabelValues(route, c.Request.Method).Observe(time.Since(start).Seconds())
}

// traceRequest makes the request's span (a child of the caller's
// traceparent, if any), named after its route, which the handler's work
// (the Kafka records it produces) descends from (docs/operations/operations.md,
// Traces). Installed only when traces are on.
func traceRequest(c *gin.Context) {
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	ctx := telemetry.TraceContext.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
	ctx, span := telemetry.StartSpan(ctx, "github.com/endcap/endcap/api", c.Request.Method+" "+route,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", c.Request.Method), attribute.String("http.route", route)))
	defer span.End()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
	code := c.Writer.Status()
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
}

func statusText(code int) string {
	switch {
	case code < 100 || code > 999:
		return "000"
	default:
		return string([]byte{byte('0' + code/100), byte('0' + code/10%10), byte('0' + code%10)})
	}
}

func recovery(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		log.ErrorContext(c, "panic while serving request", "path", c.Request.URL.Path, "panic", err)
		abortV2(c, http.StatusInternalServerError, "internal_server_error", "internal server error")
	})
}

const principalKey = "endcap.principal"

func bearer(c *gin.Context) (string, bool) {
	h := c.GetHeader("Authorization")
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// requireKey authenticates the request and checks the key's type. On /v2 a
// key of the wrong type is 401 (spec rule 5); on /public/v1 it is 403.
// Until the process has loaded every key (a start, a restart) it answers
// 503 with Retry-After, which clients retry, and never 401, which they do
// not: a key it has not read yet may well be valid, and one revoked
// further on in the log must not pass either.
//
// abort answers the 503 (the route's error shape; 401 and 403 have the
// authentication shape on every route).
func requireKey(acc *accounts.Service, want accounts.KeyType, retryAfter time.Duration, touch func(keyID string),
	abort func(c *gin.Context, status int, code, msg string)) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !acc.Ready() {
			setRetryAfter(c, retryAfter)
			abort(c, http.StatusServiceUnavailable, "service_unavailable", "the service is starting and has not loaded its API keys yet; retry after the Retry-After delay")
			return
		}
		token, ok := bearer(c)
		if !ok {
			abortAuth(c, http.StatusUnauthorized, "invalid_api_key", "missing or malformed Authorization header: expected `Bearer <API key>`")
			return
		}
		p, ok := acc.Authenticate(token)
		if !ok {
			abortAuth(c, http.StatusUnauthorized, "invalid_api_key", "the API key is invalid, revoked or expired")
			return
		}
		if p.Key.Type != want {
			if want == accounts.KeyMarketplace {
				abortAuth(c, http.StatusUnauthorized, "invalid_api_key", "an advanced API key cannot be used on /v2: use the marketplace API key")
			} else {
				abortAuth(c, http.StatusForbidden, "wrong_key_type", "this endpoint needs an advanced API key; a marketplace API key was given")
			}
			return
		}
		if touch != nil {
			touch(p.Key.ID)
		}
		c.Set(principalKey, p)
		c.Next()
	}
}

func principal(c *gin.Context) accounts.Principal {
	return c.MustGet(principalKey).(accounts.Principal)
}
