package loadgen

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestBareHandler(t *testing.T) {
	h := BareHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/events", strings.NewReader(`{"impressions":[]}`)))
	if rec.Code != 200 || rec.Body.String() != `{"accepted":true}` || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("POST: %d %q %q", rec.Code, rec.Body, rec.Header().Get("Content-Type"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/auctions", strings.NewReader(`{"auctions":[]}`)))
	if rec.Code != 201 || rec.Body.String() != string(bareAuctionsAnswer) || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("POST auctions: %d %q %q", rec.Code, rec.Body, rec.Header().Get("Content-Type"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/auctions/sponsored-brand", nil))
	if rec.Code != 404 {
		t.Errorf("other path: %d", rec.Code)
	}
}

func TestServeBare(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeBare(ctx, addr) }()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		if resp, err = http.Post("http://"+addr+"/v2/events", "application/json", strings.NewReader(`{}`)); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"accepted":true}` {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeBare: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ServeBare did not stop")
	}
	// A second server on a taken address fails at once.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := ServeBare(context.Background(), ln.Addr().String()); err == nil {
		t.Error("no error on a taken address")
	}
}
