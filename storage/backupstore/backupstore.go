// Package backupstore is where a backup's files go: a directory
// (file:///path) or a prefix of an S3 bucket (s3://bucket/prefix). A file
// appears whole or not at all (a temporary file renamed; an S3 multipart
// upload completed), so a backup cut short never leaves a half-written
// file under its name.
package backupstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/endcap/endcap/storage/s3store"
)

// Target is where a backup's files are written and read.
type Target interface {
	// Put writes name from r; it returns the bytes written.
	Put(ctx context.Context, name string, r io.Reader) (int64, error)
	// Get opens name; ok is false when it does not exist.
	Get(ctx context.Context, name string) (rc io.ReadCloser, ok bool, err error)
	// String is the target's URL.
	String() string
}

// Open returns the target of a URL: file:///absolute/path or
// s3://bucket/prefix. An s3 URL uses o for everything but the bucket
// (the endpoint, region, credentials and deadlines of ENDCAP_S3_*).
func Open(raw string, o s3store.Options) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("backup URL %q: %w", raw, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("backup URL %q: a file URL names a local path: file:///path", raw)
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("backup URL %q: the path must be absolute (file:///path)", raw)
		}
		return &dir{root: filepath.Clean(u.Path), url: raw}, nil
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("backup URL %q: no bucket (s3://bucket/prefix)", raw)
		}
		o.Bucket = u.Host
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" {
			prefix += "/"
		}
		return &bucket{st: s3store.Open(o), prefix: prefix, url: raw}, nil
	}
	return nil, fmt.Errorf("backup URL %q: want file:///path or s3://bucket/prefix", raw)
}

// validName refuses names that would leave the target.
func validName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name || strings.HasPrefix(name, "..") {
		return fmt.Errorf("backup: file name %q is not a plain relative path", name)
	}
	return nil
}

type dir struct {
	root, url string
}

func (d *dir) String() string { return d.url }

func (d *dir) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	if err := validName(name); err != nil {
		return 0, err
	}
	p := filepath.Join(d.root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".part-*")
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return 0, fmt.Errorf("backup: write %s: %w", p, err)
	}
	return n, nil
}

func (d *dir) Get(_ context.Context, name string) (io.ReadCloser, bool, error) {
	if err := validName(name); err != nil {
		return nil, false, err
	}
	f, err := os.Open(filepath.Join(d.root, filepath.FromSlash(name)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("backup: %w", err)
	}
	return f, true, nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type bucket struct {
	st     *s3store.Store
	prefix string
	url    string
}

func (b *bucket) String() string { return b.url }

func (b *bucket) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	if err := validName(name); err != nil {
		return 0, err
	}
	up, err := b.st.NewUpload(ctx, b.prefix+name, "application/octet-stream", nil, 0)
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(up, ctxReader{ctx, r}); err != nil {
		up.Abort()
		return 0, fmt.Errorf("backup: upload %s: %w", name, err)
	}
	return up.Complete()
}

func (b *bucket) Get(ctx context.Context, name string) (io.ReadCloser, bool, error) {
	if err := validName(name); err != nil {
		return nil, false, err
	}
	obj, ok, err := b.st.Get(ctx, b.prefix+name)
	if err != nil || !ok {
		return nil, ok, err
	}
	return obj.Body, true, nil
}
