package api

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestReadBodyInto reads bodies with and without Content-Length, of every
// size around the limit, into fresh and reused buffers.
func TestReadBodyInto(t *testing.T) {
	gin.SetMode(gin.TestMode)
	const limit = 4096
	big := strings.Repeat("a", limit)
	tests := []struct {
		name    string
		body    string
		chunked bool // no Content-Length
		dst     []byte
		status  int // 0: read
	}{
		{name: "empty", body: ""},
		{name: "empty chunked", body: "", chunked: true},
		{name: "small", body: `{"a":1}`},
		{name: "small chunked", body: `{"a":1}`, chunked: true},
		{name: "past the first 512 bytes chunked", body: strings.Repeat("b", 1500), chunked: true},
		{name: "at the limit", body: big},
		{name: "at the limit chunked", body: big, chunked: true},
		{name: "reused buffer, larger", body: "xyz", dst: []byte("previous body, longer")},
		{name: "reused buffer, smaller", body: strings.Repeat("c", 100), dst: make([]byte, 0, 8)},
		{name: "over the limit", body: big + "a", status: http.StatusRequestEntityTooLarge},
		{name: "over the limit chunked", body: big + "a", chunked: true, status: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			var r io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				r = io.MultiReader(r) // hides the length from NewRequest
			}
			c.Request = httptest.NewRequest(http.MethodPost, "/v2/auctions", r)
			if tt.chunked && c.Request.ContentLength != -1 {
				c.Request.ContentLength = -1
			}
			got, ok := readBodyInto(c, limit, tt.dst)
			if tt.status != 0 {
				if ok || w.Code != tt.status {
					t.Fatalf("ok %v, status %d; want a %d", ok, w.Code, tt.status)
				}
				if !bytes.Contains(w.Body.Bytes(), []byte(`"request_too_large"`)) {
					t.Fatalf("body %s", w.Body)
				}
				return
			}
			if !ok || string(got) != tt.body {
				t.Fatalf("ok %v, read %d bytes; want %d", ok, len(got), len(tt.body))
			}
		})
	}
}

// TestReadBodyIntoShortBody: a client that announces more than it sends
// gets a 400, not a body padded or cut.
func TestReadBodyIntoShortBody(t *testing.T) {
	gin.SetMode(gin.TestMode)
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/v2/auctions", &errAfter{data: []byte("abc")})
	c.Request.ContentLength = 10
	if _, ok := readBodyInto(c, 100, nil); ok || w.Code != http.StatusBadRequest {
		t.Fatalf("ok %v, status %d; want a 400", ok, w.Code)
	}
}

// errAfter returns data, then io.ErrUnexpectedEOF, as net/http's body does
// when the connection ends before Content-Length bytes.
type errAfter struct{ data []byte }

func (e *errAfter) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}
