package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// A dynamically linked binary of the host stands in for endcap: the image
// around it is built the same way.
func hostBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) on this host")
	}
	return p
}

func buildArchive(t *testing.T, out string) {
	t.Helper()
	created := time.Unix(1700000000, 0).UTC()
	img, err := Build(context.Background(), Options{Binary: hostBinary(t), Src: "../..", Version: "v1.2.3", HostRoot: "/", Created: created})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteArchive(f, img, "endcap:v1.2.3", created); err != nil {
		t.Fatal(err)
	}
}

// The same inputs give the same bytes; the archive is a valid OCI layout
// (what podman and docker load read) and a valid docker-save archive (what
// crane push reads), both the same image.
func TestArchiveReproducibleAndLoadable(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	buildArchive(t, a)
	buildArchive(t, b)
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatal("two builds of the same inputs differ")
	}

	// crane push's path: the docker-save manifest.json.
	fromTar, err := tarball.ImageFromPath(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(fromTar); err != nil {
		t.Fatalf("as a docker-save archive: %v", err)
	}
	// podman load's path: the OCI layout.
	root := filepath.Join(dir, "layout")
	untar(t, ab, root)
	idx, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index: %v, %+v", err, m)
	}
	if got := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != "v1.2.3" {
		t.Errorf("ref name %q, want v1.2.3", got)
	}
	fromLayout, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(fromLayout); err != nil {
		t.Fatalf("as an OCI layout: %v", err)
	}
	// crane rebuilds a manifest of its own from manifest.json: the same
	// configuration and layers.
	c1, _ := fromTar.ConfigName()
	c2, _ := fromLayout.ConfigName()
	if c1 != c2 {
		t.Errorf("the docker-save manifest reads configuration %s, the OCI index %s", c1, c2)
	}
	l1, _ := fromTar.Layers()
	l2, _ := fromLayout.Layers()
	if len(l1) != len(l2) || len(l1) != 2 {
		t.Fatalf("%d and %d layers, want 2", len(l1), len(l2))
	}
	for i := range l1 {
		d1, _ := l1[i].Digest()
		d2, _ := l2[i].Digest()
		if d1 != d2 {
			t.Errorf("layer %d: %s and %s", i, d1, d2)
		}
	}

	cf, err := fromLayout.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" || !cf.Created.Time.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("config: user %q, version %q, created %v", cf.Config.User, cf.Config.Labels["org.opencontainers.image.version"], cf.Created)
	}

	// The file system: the binary, its loader and C library with the
	// symlinks that lead to them, certificates, zoneinfo, the user.
	files := map[string]*tar.Header{}
	rc := mutate.Extract(fromLayout)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = h
		if h.ModTime.Unix() != 1700000000 {
			t.Errorf("%s dated %v", h.Name, h.ModTime)
		}
	}
	libs, err := sharedLibraries(context.Background(), hostBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) == 0 {
		t.Fatal("ldd found no library of a dynamic binary")
	}
	for _, want := range append(libs, binPath, "/etc/ssl/certs/ca-certificates.crt", "/usr/share/zoneinfo/America/New_York", "/etc/passwd", stateDir) {
		if !resolves(files, want) {
			t.Errorf("the image lacks %s", want)
		}
	}
	if h := files[stateDir]; h == nil || h.Uid != uid {
		t.Errorf("%s is not the user's", stateDir)
	}
	if h := files["/tmp"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp is not world-writable and sticky: %+v", h)
	}
}

// resolves says whether p names a file of the image, following its
// symlinks as the kernel would.
func resolves(files map[string]*tar.Header, p string) bool {
	for range 40 {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := ""
		moved := false
		for i, part := range parts {
			cur += "/" + part
			h, ok := files[cur]
			if !ok {
				return false
			}
			if h.Typeflag == tar.TypeSymlink {
				target := h.Linkname
				if !strings.HasPrefix(target, "/") {
					target = filepath.Join(filepath.Dir(cur), target)
				}
				p = filepath.Join(append([]string{target}, parts[i+1:]...)...)
				moved = true
				break
			}
		}
		if !moved {
			return true
		}
	}
	return false
}

func untar(t *testing.T, b []byte, root string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
