// Command image builds Endcap's OCI image without a container engine: the
// production binary (go build ./cmd/endcap, no dev tag) on an empty base,
// with what it needs at run time taken from this Debian host's packages (the
// C libraries the binary links, found with ldd, with their symlinks; the CA
// certificates; the time-zone data), a non-root user, the
// org.opencontainers.image.* labels and the version.
//
// It writes one tarball that is at once an OCI image layout (oci-layout,
// index.json, blobs/: podman load, docker load, skopeo) and a `docker save`
// archive (manifest.json, whose paths point into blobs/: crane push, older
// docker load). Every timestamp is SOURCE_DATE_EPOCH (default 0), so the same
// inputs give the same bytes.
//
//	go run . -out ../../dist/endcap-oci.tar            # builds ../../cmd/endcap first
//	go run . -binary /path/to/endcap -out image.tar    # an already-built binary
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: the same numbers as distroless's nonroot, which the
// Helm chart's securityContext names too.
const (
	uid      = 65532
	userName = "endcap"
	binPath  = "/usr/local/bin/endcap"
	stateDir = "/var/lib/endcap" // the projector's claim store (ENDCAP_PROJECTOR_STATE_DIR)
	httpPort = "8080"
)

func main() {
	var o Options
	flag.StringVar(&o.Binary, "binary", "", "the endcap binary to put in the image (empty: go build -trimpath ./cmd/endcap of -src)")
	flag.StringVar(&o.Src, "src", "../..", "the Endcap module's directory (to build the binary, and for the version)")
	flag.StringVar(&o.Out, "out", "../../dist/endcap-oci.tar", "the OCI layout tarball to write")
	flag.StringVar(&o.Version, "version", "", "the image's version label and tag (empty: git describe --tags --always --dirty of -src)")
	flag.StringVar(&o.HostRoot, "host-root", "/", "the file system the run-time files (libraries, certificates, zoneinfo) are taken from")
	flag.BoolVar(&o.Trimpath, "trimpath", true, "build the binary with -trimpath (the same bytes from any checkout directory); false shares the build cache of go test")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// Options are the inputs of one build.
type Options struct {
	Binary, Src, Out, Version, HostRoot string
	Trimpath                            bool
	Created                             time.Time // zero: SOURCE_DATE_EPOCH, else the Unix epoch
}

func run(ctx context.Context, o Options) error {
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
			}
			o.Created = time.Unix(n, 0).UTC()
		}
	}
	if o.Version == "" {
		o.Version = gitOut(ctx, o.Src, "describe", "--tags", "--always", "--dirty")
		if o.Version == "" {
			o.Version = "dev"
		}
	}
	if o.Binary == "" {
		tmp, err := os.MkdirTemp("", "endcap-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		o.Binary = filepath.Join(tmp, "endcap")
		if err := buildBinary(ctx, o.Src, o.Binary, o.Trimpath); err != nil {
			return err
		}
	}
	img, err := Build(ctx, o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(o.Out + ".tmp")
	if err != nil {
		return err
	}
	if err := WriteArchive(f, img, "endcap:"+tagSafe(o.Version), o.Created); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(o.Out+".tmp", o.Out); err != nil {
		return err
	}
	st, err := os.Stat(o.Out)
	if err != nil {
		return err
	}
	size, err := compressedSize(img)
	if err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s: endcap:%s %s, %.1f MB (layers, compressed: %.1f MB)\n", o.Out, tagSafe(o.Version), d, float64(st.Size())/1e6, float64(size)/1e6)
	return nil
}

// buildBinary builds the production binary: no build tag, so neither the
// local stack nor the load generator; cgo as the default build has it (the
// H3 library), hence the C libraries in the image.
func buildBinary(ctx context.Context, src, out string, trimpath bool) error {
	args := []string{"build", "-buildvcs=false", "-o", out}
	if trimpath {
		args = append(args, "-trimpath")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/endcap")...)
	cmd.Dir = src
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/endcap: %w", err)
	}
	return nil
}

func gitOut(ctx context.Context, dir string, args ...string) string {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

var tagBad = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// tagSafe is v as an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}).
func tagSafe(v string) string {
	v = tagBad.ReplaceAllString(v, "-")
	if len(v) > 128 {
		v = v[:128]
	}
	if v == "" || v[0] == '.' || v[0] == '-' {
		v = "v" + v
	}
	return v
}

// Build assembles the image: a layer of the run-time files (libraries,
// certificates, time zones, the user), then a layer of the binary, which
// changes with every build while the first seldom does.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	libs, err := sharedLibraries(ctx, o.Binary)
	if err != nil {
		return nil, err
	}
	base := newTree(o.HostRoot, o.Created)
	for _, d := range []string{"/etc", "/tmp", "/usr/local/bin", "/var/lib", "/home"} {
		base.dir(d, 0o755, 0)
	}
	base.dirMode("/tmp", 0o1777, 0) // sticky, like every /tmp
	base.dir(stateDir, 0o700, uid)
	base.dir("/home/"+userName, 0o700, uid)
	base.file("/etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:Endcap:/home/%s:/sbin/nologin\n", userName, uid, uid, userName)))
	base.file("/etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)))
	base.file("/etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	for _, l := range libs {
		if err := base.copyPath(l); err != nil {
			return nil, err
		}
	}
	if err := base.copyPath("/etc/ssl/certs/ca-certificates.crt"); err != nil {
		return nil, fmt.Errorf("CA certificates (Debian's ca-certificates): %w", err)
	}
	if err := base.copyTree("/usr/share/zoneinfo"); err != nil {
		return nil, fmt.Errorf("time-zone data (Debian's tzdata): %w", err)
	}
	pkgs := debianPackages(ctx, append(append([]string{}, libs...), "/usr/share/zoneinfo/UTC", "/usr/share/ca-certificates"))
	for _, p := range pkgs {
		// The packages' licences travel with their files.
		_ = base.copyPath("/usr/share/doc/" + strings.SplitN(p, "=", 2)[0] + "/copyright")
	}
	baseLayer, err := base.layer()
	if err != nil {
		return nil, err
	}

	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	app := newTree(o.HostRoot, o.Created)
	app.dir("/usr/local/bin", 0o755, 0)
	app.file(binPath, 0o755, bin)
	appLayer, err := app.layer()
	if err != nil {
		return nil, err
	}

	created := v1.Time{Time: o.Created}
	labels := map[string]string{
		"org.opencontainers.image.title":         "endcap",
		"org.opencontainers.image.description":   "Endcap, a retail-media ad platform: the API, the projectors and the exporter in one binary (endcap serve --target=api|projector|exporter)",
		"org.opencontainers.image.version":       o.Version,
		"org.opencontainers.image.created":       o.Created.Format(time.RFC3339),
		"org.opencontainers.image.source":        "https://github.com/endcap/endcap",
		"org.opencontainers.image.url":           "https://github.com/endcap/endcap",
		"org.opencontainers.image.documentation": "https://github.com/endcap/endcap/blob/main/docs/operations/deploy.md",
		"org.opencontainers.image.licenses":      "Apache-2.0",
		"org.opencontainers.image.vendor":        "Endcap",
	}
	if rev := gitOut(ctx, o.Src, "rev-parse", "HEAD"); rev != "" {
		labels["org.opencontainers.image.revision"] = rev
	}
	if len(pkgs) > 0 {
		labels["org.debian.packages"] = strings.Join(pkgs, " ")
	}
	cf := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", uid, uid),
			Entrypoint: []string{binPath},
			Cmd:        []string{"serve"},
			WorkingDir: "/home/" + userName,
			Env: []string{
				"PATH=/usr/local/bin:/usr/bin:/bin",
				"HOME=/home/" + userName,
				"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
				// A container is reached from outside it: listen on every
				// interface (the binary's default is loopback).
				"ENDCAP_HTTP_ADDR=0.0.0.0:" + httpPort,
				"ENDCAP_PROJECTOR_STATE_DIR=" + stateDir,
			},
			ExposedPorts: map[string]struct{}{httpPort + "/tcp": {}},
			Labels:       labels,
			StopSignal:   "SIGTERM",
		},
	}
	img, err := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), cf)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "tools/image: C libraries (ldd), CA certificates, zoneinfo, user " + userName, Comment: strings.Join(pkgs, " ")}},
		mutate.Addendum{Layer: appLayer, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "tools/image: go build -trimpath ./cmd/endcap (production build)"}},
	)
	if err != nil {
		return nil, err
	}
	return img, nil
}

// sharedLibraries are the files ldd lists for the binary (the dynamic
// loader included), as the paths the loader asks for: none for a static
// binary.
func sharedLibraries(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).CombinedOutput()
	s := string(out)
	if strings.Contains(s, "not a dynamic executable") || strings.Contains(s, "statically linked") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %v: %s", bin, err, s)
	}
	var libs []string
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>":
			if f[2] == "not" {
				return nil, fmt.Errorf("ldd %s: %s is not found", bin, f[0])
			}
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0]) // the loader
		}
	}
	sort.Strings(libs)
	return libs, nil
}

// debianPackages are the Debian packages (name=version) that own paths,
// for the image's label; none off Debian.
func debianPackages(ctx context.Context, paths []string) []string {
	seen := map[string]bool{}
	var pkgs []string
	for _, p := range paths {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-S", p).Output()
		if err != nil {
			continue
		}
		name := strings.SplitN(strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0], ":", 2)[0]
		if seen[name] {
			continue
		}
		seen[name] = true
		v, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", "${Version}", name).Output()
		if err != nil {
			continue
		}
		pkgs = append(pkgs, name+"="+string(v))
	}
	sort.Strings(pkgs)
	return pkgs
}

// tree is the content of one layer: entries by path, written in path order
// with one fixed time, owner root unless said.
type tree struct {
	host    string
	mtime   time.Time
	entries map[string]*tar.Header
	data    map[string][]byte
}

func newTree(host string, mtime time.Time) *tree {
	return &tree{host: host, mtime: mtime, entries: map[string]*tar.Header{}, data: map[string][]byte{}}
}

func (t *tree) hdr(p string, typ byte, mode int64, owner int) *tar.Header {
	return &tar.Header{Typeflag: typ, Name: strings.TrimPrefix(p, "/"), Mode: mode, Uid: owner, Gid: owner, ModTime: t.mtime, Format: tar.FormatPAX}
}

// parents adds the missing directories above p.
func (t *tree) parents(p string) {
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		if _, ok := t.entries[d]; !ok {
			t.entries[d] = t.hdr(d+"/", tar.TypeDir, 0o755, 0)
		}
	}
}

func (t *tree) dir(p string, mode int64, owner int) {
	t.parents(p)
	if _, ok := t.entries[p]; !ok {
		t.entries[p] = t.hdr(p+"/", tar.TypeDir, mode, owner)
	}
}

func (t *tree) dirMode(p string, mode int64, owner int) {
	t.parents(p)
	t.entries[p] = t.hdr(p+"/", tar.TypeDir, mode, owner)
}

func (t *tree) file(p string, mode int64, b []byte) {
	t.parents(p)
	h := t.hdr(p, tar.TypeReg, mode, 0)
	h.Size = int64(len(b))
	t.entries[p] = h
	t.data[p] = b
}

func (t *tree) symlink(p, target string) {
	t.parents(p)
	h := t.hdr(p, tar.TypeSymlink, 0o777, 0)
	h.Linkname = target
	t.entries[p] = h
}

// copyPath copies the host's file p, with every symlink on the way to it
// (a merged-/usr system's /lib -> usr/lib, a library's soname link) as a
// symlink and its target too.
func (t *tree) copyPath(p string) error {
	return t.copyPathDepth(path.Clean(p), 0)
}

func (t *tree) copyPathDepth(p string, depth int) error {
	if depth > 40 {
		return fmt.Errorf("%s: too many symlinks", p)
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		cur = path.Join(cur, part)
		fi, err := os.Lstat(filepath.Join(t.host, cur))
		if err != nil {
			return err
		}
		rest := path.Join(parts[i+1:]...)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(t.host, cur))
			if err != nil {
				return err
			}
			t.symlink(cur, target)
			resolved := target
			if !path.IsAbs(target) {
				resolved = path.Join(path.Dir(cur), target)
			}
			return t.copyPathDepth(path.Join(resolved, rest), depth+1)
		case fi.IsDir():
			if rest == "" {
				return fmt.Errorf("%s is a directory", p)
			}
			t.dir(cur, int64(fi.Mode().Perm()), 0)
		case fi.Mode().IsRegular():
			if rest != "" {
				return fmt.Errorf("%s: %s is not a directory", p, cur)
			}
			b, err := os.ReadFile(filepath.Join(t.host, cur))
			if err != nil {
				return err
			}
			t.file(cur, int64(fi.Mode().Perm()), b)
		default:
			return fmt.Errorf("%s: not a file, directory or symlink", cur)
		}
	}
	return nil
}

// copyTree copies the host's directory p and everything under it, symlinks
// as symlinks.
func (t *tree) copyTree(p string) error {
	root := filepath.Join(t.host, p)
	return filepath.WalkDir(root, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, hp)
		if err != nil {
			return err
		}
		ip := path.Join(p, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(hp)
			if err != nil {
				return err
			}
			t.symlink(ip, target)
		case fi.IsDir():
			t.dir(ip, int64(fi.Mode().Perm()), 0)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(hp)
			if err != nil {
				return err
			}
			t.file(ip, int64(fi.Mode().Perm()), b)
		}
		return nil
	})
}

// layer is the tree as a gzip-compressed OCI layer.
func (t *tree) layer() (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(t.entries))
	for n := range t.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(t.entries[n]); err != nil {
			return nil, err
		}
		if b, ok := t.data[n]; ok {
			if _, err := tw.Write(b); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func compressedSize(img v1.Image) (int64, error) {
	ls, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range ls {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += s
	}
	return n, nil
}

// WriteArchive writes img as an OCI image layout in a tar stream, with a
// docker-save manifest.json beside its index.json; every entry dated mtime.
func WriteArchive(w io.Writer, img v1.Image, ref string, mtime time.Time) error {
	tw := tar.NewWriter(w)
	put := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

	rawManifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	mDigest, err := img.Digest()
	if err != nil {
		return err
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}

	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     types.OCIImageIndex,
		"manifests": []map[string]any{{
			"mediaType": types.OCIManifestSchema1,
			"digest":    mDigest.String(),
			"size":      len(rawManifest),
			"annotations": map[string]string{
				"io.containerd.image.name":          "docker.io/library/" + ref,
				"org.opencontainers.image.ref.name": strings.SplitN(ref, ":", 2)[1],
			},
		}},
	}
	ib, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := put("index.json", ib); err != nil {
		return err
	}
	var layerPaths []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		layerPaths = append(layerPaths, blob(d))
	}
	db, err := json.Marshal([]map[string]any{{"Config": blob(cDigest), "RepoTags": []string{ref}, "Layers": layerPaths}})
	if err != nil {
		return err
	}
	if err := put("manifest.json", db); err != nil {
		return err
	}
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	if err := put(blob(mDigest), rawManifest); err != nil {
		return err
	}
	if err := put(blob(cDigest), rawConfig); err != nil {
		return err
	}
	for i, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if err := put(layerPaths[i], b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return nil
}
