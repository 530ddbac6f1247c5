package api

import "testing"

func TestNormalizePath(t *testing.T) {
	for in, want := range map[string]string{
		"/v2/events":             "/v2/events",
		"//v2/events":            "/v2/events",
		"/v2//events":            "/v2/events",
		"/v2/events/":            "/v2/events",
		"/prefix/v2/events":      "/v2/events",
		"/a/b//v2/auctions/":     "/v2/auctions",
		"/public/v1/marketplace": "/public/v1/marketplace",
		"/public/v1/x/v2/y":      "/public/v1/x/v2/y",
		"/":                      "/",
		"//":                     "/",
		"/readyz":                "/readyz",
	} {
		if got := normalizePath(in); got != want {
			t.Errorf("normalizePath(%q) = %q, want %q", in, got, want)
		}
	}
}
