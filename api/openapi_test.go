package api

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/endcap/endcap/api/openapi"
)

// TestServeOpenAPI: GET /openapi.json answers the document as JSON without
// a key, with a strong ETag; a request naming that ETag (alone, in a list,
// weak or "*") gets 304 without a body; the answer may be cached (and
// revalidated) and read from any origin.
func TestServeOpenAPI(t *testing.T) {
	srv := New(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	doc, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	get := func(ifNoneMatch string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/openapi.json", nil)
		if ifNoneMatch != "" {
			req.Header.Set("If-None-Match", ifNoneMatch)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w
	}
	w := get("")
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), doc.JSON) {
		t.Fatalf("%d %.200s", w.Code, w.Body)
	}
	for h, want := range map[string]string{
		"Content-Type": "application/json", "ETag": doc.ETag, "Cache-Control": "public, no-cache",
		"Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff",
	} {
		if got := w.Header().Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	for _, inm := range []string{doc.ETag, `"x", ` + doc.ETag, "W/" + doc.ETag, "*"} {
		if w := get(inm); w.Code != 304 || w.Body.Len() != 0 || w.Header().Get("ETag") != doc.ETag {
			t.Errorf("If-None-Match %s: %d %q", inm, w.Code, w.Body)
		}
	}
	for _, inm := range []string{`"x"`, doc.ETag[:10] + `"`, "W/"} {
		if w := get(inm); w.Code != 200 || !bytes.Equal(w.Body.Bytes(), doc.JSON) {
			t.Errorf("If-None-Match %s: %d", inm, w.Code)
		}
	}
	if w := httptest.NewRecorder(); true {
		srv.ServeHTTP(w, httptest.NewRequest("POST", "/openapi.json", nil))
		if w.Code != 405 {
			t.Errorf("POST /openapi.json: %d", w.Code)
		}
	}
}
