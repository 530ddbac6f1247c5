package openapi_test

import (
	"strings"
	"testing"

	"github.com/endcap/endcap/api/openapi"
)

// TestBundle: each block of a part goes in under the root's key of the same
// name, anchors of the root are usable in a part, and what YAML would take
// silently (an entry written twice, a block the root lacks, a line outside
// its block) is an error naming the part and the line.
func TestBundle(t *testing.T) {
	root := "openapi: 3.1.0\nx-sets:\n  one: &one\n    A: {type: string}\npaths:\n  /root:\n    get: {}\n" +
		"components:\n  schemas:\n    Shared: {type: string}\n"
	part := openapi.Part{Name: "areas/a.yaml", Text: []byte("# Area A.\npaths:\n  /a:\n    get:\n      headers:\n        <<: *one\n" +
		"components:\n  schemas:\n    A:\n      type: object\n")}
	b, err := openapi.Bundle([]byte(root), []openapi.Part{part})
	if err != nil {
		t.Fatal(err)
	}
	d, err := openapi.Convert(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, want := range []string{`"/root":`, `"/a":{"get":{"headers":{"A":{"type":"string"}}}}`, `"Shared":`, `"A":{"type":"object"}`} {
		if !strings.Contains(string(d.JSON), want) {
			t.Errorf("bundle has no %s:\n%s", want, d.JSON)
		}
	}
	for _, tc := range []struct{ name, part, want string }{
		{"a path twice", "paths:\n  /root:\n    get: {}\n", "paths /root is written twice"},
		{"a schema twice", "components:\n  schemas:\n    Shared: {type: number}\n", "components.schemas Shared is written twice"},
		{"a block the root lacks", "webhooks:\n  x:\n    post: {}\n", `areas/b.yaml:1: the root has no "webhooks"`},
		{"a components section the root lacks", "components:\n  responses:\n    R: {}\n", `areas/b.yaml:2: the root has no "components.responses"`},
		{"a line before the first block", "# fine\n  /x:\n    get: {}\n", "areas/b.yaml:2: a line before the first block"},
		{"a line outside its block", "paths:\n/x:\n", "areas/b.yaml:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openapi.Bundle([]byte(root), []openapi.Part{{Name: "areas/b.yaml", Text: []byte(tc.part)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
