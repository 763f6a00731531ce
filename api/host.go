package api

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// The Host check. A server without a token trusts whoever reaches it, and
// a browser on the same machine reaches it: a page of rebind.example,
// whose name the attacker's DNS server answers first with its own
// address and then with 127.0.0.1, is then same-origin with the server,
// so the browser lets it send anything and read every answer (the Origin
// check passes, since Origin and Host agree). What the page cannot change
// is the Host header, which names rebind.example. So a server without a
// token answers only requests whose Host names it: a loopback name
// (localhost, *.localhost) or address (127.0.0.0/8, ::1), the address the
// request arrived at (this server's own; on a server listening on every
// interface, whichever it was reached through), or a name or address of
// Config.AllowedHosts (serve adds its --listen host). Others get 421
// Misdirected Request. The port is not compared: a rebinding page can
// use the server's. /healthz and /readyz answer any Host: they tell
// nothing but that the server is up. With a token, the token is the
// check (the page has neither it nor, on its origin, the session cookie).

// hostPart is a Host header's host, or an entry of AllowedHosts: without
// its port and brackets, lower-cased, without a trailing dot. It
// allocates only for upper case.
func hostPart(h string) string {
	switch i := strings.LastIndexByte(h, ':'); {
	case strings.HasPrefix(h, "["):
		if j := strings.IndexByte(h, ']'); j > 0 {
			h = h[1:j]
		}
	case i >= 0 && strings.IndexByte(h, ':') == i: // one colon: a port
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// hostAddr reads h (a hostPart) as an IP address, unmapped.
func hostAddr(h string) (netip.Addr, bool) {
	if h == "" || !strings.Contains(h, ":") && (h[0] < '0' || h[0] > '9') {
		return netip.Addr{}, false // a name: not parsed, for its error would allocate
	}
	a, err := netip.ParseAddr(h)
	return a.Unmap().WithZone(""), err == nil
}

// CheckHost reports whether h can be an entry of Config.AllowedHosts: a
// host name or an IP address, with neither scheme, path nor port.
func CheckHost(h string) error {
	c := hostPart(h)
	if _, ok := hostAddr(c); ok {
		if strings.Contains(h, "]:") || !strings.HasPrefix(h, "[") && strings.Count(h, ":") == 1 {
			return fmt.Errorf("allowed host %q: give it without a port", h)
		}
		return nil
	}
	if c == "" || c != strings.ToLower(strings.TrimSuffix(h, ".")) || strings.ContainsAny(c, ":/@?#*[] \t") {
		return fmt.Errorf("allowed host %q is not a host name or address (give it without scheme, path or port)", h)
	}
	return nil
}

// allowedHosts checks Config.AllowedHosts and reads it into its names and
// its addresses.
func allowedHosts(list []string) (names []string, addrs []netip.Addr, err error) {
	for _, h := range list {
		if err := CheckHost(h); err != nil {
			return nil, nil, fmt.Errorf("api: Config.AllowedHosts: %w", err)
		}
		if a, ok := hostAddr(hostPart(h)); ok {
			addrs = append(addrs, a)
		} else {
			names = append(names, hostPart(h))
		}
	}
	return names, addrs, nil
}

// hostOK reports whether r's Host names this server (see above).
func (s *Server) hostOK(r *http.Request) bool {
	h := hostPart(r.Host)
	a, ok := hostAddr(h)
	if !ok {
		return h == "localhost" || strings.HasSuffix(h, ".localhost") || slices.Contains(s.hostNames, h)
	}
	if a.IsLoopback() || slices.Contains(s.hostAddrs, a) {
		return true
	}
	la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return false
	}
	l, ok := netip.AddrFromSlice(la.IP)
	return ok && l.Unmap() == a
}

// checkHost answers the 421 of a request to a server without a token
// whose Host does not name it.
func (s *Server) checkHost(c echo.Context) error {
	if s.cfg.Token != "" || c.Path() == "/healthz" || c.Path() == "/readyz" || s.hostOK(c.Request()) {
		return nil
	}
	return &Error{Status: http.StatusMisdirectedRequest, Code: CodeMisdirectedRequest,
		Message: fmt.Sprintf("the Host %q does not name this server: without a token it answers only to loopback "+
			"names and addresses, the address it was reached at, and the names given with --allowed-hosts "+
			"(CHRONOQ_ALLOWED_HOSTS, api.Config.AllowedHosts); add this one there, or set a token", c.Request().Host)}
}
