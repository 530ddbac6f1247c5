package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/storage/statelog"
)

// RouteSet installs one area's /public/v1 routes. Route sets live in this
// package (one file per area) and are composed by the app.
type RouteSet func(g *gin.RouterGroup, p *Public)

// Public is what route sets share: rate limits, cursors, limits, logging,
// the deadline of writes and idempotency keys (writes.go).
type Public struct {
	Limits       *RateLimiter
	Cursors      *pagination.Signer
	MaxBodyBytes int64
	RetryAfter   time.Duration
	Log          *slog.Logger
	// WriteTimeout bounds every write (0: unbounded).
	WriteTimeout time.Duration
	// Idempotency keeps the results of POSTs with an Idempotency-Key (nil:
	// the header is ignored).
	Idempotency *idempotency.Store

	styles  map[string]errorStyle // by route prefix
	noKey   map[string]bool       // POST routes without Idempotency-Key
	refills map[string]Refiller   // by idempotency.Refill kind
	// vendorRoutes are the routes a vendor-scoped key may call.
	vendorRoutes map[string]bool
}

// Marketplace is the marketplace of the authenticated key.
func Marketplace(c *gin.Context) accounts.Marketplace { return principal(c).Marketplace }

// VendorScope is the vendor (catalog id) a vendor-scoped key is bound to,
// or "" for a key of the whole marketplace.
func VendorScope(c *gin.Context) string { return principal(c).Key.VendorID }

// allowVendorKeys lets vendor-scoped keys call route (a route pattern, as
// gin's FullPath). Its handler must narrow what it answers to VendorScope.
func (p *Public) allowVendorKeys(route string) {
	if p.vendorRoutes == nil {
		p.vendorRoutes = map[string]bool{}
	}
	p.vendorRoutes[route] = true
}

// vendorKeys refuses a vendor-scoped key (403 vendor_scoped_key) on every
// /public/v1 route that did not allow it: such a key reads its vendor's
// reports and nothing of the marketplace.
func vendorKeys(p *Public) gin.HandlerFunc {
	return func(c *gin.Context) {
		if VendorScope(c) != "" && (p == nil || !p.vendorRoutes[c.FullPath()]) {
			abortAuth(c, http.StatusForbidden, "vendor_scoped_key", "this API key is scoped to a vendor: it reads that vendor's reports (/public/v1/reporting-service/vendors, campaigns, products, interactions) only")
			return
		}
		c.Next()
	}
}

func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// ParseLimit parses "N/duration" (e.g. "10/1s", "45/2s").
func ParseLimit(s string) (redis_rate.Limit, error) {
	n, per, ok := strings.Cut(s, "/")
	rate, err := strconv.Atoi(n)
	if !ok || err != nil || rate < 1 {
		return redis_rate.Limit{}, errors.New("rate limit must look like 10/1s")
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return redis_rate.Limit{}, errors.New("rate limit must look like 10/1s")
	}
	return redis_rate.Limit{Rate: rate, Burst: rate, Period: d}, nil
}

// detail is the spec's 422 body.
type detail struct {
	Detail validation.Errors `json:"detail"`
}

func abort422(c *gin.Context, errs validation.Errors) {
	c.AbortWithStatusJSON(http.StatusUnprocessableEntity, detail{Detail: errs})
}

// Messages of a 503 whose write may have been applied.
const (
	msgWriteTimedOut    = "the write did not complete in time: it may or may not have been applied; retry it (a POST with the same Idempotency-Key)"
	msgWriteUnconfirmed = "the write was not confirmed: it may or may not have been applied; retry it (a POST with the same Idempotency-Key)"
)

// Fail answers a domain error: the one place where the error vocabulary
// (internal/errkind) becomes HTTP statuses and error bodies (docs/reference/errors.md).
// Field errors are the spec's 422; a write whose deadline passed says it may
// have been applied; an error the vocabulary does not name is logged and
// answered 500 without its text.
func (p *Public) Fail(c *gin.Context, err error) {
	if v, ok := validation.As(err); ok {
		abort422(c, v)
		return
	}
	timedOut := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case writeDeadlinePassed(c) && (timedOut || errkind.KindOf(err) == errkind.Unavailable):
		abortUnavailable(c, p.RetryAfter, msgWriteTimedOut)
		return
	case errors.Is(err, statelog.ErrInFlight):
		abortUnavailable(c, p.RetryAfter, msgWriteUnconfirmed)
		return
	case timedOut:
		err = statelog.ErrUnavailable
	}
	e, ok := errkind.Of(err)
	if !ok {
		p.Log.ErrorContext(c, "request failed", "path", c.Request.URL.Path, "err", err)
		abortV2(c, http.StatusInternalServerError, "internal_server_error", "internal server error")
		return
	}
	status, code := httpStatus(e.Kind)
	if e.Code != "" {
		code = e.Code
	}
	switch e.Kind {
	case errkind.Unavailable:
		if err != e {
			p.Log.WarnContext(c, "request failed: a dependency is unavailable", "path", c.Request.URL.Path, "err", err)
		}
		abortUnavailable(c, p.RetryAfter, e.Msg)
	case errkind.NotFound:
		abortV2(c, status, code, err.Error())
	case errkind.TooMany:
		if e.RetryAfter > 0 {
			setRetryAfter(c, e.RetryAfter)
		}
		abortV2(c, status, code, e.Msg)
	default:
		abortV2(c, status, code, e.Msg)
	}
}

// httpStatus is the status and errCode of each kind of the error
// vocabulary.
func httpStatus(k errkind.Kind) (int, string) {
	switch k {
	case errkind.Invalid:
		return http.StatusBadRequest, "bad_request"
	case errkind.NotFound:
		return http.StatusNotFound, "resource_not_found"
	case errkind.Conflict:
		return http.StatusConflict, "invalid_operation"
	case errkind.Unavailable:
		return http.StatusServiceUnavailable, "service_unavailable"
	case errkind.Forbidden:
		return http.StatusForbidden, "forbidden"
	case errkind.TooMany:
		return http.StatusTooManyRequests, "too_many_requests"
	}
	return http.StatusInternalServerError, "internal_server_error"
}

// BindJSON reads and decodes the JSON body into v. It answers 413 or 422
// itself and returns false when the body is too large, missing, not JSON, or
// of the wrong types.
func (p *Public) BindJSON(c *gin.Context, v any) bool {
	body, ok := readBody(c, p.MaxBodyBytes)
	if !ok {
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		abort422(c, validation.New(validation.Missing, "Field required", "body"))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		abort422(c, jsonErrors(err))
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		abort422(c, validation.New("json_invalid", "JSON decode error: unexpected data after the body", "body"))
		return false
	}
	return bodyText(c, body)
}

// bodyText answers 422 and returns false when a string of body, a JSON text
// that decoded, breaks the text rule (invalid UTF-8, an unpaired surrogate
// escape, NUL: jsontext.StringProblem), which encoding/json lets through as
// U+FFFD or NUL: in every string of the body, keys included, naming the
// first one. A valid body costs one pass over its bytes.
func bodyText(c *gin.Context, body []byte) bool {
	if jsontext.TextOK(body) {
		return true
	}
	bad, found := jsontext.FindBadString(body)
	if !found { // not expected: TextOK and FindBadString agree on a decoded body
		abort422(c, validation.New(stringUnicode, "Strings must be valid UTF-8 without unpaired surrogates or NUL", "body"))
		return false
	}
	typ := stringUnicode
	if bad.Problem == jsontext.NULCharacter {
		typ = validation.ValueError
	}
	msg := "String " + bad.Problem.Rule()
	if bad.Key {
		msg = "Object keys " + bad.Problem.Rule()
	}
	abort422(c, validation.Errors{{Loc: append([]any{"body"}, bad.Path...), Msg: msg, Type: typ}})
	return false
}

// stringUnicode is the error type of a string that is not Unicode text
// (pydantic's name for it).
const stringUnicode = "string_unicode"

func jsonErrors(err error) validation.Errors {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		loc := []any{"body"}
		if te.Field != "" {
			for _, f := range strings.Split(te.Field, ".") {
				loc = append(loc, f)
			}
		}
		return validation.Errors{{Loc: loc, Msg: "Input should be a valid " + jsonKind(te.Type.Kind().String()), Type: validation.TypeError}}
	case errors.As(err, &se):
		return validation.New("json_invalid", "JSON decode error: "+se.Error()+" at byte "+strconv.FormatInt(se.Offset, 10), "body")
	}
	return validation.New("json_invalid", "JSON decode error: "+err.Error(), "body")
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "integer"
	case strings.HasPrefix(k, "float"):
		return "number"
	case k == "slice", k == "array":
		return "list"
	case k == "map", k == "struct":
		return "object"
	case k == "bool":
		return "boolean"
	}
	return k
}

// PageQuery reads the list query parameters: next_page (a cursor of this
// list) and limit (default def, 1..max). It answers 422 itself and returns
// ok=false when they are invalid.
func (p *Public) PageQuery(c *gin.Context, list, scope string, def, maxLimit int) (after string, limit int, ok bool) {
	after, limit, errs := p.pageQuery(c, list, scope, def, maxLimit, true)
	if len(errs) > 0 {
		abort422(c, errs)
		return "", 0, false
	}
	return after, limit, true
}

// pageQuery is PageQuery returning its errors; with cursor false it reads
// only the limit (the list's scope is not known: its filters are invalid).
func (p *Public) pageQuery(c *gin.Context, list, scope string, def, maxLimit int, cursor bool) (after string, limit int, errs validation.Errors) {
	s, present := c.GetQuery("limit")
	limit = validation.QueryLimit(&errs, s, present, def, maxLimit)
	if tok := c.Query("next_page"); tok != "" && cursor {
		cur, err := p.Cursors.Decode(tok, list, Marketplace(c).ID, scope)
		if err != nil {
			errs.Add("value_error", "next_page is not a cursor issued by this service for this list", "query", "next_page")
		}
		after = cur.After
	}
	return after, limit, errs
}

// NextPage returns the cursor that continues a list after id, or nil.
func (p *Public) NextPage(c *gin.Context, list, scope, lastID string, more bool) *string {
	if !more {
		return nil
	}
	s := p.Cursors.Encode(pagination.Cursor{List: list, Marketplace: Marketplace(c).ID, Scope: scope, After: lastID})
	return &s
}

// setETag sets the ETag of a single-entity response: the quoted version.
func setETag(c *gin.Context, version int64) {
	c.Header("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

// ifMatch is the request's If-Match as every write takes it
// (statelog.ParseIfMatch): MatchAny without one, MatchNone when it names
// no version.
func ifMatch(c *gin.Context) statelog.IfMatch { return statelog.ParseIfMatch(c.GetHeader("If-Match")) }
