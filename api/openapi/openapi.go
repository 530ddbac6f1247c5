// Package openapi holds the description of Endcap's HTTP API: openapi.yaml,
// an OpenAPI 3.1 document kept by hand as the source of truth
// (docs/reference/openapi.md), embedded in the binary and served as JSON at
// GET /openapi.json.
package openapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/goccy/go-yaml"
)

//go:embed openapi.yaml
var source []byte

// YAML is the document as written.
func YAML() []byte { return source }

// Document is the document as served.
type Document struct {
	JSON []byte // compact JSON, the YAML's anchors expanded
	ETag string // strong ETag: a quoted hash of JSON
}

var document = sync.OnceValues(func() (Document, error) { return Convert(source) })

// JSON returns the embedded document as JSON, converted once.
func JSON() (Document, error) { return document() }

// Convert turns a YAML document into its compact JSON form and ETag.
func Convert(yml []byte) (Document, error) {
	j, err := yaml.YAMLToJSON(yml)
	if err != nil {
		return Document{}, fmt.Errorf("openapi.yaml: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, j); err != nil {
		return Document{}, fmt.Errorf("openapi.yaml as JSON: %w", err)
	}
	sum := sha256.Sum256(out.Bytes())
	return Document{JSON: out.Bytes(), ETag: `"` + hex.EncodeToString(sum[:16]) + `"`}, nil
}
