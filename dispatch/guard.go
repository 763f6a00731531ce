package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The SSRF guard. A push target is a URL anyone with the API token may
// set, and the dispatcher runs inside the operator's network: unguarded,
// a target of http://169.254.169.254/ or http://10.0.0.5:6379/ would turn
// chronoq into a proxy to what only it can reach. So, by default, the
// dispatcher refuses to connect to loopback, private, link-local,
// unique-local, multicast, unspecified and other special addresses, and to
// cloud metadata endpoints. The check is made on the address actually
// dialled (net.Dialer.Control), after DNS resolution: a name that resolves
// to 127.0.0.1, or a rebinding DNS server that answers a public address at
// config time and a private one later, gains nothing. Redirects are never
// followed (see outcome.go), and proxies from the environment are not used,
// since a proxy would dial in the guard's place. Config and enqueue check
// what they can without DNS (the scheme, IP literals, metadata names) and
// answer a 400 naming the problem.

// ErrRefused is a target the guard refuses.
var ErrRefused = errors.New("dispatch: refused by the SSRF guard")

// Guard decides which addresses the dispatcher may connect to. The zero
// Guard refuses every special address and allows the rest.
type Guard struct {
	// Allow opens these networks ("10.1.0.0/16", "127.0.0.1/32"), checked
	// on the dialled address.
	Allow []netip.Prefix
	// AllowHosts opens these host names (exact, case-insensitive), dialled
	// whatever they resolve to: for internal services known by name.
	AllowHosts []string
	// Disabled turns the guard off: every address is allowed.
	Disabled bool
}

// ParseAllow reads an allow-list: CIDRs, IP addresses (a /32 or /128) and
// host names, comma-separated.
func ParseAllow(list string) (Guard, error) {
	var g Guard
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return Guard{}, fmt.Errorf("dispatch: allow-list entry %q: %w", item, err)
			}
			g.Allow = append(g.Allow, p.Masked())
		default:
			if a, err := netip.ParseAddr(item); err == nil {
				g.Allow = append(g.Allow, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			} else {
				g.AllowHosts = append(g.AllowHosts, strings.ToLower(item))
			}
		}
	}
	return g, nil
}

// special are networks refused besides those netip classifies (loopback,
// private, link-local, multicast, unspecified).
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),      // carrier-grade NAT (Alibaba's metadata 100.100.100.200)
	netip.MustParsePrefix("192.0.0.0/24"),       // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),      // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),       // NAT64: an IPv4 address in disguise
	netip.MustParsePrefix("64:ff9b:1::/48"),     // local-use NAT64
	netip.MustParsePrefix("2002::/16"),          // 6to4: an IPv4 address in disguise
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6 (unique-local too)
	netip.MustParsePrefix("169.254.169.254/32"), // the cloud metadata endpoint (link-local too)
}

// metadataHosts are the names of cloud metadata services.
var metadataHosts = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data",
	"instance-data.ec2.internal", "metadata.azure.com"}

// why answers why a is refused, "" when it is not.
func why(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		if a.Is6() {
			return "a unique-local address"
		}
		return "a private address"
	case a.IsLinkLocalUnicast():
		if a == netip.MustParseAddr("169.254.169.254") {
			return "the cloud metadata endpoint"
		}
		return "a link-local address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a.IsUnspecified():
		return "the unspecified address"
	}
	for _, p := range special {
		if p.Contains(a) {
			return "a special-purpose address (" + p.String() + ")"
		}
	}
	return ""
}

// allowedAddr reports whether the guard lets the dialler connect to a.
func (g Guard) allowedAddr(a netip.Addr) error {
	if g.Disabled {
		return nil
	}
	a = a.Unmap()
	for _, p := range g.Allow {
		if p.Contains(a) {
			return nil
		}
	}
	if r := why(a); r != "" {
		return fmt.Errorf("%w: %s is %s (open it with the allow-list)", ErrRefused, a, r)
	}
	return nil
}

func (g Guard) hostAllowed(host string) bool {
	return slices.Contains(g.AllowHosts, strings.ToLower(strings.TrimSuffix(host, ".")))
}

// CheckURL checks a target URL without DNS: absolute, http or https, a
// host, no user info, and, unless the allow-list opens it, no refused IP
// literal or metadata name. The error names the problem.
func (g Guard) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("the scheme must be http or https, got %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return errors.New("the URL has no host")
	case u.User != nil:
		return errors.New("user info in the URL is not allowed: send credentials in headers")
	case u.Fragment != "":
		return errors.New("a URL fragment is never sent: remove it")
	case len(raw) > maxURL:
		return fmt.Errorf("the URL is longer than %d bytes", maxURL)
	}
	if p := u.Port(); p != "" {
		if n, err := netip.ParseAddrPort("0.0.0.0:" + p); err != nil || n.Port() == 0 {
			return fmt.Errorf("bad port %q", p)
		}
	}
	host := u.Hostname()
	if g.Disabled || g.hostAllowed(host) {
		return nil
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if err := g.allowedAddr(a); err != nil {
			return err
		}
		return nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if slices.Contains(metadataHosts, h) {
		return fmt.Errorf("%w: %s is a cloud metadata endpoint", ErrRefused, host)
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("%w: %s is loopback (open it with the allow-list)", ErrRefused, host)
	}
	return nil
}

const maxURL = 8 << 10

// dialer answers a DialContext for the transport: the address actually
// connected to is checked in Control, after resolution, unless its host
// name is on the allow-list.
func (g Guard) dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	guarded := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot read the dialled address %q", ErrRefused, address)
			}
			return g.allowedAddr(ap.Addr())
		}}
	open := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if g.Disabled || g.hostAllowed(host) {
			return open.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}
