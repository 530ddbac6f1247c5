package spill_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/endcap/endcap/storage/spill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStore: values are read back, replaced and deleted; a closed store
// answers ErrClosed (never a panic) and its directory is gone; a store left
// by a process that ended without Close is removed by the next Open in the
// same directory, a live one is not.
func TestStore(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "spill-stale")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "LOCK"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	live, err := spill.Open(spill.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	s, err := spill.Open(spill.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale store is still there: %v", err)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Fatalf("a live store was removed: %v", err)
	}

	get := func(key string) (string, error) {
		v, err := s.Get([]byte("x"), []byte(key))
		return string(v), err
	}
	if _, err := get("a"); !errors.Is(err, spill.ErrMissing) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	for _, v := range []string{"one", "two"} {
		if err := s.Set([]byte("a"), []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got, err := get("a"); err != nil || got != "x"+v {
			t.Fatalf("Get = %q, %v; want %q", got, err, "x"+v)
		}
	}
	if err := s.Delete([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := get("a"); !errors.Is(err, spill.ErrMissing) {
		t.Fatalf("Get after Delete: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the closed store's directory is still there: %v", err)
	}
	if _, err := get("a"); !errors.Is(err, spill.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := s.Set([]byte("a"), nil); !errors.Is(err, spill.ErrClosed) {
		t.Fatalf("Set after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}
