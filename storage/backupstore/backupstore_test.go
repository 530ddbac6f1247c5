package backupstore

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/endcap/endcap/storage/s3store"
)

func TestOpenURLs(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		url, err string
	}{
		{"file://" + dir, ""},
		{"s3://bucket/some/prefix", ""},
		{"s3://bucket", ""},
		{"file://relative/path", "a file URL names a local path"},
		{"file:relative", "the path must be absolute"},
		{"s3:///prefix", "no bucket"},
		{"http://example.com/x", "want file:///path or s3://bucket/prefix"},
		{"/just/a/path", "want file:///path or s3://bucket/prefix"},
		{"%zz", "invalid URL escape"},
	} {
		_, err := Open(c.url, s3store.Options{})
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Open(%q): %v, want %q", c.url, err, c.err)
		}
	}
}

func TestDirPutGet(t *testing.T) {
	root := t.TempDir()
	tg, err := Open("file://"+root, s3store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n, err := tg.Put(ctx, "clickhouse/events_raw/202611-ab.native.gz", strings.NewReader("rows")); err != nil || n != 4 {
		t.Fatalf("Put: %d, %v", n, err)
	}
	rc, ok, err := tg.Get(ctx, "clickhouse/events_raw/202611-ab.native.gz")
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "rows" {
		t.Fatalf("read %q", b)
	}
	if _, ok, err := tg.Get(ctx, "manifest.json"); ok || err != nil {
		t.Fatalf("a missing file: %v %v", ok, err)
	}
	// No temporary file is left, and nothing is written outside the root.
	ents, _ := os.ReadDir(filepath.Join(root, "clickhouse", "events_raw"))
	if len(ents) != 1 {
		t.Fatalf("files: %v", ents)
	}
	for _, name := range []string{"../escape", "/abs", "a/../../b", "", "a//b"} {
		if _, err := tg.Put(ctx, name, strings.NewReader("x")); err == nil {
			t.Errorf("Put(%q) was accepted", name)
		}
		if _, _, err := tg.Get(ctx, name); err == nil {
			t.Errorf("Get(%q) was accepted", name)
		}
	}
	// A write cut by its context leaves no file under the name.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tg.Put(cctx, "cut", strings.NewReader("x")); err == nil {
		t.Fatal("a cancelled Put succeeded")
	}
	if _, ok, _ := tg.Get(ctx, "cut"); ok {
		t.Fatal("a cancelled Put left its file")
	}
}
