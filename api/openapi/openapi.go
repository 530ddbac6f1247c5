// Package openapi holds the description of Endcap's HTTP API, an OpenAPI
// 3.1 document kept by hand as the source of truth (docs/reference/openapi.md) and
// written in parts: openapi.yaml is the root (info, tags, the header sets,
// the webhooks, the shared components), and areas/<area>.yaml the paths
// and schemas of one area of the API (the campaign service, auctions...).
// The parts are bundled into one document when it is first loaded,
// embedded in the binary and served as JSON at GET /openapi.json.
package openapi

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
)

//go:embed openapi.yaml areas/*.yaml
var files embed.FS

// Part is a named part of the document (its file name, for errors).
type Part struct {
	Name string
	Text []byte
}

var bundled = sync.OnceValues(func() ([]byte, error) {
	root, err := files.ReadFile("openapi.yaml")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "areas/*.yaml")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	parts := make([]Part, 0, len(names))
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		parts = append(parts, Part{Name: n, Text: b})
	}
	return Bundle(root, parts)
})

// YAML is the document as written, its parts bundled into one YAML text.
func YAML() ([]byte, error) { return bundled() }

// Document is the document as served.
type Document struct {
	JSON []byte // compact JSON, the YAML's anchors expanded
	ETag string // strong ETag: a quoted hash of JSON
}

var document = sync.OnceValues(func() (Document, error) {
	y, err := YAML()
	if err != nil {
		return Document{}, err
	}
	return Convert(y)
})

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

// Bundle puts the parts into the root, as text, so that the parts may use
// the root's YAML anchors (the header sets). A part is written as the
// document is: top-level keys (paths, webhooks) at column 0, components'
// keys (schemas, parameters, responses, headers) at column 2 under
// `components:`, and their entries indented as in the root. Each block of a
// part goes in after the root's line of the same key, which the root must
// have. An entry (a path, a webhook, a component) named twice, in the root
// or in two parts, is an error: YAML would keep one silently.
func Bundle(root []byte, parts []Part) ([]byte, error) {
	rl := strings.Split(string(root), "\n")
	at := map[string]int{} // block key → index of its line in the root
	comp := false
	for i, l := range rl {
		switch {
		case isKey(l, 0):
			k := strings.TrimSuffix(strings.TrimSpace(l), ":")
			comp = k == "components"
			at[k] = i
		case comp && isKey(l, 2):
			at["components."+strings.TrimSuffix(strings.TrimSpace(l), ":")] = i
		}
	}
	ins := map[int][]string{} // root line index → lines to put after it
	for _, p := range parts {
		block, indent := "", 0
		for n, l := range strings.Split(strings.TrimRight(string(p.Text), "\n"), "\n") {
			t := strings.TrimSpace(l)
			switch {
			case isKey(l, 0) && t == "components:":
				block, indent = "components", 2
			case isKey(l, 0):
				block, indent = strings.TrimSuffix(t, ":"), 2
				if _, ok := at[block]; !ok {
					return nil, fmt.Errorf("%s:%d: the root has no %q to put this block in", p.Name, n+1, block)
				}
			case block == "components" || (strings.HasPrefix(block, "components.") && isKey(l, 2)):
				if !isKey(l, 2) {
					if t == "" || strings.HasPrefix(t, "#") {
						continue
					}
					return nil, fmt.Errorf("%s:%d: under components, a key of components (schemas: ...) at column 2", p.Name, n+1)
				}
				block, indent = "components."+strings.TrimSuffix(t, ":"), 4
				if _, ok := at[block]; !ok {
					return nil, fmt.Errorf("%s:%d: the root has no %q to put this block in", p.Name, n+1, block)
				}
			case block == "":
				if t == "" || strings.HasPrefix(t, "#") {
					continue // the part's heading comment
				}
				return nil, fmt.Errorf("%s:%d: a line before the first block (paths:, webhooks:, components:)", p.Name, n+1)
			default:
				if t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(l, strings.Repeat(" ", indent)) {
					return nil, fmt.Errorf("%s:%d: not indented under %s", p.Name, n+1, block)
				}
				ins[at[block]] = append(ins[at[block]], l)
			}
		}
	}
	var out strings.Builder
	for i, l := range rl {
		out.WriteString(l)
		if i < len(rl)-1 || len(ins[i]) > 0 {
			out.WriteByte('\n')
		}
		for _, x := range ins[i] {
			out.WriteString(x)
			out.WriteByte('\n')
		}
	}
	b := []byte(out.String())
	if err := uniqueEntries(b); err != nil {
		return nil, err
	}
	return b, nil
}

// uniqueEntries fails when an entry of a top-level mapping (paths,
// webhooks...) or of a components section is named twice in the bundled
// text.
func uniqueEntries(b []byte) error {
	seen := map[string]bool{}
	block, depth, inComponents := "", 0, false
	for _, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
		case indentOf(l) == 0:
			block, depth = strings.TrimSuffix(t, ":"), 2
			inComponents = block == "components"
		case inComponents && indentOf(l) == 2:
			block, depth = "components."+strings.TrimSuffix(t, ":"), 4
		case indentOf(l) == depth && !strings.HasPrefix(t, "-") && strings.Contains(t, ":"):
			k := block + " " + t[:strings.LastIndex(t, ":")]
			if !strings.HasSuffix(t, ":") { // `name: {inline}` or `name: value`
				k = block + " " + strings.SplitN(t, ": ", 2)[0]
			}
			if seen[k] {
				return fmt.Errorf("openapi: %s is written twice", k)
			}
			seen[k] = true
		}
	}
	return nil
}

// isKey: l is a mapping key alone on its line (`name:`), at column col.
func isKey(l string, col int) bool {
	return indentOf(l) == col && strings.HasSuffix(l, ":") && !strings.HasPrefix(strings.TrimSpace(l), "#") &&
		!strings.HasPrefix(strings.TrimSpace(l), "-") && len(strings.TrimSpace(l)) > 1
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
