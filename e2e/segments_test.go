package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/testkit/testenv"
)

const sgBase = "/public/v1/segment-service/segments"

func sgPath(id string) string { return sgBase + "/" + url.PathEscape(id) }

func sgStart(t *testing.T) (*system, config.Config) {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	return startSystem(t, cfg), cfg
}

// sgOtherMarketplace creates a second marketplace and returns its advanced key.
func sgOtherMarketplace(t *testing.T, s *system) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := s.App.Accounts.CreateMarketplace(ctx, "Other Market", "EUR", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := s.App.Accounts.CreateKey(ctx, m.ID, accounts.KeyAdvanced)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func sgStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
}

func sgErr(t *testing.T, r response, status int, code string) {
	t.Helper()
	sgStatus(t, r, status)
	var body struct {
		ErrCode string `json:"errCode"`
		DocURL  string `json:"docUrl"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.ErrCode != code || body.Message == "" || body.DocURL == "" {
		t.Fatalf("error body %s, want errCode %s", r.Body, code)
	}
}

func sgETag(t *testing.T, r response, want string) {
	t.Helper()
	if got := r.Header.Get("ETag"); got != `"`+want+`"` {
		t.Fatalf("ETag %q, want %q", got, `"`+want+`"`)
	}
}

func sgPut(t *testing.T, s *system, key, id, body string, hdr map[string]string) response {
	t.Helper()
	return s.request(t, "PUT", sgPath(id), key, []byte(body), hdr)
}

func sgLines(lines ...string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, strings.Join(lines, "\n"))
		return err
	}
}

// sgRange writes ids "<prefix><i>" for i in [from, to), one per line.
func sgRange(prefix string, from, to int) func(io.Writer) error {
	return func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		buf := make([]byte, 0, 64)
		for i := from; i < to; i++ {
			buf = append(buf[:0], prefix...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, '\n')
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
		return bw.Flush()
	}
}

// sgUpload posts a multipart body whose `file` part gen writes, streamed
// through a pipe (never held whole in memory).
func sgUpload(t *testing.T, s *system, key, id, query string, gen func(io.Writer) error, hdr map[string]string) response {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("note", "a field before the file is ignored")
		var fw io.Writer
		if err == nil {
			fw, err = mw.CreateFormFile("file", "ids.txt")
		}
		if err == nil {
			err = gen(fw)
		}
		if err == nil {
			err = mw.Close()
		}
		_ = pw.CloseWithError(err)
	}()
	req, err := http.NewRequest("POST", s.URL+sgPath(id)+"/upload"+query, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{Method: "POST", Path: sgPath(id) + "/upload" + query, Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func sgTotal(t *testing.T, s *system, key, id string) int64 {
	t.Helper()
	r := s.request(t, "GET", sgPath(id), key, nil, nil)
	sgStatus(t, r, 200)
	var v struct {
		Total int64 `json:"total"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatal(err)
	}
	return v.Total
}

func sgList(t *testing.T, s *system, key, query string) (ids []string, totals []int64, more bool, next string) {
	t.Helper()
	r := s.request(t, "GET", sgBase+query, key, nil, nil)
	sgStatus(t, r, 200)
	var v struct {
		HasMore  *bool `json:"hasMore"`
		Segments []struct {
			ID    string `json:"id"`
			Total int64  `json:"total"`
		} `json:"segments"`
		NextPage *string `json:"nextPage"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil || v.HasMore == nil || v.Segments == nil {
		t.Fatalf("list body %s (%v)", r.Body, err)
	}
	for _, sg := range v.Segments {
		ids = append(ids, sg.ID)
		totals = append(totals, sg.Total)
	}
	if *v.HasMore != (v.NextPage != nil) {
		t.Fatalf("hasMore and nextPage disagree: %s", r.Body)
	}
	if v.NextPage != nil {
		next = *v.NextPage
	}
	return ids, totals, *v.HasMore, next
}

// TestSegmentsCRUD: create, read, list with pages, update, delete, with the
// exact shapes, ETags, If-Match, and every 422 rule of the body and path.
func TestSegmentsCRUD(t *testing.T) {
	s, _ := sgStart(t)
	key := s.AdvancedKey

	r := sgPut(t, s, key, "vip", `{"name":" VIP buyers ","description":"Bought twice","config":{"type":"user-list"}}`, nil)
	sgStatus(t, r, 201)
	sgETag(t, r, "1")
	sameJSON(t, r.Body, `{"name":"VIP buyers","description":"Bought twice","id":"vip","total":0,"config":{"type":"user-list"}}`)
	if r.Header.Get("X-RateLimit-Limit") == "" {
		t.Fatal("no rate-limit headers")
	}

	r = s.request(t, "GET", sgPath("vip"), key, nil, nil)
	sgStatus(t, r, 200)
	sgETag(t, r, "1")
	sameJSON(t, r.Body, `{"name":"VIP buyers","description":"Bought twice","id":"vip","total":0,"config":{"type":"user-list"}}`)

	// config is optional; ids may hold any character but "/"
	r = sgPut(t, s, key, "a b:{x}é", `{"name":"Odd id"}`, nil)
	sgStatus(t, r, 201)
	sameJSON(t, r.Body, `{"name":"Odd id","description":"","id":"a b:{x}é","total":0,"config":{"type":"user-list"}}`)
	sgStatus(t, sgPut(t, s, key, "c", `{"name":"C"}`, nil), 201)

	// update: a full replacement of name, description, config
	r = sgPut(t, s, key, "vip", `{"name":"VIP"}`, map[string]string{"If-Match": `"1"`})
	sgStatus(t, r, 200)
	sgETag(t, r, "2")
	sameJSON(t, r.Body, `{"name":"VIP","description":"","id":"vip","total":0,"config":{"type":"user-list"}}`)
	sgErr(t, sgPut(t, s, key, "vip", `{"name":"late"}`, map[string]string{"If-Match": `"1"`}), 409, "invalid_operation")
	sgErr(t, sgPut(t, s, key, "vip", `{"name":"late"}`, map[string]string{"If-Match": `garbage`}), 409, "invalid_operation")
	sgErr(t, sgPut(t, s, key, "new", `{"name":"x"}`, map[string]string{"If-Match": `"1"`}), 409, "invalid_operation")

	// two updates racing on the same version: one wins, one 409
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = sgPut(t, s, key, "c", fmt.Sprintf(`{"name":"C%d"}`, i), map[string]string{"If-Match": `"1"`}).Status
		}()
	}
	wg.Wait()
	if statuses[0]+statuses[1] != 200+409 {
		t.Fatalf("racing updates: %v", statuses)
	}

	// list: default page holds all, in id order; pages of 1
	ids, totals, more, _ := sgList(t, s, key, "")
	if strings.Join(ids, ",") != "a b:{x}é,c,vip" || more || len(totals) != 3 {
		t.Fatalf("list %v more=%v", ids, more)
	}
	var paged []string
	next := ""
	for i := 0; ; i++ {
		q := "?limit=1"
		if next != "" {
			q += "&next_page=" + url.QueryEscape(next)
		}
		ids, _, more, n := sgList(t, s, key, q)
		paged = append(paged, ids...)
		if !more {
			break
		}
		if i > 5 {
			t.Fatal("pages do not end")
		}
		next = n
	}
	if strings.Join(paged, ",") != "a b:{x}é,c,vip" {
		t.Fatalf("pages %v", paged)
	}
	r = s.request(t, "GET", sgBase+"?limit=1", key, nil, nil)
	var page struct {
		NextPage string `json:"nextPage"`
	}
	_ = json.Unmarshal(r.Body, &page)
	sameJSON(t, r.Body, `{"hasMore":true,"segments":[{"name":"Odd id","description":"","id":"a b:{x}é","total":0,"config":{"type":"user-list"}}],"nextPage":`+strconv.Quote(page.NextPage)+`}`)
	sg422(t, s.request(t, "GET", sgBase+"?limit=0", key, nil, nil), "query.limit:greater_than_equal")
	sg422(t, s.request(t, "GET", sgBase+"?limit=1001", key, nil, nil), "query.limit:less_than_equal")
	sg422(t, s.request(t, "GET", sgBase+"?next_page=forged", key, nil, nil), "query.next_page:value_error")

	// 422 rules
	long := strings.Repeat("x", 256)
	sg422(t, sgPut(t, s, key, "v", `{}`, nil), "body.name:missing")
	sg422(t, sgPut(t, s, key, "v", `{"name":"  "}`, nil), "body.name:too_short")
	sg422(t, sgPut(t, s, key, "v", `{"name":"`+long+`","description":"`+strings.Repeat("d", 1001)+`","config":{"type":"rule-based"}}`, nil),
		"body.name:too_long", "body.description:too_long", "body.config.type:literal_error")
	sg422(t, sgPut(t, s, key, "v", `{"name":"n","config":{}}`, nil), "body.config.type:missing")
	sg422(t, sgPut(t, s, key, "v", `{"name":5}`, nil), "body.name:type_error")
	sg422(t, sgPut(t, s, key, "v", `{"name":`, nil), "body:json_invalid")
	sg422(t, sgPut(t, s, key, "v", ``, nil), "body:missing")
	sg422(t, sgPut(t, s, key, long, `{}`, nil), "path.segment-id:too_long", "body.name:missing")
	sg422(t, s.request(t, "GET", sgPath(long), key, nil, nil), "path.segment-id:too_long")
	sg422(t, s.request(t, "DELETE", sgPath(long), key, nil, nil), "path.segment-id:too_long")
	sgStatus(t, sgPut(t, s, key, strings.Repeat("é", 255), `{"name":"n"}`, nil), 201)

	// delete
	sgErr(t, s.request(t, "DELETE", sgPath("vip"), key, nil, map[string]string{"If-Match": `"1"`}), 409, "invalid_operation")
	r = s.request(t, "DELETE", sgPath("vip"), key, nil, map[string]string{"If-Match": `"2"`})
	sgStatus(t, r, 204)
	if len(r.Body) != 0 {
		t.Fatalf("204 with a body: %q", r.Body)
	}
	r = s.request(t, "GET", sgPath("vip"), key, nil, nil)
	sgErr(t, r, 404, "resource_not_found")
	golden(t, "segments_not_found.json", r)
	sgErr(t, s.request(t, "DELETE", sgPath("vip"), key, nil, nil), 404, "resource_not_found")
	// re-created after delete: a new segment whose versions continue (an
	// old ETag never matches it)
	r = sgPut(t, s, key, "vip", `{"name":"VIP again"}`, nil)
	sgStatus(t, r, 201)
	sgETag(t, r, "4")
	sameJSON(t, r.Body, `{"name":"VIP again","description":"","id":"vip","total":0,"config":{"type":"user-list"}}`)

	// a marketplace key is refused
	sgStatus(t, s.request(t, "GET", sgBase, s.MarketplaceKey, nil, nil), 403)
}

// TestSegmentsUpload: the upload's actions, formats, totals and rejections.
func TestSegmentsUpload(t *testing.T) {
	s, _ := sgStart(t)
	key := s.AdvancedKey

	// an upload creates a segment that does not exist (name = id)
	r := sgUpload(t, s, key, "buyers", "", sgLines("u1", "u2", "u3"), nil)
	sgStatus(t, r, 204)
	sgETag(t, r, "1")
	if len(r.Body) != 0 {
		t.Fatalf("204 with a body %q", r.Body)
	}
	r = s.request(t, "GET", sgPath("buyers"), key, nil, nil)
	sameJSON(t, r.Body, `{"name":"buyers","description":"","id":"buyers","total":3,"config":{"type":"user-list"}}`)

	// add (explicit) with duplicates, CRLF, blank lines, spaces, BOM
	sgStatus(t, sgUpload(t, s, key, "buyers", "?action=add", sgLines("\xEF\xBB\xBFu3\r", "", "  u4  \r", "u4", "\t", "u5"), nil), 204)
	if got := sgTotal(t, s, key, "buyers"); got != 5 {
		t.Fatalf("total %d, want 5", got)
	}
	// CSV with a header whose first column is opaqueUserId
	sgStatus(t, sgUpload(t, s, key, "buyers", "", sgLines("opaqueUserId,email", "u6,a@x", `"u,7",b@x`, "u1,c@x"), nil), 204)
	if got := sgTotal(t, s, key, "buyers"); got != 7 {
		t.Fatalf("total %d, want 7", got)
	}
	// gzip
	gz := func(w io.Writer) error {
		zw := gzip.NewWriter(w)
		if err := sgRange("g", 0, 1000)(zw); err != nil {
			return err
		}
		return zw.Close()
	}
	sgStatus(t, sgUpload(t, s, key, "buyers", "", gz, nil), 204)
	if got := sgTotal(t, s, key, "buyers"); got != 1007 {
		t.Fatalf("total %d, want 1007", got)
	}
	// remove, with ids that are not members
	sgStatus(t, sgUpload(t, s, key, "buyers", "?action=remove", sgRange("g", 500, 1500), nil), 204)
	if got := sgTotal(t, s, key, "buyers"); got != 507 {
		t.Fatalf("total %d, want 507", got)
	}
	// replace; the version moves (the member generation changed)
	r = sgUpload(t, s, key, "buyers", "?action=replace", sgLines("a", "b", "a"), map[string]string{"If-Match": `"1"`})
	sgStatus(t, r, 204)
	sgETag(t, r, "2")
	if got := sgTotal(t, s, key, "buyers"); got != 2 {
		t.Fatalf("total %d, want 2", got)
	}
	sgErr(t, sgUpload(t, s, key, "buyers", "?action=replace", sgLines("z"), map[string]string{"If-Match": `"1"`}), 409, "invalid_operation")
	// metadata set by PUT survives uploads; PUT keeps the members
	r = sgPut(t, s, key, "buyers", `{"name":"Buyers","description":"d"}`, nil)
	sgStatus(t, r, 200)
	sameJSON(t, r.Body, `{"name":"Buyers","description":"d","id":"buyers","total":2,"config":{"type":"user-list"}}`)
	sgStatus(t, sgUpload(t, s, key, "buyers", "?action=add", sgLines("c"), nil), 204)
	sameJSON(t, s.request(t, "GET", sgPath("buyers"), key, nil, nil).Body,
		`{"name":"Buyers","description":"d","id":"buyers","total":3,"config":{"type":"user-list"}}`)

	// invalid lines: 422 with the line numbers; a replace changes nothing
	bad := sgLines("ok1", strings.Repeat("x", 91), "", strings.Repeat("é", 90), "\xff", "ok2")
	r = sgUpload(t, s, key, "buyers", "?action=replace", bad, nil)
	sg422(t, r, "body.file.2:too_long", "body.file.5:invalid")
	golden(t, "segments_reject_lines.json", r)
	if got := sgTotal(t, s, key, "buyers"); got != 3 {
		t.Fatalf("a rejected replace changed the segment: total %d", got)
	}
	// a rejected upload to a new segment does not create it
	sg422(t, sgUpload(t, s, key, "never", "", bad, nil), "body.file.2:too_long", "body.file.5:invalid")
	sgErr(t, s.request(t, "GET", sgPath("never"), key, nil, nil), 404, "resource_not_found")

	// request-level rejections
	sg422(t, sgUpload(t, s, key, "buyers", "?action=delete", sgLines("a"), nil), "query.action:literal_error")
	sg422(t, sgUpload(t, s, key, strings.Repeat("x", 256), "?action=nope", sgLines("a"), nil), "path.segment-id:too_long", "query.action:literal_error")
	sg422(t, s.request(t, "POST", sgPath("buyers")+"/upload", key, []byte(`{"file":"a"}`), nil), "body:type_error")
	var noFile bytes.Buffer
	mw := multipart.NewWriter(&noFile)
	_ = mw.WriteField("other", "x")
	_ = mw.Close()
	sg422(t, s.request(t, "POST", sgPath("buyers")+"/upload", key, noFile.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()}), "body.file:missing")
	// a body truncated before the end of the file part: 400, nothing changes
	var trunc bytes.Buffer
	mw = multipart.NewWriter(&trunc)
	fw, _ := mw.CreateFormFile("file", "ids.txt")
	_, _ = io.WriteString(fw, "t1\nt2\n")
	r = s.request(t, "POST", sgPath("buyers")+"/upload?action=replace", key, trunc.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
	sgErr(t, r, 400, "bad_request")
	if got := sgTotal(t, s, key, "buyers"); got != 3 {
		t.Fatalf("a truncated replace changed the segment: total %d", got)
	}

	// a declared size above the maximum is refused before the body is read
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "POST %s/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n--b\r\n",
		sgPath("buyers"), key, int64(2)<<30)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	sgErr(t, response{Method: "POST", Path: sgPath("buyers") + "/upload", Status: resp.StatusCode, Header: resp.Header, Body: body}, 413, "request_too_large")

	// one upload at a time per segment: a second upload and a delete get 409
	pr, pw := io.Pipe()
	slowDone := make(chan response, 1)
	go func() {
		slowDone <- sgUpload(t, s, key, "buyers", "?action=replace", func(w io.Writer) error {
			_, err := io.Copy(w, pr)
			return err
		}, nil)
	}()
	_, _ = io.WriteString(pw, "s1\ns2\n")
	// Wait until the slow upload holds the segment's lock in Redis. Probing
	// with another upload would race: the probe could take the lock first
	// and make the slow upload the one refused.
	testenv.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := s.App.Redis.Exists(ctx, "ec:seglock:{"+s.Marketplace.ID+":buyers}").Result()
		if err != nil || n != 1 {
			return fmt.Errorf("the slow upload holds no lock yet: %d %v", n, err)
		}
		return nil
	})
	sgErr(t, sgUpload(t, s, key, "buyers", "", sgLines("z"), nil), 409, "invalid_operation")
	sgErr(t, s.request(t, "DELETE", sgPath("buyers"), key, nil, nil), 409, "invalid_operation")
	_ = pw.Close()
	sgStatus(t, <-slowDone, 204)
	if got := sgTotal(t, s, key, "buyers"); got != 2 {
		t.Fatalf("total %d, want 2", got)
	}
	sgStatus(t, s.request(t, "DELETE", sgPath("buyers"), key, nil, nil), 204)
	// an upload after the delete makes a new segment, with only its ids
	r = sgUpload(t, s, key, "buyers", "?action=add", sgLines("n1"), nil)
	sgStatus(t, r, 204)
	sgETag(t, r, "6") // versions continue after the delete (5)
	sameJSON(t, s.request(t, "GET", sgPath("buyers"), key, nil, nil).Body,
		`{"name":"buyers","description":"","id":"buyers","total":1,"config":{"type":"user-list"}}`)
}

// TestSegmentsIsolation: marketplace B never sees or changes A's segments;
// the same segment id in two marketplaces is two segments.
func TestSegmentsIsolation(t *testing.T) {
	s, _ := sgStart(t)
	a := s.AdvancedKey
	b := sgOtherMarketplace(t, s)

	sgStatus(t, sgPut(t, s, a, "shared", `{"name":"A's"}`, nil), 201)
	sgStatus(t, sgUpload(t, s, a, "shared", "", sgLines("a1", "a2"), nil), 204)

	sgErr(t, s.request(t, "GET", sgPath("shared"), b, nil, nil), 404, "resource_not_found")
	if ids, _, _, _ := sgList(t, s, b, ""); len(ids) != 0 {
		t.Fatalf("B lists %v", ids)
	}
	sgErr(t, s.request(t, "DELETE", sgPath("shared"), b, nil, nil), 404, "resource_not_found")
	sgErr(t, sgPut(t, s, b, "shared", `{"name":"B's"}`, map[string]string{"If-Match": `"1"`}), 409, "invalid_operation")
	// A's cursor is not B's
	sgStatus(t, sgPut(t, s, a, "zz", `{"name":"Z"}`, nil), 201)
	_, _, _, next := sgList(t, s, a, "?limit=1")
	sg422(t, s.request(t, "GET", sgBase+"?next_page="+url.QueryEscape(next), b, nil, nil), "query.next_page:value_error")

	// B's upload and PUT to the same id make B's own segment
	sgStatus(t, sgUpload(t, s, b, "shared", "?action=replace", sgLines("b1"), nil), 204)
	sgStatus(t, sgUpload(t, s, b, "shared", "?action=remove", sgLines("a1", "a2"), nil), 204)
	r := sgPut(t, s, b, "shared", `{"name":"B's"}`, nil)
	sgStatus(t, r, 200)
	sameJSON(t, r.Body, `{"name":"B's","description":"","id":"shared","total":1,"config":{"type":"user-list"}}`)
	sameJSON(t, s.request(t, "GET", sgPath("shared"), a, nil, nil).Body,
		`{"name":"A's","description":"","id":"shared","total":2,"config":{"type":"user-list"}}`)
	sgStatus(t, s.request(t, "DELETE", sgPath("shared"), b, nil, nil), 204)
	if got := sgTotal(t, s, a, "shared"); got != 2 {
		t.Fatalf("B's delete changed A: total %d", got)
	}
	if ids, _, _, _ := sgList(t, s, b, ""); len(ids) != 0 {
		t.Fatalf("B lists %v", ids)
	}
}

// TestSegmentsRestart: a second process on the same Kafka (and Redis)
// rebuilds every segment, with its members.
func TestSegmentsRestart(t *testing.T) {
	s, cfg := sgStart(t)
	key := s.AdvancedKey
	sgStatus(t, sgPut(t, s, key, "one", `{"name":"One","description":"first"}`, nil), 201)
	sgStatus(t, sgUpload(t, s, key, "one", "", sgRange("u", 0, 100), nil), 204)
	sgStatus(t, sgUpload(t, s, key, "two", "", sgRange("u", 0, 10), nil), 204)
	sgStatus(t, sgUpload(t, s, key, "two", "?action=replace", sgRange("v", 0, 7), nil), 204)
	sgStatus(t, sgUpload(t, s, key, "gone", "", sgLines("x"), nil), 204)
	sgStatus(t, s.request(t, "DELETE", sgPath("gone"), key, nil, nil), 204)
	want := s.request(t, "GET", sgBase, key, nil, nil)
	sgStatus(t, want, 200)

	s2 := startSystem(t, cfg)
	got := s2.request(t, "GET", sgBase, key, nil, nil)
	sgStatus(t, got, 200)
	sameJSON(t, got.Body, string(want.Body))
	sameJSON(t, got.Body, `{"hasMore":false,"nextPage":null,"segments":[
		{"name":"One","description":"first","id":"one","total":100,"config":{"type":"user-list"}},
		{"name":"two","description":"","id":"two","total":7,"config":{"type":"user-list"}}]}`)
	r := s2.request(t, "GET", sgPath("two"), key, nil, nil)
	sgETag(t, r, "2")
}

// TestSegmentsUploadBoundedMemory: a 2,000,000-id file, generated on the fly,
// uploads with the Go heap in use under 100 MB, and totals are exact after
// adds with duplicates, a remove and a replace. With
// ENDCAP_SEGMENTS_IDS=10000000 it runs the size given (a manual benchmark).
func TestSegmentsUploadBoundedMemory(t *testing.T) {
	n := 2_000_000
	if v := os.Getenv("ENDCAP_SEGMENTS_IDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := sgStart(t)
	key := s.AdvancedKey

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	start := time.Now()
	sgStatus(t, sgUpload(t, s, key, "big", "", sgRange("user-", 0, n), nil), 204)
	took := time.Since(start)
	close(stop)
	<-sampled
	t.Logf("%d ids uploaded in %s (%.0f ids/s); heap in use: %.1f MB before, peak %.1f MB during",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(base)/1e6, float64(peak.Load())/1e6)
	if peak.Load() > 100e6 {
		t.Fatalf("heap in use peaked at %.1f MB during the upload (limit 100 MB)", float64(peak.Load())/1e6)
	}
	if got := sgTotal(t, s, key, "big"); got != int64(n) {
		t.Fatalf("total %d, want %d", got, n)
	}
	// half duplicates
	sgStatus(t, sgUpload(t, s, key, "big", "?action=add", sgRange("user-", n-500, n+500), nil), 204)
	if got := sgTotal(t, s, key, "big"); got != int64(n+500) {
		t.Fatalf("total %d, want %d", got, n+500)
	}
	// remove: 1,000 members and 1,000 strangers
	sgStatus(t, sgUpload(t, s, key, "big", "?action=remove", sgRange("user-", n-500, n+1500), nil), 204)
	if got := sgTotal(t, s, key, "big"); got != int64(n-500) {
		t.Fatalf("total %d, want %d", got, n-500)
	}
	// replace
	sgStatus(t, sgUpload(t, s, key, "big", "?action=replace", sgRange("other-", 0, 12345), nil), 204)
	if got := sgTotal(t, s, key, "big"); got != 12345 {
		t.Fatalf("total %d, want 12345", got)
	}
	sgStatus(t, s.request(t, "DELETE", sgPath("big"), key, nil, nil), 204)
}

// sg422 checks a 422 body's "loc:type" entries in order.
func sg422(t *testing.T, r response, want ...string) {
	t.Helper()
	if got := detail422(t, r, true); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("422 detail %v, want %v (%s)", got, want, r.Body)
	}
}
