package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// MinMajor and MinMinor are the oldest Redis Endcap runs on: the event claims
// use SET NX GET and the charge script EXPIRETIME, both from Redis 7.0.
const MinMajor, MinMinor = 7, 0

// ServerInfo is what Endcap checks of the Redis it is given.
type ServerInfo struct {
	Addr    string // the server's address, as the client knows it
	Version string // redis_version, e.g. "7.0.15"
	Major   int
	Minor   int
	// MaxmemoryPolicy is what Redis does at its memory limit: "noeviction"
	// refuses writes; any other policy deletes keys.
	MaxmemoryPolicy string
}

// Supported returns an error when the server is older than MinMajor.MinMinor.
func (s ServerInfo) Supported() error {
	if s.Major < MinMajor || s.Major == MinMajor && s.Minor < MinMinor {
		return fmt.Errorf("redis %s is too old: Endcap needs %d.%d or later", s.Version, MinMajor, MinMinor)
	}
	return nil
}

// Evicts says whether Redis deletes keys when it reaches its memory limit.
func (s ServerInfo) Evicts() bool { return s.MaxmemoryPolicy != "noeviction" }

// Server reads the server's version and eviction policy (INFO server and
// INFO memory; no CONFIG, which managed services often refuse). On a
// cluster it reads one node; Servers reads every master.
func Server(ctx context.Context, rdb redis.UniversalClient) (ServerInfo, error) {
	var text strings.Builder
	for _, section := range []string{"server", "memory"} {
		s, err := rdb.Info(ctx, section).Result()
		if err != nil {
			return ServerInfo{}, fmt.Errorf("redis INFO %s: %w", section, err)
		}
		text.WriteString(s)
		text.WriteString("\n")
	}
	return ParseInfo(text.String())
}

// Servers reads Server of every master (the one server of a
// *redis.Client), in no particular order.
func Servers(ctx context.Context, rdb redis.UniversalClient) ([]ServerInfo, error) {
	var mu sync.Mutex
	var out []ServerInfo
	err := ForEachMaster(ctx, rdb, func(ctx context.Context, m *redis.Client) error {
		s, err := Server(ctx, m)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Options().Addr, err)
		}
		s.Addr = m.Options().Addr
		mu.Lock()
		out = append(out, s)
		mu.Unlock()
		return nil
	})
	return out, err
}

// ParseInfo reads ServerInfo from the text of INFO server and INFO memory.
func ParseInfo(text string) (ServerInfo, error) {
	var s ServerInfo
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "redis_version":
			s.Version = v
		case "maxmemory_policy":
			s.MaxmemoryPolicy = v
		}
	}
	if s.Version == "" {
		return s, fmt.Errorf("redis INFO has no redis_version")
	}
	if s.MaxmemoryPolicy == "" {
		return s, fmt.Errorf("redis INFO has no maxmemory_policy")
	}
	parts := strings.SplitN(s.Version, ".", 3)
	var err error
	if s.Major, err = strconv.Atoi(parts[0]); err != nil {
		return s, fmt.Errorf("redis version %q: %w", s.Version, err)
	}
	if len(parts) > 1 {
		if s.Minor, err = strconv.Atoi(parts[1]); err != nil {
			return s, fmt.Errorf("redis version %q: %w", s.Version, err)
		}
	}
	return s, nil
}
