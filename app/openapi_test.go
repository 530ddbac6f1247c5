package app

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/api/openapi/openapitest"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/masterkey"
)

// TestOpenAPIDescribesEveryRoute: the router of a process that serves
// everything (target all, /metrics on the API port) has exactly the
// operations of the OpenAPI document: a route is not done until it is
// described (docs/reference/openapi.md), and the document describes nothing the
// server does not answer. The web console's pages (/console) are HTML for a
// browser, not part of the API, and are left out.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.SecretKey = masterkey.Generate()
	a, err := New(cfg, TargetAll, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	lister, ok := a.Handler().(interface{ Routes() gin.RoutesInfo })
	if !ok {
		t.Fatalf("the handler (%T) does not list its routes", a.Handler())
	}
	var routes []string
	for _, r := range lister.Routes() {
		if r.Path == "/console" || strings.HasPrefix(r.Path, "/console/") {
			continue // the browser console's pages and forms are not the API (docs/guide/console.md)
		}
		routes = append(routes, r.Method+" "+openapitest.RoutePattern(r.Path))
	}
	slices.Sort(routes)
	routes = slices.Compact(routes)
	described := openapitest.Operations(doc)
	if len(routes) < 60 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	for _, r := range routes {
		if !slices.Contains(described, r) {
			t.Errorf("route %s is not in the OpenAPI document: describe it in api/openapi/areas/ (docs/reference/openapi.md)", r)
		}
	}
	for _, op := range described {
		if !slices.Contains(routes, op) {
			t.Errorf("the OpenAPI document (api/openapi) describes %s, which the router does not have", op)
		}
	}
	if !t.Failed() {
		t.Logf("%d routes, all described", len(routes))
	}
}
