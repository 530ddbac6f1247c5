package localstack

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ModulePath is the module whose root RepoRoot looks for.
const ModulePath = "github.com/endcap/endcap"

type portRequest struct {
	what    string // "Redis"
	setting string // Options field name, for messages
	port    *int
}

// allocatePorts checks that fixed ports are free and picks free ports for zero ones. All listeners are
// held until every port is chosen, so the picks differ from each other and from the fixed ports.
func allocatePorts(host string, reqs []portRequest) error {
	seen := map[int]string{}
	for _, r := range reqs {
		if *r.port == 0 {
			continue
		}
		if other, dup := seen[*r.port]; dup {
			return fmt.Errorf("localstack: Options.%s and Options.%s are both %d; give each service its own port", other, r.setting, *r.port)
		}
		seen[*r.port] = r.setting
	}

	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, r := range reqs {
		if *r.port == 0 {
			continue
		}
		addr := net.JoinHostPort(host, strconv.Itoa(*r.port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("localstack: %s port %d on %s is already in use by a process that is not part of this stack; "+
					"stop that process or change Options.%s (0 picks a free port)", r.what, *r.port, host, r.setting)
			}
			return fmt.Errorf("localstack: cannot listen on %s for %s (Options.Host=%q, Options.%s=%d): %w",
				addr, r.what, host, r.setting, *r.port, err)
		}
		held = append(held, l)
	}
	for _, r := range reqs {
		if *r.port != 0 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return fmt.Errorf("localstack: picking a free port for %s on %q: %w", r.what, host, err)
		}
		held = append(held, l)
		*r.port = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}

// RepoRoot returns the directory holding the go.mod of module github.com/endcap/endcap, searching from
// the working directory upwards (so it works from package directories in tests).
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if modulePathOf(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("localstack: no go.mod of module %s in %s or above", ModulePath, wd)
		}
		dir = parent
	}
}

// modulePathOf returns the module path declared in a go.mod file, or "".
func modulePathOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		rest = strings.TrimSpace(rest)
		if uq, err := strconv.Unquote(rest); err == nil {
			return uq
		}
		return rest
	}
	return ""
}
