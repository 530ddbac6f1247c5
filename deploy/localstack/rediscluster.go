package localstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A Redis Cluster (Options.RedisCluster): that many masters of Debian's redis-server, each with
// Options.RedisReplicas replicas, every node a child like the other services, formed with
// `redis-cli --cluster create` on the first start and from the nodes' own nodes.conf afterwards.

// DefaultRedisNodeTimeout is the cluster-node-timeout of a local cluster when Options.RedisNodeTimeout
// is 0: how long a master may stay unreachable before the others mark it failed and one of its
// replicas takes over.
const DefaultRedisNodeTimeout = 2 * time.Second

// RedisService is the service name (pid file, log, Stack.PIDs, Kill, Restart) of node i (1-based) of a
// Redis Cluster: ServiceRedis for the first, "redis-<i>" for the others. The nodes are numbered as
// Stack.RedisAddrs lists them; which are masters changes with failovers (RedisNodes says).
func RedisService(i int) string {
	if i <= 1 {
		return ServiceRedis
	}
	return ServiceRedis + "-" + strconv.Itoa(i)
}

// redisNodes is the number of nodes of a cluster (0 without one).
func (o *Options) redisNodes() int { return o.RedisCluster * (1 + o.RedisReplicas) }

// normalizeRedisCluster checks the cluster options and sizes the port slots of the nodes after the first.
func (o *Options) normalizeRedisCluster() error {
	switch {
	case o.RedisCluster < 0 || o.RedisReplicas < 0:
		return fmt.Errorf("localstack: Options.RedisCluster = %d, RedisReplicas = %d: negative", o.RedisCluster, o.RedisReplicas)
	case o.RedisCluster == 0 && o.RedisReplicas > 0:
		return errors.New("localstack: Options.RedisReplicas is set but Options.RedisCluster is not")
	case o.RedisCluster == 0:
		return nil
	case !o.Redis:
		return errors.New("localstack: Options.RedisCluster is set but Options.Redis is not")
	case o.RedisCluster < 3:
		return fmt.Errorf("localstack: Options.RedisCluster = %d: a Redis Cluster needs at least 3 masters", o.RedisCluster)
	}
	if o.RedisNodeTimeout == 0 {
		o.RedisNodeTimeout = DefaultRedisNodeTimeout
	}
	n := o.redisNodes() - 1
	if len(o.RedisNodePorts) > n {
		return fmt.Errorf("localstack: Options.RedisNodePorts has %d ports for %d nodes after the first", len(o.RedisNodePorts), n)
	}
	if len(o.RedisBusPorts) > n+1 {
		return fmt.Errorf("localstack: Options.RedisBusPorts has %d ports for %d nodes", len(o.RedisBusPorts), n+1)
	}
	o.RedisNodePorts = append(o.RedisNodePorts, make([]int, n-len(o.RedisNodePorts))...)
	o.RedisBusPorts = append(o.RedisBusPorts, make([]int, n+1-len(o.RedisBusPorts))...)
	for _, p := range append(append([]int(nil), o.RedisNodePorts...), o.RedisBusPorts...) {
		if p < 0 || p > 65535 {
			return fmt.Errorf("localstack: Options.RedisNodePorts or RedisBusPorts: %d is not a valid port", p)
		}
	}
	return nil
}

// redisPort is the port of node i (1-based).
func (o *Options) redisPort(i int) int {
	if i <= 1 {
		return o.RedisPort
	}
	return o.RedisNodePorts[i-2]
}

// redisClusterPortRequests are the ports of the nodes after the first (RedisPort is the first's) and the
// cluster bus ports of them all.
func (o *Options) redisClusterPortRequests() []portRequest {
	var r []portRequest
	for i := range o.RedisNodePorts {
		r = append(r, portRequest{"Redis node " + strconv.Itoa(i+2), "RedisNodePorts", &o.RedisNodePorts[i]})
	}
	for i := range o.RedisBusPorts {
		r = append(r, portRequest{"Redis cluster bus of node " + strconv.Itoa(i+1), "RedisBusPorts", &o.RedisBusPorts[i]})
	}
	return r
}

// redisClusterArgs are the cluster settings of a node: its nodes.conf in its own directory, a short
// node timeout, replicas that may always take over (a replica of a test cluster may have been cut off
// for long), the slots of the other masters served while one is down, and replicas synced at once.
func redisClusterArgs(o Options, i int) []string {
	return []string{
		"--cluster-enabled", "yes",
		// Its own port, not the default port + 10000, which nothing reserved.
		"--cluster-port", strconv.Itoa(o.RedisBusPorts[i-1]),
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(o.RedisNodeTimeout.Milliseconds(), 10),
		"--cluster-replica-validity-factor", "0",
		"--cluster-require-full-coverage", "no",
		// A replica that (re)joins is synced at once, not after the default 5 s wait for others.
		"--repl-diskless-sync-delay", "0",
	}
}

// formRedisCluster joins the nodes into a cluster the first time (redis-cli --cluster create assigns the
// slots to the first RedisCluster nodes and makes the others their replicas) and waits until every node
// sees a cluster whose slots are all served and every replica is in sync with its master. Nodes that
// already form one (a restart: each reads its nodes.conf) are only waited for.
func (s *Stack) formRedisCluster(ctx context.Context, cli string) error {
	o := s.opts
	known, err := clusterInfoField(ctx, s.RedisAddr, "cluster_known_nodes")
	if err != nil {
		return fmt.Errorf("localstack: redis cluster: %w", err)
	}
	if known != strconv.Itoa(len(s.RedisAddrs)) {
		args := append([]string{"--cluster", "create"}, s.RedisAddrs...)
		args = append(args, "--cluster-replicas", strconv.Itoa(o.RedisReplicas), "--cluster-yes")
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Env = childEnv(nil)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("localstack: redis-cli --cluster create: %w\n%s", err, out)
		}
		s.log.Debug("localstack: redis cluster created", "nodes", len(s.RedisAddrs))
	}
	return s.waitRedisCluster(ctx)
}

// waitRedisCluster waits until every node of the cluster answers cluster_state:ok and knows every other
// node, the cluster has RedisCluster masters serving every slot and every other node is a replica whose
// link to its master is up and synced, none flagged failed.
func (s *Stack) waitRedisCluster(ctx context.Context) error {
	var last error
	for {
		if last = s.redisClusterReady(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localstack: redis cluster not ready: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Stack) redisClusterReady(ctx context.Context) error {
	n := strconv.Itoa(len(s.RedisAddrs))
	for _, addr := range s.RedisAddrs {
		info, err := respDo(ctx, addr, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if v := infoField(info, "cluster_state"); v != "ok" {
			return fmt.Errorf("%s: cluster_state %s", addr, v)
		}
		if v := infoField(info, "cluster_known_nodes"); v != n {
			return fmt.Errorf("%s: knows %s nodes of %s", addr, v, n)
		}
		if v := infoField(info, "cluster_slots_ok"); v != "16384" {
			return fmt.Errorf("%s: %s slots served", addr, v)
		}
		text, err := respDo(ctx, addr, "CLUSTER", "NODES")
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		nodes, err := s.parseClusterNodes(text)
		if err != nil {
			return err
		}
		masters := 0
		for _, nd := range nodes {
			switch {
			case nd.Failed:
				return fmt.Errorf("%s sees %s failed", addr, nd.Addr)
			case nd.Master && len(nd.Slots) > 0:
				masters++
			case nd.Master:
				return fmt.Errorf("%s sees %s as a master without slots", addr, nd.Addr)
			}
		}
		if masters != s.opts.RedisCluster {
			return fmt.Errorf("%s sees %d masters of %d", addr, masters, s.opts.RedisCluster)
		}
		repl, err := respDo(ctx, addr, "INFO", "replication")
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if infoField(repl, "role") == "slave" {
			if v := infoField(repl, "master_link_status"); v != "up" {
				return fmt.Errorf("%s: replica link %s", addr, v)
			}
			if v := infoField(repl, "master_sync_in_progress"); v != "0" {
				return fmt.Errorf("%s: replica still syncing", addr)
			}
		}
	}
	return nil
}

// WaitRedisCluster waits, within ctx, until every running node of the cluster serves it: after a node was
// killed and restarted (it comes back as a replica when another took over its slots).
func (s *Stack) WaitRedisCluster(ctx context.Context) error {
	if len(s.RedisAddrs) < 2 {
		return errors.New("localstack: no redis cluster in this stack")
	}
	return s.waitRedisCluster(ctx)
}

// RedisNode is one node of the cluster as CLUSTER NODES shows it.
type RedisNode struct {
	Service string // RedisService(i)
	Addr    string
	ID      string
	Master  bool
	Failed  bool   // flagged fail (unreachable) by the cluster
	Of      string // a replica's master's ID
	Slots   [][2]int
}

// RedisNodes asks the first node that answers for the cluster's nodes and their roles.
func (s *Stack) RedisNodes(ctx context.Context) ([]RedisNode, error) {
	var last error
	for _, addr := range s.RedisAddrs {
		text, err := respDo(ctx, addr, "CLUSTER", "NODES")
		if err != nil {
			last = err
			continue
		}
		return s.parseClusterNodes(text)
	}
	return nil, fmt.Errorf("localstack: no redis node answers: %w", last)
}

func (s *Stack) parseClusterNodes(text string) ([]RedisNode, error) {
	service := map[string]string{}
	for i, a := range s.RedisAddrs {
		service[a] = RedisService(i + 1)
	}
	var out []RedisNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("localstack: CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := RedisNode{Service: service[addr], Addr: addr, ID: f[0]}
		flags := "," + f[2] + ","
		n.Master = strings.Contains(flags, ",master,")
		n.Failed = strings.Contains(flags, ",fail,")
		if f[3] != "-" {
			n.Of = f[3]
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("localstack: CLUSTER NODES slots %q", r)
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out, nil
}

// RedisMasterOf returns the node that serves key's slot now.
func (s *Stack) RedisMasterOf(ctx context.Context, key string) (RedisNode, error) {
	var slot int
	var err error
	for _, addr := range s.RedisAddrs {
		var v string
		if v, err = respDo(ctx, addr, "CLUSTER", "KEYSLOT", key); err == nil {
			slot, err = strconv.Atoi(v)
			break
		}
	}
	if err != nil {
		return RedisNode{}, err
	}
	nodes, err := s.RedisNodes(ctx)
	if err != nil {
		return RedisNode{}, err
	}
	for _, n := range nodes {
		for _, r := range n.Slots {
			if n.Master && !n.Failed && slot >= r[0] && slot <= r[1] {
				return n, nil
			}
		}
	}
	return RedisNode{}, fmt.Errorf("localstack: no master serves slot %d of %q", slot, key)
}

func clusterInfoField(ctx context.Context, addr, field string) (string, error) {
	info, err := respDo(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return "", err
	}
	return infoField(info, field), nil
}

// infoField is the value of field in the text of INFO or CLUSTER INFO ("" when absent).
func infoField(text, field string) string {
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			return v
		}
	}
	return ""
}

// redisNodeSpecs are the children of a cluster: node i keeps its data (and nodes.conf) in
// Dir/redis-cluster/<i>, apart from the data of a single server (Dir/redis).
func redisNodeSpecs(o Options, bin string) ([]childSpec, error) {
	var out []childSpec
	for i := 1; i <= o.redisNodes(); i++ {
		name := RedisService(i)
		sp, err := redisNodeSpec(o, bin, name, filepath.Join(o.Dir, "redis-cluster", strconv.Itoa(i)), o.redisPort(i), redisClusterArgs(o, i))
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// redisClusterAddrs are the dial addresses of every node, in order.
func redisClusterAddrs(o Options) []string {
	var out []string
	for i := 1; i <= o.redisNodes(); i++ {
		out = append(out, net.JoinHostPort(dialHost(o.Host), strconv.Itoa(o.redisPort(i))))
	}
	return out
}

// findRedisCLI locates redis-cli (Debian's redis-tools, which redis-server depends on).
func findRedisCLI(o Options) string {
	cands := []string{"/usr/bin/redis-cli", "/usr/local/bin/redis-cli"}
	if o.RedisBin != "" {
		cands = append([]string{filepath.Join(filepath.Dir(o.RedisBin), "redis-cli")}, cands...)
	}
	return findProgram("", "redis-cli", cands...)
}
