package clickhouse_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// tlsFront listens with TLS on loopback (a certificate for 127.0.0.1 signed
// by a fresh authority, written as PEM to the returned file) and relays
// every connection to backend: a ClickHouse secure native port, as the
// client sees it.
func tlsFront(t *testing.T, backend string) (addr, caFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test authority"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "clickhouse"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, _ := x509.ParseCertificate(caDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, c); b.Close() }()
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	return ln.Addr().String(), caFile
}

// TestTLS: with TLS, the client verifies the server's certificate against
// the authorities of TLSCA (or the system's, which do not know this one).
func TestTLS(t *testing.T) {
	env := testenv.Get(t)
	addr, ca := tlsFront(t, env.ClickHouseAddr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	version := func(o clickhouse.Options) (string, error) {
		c, err := clickhouse.Open(o)
		if err != nil {
			return "", err
		}
		defer c.Close()
		var v string
		err = c.QueryRow(ctx, "SELECT version()").Scan(&v)
		return v, err
	}
	o := clickhouse.Options{Addr: addr, Database: "default", User: "default", TLS: true, TLSCA: ca}
	if v, err := version(o); err != nil || v == "" {
		t.Fatalf("over TLS with the authority: %q, %v", v, err)
	}
	o.TLSCA = ""
	if _, err := version(o); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("over TLS, the certificate checked against the system's authorities: %v, want a certificate error", err)
	}
	o.TLS = false
	if _, err := version(o); err == nil {
		t.Fatal("without TLS, a TLS port answered")
	}
	o.TLS, o.TLSCA = true, filepath.Join(t.TempDir(), "missing.pem")
	if _, err := clickhouse.Open(o); err == nil || !strings.Contains(err.Error(), "TLS authorities") {
		t.Fatalf("a missing authorities file: %v", err)
	}
}
