package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/redisstore"
)

// TLSRedis is a redis-server of one test's own that speaks TLS only, with
// the users of an ACL file and the default user off.
type TLSRedis struct {
	Addr string // 127.0.0.1:port, TLS
	// CA is the PEM file of the authority that signed the server's
	// certificate (for 127.0.0.1 and localhost); OtherCA one that did not.
	CA, OtherCA string
	// Admin is a client of the user "admin", who may run every command
	// (to look at what the test did, ACL LOG).
	Admin redis.UniversalClient
}

// OwnTLSRedis starts, for one test, Debian's redis-server with TLS on a
// free port (no plaintext port), certificates made for it, and an ACL file
// of the user "admin" (every command; password adminPassword) and of the
// given lines (e.g. "user endcap on >secret ~ec:* -@all +get"), with that
// many replicas (TLS replication, as admin) attached before it returns. They
// are stopped when the test ends. It skips or fails like Get when redis-server
// is not installed.
func OwnTLSRedis(t testing.TB, adminPassword string, replicas int, users ...string) *TLSRedis {
	t.Helper()
	return ownTLSRedis(t, adminPassword, replicas, 0, users)
}

// OwnTLSRedisCluster is OwnTLSRedis as a Redis Cluster of that many
// masters (at least 3, no replicas) that speak TLS to clients and to each
// other; Addr lists them separated by commas and Admin is a cluster client.
func OwnTLSRedisCluster(t testing.TB, adminPassword string, masters int, users ...string) *TLSRedis {
	t.Helper()
	return ownTLSRedis(t, adminPassword, 0, masters, users)
}

func ownTLSRedis(t testing.TB, adminPassword string, replicas, masters int, users []string) *TLSRedis {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs redis-server (not in -short)")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		bin = "/usr/bin/redis-server"
		if _, serr := os.Stat(bin); serr != nil {
			if os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
				t.Skipf("redis-server not installed (run deploy/local/install.sh): %v", err)
			}
			t.Fatalf("redis-server: %v", err)
		}
	}
	dir := t.TempDir()
	caPEM, caCert, caKey := makeCA(t, "endcap test redis CA")
	otherPEM, _, _ := makeCA(t, "another CA")
	srvCert, srvKey := makeLeaf(t, caCert, caKey)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := &TLSRedis{CA: write("ca.pem", caPEM), OtherCA: write("other-ca.pem", otherPEM)}
	acl := append([]string{"user default off", "user admin on >" + adminPassword + " ~* &* +@all"}, users...)
	aclFile := write("users.acl", []byte(strings.Join(acl, "\n")+"\n"))
	srvPEM, keyPEM := write("server.pem", srvCert), write("server-key.pem", srvKey)
	start := func(name string, port int, extra ...string) (done chan struct{}, log string) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		log = filepath.Join(d, "redis.log")
		logf, err := os.Create(log)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, append([]string{"--bind", "127.0.0.1", "--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", srvPEM, "--tls-key-file", keyPEM, "--tls-ca-cert-file", r.CA, "--tls-auth-clients", "no",
			"--aclfile", aclFile, "--dir", d, "--save", "", "--appendonly", "no", "--daemonize", "no", "--set-proc-title", "no"}, extra...)...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with the test binary, however it ends
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		done = make(chan struct{})
		go func() { _ = cmd.Wait(); close(done); _ = logf.Close() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
		})
		return done, log
	}
	port := freePort(t)
	r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var clusterArgs []string
	if masters > 0 {
		clusterArgs = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--tls-cluster", "yes", "--cluster-node-timeout", "2000"}
	}
	bus := func() []string {
		if masters == 0 {
			return nil
		}
		return append([]string{"--cluster-port", strconv.Itoa(freePort(t))}, clusterArgs...)
	}
	done, logFile := start("master", port, bus()...)
	addrs := []string{r.Addr}
	for i := 2; i <= masters; i++ {
		p := freePort(t)
		start(fmt.Sprintf("master-%d", i), p, bus()...)
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	tc, err := redisstore.TLSConfig(r.CA)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if masters > 0 {
		for _, a := range addrs {
			node := redisstore.Open(redisstore.Options{Addr: a, Username: "admin", Password: adminPassword, TLS: tc})
			for node.Ping(ctx).Err() != nil && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			_ = node.Close()
		}
		args := append([]string{"--tls", "--cacert", r.CA, "--user", "admin", "--pass", adminPassword, "--no-auth-warning", "--cluster", "create"}, addrs...)
		cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
		out, err := exec.CommandContext(cctx, "redis-cli", append(args, "--cluster-yes")...).CombinedOutput()
		ccancel()
		if err != nil {
			log, _ := os.ReadFile(logFile)
			t.Fatalf("redis-cli --cluster create: %v\n%s\n%s", err, out, log)
		}
		r.Addr = strings.Join(addrs, ",")
	}
	r.Admin = redisstore.Open(redisstore.Options{Addr: r.Addr, Username: "admin", Password: adminPassword, TLS: tc, Cluster: masters > 0})
	t.Cleanup(func() { _ = r.Admin.Close() })
	ready := func(ok func(context.Context) error) {
		for {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			err := ok(pctx)
			pcancel()
			if err == nil {
				return
			}
			select {
			case <-done:
				log, _ := os.ReadFile(logFile)
				t.Fatalf("redis-server with TLS exited: %s", log)
			case <-ctx.Done():
				log, _ := os.ReadFile(logFile)
				t.Fatalf("redis-server with TLS not ready: %v\n%s", err, log)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	ready(func(ctx context.Context) error { return r.Admin.Ping(ctx).Err() })
	if masters > 0 {
		ready(func(ctx context.Context) error {
			return redisstore.ForEachMaster(ctx, r.Admin, func(ctx context.Context, m *redis.Client) error {
				info, err := m.ClusterInfo(ctx).Result()
				if err == nil && !strings.Contains(info, "cluster_state:ok") {
					err = errors.New("cluster not ready")
				}
				return err
			})
		})
	}
	for i := range replicas {
		start(fmt.Sprintf("replica-%d", i+1), freePort(t), "--replicaof", "127.0.0.1", strconv.Itoa(port),
			"--tls-replication", "yes", "--masteruser", "admin", "--masterauth", adminPassword)
	}
	if replicas > 0 {
		ready(func(ctx context.Context) error {
			info, err := r.Admin.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if n := strings.Count(info, ",state=online,"); n < replicas {
				return fmt.Errorf("%d of %d replicas in sync", n, replicas)
			}
			return nil
		})
	}
	return r
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// makeCA returns a self-signed authority: its certificate in PEM, parsed,
// and its key.
func makeCA(t testing.TB, name string) ([]byte, *x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, key
}

// makeLeaf returns a server certificate for 127.0.0.1 and localhost signed
// by the authority, and its key, in PEM.
func makeLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}} // the cluster bus: a client too
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

// ACLLog returns the entries of the ACL LOG of every master (commands and keys
// refused to a user), each as "user: reason object".
func (r *TLSRedis) ACLLog(ctx context.Context) ([]string, error) {
	var v []any
	var mu sync.Mutex
	err := redisstore.ForEachMaster(ctx, r.Admin, func(ctx context.Context, m *redis.Client) error {
		entries, err := m.Do(ctx, "ACL", "LOG").Slice()
		mu.Lock()
		v = append(v, entries...)
		mu.Unlock()
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range v {
		var fields map[string]any
		switch m := e.(type) {
		case map[any]any:
			fields = map[string]any{}
			for k, v := range m {
				fields[k.(string)] = v
			}
		case []any:
			fields = map[string]any{}
			for i := 0; i+1 < len(m); i += 2 {
				fields[m[i].(string)] = m[i+1]
			}
		default:
			return nil, errors.New("ACL LOG: unexpected entry")
		}
		out = append(out, strings.TrimSpace(fmtAny(fields["username"])+": "+fmtAny(fields["reason"])+" "+fmtAny(fields["object"])+" ("+fmtAny(fields["context"])+")"))
	}
	return out, nil
}

func fmtAny(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// DocumentedACLRule is the ACL rule of the user "endcap" that
// docs/operations/operations.md gives (its one `ACL SETUSER endcap` line),
// with password, as a line of an ACL file for OwnTLSRedis: what Endcap
// needs of Redis, proven by the tests that run on it.
func DocumentedACLRule(t testing.TB, password string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for { // the module's root: the first directory up with a go.mod
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
	b, err := os.ReadFile(filepath.Join(dir, "docs", "operations", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^ACL SETUSER endcap (.*)$").FindAllStringSubmatch(string(b), -1)
	if len(m) != 1 {
		t.Fatalf("docs/operations/operations.md: %d lines `ACL SETUSER endcap ...`, want 1", len(m))
	}
	rule := m[0][1]
	if !strings.Contains(rule, ">PASSWORD ") {
		t.Fatalf("the documented rule has no >PASSWORD: %s", rule)
	}
	return "user endcap " + strings.Replace(rule, ">PASSWORD ", ">"+password+" ", 1)
}
