package api

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestBindJSONTextRule: a /public/v1 body whose strings hold invalid UTF-8,
// an unpaired surrogate escape or NUL is 422, naming the first such string
// by its loc (encoding/json alone would store U+FFFD or NUL); other
// strings, escapes and characters pass.
func TestBindJSONTextRule(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	p := &Public{MaxBodyBytes: 1 << 20}
	r := gin.New()
	r.POST("/x", func(c *gin.Context) {
		var v struct {
			ID    string   `json:"id"`
			Names []string `json:"names"`
		}
		if p.BindJSON(c, &v) {
			c.JSON(200, v)
		}
	})
	type fe struct {
		Loc  []any  `json:"loc"`
		Msg  string `json:"msg"`
		Type string `json:"type"`
	}
	for _, tc := range []struct {
		name, body string
		code       int
		loc        []any
		typ, msg   string
	}{
		{"plain", `{"id":"a","names":["é","日本","😀"]}`, 200, nil, "", ""},
		{"escapes", `{"id":"\ud83d\ude00\u00e9\u0001","names":["\\u0000"]}`, 200, nil, "", ""},
		{"lone surrogate", `{"id":"a\ud800"}`, 422, []any{"body", "id"}, "string_unicode", "String must not contain an unpaired surrogate escape"},
		{"lone low surrogate in a list", `{"names":["ok","\udfff"]}`, 422, []any{"body", "names", float64(1)}, "string_unicode", "unpaired surrogate"},
		{"invalid UTF-8", "{\"id\":\"a\xffb\"}", 422, []any{"body", "id"}, "string_unicode", "String must be valid UTF-8"},
		{"NUL", `{"id":"a\u0000"}`, 422, []any{"body", "id"}, "value_error", "String must not contain the NUL character"},
		{"NUL in an unknown field", `{"id":"a","other":{"x":["\u0000"]}}`, 422, []any{"body", "other", "x", float64(0)}, "value_error", "NUL"},
		{"bad key", "{\"i\xffd\":\"a\"}", 422, []any{"body"}, "string_unicode", "Object keys must be valid UTF-8"},
		{"syntax error first", "{\"id\":\"\xff\"", 422, []any{"body"}, "json_invalid", "JSON decode error"},
	} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", "/x", strings.NewReader(tc.body)))
		if w.Code != tc.code {
			t.Errorf("%s: %d %s", tc.name, w.Code, w.Body)
			continue
		}
		if tc.code != 422 {
			continue
		}
		var got struct{ Detail []fe }
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Detail) != 1 {
			t.Errorf("%s: body %s", tc.name, w.Body)
			continue
		}
		d := got.Detail[0]
		if !reflect.DeepEqual(d.Loc, tc.loc) || d.Type != tc.typ || !strings.Contains(d.Msg, tc.msg) {
			t.Errorf("%s: %+v, want loc %v type %s msg ~%q", tc.name, d, tc.loc, tc.typ, tc.msg)
		}
	}
}
