package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/endcap/endcap/api/openapi"
	"github.com/endcap/endcap/api/openapi/openapitest"
	"github.com/endcap/endcap/management/webhooks"
)

// TestDocumentIsOpenAPI31: the document loads and validates with
// kin-openapi as OpenAPI 3.1 (its schemas with the JSON Schema 2020-12
// rules of 3.1, its examples against their schemas).
func TestDocumentIsOpenAPI31(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableMultiError(), openapi3.EnableExamplesValidation(),
		openapi3.EnableSchemaDefaultsValidation(), openapi3.EnableSchemaPatternValidation()); err != nil {
		t.Fatal(err)
	}
}

// metaSchema is the official JSON Schema of OpenAPI 3.1 documents
// (https://spec.openapis.org/oas/3.1/schema/2022-10-07), as libopenapi
// ships it.
func metaSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	const id = "https://spec.openapis.org/oas/3.1/schema/2022-10-07"
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(datamodel.OpenAPI31SchemaData))
	if err != nil {
		t.Fatal(err)
	}
	if got := meta.(map[string]any)["$id"]; got != id {
		t.Fatalf("libopenapi's OpenAPI 3.1 schema is %v, want %s", got, id)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, meta); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDocumentMatchesTheMetaSchema: the document is valid against the
// official OpenAPI 3.1 schema. kin-openapi checks most of what it says and
// more (schemas, references, path parameters), but not all of it: it
// accepts a response keyed by a status that is not one ("2000"), which the
// meta-schema refuses; this check covers such structure.
func TestDocumentMatchesTheMetaSchema(t *testing.T) {
	s := metaSchema(t)
	d, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.JSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatal(err)
	}
	// The check fails a document that breaks the structure.
	bad := bytes.Replace(d.JSON, []byte(`"responses":{"200":`), []byte(`"responses":{"2000":`), 1)
	if bytes.Equal(bad, d.JSON) {
		t.Fatal("no response to break")
	}
	v, err = jsonschema.UnmarshalJSON(bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err == nil {
		t.Error("the meta-schema accepts a response keyed 2000")
	}
}

// TestDocumentRules: what every operation of this API documents, beyond
// what OpenAPI requires.
func TestDocumentRules(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := openapi.JSON()
	if bytes.Contains(d.JSON, []byte(`"nullable"`)) {
		t.Error(`"nullable" is OpenAPI 3.0: in 3.1 write type: [T, "null"]`)
	}
	// kin-openapi does not check a schema's own examples (3.1 "examples").
	for name, s := range doc.Components.Schemas {
		for i, ex := range s.Value.Examples {
			if err := s.Value.VisitJSON(ex, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("schema %s: example %d: %v", name, i, err)
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			secured := op.Security == nil || len(*op.Security) > 0
			public := strings.HasPrefix(path, "/public/v1/")
			limited := public && path != "/public/v1/marketplace"
			if op.OperationID == "" || len(op.Tags) == 0 || op.Summary == "" {
				t.Errorf("%s: operationId, tags and summary are required", where)
			}
			want := []string{"500"}
			if path != "/metrics" && path != "/openapi.json" && path != "/livez" && path != "/readyz" && method != "OPTIONS" {
				want = append(want, "400")
			}
			if secured {
				want = append(want, "401", "503")
			}
			if public {
				want = append(want, "403")
			}
			if limited {
				want = append(want, "429")
			}
			if method == "OPTIONS" {
				want = []string{"204"}
			}
			for _, code := range want {
				if op.Responses.Value(code) == nil {
					t.Errorf("%s: no %s response", where, code)
				}
			}
			for code, r := range op.Responses.Map() {
				if code >= "400" && r.Value.Content.Get("application/json") == nil {
					t.Errorf("%s: the %s response has no JSON body", where, code)
				}
			}
			if public && method == "POST" && !strings.HasSuffix(path, "/upload") && !takes(op, "Idempotency-Key") {
				t.Errorf("%s: a POST of /public/v1 takes an Idempotency-Key", where)
			}
		}
	}
}

// TestWebhooksDescribed: every event type a webhook can receive is an
// operation of the document's webhooks, with its body and the signature's
// headers.
func TestWebhooksDescribed(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	types := append(slices.Clone(webhooks.EventTypes), webhooks.TypeTest)
	if len(doc.Webhooks) != len(types) {
		t.Errorf("%d webhooks described for %d event types", len(doc.Webhooks), len(types))
	}
	for _, typ := range types {
		item := doc.Webhooks[typ]
		if item == nil || item.Post == nil {
			t.Errorf("event type %s: no webhook operation", typ)
			continue
		}
		op := item.Post
		if op.OperationID == "" || len(op.Tags) == 0 || op.Summary == "" || op.RequestBody == nil {
			t.Errorf("%s: operationId, tags, summary and a body are required", typ)
		}
		for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
			if !takes(op, h) {
				t.Errorf("%s: no %s header", typ, h)
			}
		}
	}
}

func takes(op *openapi3.Operation, header string) bool {
	for _, p := range op.Parameters {
		if p.Value.In == "header" && p.Value.Name == header {
			return true
		}
	}
	return false
}

// TestConvert: the served JSON is the YAML with its anchors expanded, and
// a broken YAML is an error, not a document.
func TestConvert(t *testing.T) {
	d, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(d.JSON, &v); err != nil {
		t.Fatal(err)
	}
	if v["openapi"] != "3.1.0" || bytes.Contains(d.JSON, []byte("*rateLimitHeaders")) {
		t.Fatalf("the JSON form is not the document: %.200s", d.JSON)
	}
	if len(d.ETag) != 34 || d.ETag[0] != '"' {
		t.Errorf("ETag %s", d.ETag)
	}
	y, err := openapi.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := openapi.Convert(y)
	if !bytes.Equal(again.JSON, d.JSON) || again.ETag != d.ETag {
		t.Error("the conversion is not stable")
	}
	if _, err := openapi.Convert([]byte("openapi: [3.1\n")); err == nil {
		t.Error("a broken YAML converted")
	}
}
