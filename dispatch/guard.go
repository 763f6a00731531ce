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

	"code.dny.dev/ssrf"
)

// The SSRF guard. A push target is a URL anyone with the API token may
// set, and the dispatcher runs inside the operator's network: unguarded,
// a target of http://169.254.169.254/ or http://10.0.0.5:6379/ would turn
// chronoq into a proxy to what only it can reach. So, by default, the
// dispatcher refuses to connect to:
//
//   - every range of the IANA special-purpose address registries, IPv4
//     and IPv6 (loopback, private, shared, link-local, documentation,
//     benchmarking, reserved, the "this network" block, 6to4, NAT64,
//     Teredo, IPv4-mapped and -compatible, discard-only, unique-local, and
//     all of IPv6 outside 2000::/3), and multicast;
//   - the addresses of this host's own interfaces, whatever their range
//     (a receiver listening on all interfaces is reached through them as
//     through loopback), read again at each check: addresses change;
//   - cloud metadata endpoints, by address and by name.
//
// An IPv6 address that carries an IPv4 address (IPv4-mapped, the
// deprecated IPv4-compatible, 6to4, NAT64, Teredo) is in one of those
// ranges; where the allow-list opens it (say 64:ff9b::/96 on a network
// with NAT64), the IPv4 addresses it carries are checked as well, so
// that 64:ff9b::7f00:1 still does not reach 127.0.0.1.
//
// The allow-list (--dispatch-allow, Guard.Allow and Guard.AllowHosts) is
// the only way in, and every refusal names it. The check is made on the
// address actually dialled (net.Dialer.Control), after DNS resolution: a
// name that resolves to 127.0.0.1, or a rebinding DNS server that answers
// a public address at config time and a private one later, gains nothing.
// Redirects are never followed (see mapStatus), and proxies from the
// environment are not used, since a proxy would dial in the guard's place.
// Config and enqueue check what they can without DNS (the scheme, IP
// literals, metadata and localhost names) and answer a 400 naming the
// problem.

// ErrRefused is a target the guard refuses.
var ErrRefused = errors.New("dispatch: refused by the SSRF guard")

// Guard decides which addresses the dispatcher may connect to. The zero
// Guard refuses every special address and allows the rest.
type Guard struct {
	// Allow opens these networks ("10.1.0.0/16", "127.0.0.1/32"), checked
	// on the dialled address. An entry opens exactly the addresses it
	// holds: 127.0.0.1/32 does not open ::ffff:127.0.0.1.
	Allow []netip.Prefix
	// AllowHosts opens these host names (exact, case-insensitive), dialled
	// whatever they resolve to: for internal services known by name.
	AllowHosts []string
	// Disabled turns the guard off: every address is allowed.
	Disabled bool
}

// interfaceAddrs reads this host's interface addresses: net.InterfaceAddrs,
// and the tests' seam to give the host others.
var interfaceAddrs = net.InterfaceAddrs

// allowFlag names the allow-list in every refusal.
const allowFlag = "--dispatch-allow"

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
				a = a.WithZone("")
				g.Allow = append(g.Allow, netip.PrefixFrom(a, a.BitLen()))
			} else {
				g.AllowHosts = append(g.AllowHosts, strings.ToLower(item))
			}
		}
	}
	return g, nil
}

// The special-purpose ranges are code.dny.dev/ssrf's, which generates them
// from the IANA registries (and adds multicast, 224.0.0.0/4):
//
//	https://www.iana.org/assignments/iana-ipv4-special-registry/
//	https://www.iana.org/assignments/iana-ipv6-special-registry/
//
// Of IPv6 it lists the special ranges inside 2000::/3 (the global unicast
// space); every range of the IPv6 registry outside it (::1, ::,
// ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, 100::/64, 5f00::/16,
// fc00::/7, fe80::/10...) is refused with the rest of that space, which
// holds no address a public receiver has. TestGuardSpecialRanges walks
// both registries, range by range, to hold the lists to them.

// Cloud metadata endpoints (169.254.169.254 and fd00:ec2::254 are in
// special ranges too; named here for a clearer refusal).
var (
	metadataAddrs = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")}
	metadataHosts = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data",
		"instance-data.ec2.internal", "metadata.azure.com"}
)

// carrier is an IPv6 form that carries IPv4 addresses.
type carrier struct {
	prefix netip.Prefix
	name   string
	// v4 are the IPv4 addresses an address of prefix carries.
	v4 func(b [16]byte) []netip.Addr
}

// v4At is the IPv4 address of the bytes of b at i.
func v4At(b [16]byte, i ...int) netip.Addr {
	return netip.AddrFrom4([4]byte{b[i[0]], b[i[1]], b[i[2]], b[i[3]]})
}

func last32(b [16]byte) []netip.Addr { return []netip.Addr{v4At(b, 12, 13, 14, 15)} }

// carriers are the IPv6 forms that carry IPv4 addresses, each a range of
// the IPv6 special-purpose registry but the IPv4-compatible one (RFC
// 4291, deprecated; inside ::/8, reserved by the IETF).
var carriers = []carrier{
	{netip.MustParsePrefix("::ffff:0:0/96"), "an IPv4-mapped address", last32},
	// ::/96 but :: and ::1, the unspecified and loopback addresses.
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address", last32},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address", last32},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address", localNAT64},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address", func(b [16]byte) []netip.Addr {
		return []netip.Addr{v4At(b, 2, 3, 4, 5)}
	}},
	// Teredo (RFC 4380): the server's address, and the client's, stored
	// with every bit flipped.
	{netip.MustParsePrefix("2001::/32"), "a Teredo address", func(b [16]byte) []netip.Addr {
		return []netip.Addr{v4At(b, 4, 5, 6, 7), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})}
	}},
}

// localNAT64 reads an address of RFC 8215's local-use prefix, which a
// network may use with any RFC 6052 prefix length from 48 up, and we
// cannot know which: it answers the IPv4 address at every place such a
// length could put it, so that the gateway's reading is among those
// checked. A length under 96 is possible only when the reserved byte 8
// and the bytes after the IPv4 address are zero (RFC 6052, 2.2); 96 is
// possible unless its reading is 0.0.0.0 where a shorter one is. (The
// readings of the lengths not in use are noise, and may refuse an
// address that a network using a length under 96 means: open the IPv4
// addresses they read as well.)
func localNAT64(b [16]byte) []netip.Addr {
	zeroFrom := func(i int) bool { return b[8] == 0 && !slices.ContainsFunc(b[i:], func(x byte) bool { return x != 0 }) }
	var out []netip.Addr
	if zeroFrom(11) {
		out = append(out, v4At(b, 6, 7, 9, 10)) // /48
	}
	if zeroFrom(12) {
		out = append(out, v4At(b, 7, 9, 10, 11)) // /56
	}
	if zeroFrom(13) {
		out = append(out, v4At(b, 9, 10, 11, 12)) // /64
	}
	if len(out) == 0 || !zeroFrom(12) {
		out = append(out, v4At(b, 12, 13, 14, 15)) // /96
	}
	return out
}

// carrierOf answers the IPv4-carrying form of a, nil for none.
func carrierOf(a netip.Addr) *carrier {
	if !a.Is6() || a == netip.IPv6Unspecified() || a == netip.IPv6Loopback() {
		return nil
	}
	for i := range carriers {
		if carriers[i].prefix.Contains(a) {
			return &carriers[i]
		}
	}
	return nil
}

// why answers why a (without a zone) is refused by range, "" when no
// range refuses it.
func why(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "the unspecified address"
	case slices.Contains(metadataAddrs, a):
		return "the cloud metadata endpoint"
	case a.IsPrivate():
		if a.Is6() {
			return "a unique-local address"
		}
		return "a private address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	}
	if c := carrierOf(a); c != nil {
		v4 := c.v4(a.As16())
		if len(v4) == 1 {
			return fmt.Sprintf("a special-purpose address: %s (%s) of %s", c.name, c.prefix, v4[0])
		}
		return fmt.Sprintf("a special-purpose address: %s (%s)", c.name, c.prefix)
	}
	if a.Is4() {
		for _, p := range ssrf.IPv4DeniedPrefixes {
			if p.Contains(a) {
				return "a special-purpose address (" + p.String() + ")"
			}
		}
		return ""
	}
	if !ssrf.IPv6GlobalUnicast.Contains(a) {
		return "a special-purpose address (outside " + ssrf.IPv6GlobalUnicast.String() + ", the global unicast space)"
	}
	for _, p := range ssrf.IPv6DeniedPrefixes {
		if p.Contains(a) {
			return "a special-purpose address (" + p.String() + ")"
		}
	}
	return ""
}

// allows reports whether the allow-list holds a.
func (g Guard) allows(a netip.Addr) bool {
	return slices.ContainsFunc(g.Allow, func(p netip.Prefix) bool { return p.Contains(a) })
}

// own reports whether a is an address of one of this host's interfaces,
// read now.
func own(a netip.Addr) (bool, error) {
	addrs, err := interfaceAddrs()
	if err != nil {
		return false, err
	}
	for _, ad := range addrs {
		var ip net.IP
		switch v := ad.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if o, ok := netip.AddrFromSlice(ip); ok && o.Unmap() == a {
			return true, nil
		}
	}
	return false, nil
}

// refusal answers why g refuses a, "" when it lets it through.
func (g Guard) refusal(a netip.Addr) string {
	a = a.WithZone("") // a prefix never holds a zoned address
	if !g.allows(a) {
		if r := why(a); r != "" {
			return r
		}
		mine, err := own(a)
		switch {
		case err != nil:
			return "perhaps this host's own: its interface addresses cannot be read (" + err.Error() + ")"
		case mine:
			return "an address of this host"
		}
		return ""
	}
	if c := carrierOf(a); c != nil {
		for _, v4 := range c.v4(a.As16()) {
			if r := g.refusal(v4); r != "" {
				return fmt.Sprintf("%s (%s) of %s, which is %s", c.name, c.prefix, v4, r)
			}
		}
	}
	return ""
}

// allowedAddr reports whether the guard lets the dialler connect to a.
func (g Guard) allowedAddr(a netip.Addr) error {
	if g.Disabled {
		return nil
	}
	if r := g.refusal(a); r != "" {
		return fmt.Errorf("%w: %s is %s (only the allow-list, %s, opens it)", ErrRefused, a.WithZone(""), r, allowFlag)
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
		return fmt.Errorf("%w: %s is a cloud metadata endpoint (only the allow-list, %s, opens it)", ErrRefused, host, allowFlag)
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("%w: %s is a loopback name (only the allow-list, %s, opens it)", ErrRefused, host, allowFlag)
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
