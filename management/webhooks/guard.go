package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Guard keeps deliveries away from internal addresses: it resolves the
// host when a connection is made, refuses every address that is not
// public (loopback unless AllowLoopback, private, link-local, unique-local,
// shared/CGNAT, cloud metadata, multicast, reserved, documentation, IPv4
// inside IPv6 forms that reach those), and dials the address it vetted.
// The dialer checks the address of the socket again just before it
// connects, so no second resolution can swap it (docs/reference/webhooks.md, Safety).
type Guard struct {
	// AllowLoopback lets deliveries reach 127.0.0.0/8 and ::1, for local
	// development (ENDCAP_WEBHOOK_ALLOW_LOOPBACK; endcap dev sets it).
	AllowLoopback bool
	// Resolve looks a host up (nil: the system resolver). Tests give
	// their own.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// DialTimeout bounds one connection attempt (0: 5 s).
	DialTimeout time.Duration
}

// RefusedError means the destination's every address is not allowed: no
// connection was made. Its text, which the delivery log shows, names
// neither the address nor what the host resolved to (an internal DNS
// answer is not for the API's clients to read); Detail does, for the
// operators' log.
type RefusedError struct {
	Host   string
	Addr   netip.Addr
	Reason string
}

// MsgRefused is the text of every RefusedError.
const MsgRefused = "refused: address not allowed"

func (e *RefusedError) Error() string { return MsgRefused }

// Detail says which address was refused and why.
func (e *RefusedError) Detail() string {
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("%s resolves to %s, a %s address", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("%s is a %s address", e.Addr, e.Reason)
}

type blockRange struct {
	p      netip.Prefix
	reason string
}

var blocked = func() []blockRange {
	var out []blockRange
	add := func(reason string, cidrs ...string) {
		for _, c := range cidrs {
			out = append(out, blockRange{netip.MustParsePrefix(c), reason})
		}
	}
	add("loopback", "127.0.0.0/8", "::1/128")
	add("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
	add("link-local (cloud metadata)", "169.254.0.0/16", "fe80::/10")
	add("unique-local", "fc00::/7", "fec0::/10")
	add("shared (CGNAT)", "100.64.0.0/10")
	add("cloud metadata", "168.63.129.16/32", "192.0.0.192/32")
	add("unspecified", "0.0.0.0/8", "::/128")
	add("multicast", "224.0.0.0/4", "ff00::/8")
	add("reserved", "240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15", "100::/64", "2001::/23", "64:ff9b:1::/48", "::/96")
	add("documentation", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
	return out
}()

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixToFo = netip.MustParsePrefix("2002::/16")
)

// Check returns why a is not allowed, or "". An address with an IPv6 zone
// (fe80::1%eth0, ::1%lo) is never allowed: a zone names an interface of
// this host, which no public destination needs, and the ranges below do
// not match a zoned address; the reason is that of the address without it.
func (g *Guard) Check(a netip.Addr) string {
	if a.Zone() != "" {
		why := g.Check(a.WithZone(""))
		if why == "" {
			why = "scoped"
		}
		return why + " (with a zone)"
	}
	a = a.Unmap() // ::ffff:10.0.0.1 is 10.0.0.1
	if !a.IsValid() {
		return "invalid"
	}
	// IPv6 forms that carry an IPv4 address: judge the IPv4 one.
	if a.Is6() && (nat64.Contains(a) || sixToFo.Contains(a)) {
		b := a.As16()
		var v4 [4]byte
		if nat64.Contains(a) {
			copy(v4[:], b[12:])
		} else {
			copy(v4[:], b[2:6])
		}
		if why := g.Check(netip.AddrFrom4(v4)); why != "" {
			return why + " (inside IPv6)"
		}
		return ""
	}
	if a.IsLoopback() && g.AllowLoopback {
		return ""
	}
	for _, r := range blocked {
		if r.p.Contains(a) {
			return r.reason
		}
	}
	return ""
}

// DialContext resolves addr's host, keeps its allowed addresses and
// connects to them in turn (an http.Transport's DialContext).
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = g.resolve(ctx, host); err != nil {
		return nil, err
	}
	var refused *RefusedError
	d := net.Dialer{Timeout: g.DialTimeout, Control: g.control}
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	var lastErr error
	for _, a := range addrs {
		if why := g.Check(a); why != "" {
			if refused == nil {
				refused = &RefusedError{Host: host, Addr: a.Unmap(), Reason: why}
			}
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case lastErr != nil:
		return nil, lastErr
	case refused != nil:
		return nil, refused
	}
	return nil, fmt.Errorf("%s has no address", host)
}

func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if g.Resolve != nil {
		return g.Resolve(ctx, host)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	var de *net.DNSError
	if errors.As(err, &de) {
		// Without the resolver's address, which is internal.
		switch {
		case de.IsNotFound:
			return nil, fmt.Errorf("the host %s was not found (DNS)", host)
		case de.IsTimeout:
			return nil, fmt.Errorf("the DNS lookup of %s timed out", host)
		}
		return nil, fmt.Errorf("the DNS lookup of %s failed", host)
	}
	return addrs, err
}

// RegistrationTimeout bounds the resolution of a webhook's host when its
// URL is registered.
const RegistrationTimeout = 2 * time.Second

// CheckHost says why a webhook whose URL has host may not be registered
// (""; it may): an IP literal that is not allowed, or a name whose every
// address is not allowed. A name that does not resolve (within
// RegistrationTimeout) is accepted: the check at each connection stays the
// guard, and it is also what stops a name that resolves elsewhere later.
// The message names no address the name resolved to.
func (g *Guard) CheckHost(ctx context.Context, host string) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		if why := g.Check(ip); why != "" {
			return fmt.Sprintf("URL must reach a public address: %s is a %s address", host, why)
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, RegistrationTimeout)
	defer cancel()
	addrs, err := g.resolve(ctx, host)
	if err != nil || len(addrs) == 0 {
		return ""
	}
	for _, a := range addrs {
		if g.Check(a) == "" {
			return ""
		}
	}
	return fmt.Sprintf("URL must reach a public address: %s resolves only to addresses that are not allowed (loopback, private or other internal networks)", host)
}

// control is the dialer's last check, on the address the socket is about
// to connect to.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: unparsable address %q", address)
	}
	if why := g.Check(ap.Addr()); why != "" {
		return &RefusedError{Addr: ap.Addr().Unmap(), Reason: why}
	}
	return nil
}

// refusal returns the RefusedError in err's chain.
func refusal(err error) (*RefusedError, bool) {
	var r *RefusedError
	ok := errors.As(err, &r)
	return r, ok
}
