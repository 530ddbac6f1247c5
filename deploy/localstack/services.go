package localstack

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/xml"
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
	"text/template"
	"time"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{"xml": xmlEscape}).ParseFS(templateFS, "templates/*.tmpl"))

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

type binaries struct {
	clickhouse, redis, redisCLI, versitygw, zookeeper string
	node, maildev                                     string
}

// findBinaries locates the programs of the selected services. The error wraps ErrMissingBinary.
func findBinaries(o Options) (binaries, error) {
	var b binaries
	var missing []string
	if o.ClickHouse {
		b.clickhouse = findProgram(o.ClickHouseBin, "clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server")
		if b.clickhouse == "" {
			missing = append(missing, describeMissing("clickhouse-server", o.ClickHouseBin))
		}
	}
	if o.ClickHouseReplicas > 0 {
		b.zookeeper = findProgram(o.ZooKeeperBin, "zkServer.sh", zkServerScript)
		if b.zookeeper == "" {
			missing = append(missing, describeMissing("zookeeper ("+zkServerScript+")", o.ZooKeeperBin))
		}
	}
	if o.Redis {
		b.redis = findProgram(o.RedisBin, "redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server")
		if b.redis == "" {
			missing = append(missing, describeMissing("redis-server", o.RedisBin))
		}
		if o.RedisCluster > 0 {
			if b.redisCLI = findRedisCLI(o); b.redisCLI == "" {
				missing = append(missing, "redis-cli")
			}
		}
	}
	if o.S3 {
		cands := []string{filepath.Join(o.Dir, "bin", "versitygw")}
		if root, err := RepoRoot(); err == nil {
			cands = append(cands, filepath.Join(root, ".endcap", "bin", "versitygw"))
		}
		b.versitygw = findProgram(o.VersityGWBin, "versitygw", cands...)
		if b.versitygw == "" {
			missing = append(missing, describeMissing("versitygw", o.VersityGWBin))
		}
	}
	if o.Mail {
		b.node = findProgram("", "node", "/usr/bin/node")
		if b.node == "" {
			missing = append(missing, "node")
		}
		b.maildev = findMailDev(o)
		if b.maildev == "" {
			missing = append(missing, describeMissing("maildev (npm)", o.MailDevScript))
		}
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: %s", ErrMissingBinary, strings.Join(missing, "; "))
	}
	return b, nil
}

func describeMissing(name, explicit string) string {
	if explicit != "" {
		return fmt.Sprintf("%s (%s is not an executable file)", name, explicit)
	}
	return name
}

// findProgram returns explicit if set and executable (and "" if it is not); otherwise the first
// executable among the candidates, then name on PATH.
func findProgram(explicit, name string, candidates ...string) string {
	if explicit != "" {
		if isExecutable(explicit) {
			abs, err := filepath.Abs(explicit)
			if err == nil {
				return abs
			}
			return explicit
		}
		return ""
	}
	for _, c := range candidates {
		if isExecutable(c) {
			return c
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// ---- ClickHouse ----

type clickHouseConfig struct {
	Host, DataDir, LogDir, UsersConfig string
	TCPPort, HTTPPort                  int
	Networks                           []string
	SystemLogs                         bool // query_log and part_log (Options.ClickHouseSystemLogs)

	// A replica of a cluster (Options.ClickHouseReplicas > 0); Cluster is empty for a single server.
	Cluster, Shard, Replica string
	InterserverPort         int
	ZooKeeperHost           string
	ZooKeeperPort           int
	ClusterReplicas         []hostPort
}

type hostPort struct {
	Host string
	Port int
}

// clickHouseSpec is the server of replica i (0 for the single server of a stack without replicas, else
// 1..ClickHouseReplicas). Replica 1 (and the single server) keeps its data in Dir/clickhouse, replica i in
// Dir/clickhouse-<i>.
func clickHouseSpec(o Options, bin string, i int) (childSpec, error) {
	name := clickHouseService(i)
	base := filepath.Join(o.Dir, name)
	tcp, http := o.ClickHousePort, o.ClickHouseHTTPPort
	if i > 1 {
		tcp, http = o.replicaPorts[i-2].tcp, o.replicaPorts[i-2].http
	}
	cfg := clickHouseConfig{
		Host:        o.Host,
		DataDir:     filepath.Join(base, "data"),
		LogDir:      filepath.Join(base, "logs"),
		UsersConfig: filepath.Join(base, "users.xml"),
		TCPPort:     tcp,
		HTTPPort:    http,
		Networks:    []string{"127.0.0.1", "::1"},
		SystemLogs:  o.ClickHouseSystemLogs,
	}
	if i > 0 {
		cfg.Cluster, cfg.Shard, cfg.Replica = o.ClickHouseCluster, DefaultClickHouseShard, ReplicaName(i)
		cfg.InterserverPort = o.interserverPorts[i-1]
		cfg.ZooKeeperHost, cfg.ZooKeeperPort = dialHost(o.Host), o.ZooKeeperPort
		for j := 1; j <= o.ClickHouseReplicas; j++ {
			cfg.ClusterReplicas = append(cfg.ClusterReplicas, hostPort{dialHost(o.Host), o.replicaTCPPort(j)})
		}
	}
	if ip := net.ParseIP(o.Host); ip != nil && !ip.IsLoopback() && !ip.IsUnspecified() {
		cfg.Networks = append(cfg.Networks, ip.String())
	}
	for _, d := range []string{cfg.DataDir, cfg.LogDir, filepath.Join(cfg.DataDir, "tmp"),
		filepath.Join(cfg.DataDir, "user_files"), filepath.Join(cfg.DataDir, "format_schemas")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return childSpec{}, fmt.Errorf("localstack: clickhouse: %w", err)
		}
	}
	configPath := filepath.Join(base, "config.xml")
	if err := renderTemplate("config.xml.tmpl", configPath, cfg); err != nil {
		return childSpec{}, err
	}
	if err := renderTemplate("users.xml.tmpl", cfg.UsersConfig, cfg); err != nil {
		return childSpec{}, err
	}
	httpAddr := net.JoinHostPort(dialHost(o.Host), strconv.Itoa(http))
	return childSpec{
		name:     name,
		path:     bin,
		args:     []string{"--config-file=" + configPath},
		env:      childEnv(nil),
		dir:      base,
		addr:     fmt.Sprintf("native %s, http %s", net.JoinHostPort(dialHost(o.Host), strconv.Itoa(tcp)), httpAddr),
		newReady: func() func(context.Context) error { return clickHouseReady(httpAddr, i > 0) },
		extraLogs: []string{
			filepath.Join(cfg.LogDir, "clickhouse-server.err.log"),
		},
	}, nil
}

func renderTemplate(name, path string, data any) error {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		return fmt.Errorf("localstack: rendering %s: %w", name, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("localstack: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("localstack: %w", err)
	}
	return nil
}

// clickHouseReady is the readiness check of a server: /ping answers. For a replica, also: it reaches
// ZooKeeper, and ddlWorkerSettle has passed since it first did. 18.16 answers queries before its DDL worker
// (the thread that runs ON CLUSTER statements) has connected to ZooKeeper, and an ON CLUSTER statement
// received in that window crashes the server (its ZooKeeper handle is still null); a worker whose first connection
// failed tries again a second later.
func clickHouseReady(httpAddr string, replica bool) func(ctx context.Context) error {
	var reached time.Time
	return func(ctx context.Context) error {
		if err := clickHousePing(ctx, httpAddr); err != nil || !replica {
			return err
		}
		if reached.IsZero() {
			if _, err := clickHouseHTTPQuery(ctx, httpAddr, "SELECT count() FROM system.zookeeper WHERE path = '/'"); err != nil {
				return err
			}
			reached = time.Now()
		}
		if d := time.Since(reached); d < ddlWorkerSettle {
			return fmt.Errorf("waiting %s more for the DDL worker", ddlWorkerSettle-d)
		}
		return nil
	}
}

const ddlWorkerSettle = 1500 * time.Millisecond

// clickHouseHTTPQuery runs a query over HTTP and returns its body.
func clickHouseHTTPQuery(ctx context.Context, httpAddr, q string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/", strings.NewReader(q))
	if err != nil {
		return "", err
	}
	resp, err := readyClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s %q", q, resp.Status, body)
	}
	return string(body), nil
}

var readyClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

func clickHousePing(ctx context.Context, httpAddr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/ping", nil)
	if err != nil {
		return err
	}
	resp, err := readyClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK || string(body) != "Ok.\n" {
		return fmt.Errorf("GET /ping: %s %q", resp.Status, body)
	}
	return nil
}

// ---- Redis ----

func redisSpec(o Options, bin string) (childSpec, error) {
	return redisNodeSpec(o, bin, ServiceRedis, filepath.Join(o.Dir, "redis"), o.RedisPort, nil)
}

// redisNodeSpec is a redis-server on port with its data in dir; extra are further settings (a cluster
// node's).
func redisNodeSpec(o Options, bin, name, dir string, port int, extra []string) (childSpec, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return childSpec{}, fmt.Errorf("localstack: %s: %w", name, err)
	}
	addr := net.JoinHostPort(dialHost(o.Host), strconv.Itoa(port))
	return childSpec{
		name: name,
		path: bin,
		args: append([]string{
			"--bind", o.Host,
			"--port", strconv.Itoa(port),
			"--dir", dir,
			"--appendonly", "yes",
			"--appendfsync", "everysec",
			"--save", "",
			"--daemonize", "no",
			"--protected-mode", "yes",
			// Keep argv as is: by default Redis rewrites its process title, and then /proc/<pid>/cmdline no
			// longer names Dir, which the stale-child check relies on.
			"--set-proc-title", "no",
			// Large sets (segment members) expire and are deleted without
			// blocking the server.
			"--lazyfree-lazy-expire", "yes",
			"--lazyfree-lazy-user-del", "yes",
		}, extra...),
		env:  childEnv(nil),
		dir:  dir,
		addr: addr,
		ready: func(ctx context.Context) error {
			reply, err := respDo(ctx, addr, "PING")
			if err != nil {
				return err
			}
			if reply != "PONG" {
				return fmt.Errorf("PING: %q", reply)
			}
			return nil
		},
	}, nil
}

// respDo sends one command over a new connection and returns a simple-string, integer or bulk reply as a
// string; an error reply (such as -LOADING) is returned as an error.
func respDo(ctx context.Context, addr string, args ...string) (string, error) {
	out, err := respDoAll(ctx, addr, args)
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// respDoAll sends commands one after the other over one new connection (what a command such as WAIT needs:
// it waits for the writes of its own connection) and returns their replies as respDo does; the first error
// reply ends it.
func respDoAll(ctx context.Context, addr string, cmds ...[]string) ([]string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	}
	r := bufio.NewReader(conn)
	out := make([]string, 0, len(cmds))
	for _, args := range cmds {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := io.WriteString(conn, b.String()); err != nil {
			return out, err
		}
		reply, err := readReply(r)
		if err != nil {
			return out, err
		}
		out = append(out, reply)
	}
	return out, nil
}

// readReply reads one simple-string, integer, bulk or error reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty RESP reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad RESP bulk header %q", line)
		}
		if n < 0 {
			return "", errNil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected RESP reply %q", line)
	}
}

// errNil is returned by respDo for a nil bulk reply.
var errNil = errors.New("redis: nil")

// ---- S3 (versitygw) ----

func s3Spec(o Options, bin string) (childSpec, error) {
	base := filepath.Join(o.Dir, "s3")
	data := filepath.Join(base, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return childSpec{}, fmt.Errorf("localstack: s3: %w", err)
	}
	listen := net.JoinHostPort(o.Host, strconv.Itoa(o.S3Port))
	endpoint := "http://" + net.JoinHostPort(dialHost(o.Host), strconv.Itoa(o.S3Port))
	// Global options go before the backend subcommand.
	args := []string{"--port", listen, "--region", DefaultS3Region, "--quiet", "posix"}
	ok, err := userXattrSupported(data)
	if err != nil {
		return childSpec{}, fmt.Errorf("localstack: s3: probing xattrs: %w", err)
	}
	if !ok {
		// The posix backend keeps object metadata in user xattrs; without them it needs a sidecar directory.
		side := filepath.Join(base, "meta")
		if err := os.MkdirAll(side, 0o755); err != nil {
			return childSpec{}, fmt.Errorf("localstack: s3: %w", err)
		}
		args = append(args, "--sidecar", side)
	}
	args = append(args, data)
	return childSpec{
		name: ServiceS3,
		path: bin,
		args: args,
		// Credentials go through the environment (not argv, where ps shows them). Inherited ROOT_* and
		// VGW_* variables would override or add settings, so they are dropped.
		env: childEnv([]string{"ROOT_", "VGW_"},
			"ROOT_ACCESS_KEY="+o.S3AccessKey, "ROOT_SECRET_KEY="+o.S3SecretKey),
		dir:  base,
		addr: endpoint,
		ready: func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/", nil)
			if err != nil {
				return err
			}
			resp, err := readyClient.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			return nil // any HTTP response will do (unsigned requests get 403)
		},
	}, nil
}

// userXattrSupported reports whether the filesystem of dir accepts user.* extended attributes.
func userXattrSupported(dir string) (bool, error) {
	f, err := os.CreateTemp(dir, ".xattr-probe-*")
	if err != nil {
		return false, err
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	err = syscall.Setxattr(name, "user.endcap.probe", []byte("1"), 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return false, nil
	default:
		return false, err
	}
}

// ---- maildev (SMTP and inbox) ----

// maildevScript is maildev's entry point under an npm prefix.
const maildevScript = "node_modules/maildev/dist/bin/maildev.js"

// findMailDev is maildev's entry point for o, or "".
func findMailDev(o Options) string {
	cands := []string{filepath.Join(o.Dir, "maildev", maildevScript)}
	if root, err := RepoRoot(); err == nil {
		cands = append(cands, filepath.Join(root, ".endcap", "maildev", maildevScript))
	}
	return findFile(o.MailDevScript, cands...)
}

// HasMailDev says whether node and maildev are installed for a stack in dir
// (deploy/local/install.sh installs them).
func HasMailDev(dir string) bool {
	return findProgram("", "node", "/usr/bin/node") != "" && findMailDev(Options{Dir: dir}) != ""
}

// findFile returns explicit when set and a regular file (else ""), or the first candidate that is one.
func findFile(explicit string, candidates ...string) string {
	if explicit != "" {
		candidates = []string{explicit}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			if abs, err := filepath.Abs(c); err == nil {
				return abs
			}
			return c
		}
	}
	return ""
}

func mailSpec(o Options, node, script string) (childSpec, error) {
	dir := filepath.Join(o.Dir, "mail")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return childSpec{}, fmt.Errorf("localstack: mail: %w", err)
	}
	web := "http://" + net.JoinHostPort(dialHost(o.Host), strconv.Itoa(o.MailWebPort))
	return childSpec{
		name: ServiceMail,
		path: node,
		args: []string{script, "--smtp", strconv.Itoa(o.MailSMTPPort), "--ip", o.Host,
			"--web", strconv.Itoa(o.MailWebPort), "--web-ip", o.Host, "--mail-directory", dir, "--silent"},
		env:  childEnv([]string{"MAILDEV_"}),
		dir:  dir,
		addr: fmt.Sprintf("smtp %s, web %s", net.JoinHostPort(dialHost(o.Host), strconv.Itoa(o.MailSMTPPort)), web),
		ready: func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, web+"/api/healthz", nil)
			if err != nil {
				return err
			}
			resp, err := readyClient.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /api/healthz: %s", resp.Status)
			}
			return nil
		},
	}, nil
}
