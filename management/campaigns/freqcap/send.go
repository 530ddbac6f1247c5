package freqcap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
)

// The auction reads a shopper's counts in two halves, in its own goroutine:
// Send writes the HGETALL as the auction starts, and Pending.Receive reads
// the reply once the auction has read its products, by when it has mostly
// arrived. That is one write and one read of a socket, where a read through
// go-redis, overlapped on a goroutine of its own, cost the auction's process
// about three times the CPU on the 2-core test machine (a goroutine woken,
// go-redis's pool check, its reply buffer grown from nothing), more than the
// rest of a 500-product auction on popular products
// (docs/reference/campaigns.md, The auction).
//
// So Send uses connections of its own, to the server (or the cluster master
// of the shopper's slot) that the go-redis client would use, dialled with
// its options: TLS, the user and password (or the password file, read at
// each dial), the database. They are kept between reads, a few per node.
// A connection whose reply did not come by the deadline, or came wrong, is
// closed; a kept one that the server closed meanwhile is dialled again
// once. A MOVED or ASK reply (a cluster whose slots move) is read again
// with go-redis's typed command, which follows it; so is every read with a
// client that is not a *redis.Client or *redis.ClusterClient.

const (
	maxIdlePerNode = 64      // connections kept per node
	maxReply       = 8 << 20 // the largest reply read: a shopper's counts are far fewer
	discardWait    = 100 * time.Microsecond
	// lateGrace is how long Receive still reads when the auction comes to
	// the reply after its deadline (its goroutine kept off the cores): a
	// reply that came in time is in the socket, and is taken.
	lateGrace = 200 * time.Microsecond
)

// Pending is a read sent by Store.Send whose reply is not taken yet. Its
// memory serves the next Send. The zero value has nothing pending. Not safe
// for concurrent use.
type Pending struct {
	s        *Store
	active   bool  // a read was sent and its reply not taken
	typed    bool  // read with go-redis at Receive (no connection of its own)
	err      error // the send's
	n        *node
	c        *conn
	reused   bool // c served reads before (the server may have closed it since)
	ctx      context.Context
	deadline time.Time
	mp, user string
	cmd      []byte // the command, kept to send it again on a fresh connection
}

// conns keeps the connections by node.
type conns struct {
	mu     sync.Mutex
	nodes  map[string]*node // by address
	closed bool
}

type node struct {
	opt  *redis.Options
	idle []*conn
}

// conn is one connection of the reads.
type conn struct {
	nc      net.Conn
	n       *node
	scratch []byte // the reply a Discard reads
}

// Send sends the read of a shopper's counts and returns without waiting for
// the reply, which p.Receive takes (or p.Discard drops). Every wait of the
// read, dialling included, ends by deadline. A read p still had pending is
// dropped first.
func (s *Store) Send(ctx context.Context, mp, user string, deadline time.Time, p *Pending) {
	p.Discard()
	*p = Pending{s: s, active: true, ctx: ctx, deadline: deadline, mp: mp, user: user, cmd: p.cmd[:0]}
	key := Key(mp, user)
	opt, err := s.nodeOptions(ctx, key)
	if errors.Is(err, errNoConns) {
		p.typed = true
		return
	}
	if err != nil {
		p.err = err
		return
	}
	p.cmd = appendCommand(p.cmd, "HGETALL", key)
	p.n = s.conns.node(opt)
	if p.c = s.conns.get(p.n); p.c != nil {
		p.reused = true
		if p.err = p.c.write(p.cmd, deadline); p.err == nil {
			return
		}
		p.c.close()
	}
	p.resend()
}

// resend sends the command on a new connection to the node.
func (p *Pending) resend() {
	p.c, p.reused, p.err = nil, false, nil
	c, err := p.s.conns.dial(p.ctx, p.n, p.deadline)
	if err == nil {
		if err = c.write(p.cmd, p.deadline); err != nil {
			c.close()
		}
	}
	if err != nil {
		p.err = err
		return
	}
	p.c = c
}

// Receive waits for the reply of the read sent, until the deadline given to
// Send (a reply already come is taken up to lateGrace past it), and reads the counts of the periods of at into c (whose memory it
// reuses). On an error c holds no counts.
func (p *Pending) Receive(at time.Time, loc *time.Location, c *Counts) error {
	if !p.active {
		return errors.New("frequency caps: no read sent")
	}
	p.active = false
	if p.typed {
		ctx, cancel := context.WithDeadline(p.ctx, p.deadline)
		defer cancel()
		return p.s.Read(ctx, p.mp, p.user, at, loc, c)
	}
	st := stampsAt(at, loc)
	deadline := p.deadline
	if late := time.Now().Add(lateGrace); late.After(deadline) {
		deadline = late
	}
	err := p.err
	if err == nil {
		c.buf, err = p.c.reply(c.buf[:0], deadline)
		if err != nil && p.reused && stale(err) {
			// The server closed the kept connection (its idle timeout, a
			// restart): once more on a new one.
			p.c.close()
			if p.resend(); p.err == nil {
				c.buf, err = p.c.reply(c.buf[:0], deadline)
			} else {
				err = p.err
			}
		}
	}
	if err == nil {
		p.s.conns.put(p.c)
		p.c = nil
		if err = c.parse(c.buf, &st); errors.Is(err, errRedirect) {
			ctx, cancel := context.WithDeadline(p.ctx, p.deadline)
			err = p.s.readTyped(ctx, Key(p.mp, p.user), &st, c)
			cancel()
		}
	}
	if p.c != nil {
		p.c.close()
		p.c = nil
	}
	p.ctx = nil
	if err != nil {
		c.reset()
		return fmt.Errorf("%w: frequency caps: reading the counts: %v", errkind.Unavailable, err)
	}
	return nil
}

// Discard drops the read sent, if its reply was not taken: the reply is read
// (it has mostly come by the time an auction ends) and the connection kept;
// one that has not come within a moment is waited for, until the read's
// deadline, on a goroutine of its own.
func (p *Pending) Discard() {
	if !p.active {
		return
	}
	p.active, p.ctx = false, nil
	c := p.c
	if c == nil {
		return
	}
	p.c = nil
	var err error
	soon := time.Now().Add(discardWait)
	if p.deadline.Before(soon) {
		soon = p.deadline
	}
	c.scratch, err = c.reply(c.scratch[:0], soon)
	if err == nil {
		p.s.conns.put(c)
		return
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(p.deadline) {
		c.close()
		return
	}
	s, partial, deadline := p.s, c.scratch, p.deadline
	go func() {
		var err error
		if c.scratch, err = c.reply(partial, deadline); err != nil {
			c.close()
			return
		}
		s.conns.put(c)
	}()
}

// stale reports whether a read failed because the server had closed the
// connection before.
func stale(err error) bool {
	return !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, errProtocol)
}

var (
	errNoConns  = errors.New("no connections of its own for this client")
	errProtocol = errors.New("a reply out of protocol")
)

// nodeOptions are the go-redis options of the node that serves key.
func (s *Store) nodeOptions(ctx context.Context, key string) (*redis.Options, error) {
	switch c := s.rdb.(type) {
	case *redis.Client:
		return c.Options(), nil
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return n.Options(), nil
	}
	return nil, errNoConns
}

// node returns the node of opt's address.
func (cs *conns) node(opt *redis.Options) *node {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := cs.nodes[opt.Addr]
	if n == nil {
		if cs.nodes == nil {
			cs.nodes = map[string]*node{}
		}
		n = &node{opt: opt}
		cs.nodes[opt.Addr] = n
	}
	return n
}

// get takes a kept connection of n, nil when there is none.
func (cs *conns) get(n *node) *conn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if k := len(n.idle); k > 0 {
		c := n.idle[k-1]
		n.idle[k-1] = nil
		n.idle = n.idle[:k-1]
		return c
	}
	return nil
}

// put keeps a connection whose replies were all read.
func (cs *conns) put(c *conn) {
	cs.mu.Lock()
	if !cs.closed && len(c.n.idle) < maxIdlePerNode {
		c.n.idle = append(c.n.idle, c)
		c = nil
	}
	cs.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// Close closes the kept connections; a read still pending closes its own
// when it ends.
func (s *Store) Close() error {
	cs := &s.conns
	cs.mu.Lock()
	cs.closed = true
	var all []*conn
	for _, n := range cs.nodes {
		all = append(all, n.idle...)
		n.idle = nil
	}
	cs.mu.Unlock()
	for _, c := range all {
		c.close()
	}
	return nil
}

// dial opens a connection to n as go-redis would (TLS, the user and
// password or the password file, the database), by deadline.
func (cs *conns) dial(ctx context.Context, n *node, deadline time.Time) (*conn, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	opt := n.opt
	network := opt.Network
	if network == "" {
		network = "tcp"
	}
	d := &net.Dialer{KeepAlive: 5 * time.Minute}
	var (
		nc  net.Conn
		err error
	)
	if opt.TLSConfig != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: opt.TLSConfig}).DialContext(ctx, network, opt.Addr)
	} else {
		nc, err = d.DialContext(ctx, network, opt.Addr)
	}
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, n: n}
	if err := c.handshake(ctx, opt, deadline); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// handshake authenticates and selects the database, as go-redis does for
// its own connections.
func (c *conn) handshake(ctx context.Context, opt *redis.Options, deadline time.Time) error {
	user, pass := opt.Username, opt.Password
	switch {
	case opt.StreamingCredentialsProvider != nil:
		return errors.New("streaming credentials: not supported by the frequency caps' connections")
	case opt.CredentialsProviderContext != nil:
		var err error
		if user, pass, err = opt.CredentialsProviderContext(ctx); err != nil {
			return err
		}
	case opt.CredentialsProvider != nil:
		user, pass = opt.CredentialsProvider()
	}
	var cmd []byte
	n := 0
	if pass != "" {
		if user != "" {
			cmd = appendCommand(cmd, "AUTH", user, pass)
		} else {
			cmd = appendCommand(cmd, "AUTH", pass)
		}
		n++
	}
	if opt.DB != 0 {
		cmd = appendCommand(cmd, "SELECT", strconv.Itoa(opt.DB))
		n++
	}
	if n == 0 {
		return nil
	}
	if err := c.write(cmd, deadline); err != nil {
		return err
	}
	var buf []byte
	for range n {
		var err error
		if buf, err = c.reply(buf[:0], deadline); err != nil {
			return err
		}
		if line := buf[:len(buf)-2]; string(line) != "+OK" {
			return fmt.Errorf("redis: %s", line[min(1, len(line)):])
		}
	}
	return nil
}

func (c *conn) write(b []byte, deadline time.Time) error {
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return err
	}
	_, err := c.nc.Write(b)
	return err
}

// reply reads one whole reply after what buf holds of it already, by
// deadline, and returns buf with it.
func (c *conn) reply(buf []byte, deadline time.Time) ([]byte, error) {
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return buf, err
	}
	for {
		if len(buf) > 0 {
			end, err := replyEnd(buf)
			switch {
			case err == nil && end == len(buf):
				return buf, nil
			case err == nil:
				return buf, fmt.Errorf("%w: %d bytes after the reply", errProtocol, len(buf)-end)
			case !errors.Is(err, errTruncated):
				return buf, fmt.Errorf("%w: %v", errProtocol, err)
			}
		}
		if len(buf) >= maxReply {
			return buf, fmt.Errorf("%w: a reply over %d bytes", errProtocol, maxReply)
		}
		if cap(buf)-len(buf) < 2048 {
			buf = append(buf[:cap(buf)], make([]byte, max(4096, cap(buf)))...)[:len(buf)]
		}
		k, err := c.nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil && (k == 0 || !errors.Is(err, os.ErrDeadlineExceeded)) {
			return buf, err
		}
	}
}

func (c *conn) close() { _ = c.nc.Close() }

// appendCommand appends a command of bulk strings (RESP).
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
