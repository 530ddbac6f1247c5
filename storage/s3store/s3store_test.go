package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// open returns a store on a bucket of the test's own, created.
func open(t *testing.T) (*s3store.Store, s3store.Options) {
	t.Helper()
	cfg := testenv.Get(t).Config(t, nil)
	o := s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey}
	st := s3store.Open(o)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatalf("a second EnsureBucket: %v", err)
	}
	return st, o
}

func payload(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// upload writes data to key in writes of chunk bytes and completes it.
func upload(t *testing.T, st *s3store.Store, key string, data []byte, partSize, chunk int, meta map[string]string) int64 {
	t.Helper()
	u, err := st.NewUpload(t.Context(), key, "application/octet-stream", meta, partSize)
	if err != nil {
		t.Fatal(err)
	}
	for rest := data; len(rest) > 0; {
		k := min(chunk, len(rest))
		if n, err := u.Write(rest[:k]); err != nil || n != k {
			t.Fatalf("write: %d, %v", n, err)
		}
		rest = rest[k:]
	}
	size, err := u.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return size
}

func read(t *testing.T, st *s3store.Store, key string) ([]byte, s3store.Object) {
	t.Helper()
	obj, ok, err := st.Get(t.Context(), key)
	if err != nil || !ok {
		t.Fatalf("get %s: %v, %v", key, ok, err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, obj
}

// Uploads of every size, as one part or several: the object is the bytes
// written, with its metadata, and appears only at Complete.
func TestUpload(t *testing.T) {
	st, _ := open(t)
	for _, tc := range []struct {
		name        string
		size, chunk int
	}{
		{"empty", 0, 1},
		{"one byte", 1, 1},
		{"under a part", 100_000, 4096},
		{"exactly a part", s3store.MinPartSize, 1 << 20},
		{"three parts, the last short", 2*s3store.MinPartSize + 12_345, 1<<20 + 3},
		{"one write of several parts", 2*s3store.MinPartSize + 1, 2*s3store.MinPartSize + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "up/" + strings.ReplaceAll(tc.name, " ", "-")
			data := payload(tc.size)
			u, err := st.NewUpload(t.Context(), key, "text/csv", map[string]string{"Produced-At": "2026-11-26T08:00:00.000Z", "final": "true"}, s3store.MinPartSize)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := u.Write(data); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := st.Head(t.Context(), key); err != nil || ok {
				t.Fatalf("the object is there before Complete: %v %v", ok, err)
			}
			size, err := u.Complete()
			if err != nil || size != int64(tc.size) {
				t.Fatalf("complete: %d, %v", size, err)
			}
			got, obj := read(t, st, key)
			if !bytes.Equal(got, data) || obj.Size != int64(tc.size) || obj.ContentType != "text/csv" {
				t.Fatalf("read %d bytes (equal %v), size %d, type %q", len(got), bytes.Equal(got, data), obj.Size, obj.ContentType)
			}
			info, ok, err := st.Head(t.Context(), key)
			if err != nil || !ok || info.Size != int64(tc.size) || info.ETag == "" || info.ETag != obj.ETag ||
				info.Metadata["produced-at"] != "2026-11-26T08:00:00.000Z" || info.Metadata["final"] != "true" {
				t.Fatalf("head: %+v %v %v", info, ok, err)
			}
			if _, err := u.Write([]byte("x")); err == nil {
				t.Error("a write after Complete was taken")
			}
			if _, err := u.Complete(); err == nil {
				t.Error("a second Complete succeeded")
			}
			u.Abort() // after Complete: nothing happens
			if again, _ := read(t, st, key); !bytes.Equal(again, data) {
				t.Error("Abort after Complete changed the object")
			}
		})
	}
}

// An aborted or failed upload leaves the key as it was; a completed one
// replaces the object (another ETag).
func TestUploadAbortAndReplace(t *testing.T) {
	st, _ := open(t)
	key := "replace/file"
	first := payload(1000)
	upload(t, st, key, first, 0, 100, nil)
	before, _, _ := st.Head(t.Context(), key)

	// aborted after a part was sent
	u, err := st.NewUpload(t.Context(), key, "application/octet-stream", nil, s3store.MinPartSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(payload(s3store.MinPartSize + 10)); err != nil {
		t.Fatal(err)
	}
	u.Abort()
	u.Abort()
	if _, err := u.Write([]byte("x")); err == nil {
		t.Error("a write after Abort was taken")
	}
	if _, err := u.Complete(); err == nil {
		t.Error("Complete after Abort succeeded")
	}
	if got, _ := read(t, st, key); !bytes.Equal(got, first) {
		t.Fatal("an aborted upload changed the object")
	}

	// its context cancelled mid-upload
	ctx, cancel := context.WithCancel(t.Context())
	u, err = st.NewUpload(ctx, key, "application/octet-stream", nil, s3store.MinPartSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(payload(s3store.MinPartSize)); err != nil {
		t.Fatal(err)
	}
	cancel()
	var werr error
	for range 4 {
		if _, werr = u.Write(payload(s3store.MinPartSize)); werr != nil {
			break
		}
	}
	if _, err := u.Complete(); err == nil || werr == nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("an upload whose context ended: write %v, complete %v", werr, err)
	}
	if got, _ := read(t, st, key); !bytes.Equal(got, first) {
		t.Fatal("a cancelled upload changed the object")
	}

	second := payload(2000)
	upload(t, st, key, second, 0, 2000, nil)
	after, _, _ := st.Head(t.Context(), key)
	if got, _ := read(t, st, key); !bytes.Equal(got, second) || after.ETag == before.ETag {
		t.Fatalf("replaced: equal %v, ETag %s → %s", bytes.Equal(got, second), before.ETag, after.ETag)
	}
}

func TestMissingObject(t *testing.T) {
	st, _ := open(t)
	if _, ok, err := st.Head(t.Context(), "no/such/key"); ok || err != nil {
		t.Errorf("head: %v %v", ok, err)
	}
	if _, ok, err := st.Get(t.Context(), "no/such/key"); ok || err != nil {
		t.Errorf("get: %v %v", ok, err)
	}
}

// The server checks signatures: wrong credentials are refused.
func TestWrongCredentials(t *testing.T) {
	_, o := open(t)
	o.SecretKey += "x"
	bad := s3store.Open(o)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := bad.Ping(ctx); err == nil {
		t.Fatal("a wrong secret key was accepted")
	}
	if _, _, err := bad.Head(ctx, "any"); err == nil {
		t.Fatal("head with a wrong secret key was accepted")
	}
}

// RangeReader reads one version of the object at any offset, a block per
// request, with at most its blocks kept; a replaced or removed object is
// ErrChanged.
func TestRangeReader(t *testing.T) {
	st, _ := open(t)
	key := "range/file"
	data := payload(100_003)
	upload(t, st, key, data, 0, len(data), nil)
	info, _, err := st.Head(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	rr := st.NewRangeReader(t.Context(), key, info, 4096, 3)
	if rr.Size() != int64(len(data)) {
		t.Fatalf("size %d", rr.Size())
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		off := r.IntN(len(data))
		n := r.IntN(10_000)
		p := make([]byte, n)
		got, err := rr.ReadAt(p, int64(off))
		want := min(n, len(data)-off)
		if got != want || !bytes.Equal(p[:got], data[off:off+want]) || (got < n && err != io.EOF) || (got == n && err != nil && err != io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, got, err)
		}
	}
	if n, err := rr.ReadAt(make([]byte, 10), int64(len(data))); n != 0 || err != io.EOF {
		t.Errorf("at the end: %d, %v", n, err)
	}
	if _, err := rr.ReadAt(make([]byte, 10), -1); err == nil {
		t.Error("a negative offset was read")
	}
	// The whole object through a SectionReader, as Parquet reads it.
	all, err := io.ReadAll(io.NewSectionReader(rr, 0, rr.Size()))
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("whole: %d bytes, %v", len(all), err)
	}

	// Replaced: a block not kept is refused.
	other := bytes.Clone(data)
	other[0]++
	upload(t, st, key, other, 0, 50_000, nil)
	fresh := st.NewRangeReader(t.Context(), key, info, 4096, 3)
	if _, err := fresh.ReadAt(make([]byte, 10), 0); !errors.Is(err, s3store.ErrChanged) {
		t.Errorf("the replaced object: %v", err)
	}
	// Removed.
	if _, err := st.Client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(st.Bucket), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.ReadAt(make([]byte, 10), 50_000); !errors.Is(err, s3store.ErrChanged) {
		t.Errorf("the removed object: %v", err)
	}
}

// A presigned URL downloads the object with a plain GET until it expires;
// an altered one is refused.
func TestPresignGet(t *testing.T) {
	st, _ := open(t)
	key := "presign/file.csv"
	data := []byte("a,b\n1,2\n")
	upload(t, st, key, data, 0, len(data), nil)
	get := func(u string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	u, until, err := st.PresignGet(t.Context(), key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(until); d < 59*time.Minute || d > time.Hour {
		t.Errorf("expires in %s", d)
	}
	if code, b := get(u); code != http.StatusOK || !bytes.Equal(b, data) {
		t.Fatalf("presigned GET: %d %q", code, b)
	}
	pu, _ := url.Parse(u)
	q := pu.Query()
	sig := q.Get("X-Amz-Signature")
	q.Set("X-Amz-Signature", strings.Repeat("0", len(sig)))
	pu.RawQuery = q.Encode()
	if code, _ := get(pu.String()); code != http.StatusForbidden {
		t.Errorf("an altered signature: %d", code)
	}
	short, _, err := st.PresignGet(t.Context(), key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	if code, _ := get(short); code != http.StatusForbidden {
		t.Errorf("an expired URL: %d", code)
	}
}

// AbortStale removes the unfinished uploads of exactly the key begun
// before the time given, and leaves the others.
func TestAbortStale(t *testing.T) {
	st, _ := open(t)
	var ups []*s3store.Upload
	defer func() {
		for _, u := range ups {
			u.Abort() // their senders stop (the server's uploads are checked before)
		}
	}()
	start := func(key string) {
		u, err := st.NewUpload(t.Context(), key, "text/plain", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, u)
	}
	start("stale/a")
	start("stale/ab")
	time.Sleep(1100 * time.Millisecond) // S3 keeps the initiation time to the second
	cut := time.Now()
	time.Sleep(1100 * time.Millisecond)
	start("stale/a")
	if err := st.AbortStale(t.Context(), "stale/a", cut); err != nil {
		t.Fatal(err)
	}
	out, err := st.Client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(st.Bucket), Prefix: aws.String("stale/")})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, up := range out.Uploads {
		left = append(left, aws.ToString(up.Key))
	}
	if len(left) != 2 || !(left[0] == "stale/a" && left[1] == "stale/ab" || left[0] == "stale/ab" && left[1] == "stale/a") {
		t.Errorf("uploads left: %q, want the newer stale/a and stale/ab", left)
	}
}

// Without static keys the client takes its credentials from the AWS SDK's
// default chain (here its first link, the AWS_* variables; a Kubernetes
// service account's web identity or an instance profile come after it).
func TestDefaultCredentialChain(t *testing.T) {
	_, o := open(t)
	cases := []struct {
		name       string
		key, value string
		ok         bool
	}{
		{"the keys in the environment", o.AccessKey, o.SecretKey, true},
		{"a wrong secret in the environment", o.AccessKey, o.SecretKey + "x", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", c.key)
			t.Setenv("AWS_SECRET_ACCESS_KEY", c.value)
			t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
			chain := o
			chain.AccessKey, chain.SecretKey = "", ""
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := s3store.Open(chain).Ping(ctx); (err == nil) != c.ok {
				t.Fatalf("ping: %v, want success %v", err, c.ok)
			}
		})
	}
}
