// Package openapitest checks HTTP exchanges against the API's OpenAPI
// document (api/openapi) with kin-openapi: for the tests of the router, the
// e2e golden files and the e2e tests that validate live answers. It is never
// linked into the server.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/endcap/endcap/api/openapi"
)

// Load returns the embedded document, loaded and validated by kin-openapi.
func Load() (*openapi3.T, error) {
	d, err := openapi.JSON()
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(d.JSON)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	return doc, nil
}

var param = regexp.MustCompile(`\{[^}]*\}`)

// Operations returns the document's operations as "METHOD /path", each path
// parameter written {} (so that they compare with the router's whatever
// their names).
func Operations(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+param.ReplaceAllString(path, "{}"))
		}
	}
	sort.Strings(out)
	return out
}

var ginParam = regexp.MustCompile(`[:*][^/]+`)

// RoutePattern writes a Gin route path (":id", "*rest") as Operations does.
func RoutePattern(ginPath string) string { return ginParam.ReplaceAllString(ginPath, "{}") }

// Exchange is one request and its answer.
type Exchange struct {
	Method string
	Path   string // with the query
	// RequestHeader and RequestBody: nil RequestBody means the body was
	// not recorded, and only the request line is checked.
	RequestHeader http.Header
	RequestBody   []byte
	Status        int
	Header        http.Header
	Body          []byte
}

// Validator checks exchanges against the document.
type Validator struct {
	Doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options
}

// uuidFormat asserts `format: uuid` (kin-openapi leaves it an annotation):
// UUIDs of RFC 9562, the v7 the service generates included.
var uuidFormat = openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)

// NewValidator loads the document and makes its router.
func NewValidator() (*Validator, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Validator{Doc: doc, router: r, opts: &openapi3filter.Options{
		// The key is the server's business: the exchange is checked for
		// its shape, whatever key it carried.
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.WithStringFormatValidator("uuid", uuidFormat),
		},
	}}, nil
}

// ErrNoOperation is the cause of an exchange whose request no operation of
// the document describes; its answer was then checked as the router's 404
// or 405.
var ErrNoOperation = errors.New("no operation of the document")

// Validate checks an exchange. request is the problem of the request (nil
// when it conforms, or when no operation describes it: see ErrNoOperation),
// response the problem of the answer. A request that no operation
// describes must have been answered 404 resource_not_found (no such path)
// or 405 method_not_allowed (no such method), in the body of the /v2
// errors.
func (v *Validator) Validate(ctx context.Context, ex Exchange) (request, response error) {
	req := httptest.NewRequest(ex.Method, ex.Path, bytes.NewReader(ex.RequestBody))
	for k, vs := range ex.RequestHeader {
		req.Header[k] = vs
	}
	route, params, err := v.router.FindRoute(req)
	switch {
	case sameRouteError(err, routers.ErrPathNotFound):
		return fmt.Errorf("%s %s: %w", ex.Method, ex.Path, ErrNoOperation), v.unrouted(ex, http.StatusNotFound, "resource_not_found")
	case sameRouteError(err, routers.ErrMethodNotAllowed):
		return fmt.Errorf("%s %s: %w", ex.Method, ex.Path, ErrNoOperation), v.unrouted(ex, http.StatusMethodNotAllowed, "method_not_allowed")
	case err != nil:
		return err, fmt.Errorf("%s %s: %w", ex.Method, ex.Path, err)
	}
	opts := *v.opts
	opts.ExcludeRequestBody = ex.RequestBody == nil
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: &opts}
	request = openapi3filter.ValidateRequest(ctx, in)
	header := ex.Header
	if header == nil {
		header = http.Header{}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: ex.Status, Header: header,
		Body: io.NopCloser(bytes.NewReader(ex.Body)), Options: &opts,
	}
	return request, openapi3filter.ValidateResponse(ctx, out)
}

// ValidateWebhook checks a request Endcap sent to a webhook (its headers
// and body) against the operation of its event type in the document's
// webhooks.
func (v *Validator) ValidateWebhook(ctx context.Context, header http.Header, body []byte) error {
	var env struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("webhook body: %w", err)
	}
	item := v.Doc.Webhooks[env.Type]
	if item == nil || item.Post == nil {
		return fmt.Errorf("webhook event type %q: no operation in the document's webhooks", env.Type)
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header = header.Clone()
	route := &routers.Route{Spec: v.Doc, Path: "/", PathItem: item, Method: http.MethodPost, Operation: item.Post}
	return openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{Request: req, Route: route, Options: v.opts})
}

// sameRouteError reports whether err is the router error target (the
// router returns copies of its sentinel errors, which errors.Is misses).
func sameRouteError(err, target error) bool {
	var re *routers.RouteError
	return errors.As(err, &re) && re.Reason == target.(*routers.RouteError).Reason
}

// unrouted checks the answer to a request no operation describes.
func (v *Validator) unrouted(ex Exchange, status int, code string) error {
	if ex.Status != status {
		return fmt.Errorf("no operation of the document describes %s %s, so the answer must be %d, not %d", ex.Method, ex.Path, status, ex.Status)
	}
	var body struct {
		ErrCode string `json:"errCode"`
	}
	if err := json.Unmarshal(ex.Body, &body); err != nil {
		return fmt.Errorf("%d body: %w", status, err)
	}
	if body.ErrCode != code {
		return fmt.Errorf("%d errCode %q, want %q", status, body.ErrCode, code)
	}
	var value any
	if err := json.Unmarshal(ex.Body, &value); err != nil {
		return err
	}
	schema := v.Doc.Components.Schemas["V2Error"].Value
	return schema.VisitJSON(value, openapi3.EnableJSONSchema2020())
}

// Pretty shortens kin-openapi's multi-line errors (which quote the whole
// schema) to their first line of each problem.
func Pretty(err error) string {
	if err == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(l, "Schema:") {
			break
		}
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ")
}
