package clickhouse

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// HTTP is a client of ClickHouse's HTTP interface, for what the native
// protocol's client cannot do: stream a query's answer, or an insert's
// rows, in one of ClickHouse's own formats (FORMAT Native), which both
// 18.16 and current versions read and write, aggregate function states
// included. Bodies travel gzip-compressed (the server compresses and
// decompresses them).
type HTTP struct {
	base     *url.URL
	database string
	user     string
	password string
	client   *http.Client
}

// HTTPOptions say where ClickHouse's HTTP interface is.
type HTTPOptions struct {
	// URL is the interface's address: http://host:8123, or https:// (8443
	// on ClickHouse Cloud).
	URL      string
	Database string
	User     string
	Password string
	// TLSCA is a PEM file of the authorities of the server's certificate
	// (empty: the system's).
	TLSCA string
	// ConnectTimeout bounds opening a connection and ResponseTimeout the
	// wait for an answer's headers (a query's first block); each call's
	// context bounds the whole call.
	ConnectTimeout  time.Duration
	ResponseTimeout time.Duration
}

// OpenHTTP returns a client of o. It makes no network call.
func OpenHTTP(o HTTPOptions) (*HTTP, error) {
	if !identRe.MatchString(o.Database) {
		return nil, fmt.Errorf("clickhouse: database name %q is not a plain identifier", o.Database)
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("clickhouse: HTTP URL %q: want http://host:port or https://host:port", o.URL)
	}
	connect, response := o.ConnectTimeout, o.ResponseTimeout
	if connect <= 0 {
		connect = 5 * time.Second
	}
	if response <= 0 {
		response = 5 * time.Minute
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: connect}).DialContext,
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: response,
		DisableCompression:    true, // the gzip bodies are kept as they are
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.TLSCA != "" {
			pem, err := os.ReadFile(o.TLSCA)
			if err != nil {
				return nil, fmt.Errorf("clickhouse: TLS authorities: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("clickhouse: TLS authorities: no certificate in %s", o.TLSCA)
			}
			cfg.RootCAs = pool
		}
		tr.TLSClientConfig = cfg
	}
	return &HTTP{base: u, database: o.Database, user: o.User, password: o.Password, client: &http.Client{Transport: tr}}, nil
}

// Close closes the idle connections.
func (h *HTTP) Close() { h.client.CloseIdleConnections() }

func (h *HTTP) request(ctx context.Context, query string, body io.Reader) (*http.Request, error) {
	u := *h.base
	q := url.Values{}
	q.Set("database", h.database)
	q.Set("query", query)
	u.RawQuery = q.Encode()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if h.user != "" || h.password != "" {
		req.SetBasicAuth(h.user, h.password)
	}
	return req, nil
}

// SelectGzip runs query (a SELECT ... FORMAT ...) and returns its answer,
// gzip-compressed by the server, as a stream to close. ctx bounds the whole
// read.
func (h *HTTP) SelectGzip(ctx context.Context, query string) (io.ReadCloser, error) {
	req, err := h.request(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	q := req.URL.Query()
	q.Set("enable_http_compression", "1")
	// The whole answer is made before it is sent, so that an error reading
	// it is an error status, never a cut stream that looks whole.
	q.Set("wait_end_of_query", "1")
	req.URL.RawQuery = q.Encode()
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("clickhouse http: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, httpError(resp)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		resp.Body.Close()
		return nil, errors.New("clickhouse http: the server did not compress its answer (enable_http_compression)")
	}
	return resp.Body, nil
}

// InsertGzip runs query (an INSERT ... FORMAT ...) with body, gzip-compressed
// data in that format, as its rows.
func (h *HTTP) InsertGzip(ctx context.Context, query string, body io.Reader) error {
	req, err := h.request(ctx, query, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("clickhouse http: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpError(resp)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

func httpError(resp *http.Response) error {
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if zr, err := gzip.NewReader(resp.Body); err == nil {
			body = zr
		}
	}
	b, _ := io.ReadAll(io.LimitReader(body, 4<<10))
	return fmt.Errorf("clickhouse http: %s: %s", resp.Status, strings.TrimSpace(string(b)))
}

// QuoteIdent quotes a table or column name for a query.
func QuoteIdent(s string) string {
	return "`" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "`", "\\`") + "`"
}
