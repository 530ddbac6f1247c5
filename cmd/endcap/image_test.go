package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/testkit/testenv"
)

// TestImageRunsTheAPI builds the OCI image the way `make image` does
// (tools/image, the production binary), unpacks its layers into a root
// directory as a container runtime would, and starts the image's entrypoint
// in that root (chroot; a user namespace when the test is not root) as the
// image's user, `serve --target=api` against the test servers: the image
// holds every file the binary needs at run time, its user may run it, and
// the API becomes ready (/readyz 200).
func TestImageRunsTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image")
	}
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)

	dir := t.TempDir()
	archive := filepath.Join(dir, "endcap-oci.tar")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// -trimpath=false: the binary's packages are those go test has just
	// compiled (a -trimpath build compiles every one of them again).
	build := exec.CommandContext(ctx, "go", "run", ".", "-src", "../..", "-out", archive, "-version", "v0.0.0-test", "-trimpath=false")
	build.Dir = filepath.Join("..", "..", "tools", "image")
	build.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tools/image: %v\n%s", err, out)
	}

	root := filepath.Join(dir, "root")
	img := unpackImage(t, archive, root)
	if img.Config.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532 (not root)", img.Config.User)
	}
	if got := img.Config.Labels["org.opencontainers.image.version"]; got != "v0.0.0-test" {
		t.Errorf("label org.opencontainers.image.version %q, want v0.0.0-test", got)
	}
	for _, l := range []string{"org.opencontainers.image.title", "org.opencontainers.image.source", "org.opencontainers.image.revision", "org.opencontainers.image.created"} {
		if img.Config.Labels[l] == "" {
			t.Errorf("label %s missing", l)
		}
	}
	if len(img.Config.Entrypoint) != 1 {
		t.Fatalf("entrypoint %q, want the binary", img.Config.Entrypoint)
	}
	for _, f := range []string{"etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo/America/New_York", "etc/passwd"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("image lacks %s: %v", f, err)
		}
	}

	port := freeTCPPort(t)
	settings := map[string]string{
		"ENDCAP_HTTP_ADDR":           fmt.Sprintf("127.0.0.1:%d", port),
		"ENDCAP_KAFKA_BROKERS":       strings.Join(brokers, ","),
		"ENDCAP_KAFKA_TOPIC_PREFIX":  cfg.KafkaTopicPrefix,
		"ENDCAP_CLICKHOUSE_ADDR":     cfg.ClickHouseAddr,
		"ENDCAP_CLICKHOUSE_DATABASE": cfg.ClickHouseDatabase,
		"ENDCAP_REDIS_ADDR":          cfg.RedisAddr,
		"ENDCAP_REDIS_CLUSTER":       strconv.FormatBool(cfg.RedisCluster),
		"ENDCAP_S3_ENDPOINT":         cfg.S3Endpoint,
		"ENDCAP_S3_BUCKET":           cfg.S3Bucket,
		"ENDCAP_S3_ACCESS_KEY":       cfg.S3AccessKey,
		"ENDCAP_S3_SECRET_KEY":       cfg.S3SecretKey,
		"ENDCAP_BID_SIGNING_KEYS":    cfg.BidSigningKeys,
		"ENDCAP_CURSOR_SECRET":       cfg.CursorSecret,
		"ENDCAP_READYZ_DETAIL":       "true",
	}
	procEnv := append([]string{}, img.Config.Env...)
	for k, v := range settings {
		procEnv = append(procEnv, k+"="+v)
	}
	var log bytes.Buffer
	cmd := exec.Command(img.Config.Entrypoint[0], "serve", "--target=api")
	cmd.Env = procEnv
	cmd.Dir = img.Config.WorkingDir
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = chrootAs(t, root, img.Config.User)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s in the image's root: %v", img.Config.Entrypoint[0], err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})

	// The process runs as the image's user, not root.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" && os.Getuid() == 0 && f[1] != "65532" {
				t.Errorf("the process runs as uid %s, want 65532", f[1])
			}
		}
	}

	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for {
		select {
		case <-done:
			t.Fatalf("endcap serve --target=api ended in the image's root (%v):\n%s", cmd.ProcessState, log.String())
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 within 90 s (last: %s); the process's log:\n%s", last, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// imageConfig is the part of the OCI image configuration the test reads.
type imageConfig struct {
	Config struct {
		User       string
		Entrypoint []string
		Env        []string
		WorkingDir string
		Labels     map[string]string
	} `json:"config"`
}

// unpackImage reads the OCI layout tarball (index.json, the manifest, the
// blobs), checks every blob against its digest, and extracts the layers in
// order into root; it returns the image's configuration.
func unpackImage(t *testing.T, archive, root string) imageConfig {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
	if _, ok := files["oci-layout"]; !ok {
		t.Fatal("the archive has no oci-layout file: not an OCI image layout")
	}
	blob := func(digest string) []byte {
		t.Helper()
		b, ok := files["blobs/"+strings.Replace(digest, ":", "/", 1)]
		if !ok {
			t.Fatalf("blob %s missing", digest)
		}
		if got := sha256Hex(b); "sha256:"+got != digest {
			t.Fatalf("blob %s has digest sha256:%s", digest, got)
		}
		return b
	}
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(index.Manifests))
	}
	var manifest struct {
		MediaType string `json:"mediaType"`
		Config    struct{ Digest string }
		Layers    []struct{ Digest, MediaType string }
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %q", manifest.MediaType)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, l := range manifest.Layers {
		if l.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Errorf("layer media type %q", l.MediaType)
		}
		if err := extractLayer(blob(l.Digest), root); err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
	}
	return cfg
}

func extractLayer(gz []byte, root string) error {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + h.Name)
		p := filepath.Join(root, name)
		mode := os.FileMode(h.Mode & 0o777)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, mode|stickyBit(h.Mode)); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			_ = os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
		if os.Getuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				return err
			}
		}
	}
}

func stickyBit(mode int64) os.FileMode {
	if mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// chrootAs runs the child in root as user ("uid:gid"): as root, a plain
// chroot and setuid; otherwise in a user namespace whose only user is that
// uid, mapped to the test's.
func chrootAs(t *testing.T, root, user string) *syscall.SysProcAttr {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || errors.Join(err1, err2) != nil {
		t.Fatalf("image user %q is not uid:gid", user)
	}
	if os.Getuid() == 0 {
		// The kernel changes the root before the user: the test's
		// directories above root need not be open to the image's user.
		return &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	return &syscall.SysProcAttr{
		Chroot:                     root,
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		Credential:                 &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
