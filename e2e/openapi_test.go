package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/endcap/endcap/api/openapi/openapitest"
)

// TestOpenAPIGoldenFiles: every golden exchange of these tests (the request
// line, status, headers and body that golden records) conforms to the
// OpenAPI document (api/openapi). A golden request body
// (testdata/auctions/*/*.request.json) that succeeded conforms too, and one
// the server rejected is rejected by the document's schemas as well, unless
// its error is one of schemaCannotSay. A request that no operation
// describes must have been answered with the router's 404 or 405. It needs
// no server: it reads testdata.
func TestOpenAPIGoldenFiles(t *testing.T) {
	v, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "sdk": // the SDK's own files
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".request.json"):
			return nil
		}
		n++
		t.Run(strings.TrimPrefix(path, "testdata/"), func(t *testing.T) { checkGoldenExchange(t, v, path) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("only %d golden files found", n)
	}
}

func checkGoldenExchange(t *testing.T, v *openapitest.Validator, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var x goldenExchange
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil || x.Method == "" || x.Path == "" || x.Status == 0 {
		t.Fatalf("not a golden exchange {method, path, status, headers, body} (%v): write it with golden()", err)
	}
	ex := openapitest.Exchange{Method: x.Method, Path: x.Path, Status: x.Status, Header: http.Header{}, Body: x.Body}
	for k, val := range x.Headers {
		ex.Header.Set(k, val)
	}
	if req, ok := strings.CutSuffix(path, ".response.json"); ok {
		body, err := os.ReadFile(req + ".request.json")
		if err != nil {
			t.Fatal(err)
		}
		ex.RequestBody = expandAuctionBody(body)
		ex.RequestHeader = http.Header{"Content-Type": {"application/json"}}
	}
	reqErr, respErr := v.Validate(t.Context(), ex)
	if respErr != nil {
		t.Errorf("%s %s → %d: the answer does not conform to the document: %s", x.Method, x.Path, x.Status, openapitest.Pretty(respErr))
	}
	switch {
	case errors.Is(reqErr, openapitest.ErrNoOperation):
	case reqErr != nil && x.Status < 300:
		t.Errorf("%s %s: the request succeeded (%d) but does not conform to the document: %s", x.Method, x.Path, x.Status, openapitest.Pretty(reqErr))
	case reqErr == nil && x.Status >= 400 && ex.RequestBody != nil:
		var body struct{ ErrCode string }
		_ = json.Unmarshal(x.Body, &body)
		if schemaCannotSay[body.ErrCode] == "" {
			t.Errorf("%s %s: the server rejects this request (%d %s) but the document's schemas accept it: state the rule in the schema, or add the code to schemaCannotSay with the reason", x.Method, x.Path, x.Status, body.ErrCode)
		}
	}
}

// schemaCannotSay are the errors of golden requests that the document's
// schemas accept, each with the reason: its rule is not one a JSON Schema
// states (it is in the operation's description).
var schemaCannotSay = map[string]string{
	"invalid_api_key":           "the key is wrong, not the body",
	"product_info_mismatch":     "arrays of the same length",
	"invalid_location_cell":     "a valid H3 cell (its digits encode a resolution and a base cell)",
	"invalid_travel_date_range": "a date after another",
}
