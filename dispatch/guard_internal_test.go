package dispatch

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// registryRanges are the ranges of the IANA IPv4 and IPv6 Special-Purpose
// Address Registries, written from them (not from the list the guard
// reads), with the IPv4-compatible range (RFC 4291, deprecated) and
// multicast:
//
//	https://www.iana.org/assignments/iana-ipv4-special-registry/
//	https://www.iana.org/assignments/iana-ipv6-special-registry/
var registryRanges = []string{
	// IPv4
	"0.0.0.0/8",          // "this network"
	"0.0.0.0/32",         // "this host on this network"
	"10.0.0.0/8",         // private-use
	"100.64.0.0/10",      // shared address space
	"127.0.0.0/8",        // loopback
	"169.254.0.0/16",     // link local
	"172.16.0.0/12",      // private-use
	"192.0.0.0/24",       // IETF protocol assignments
	"192.0.0.0/29",       // IPv4 service continuity prefix
	"192.0.0.8/32",       // IPv4 dummy address
	"192.0.0.9/32",       // port control protocol anycast
	"192.0.0.10/32",      // TURN anycast
	"192.0.0.170/32",     // NAT64/DNS64 discovery
	"192.0.0.171/32",     // NAT64/DNS64 discovery
	"192.0.2.0/24",       // documentation (TEST-NET-1)
	"192.31.196.0/24",    // AS112-v4
	"192.52.193.0/24",    // AMT
	"192.88.99.0/24",     // deprecated (6to4 relay anycast)
	"192.88.99.2/32",     // 6a44-relay anycast
	"192.168.0.0/16",     // private-use
	"192.175.48.0/24",    // direct delegation AS112 service
	"198.18.0.0/15",      // benchmarking
	"198.51.100.0/24",    // documentation (TEST-NET-2)
	"203.0.113.0/24",     // documentation (TEST-NET-3)
	"240.0.0.0/4",        // reserved
	"255.255.255.255/32", // limited broadcast
	"224.0.0.0/4",        // multicast (not a registry's)
	// IPv6
	"::1/128",           // loopback
	"::/128",            // unspecified
	"::ffff:0:0/96",     // IPv4-mapped
	"::/96",             // IPv4-compatible (RFC 4291, deprecated; not a registry's)
	"64:ff9b::/96",      // IPv4-IPv6 translation
	"64:ff9b:1::/48",    // IPv4-IPv6 translation, local use
	"100::/64",          // discard-only
	"100:0:0:1::/64",    // dummy IPv6 prefix
	"2001::/23",         // IETF protocol assignments
	"2001::/32",         // Teredo
	"2001:1::1/128",     // port control protocol anycast
	"2001:1::2/128",     // TURN anycast
	"2001:1::3/128",     // DNS-SD service registration protocol anycast
	"2001:2::/48",       // benchmarking
	"2001:3::/32",       // AMT
	"2001:4:112::/48",   // AS112-v6
	"2001:10::/28",      // deprecated (ORCHID)
	"2001:20::/28",      // ORCHIDv2
	"2001:30::/28",      // drone remote ID protocol entity tags
	"2001:db8::/32",     // documentation
	"2002::/16",         // 6to4
	"2620:4f:8000::/48", // direct delegation AS112 service
	"3fff::/20",         // documentation
	"5f00::/16",         // segment routing (SRv6) SIDs
	"fc00::/7",          // unique-local
	"fe80::/10",         // link-local unicast
	"ff00::/8",          // multicast (not a registry's)
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// refusedAtDial dials a through g's dialer and reports the guard's
// refusal. Control refuses before the connect: nothing leaves the host.
func refusedAtDial(t *testing.T, g Guard, a netip.Addr) error {
	t.Helper()
	conn, err := g.dialer(time.Second)(t.Context(), "tcp", netip.AddrPortFrom(a, 80).String())
	if conn != nil {
		_ = conn.Close()
	}
	return err
}

// Every range of both registries, v4 and v6, is refused at config time (a
// literal) and at dial time, its first and last address, each refusal
// naming the allow-list's flag; the allow-list opens it.
func TestGuardSpecialRanges(t *testing.T) {
	t.Parallel()
	var g Guard
	for _, r := range registryRanges {
		p := netip.MustParsePrefix(r)
		for _, a := range []netip.Addr{p.Addr(), lastAddr(p)} {
			host := a.String()
			if a.Is6() {
				host = "[" + host + "]"
			}
			err := g.CheckURL("http://" + host + ":8080/")
			require.ErrorIs(t, err, ErrRefused, "%s (%s)", a, r)
			require.Contains(t, err.Error(), "--dispatch-allow", "%s", a)
			err = refusedAtDial(t, g, a)
			require.ErrorIs(t, err, ErrRefused, "%s (%s) at dial time", a, r)
			require.Contains(t, err.Error(), "--dispatch-allow", "%s", a)
			if carrierOf(a) == nil {
				open := Guard{Allow: []netip.Prefix{p}}
				require.NoError(t, open.CheckURL("http://"+host+"/"), "%s opened by %s", a, p)
			}
		}
	}
	// Next to them, public addresses pass.
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "[2606:4700::1111]", "[2001:200::1]", "[2a00:1450::1]"} {
		require.NoError(t, g.CheckURL("http://"+a+"/"), a)
	}
}

// An IPv6 address that carries an IPv4 address is refused in every form;
// where the allow-list opens the form, the IPv4 address it carries is
// checked too.
func TestGuardCarriers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		form            string
		public, private string // carrying 8.8.8.8, and an address of carried
		carried         string // the private one's IPv4 address
		carriedNet      string // the network to open for it
	}{
		{"::ffff:0:0/96", "::ffff:8.8.8.8", "::ffff:127.0.0.1", "127.0.0.1", "127.0.0.0/8"},
		{"::/96", "::8.8.8.8", "::10.0.0.1", "10.0.0.1", "10.0.0.0/8"},
		{"64:ff9b::/96", "64:ff9b::808:808", "64:ff9b::7f00:1", "127.0.0.1", "127.0.0.0/8"},
		// The local-use prefix, as a /96, a /48 and a /64 prefix.
		{"64:ff9b:1::/48", "64:ff9b:1::808:808", "64:ff9b:1::a00:1", "10.0.0.1", "10.0.0.0/8"},
		{"64:ff9b:1::/48", "64:ff9b:1:808:8:800::", "64:ff9b:1:a0a:a:a00::", "10.10.10.10", "10.0.0.0/8"},
		{"64:ff9b:1::/48", "64:ff9b:1:0:8:808:800:0", "64:ff9b:1:0:7f:0:100:0", "127.0.0.1", "127.0.0.0/8"},
		{"2002::/16", "2002:808:808::1", "2002:a00:1::1", "10.0.0.1", "10.0.0.0/8"},
		// Teredo: the client (its bits flipped), and the server.
		{"2001::/32", "2001:0:808:808::f7f7:f7f7", "2001:0:808:808::80ff:fffe", "127.0.0.1", "127.0.0.0/8"},
		{"2001::/32", "2001:0:808:808::f7f7:f7f7", "2001:0:a00:1::f7f7:f7f7", "10.0.0.1", "10.0.0.0/8"},
	} {
		form := netip.MustParsePrefix(tc.form)
		public, private := netip.MustParseAddr(tc.public), netip.MustParseAddr(tc.private)
		require.True(t, form.Contains(public) && form.Contains(private), tc.form)

		var g Guard
		for _, a := range []netip.Addr{public, private} {
			err := g.CheckURL("http://[" + a.String() + "]/")
			require.ErrorIs(t, err, ErrRefused, "%s", a)
			// A mapped address is dialled as the IPv4 address it maps
			// (Control sees 8.8.8.8): the literal is refused above.
			if !a.Is4In6() {
				require.ErrorIs(t, refusedAtDial(t, g, a), ErrRefused, "%s", a)
			}
		}
		open := Guard{Allow: []netip.Prefix{form}}
		require.NoError(t, open.CheckURL("http://["+public.String()+"]/"), "%s with %s open", public, form)
		err := open.CheckURL("http://[" + private.String() + "]/")
		require.ErrorIs(t, err, ErrRefused, "%s with %s open", private, form)
		require.Contains(t, err.Error(), "of "+tc.carried+", which is a", "%s", private)
		require.Contains(t, err.Error(), "--dispatch-allow")
		require.ErrorIs(t, refusedAtDial(t, open, private), ErrRefused, "%s at dial time", private)
		both := Guard{Allow: []netip.Prefix{form, netip.MustParsePrefix(tc.carriedNet)}}
		require.NoError(t, both.CheckURL("http://["+private.String()+"]/"), "%s with %s and %s open", private, form, tc.carriedNet)
	}
}

// The host's own addresses are refused whatever their range, read at each
// check (an address the host gains is refused at once, one it loses is
// not refused any more); a host whose addresses cannot be read refuses.
// Not parallel: it gives the package's seam interfaceAddrs other
// addresses, and puts it back before the parallel tests run.
func TestGuardOwnAddresses(t *testing.T) {
	var hostAddrs atomic.Value
	hostAddrs.Store([]net.Addr{&net.IPNet{IP: net.ParseIP("8.8.4.4"), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("2606:4700::6810:1"), Mask: net.CIDRMask(64, 128)}})
	var readErr atomic.Bool
	reads := atomic.Int64{}
	saved := interfaceAddrs
	interfaceAddrs = func() ([]net.Addr, error) {
		reads.Add(1)
		if readErr.Load() {
			return nil, errors.New("netlink: permission denied")
		}
		return hostAddrs.Load().([]net.Addr), nil
	}
	t.Cleanup(func() { interfaceAddrs = saved })
	var g Guard
	for _, a := range []string{"8.8.4.4", "2606:4700::6810:1"} {
		addr := netip.MustParseAddr(a)
		host := addr.String()
		if addr.Is6() {
			host = "[" + host + "]"
		}
		err := g.CheckURL("http://" + host + "/")
		require.ErrorIs(t, err, ErrRefused, a)
		require.Contains(t, err.Error(), "an address of this host", a)
		require.Contains(t, err.Error(), "--dispatch-allow", a)
		require.ErrorIs(t, refusedAtDial(t, g, addr), ErrRefused, a)
		open := Guard{Allow: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())}}
		require.NoError(t, open.CheckURL("http://"+host+"/"), a)
	}
	require.NoError(t, g.CheckURL("http://8.8.8.8/"), "not this host's")

	// The host moves: its old address passes, its new one is refused.
	hostAddrs.Store([]net.Addr{&net.IPNet{IP: net.ParseIP("8.8.8.8"), Mask: net.CIDRMask(24, 32)}})
	require.NoError(t, g.CheckURL("http://8.8.4.4/"))
	require.ErrorIs(t, g.CheckURL("http://8.8.8.8/"), ErrRefused)

	before := reads.Load()
	readErr.Store(true)
	err := g.CheckURL("http://1.1.1.1/")
	require.ErrorIs(t, err, ErrRefused)
	require.Contains(t, err.Error(), "cannot be read")
	require.Greater(t, reads.Load(), before, "read at the check")
}
