package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/endcap/endcap/storage/redisstore"
)

// fakeRedis answers INFO with the given version and eviction policy, and
// refuses every other command (the client then speaks RESP2): enough for
// checkRedis, which only reads INFO.
func fakeRedis(t *testing.T, version, policy string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					args, err := readCommand(r)
					if err != nil {
						return
					}
					var reply string
					switch strings.ToUpper(args[0]) {
					case "INFO":
						body := "# Server\r\nredis_version:" + version + "\r\n# Memory\r\nmaxmemory_policy:" + policy + "\r\n"
						reply = "$" + strconv.Itoa(len(body)) + "\r\n" + body + "\r\n"
					default:
						reply = "-ERR unknown command '" + args[0] + "'\r\n"
					}
					if _, err := c.Write([]byte(reply)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad array %q", line)
	}
	args := make([]string, n)
	for i := range args {
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil || size < 0 {
			return nil, fmt.Errorf("bad bulk %q", line)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// TestCheckRedis: an old Redis stops the start (no retry can fix it); an
// evicting one starts with an ERROR log; a good one says nothing.
func TestCheckRedis(t *testing.T) {
	tests := []struct {
		version, policy string
		permanent       bool
		logged          bool
	}{
		{"7.0.15", "noeviction", false, false},
		{"7.2.4", "allkeys-lru", false, true},
		{"6.2.14", "noeviction", true, false},
	}
	for _, tc := range tests {
		var logs bytes.Buffer
		a := &App{log: slog.New(slog.NewTextHandler(&logs, nil))}
		a.Redis = redisstore.Open(redisstore.Options{Addr: fakeRedis(t, tc.version, tc.policy)})
		err := a.checkRedis(t.Context())
		_ = a.Redis.Close()
		var pe permanentError
		if got := errors.As(err, &pe); got != tc.permanent {
			t.Errorf("%s %s: error %v, want permanent %v", tc.version, tc.policy, err, tc.permanent)
		}
		if !tc.permanent && err != nil {
			t.Errorf("%s %s: %v", tc.version, tc.policy, err)
		}
		if got := strings.Contains(logs.String(), "level=ERROR"); got != tc.logged {
			t.Errorf("%s %s: logged %q, want an ERROR %v", tc.version, tc.policy, logs.String(), tc.logged)
		}
	}
}
