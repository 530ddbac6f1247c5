// Package e2e drives the whole system over HTTP against real servers:
// ClickHouse, Redis, the S3 server (deploy/localstack) and kfake.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) { testenv.Main(m) }

// system is one in-process Endcap (target all) with a marketplace and keys.
type system struct {
	App            *app.App
	URL            string
	Cfg            config.Config
	Marketplace    accounts.Marketplace
	MarketplaceKey string
	AdvancedKey    string
	stop           func()
}

func startSystem(t testing.TB, cfg config.Config) *system {
	t.Helper()
	return newSystem(testapp.Start(t, testapp.WithConfig(cfg), testapp.WithMarketplace("Test Market", "USD", "America/New_York")))
}

// startEmptySystem starts a system and waits until it is ready, without
// making a marketplace.
func startEmptySystem(t testing.TB, cfg config.Config) *system {
	t.Helper()
	return newSystem(testapp.Start(t, testapp.WithConfig(cfg)))
}

func newSystem(a *testapp.App) *system {
	return &system{App: a.App, URL: a.URL, Cfg: a.Cfg, Marketplace: a.Marketplace, MarketplaceKey: a.MarketplaceKey,
		AdvancedKey: a.AdvancedKey, stop: a.Stop}
}

type response struct {
	Method, Path string // of the request (the path with its query)
	Status       int
	Header       http.Header
	Body         []byte
}

func (s *system) request(t testing.TB, method, path, key string, body []byte, hdr map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	// Every body the API answers writes its timestamps one way (but for an
	// echo of the request's own values).
	checkTimestamps(t, method+" "+path, b, sentText(path, body)...)
	return response{Method: method, Path: path, Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func (s *system) do(t testing.TB, method, path, key string, body []byte) (int, []byte) {
	r := s.request(t, method, path, key, body, nil)
	return r.Status, r.Body
}

// query runs a ClickHouse query in the system's database and returns the
// rows as strings.
func (s *system) query(t *testing.T, q string, args ...any) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.App.ClickHouse.Query(ctx, q, args...)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	defer rows.Close()
	var out [][]string
	types := rows.ColumnTypes()
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(types))
		for i, p := range ptrs {
			row[i] = fmt.Sprint(reflect.ValueOf(p).Elem().Interface())
		}
		out = append(out, row)
	}
	return out
}

func (s *system) count(t *testing.T, q string, args ...any) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n uint64
	if err := s.App.ClickHouse.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	return n
}

// golden compares the exchange r with testdata/name, rewriting it with
// -update. The file holds the request line, the status, the response
// headers of goldenHeaders that r carries and the JSON body (numbers as the
// server wrote them): everything TestOpenAPIGoldenFiles needs to check the
// exchange against the OpenAPI document. A test that must hide a changing
// value (an id, a time) replaces it in r.Body, r.Path or r.Header first.
//
// It checks the body's timestamps first (checkTimestamps): a golden file
// holds timestamps in the one form only, but for an echo of its request's
// path, or of the .request.json beside a .response.json.
func golden(t *testing.T, name string, r response) {
	t.Helper()
	sent := sentText(r.Path, nil)
	if req, ok := strings.CutSuffix(name, ".response.json"); ok {
		b, _ := os.ReadFile(filepath.Join("testdata", req+".request.json"))
		sent = append(sent, string(b))
	}
	checkTimestamps(t, name, r.Body, sent...)
	got, err := goldenJSON(r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./e2e -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from golden file:\n got: %s\nwant: %s", name, got, want)
	}
}

// goldenExchange is the form of a golden file.
type goldenExchange struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body"`
}

// goldenHeaders are the response headers a golden file keeps: those the
// OpenAPI document describes and whose values do not change from run to
// run (the X-RateLimit-* counters do).
var goldenHeaders = []string{"Content-Type", "Retry-After", "ETag", "Location", "Idempotent-Replayed"}

// goldenJSON is the golden file of r: indented, object keys of the body
// sorted, numbers kept as the server wrote them (no float rounding).
func goldenJSON(r response) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("response is not JSON: %q", r.Body)
	}
	body, err := json.Marshal(v) // a json.Number is written as its text
	if err != nil {
		return nil, err
	}
	x := goldenExchange{Method: r.Method, Path: r.Path, Status: r.Status, Body: body}
	for _, h := range goldenHeaders {
		if v := r.Header.Get(h); v != "" {
			if x.Headers == nil {
				x.Headers = map[string]string{}
			}
			x.Headers[h] = v
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // a query's & as it is
	enc.SetIndent("", "  ")
	err = enc.Encode(x)
	return out.Bytes(), err
}

func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("response is not JSON: %q", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("response differs\n got: %s\nwant: %s", gb, wb)
	}
}

// detail422 checks that r is a 422 whose every detail has a msg and a type,
// and returns its locs as "body.x.0" (with ":type" appended when typed).
func detail422(t *testing.T, r response, typed bool) []string {
	t.Helper()
	if r.Status != 422 {
		t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
	}
	var body struct {
		Detail []struct {
			Loc  []any  `json:"loc"`
			Msg  string `json:"msg"`
			Type string `json:"type"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("422 body %s: %v", r.Body, err)
	}
	var got []string
	for _, d := range body.Detail {
		if d.Msg == "" || d.Type == "" {
			t.Fatalf("detail without msg or type: %s", r.Body)
		}
		parts := make([]string, len(d.Loc))
		for i, l := range d.Loc {
			parts[i] = fmt.Sprint(l)
		}
		loc := strings.Join(parts, ".")
		if typed {
			loc += ":" + d.Type
		}
		got = append(got, loc)
	}
	return got
}

// expect422Locs checks a 422 body's locs, in any order ("body.x.0").
func expect422Locs(t *testing.T, r response, want ...string) {
	t.Helper()
	sameSet(t, r, detail422(t, r, false), want)
}

// expect422Typed checks a 422 body's "loc:type" entries, in any order.
func expect422Typed(t *testing.T, r response, want ...string) {
	t.Helper()
	sameSet(t, r, detail422(t, r, true), want)
}

func sameSet(t *testing.T, r response, got, want []string) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("422 %v, want %v: %s", got, want, r.Body)
	}
}

// otherMarketplace creates a second marketplace and returns its advanced key.
func otherMarketplace(t *testing.T, s *system) string {
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
