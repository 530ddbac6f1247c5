package s3store_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

// A hung object store (the server frozen with SIGSTOP: connections are
// accepted by the kernel and nothing answers) fails every call within its
// deadline: a request, a part of an upload, a read of an object's body, a
// connection to open. Nothing waits for the store to come back.
func TestHungStoreFailsWithinDeadlines(t *testing.T) {
	srv := testenv.OwnS3(t)
	const (
		request = time.Second
		part    = 2 * time.Second
		slack   = 3 * time.Second
	)
	st := s3store.Open(s3store.Options{Endpoint: srv.Endpoint, Region: srv.Region, Bucket: "hung", AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		ConnectTimeout: time.Second, RequestTimeout: request, PartTimeout: part})
	ctx := t.Context()
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	data := payload(3 * s3store.MinPartSize)
	upload(t, st, "big", data, s3store.MinPartSize, 1<<20, nil)
	info, ok, err := st.Head(ctx, "big")
	if err != nil || !ok {
		t.Fatalf("head: %v %v", ok, err)
	}
	// Opened before the freeze: a body being read, an upload under way.
	obj, ok, err := st.Get(ctx, "big")
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	defer obj.Body.Close()
	if _, err := io.ReadFull(obj.Body, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	up, err := st.NewUpload(ctx, "up", "application/octet-stream", nil, s3store.MinPartSize)
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	defer srv.Thaw()

	for _, tc := range []struct {
		name  string
		bound time.Duration // the deadline the call must end within (before slack)
		call  func() error
	}{
		{"ping", request, func() error { return st.Ping(ctx) }},
		{"head", request, func() error { _, _, err := st.Head(ctx, "big"); return err }},
		{"get", request, func() error { _, _, err := st.Get(ctx, "big"); return err }},
		{"start an upload", request, func() error {
			_, err := st.NewUpload(ctx, "other", "text/csv", nil, 0)
			return err
		}},
		{"abort stale uploads", request, func() error { return st.AbortStale(ctx, "up", time.Now()) }},
		{"read a body", request, func() error { _, err := io.Copy(io.Discard, obj.Body); return err }},
		{"ranged read", request, func() error {
			_, err := st.NewRangeReader(ctx, "big", info, 1<<20, 2).ReadAt(make([]byte, 10), int64(len(data)-10))
			return err
		}},
		// A part that hangs fails the upload; its abort (also unanswered)
		// is one more request.
		{"upload parts", part + request, func() error {
			if _, err := up.Write(bytes.Repeat([]byte("x"), 2*s3store.MinPartSize)); err != nil {
				return err
			}
			_, err := up.Complete()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- tc.call() }()
			select {
			case err := <-done:
				took := time.Since(start)
				if err == nil {
					t.Fatal("succeeded against a frozen store")
				}
				if took > tc.bound+slack {
					t.Fatalf("failed after %s, past its bound %s: %v", took.Round(time.Millisecond), tc.bound, err)
				}
				t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
			case <-time.After(tc.bound + 2*slack):
				t.Fatalf("still waiting after %s for a frozen store (bound %s)", (tc.bound + 2*slack), tc.bound)
			}
		})
	}
}
