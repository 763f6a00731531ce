package testutil

import (
	"net"
	"net/netip"
	"testing"
)

// HostAddrs answers the addresses of this host's interfaces that a peer on
// its network would use (not loopback, link-local nor multicast ones), for
// tests of what is reachable through them as through loopback (the SSRF
// guard, the Host check). It skips the test on a host with none.
func HostAddrs(t testing.TB) []netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("testutil: this host's addresses: %v", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if ip = ip.Unmap(); ok && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsMulticast() {
			out = append(out, ip)
		}
	}
	if len(out) == 0 {
		t.Skip("this host has no address but loopback and link-local ones")
	}
	return out
}
