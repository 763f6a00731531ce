package dispatch_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

func TestGuardCheckURL(t *testing.T) {
	t.Parallel()
	var g dispatch.Guard
	refused := map[string]string{
		"ftp://example.com/":               "scheme",
		"example.com/x":                    "scheme",
		"http://":                          "no host",
		"https://user:pw@example.com/":     "user info",
		"http://127.0.0.1/":                "loopback",
		"http://127.1.2.3:8080/":           "loopback",
		"http://[::1]/":                    "loopback",
		"http://[::ffff:127.0.0.1]/":       "loopback",
		"http://localhost:8080/":           "loopback",
		"http://api.localhost/":            "loopback",
		"http://10.1.2.3/":                 "private",
		"http://172.16.0.1/":               "private",
		"http://192.168.1.1/":              "private",
		"http://[fd12::1]/":                "unique-local",
		"http://169.254.169.254/latest/":   "metadata",
		"http://169.254.1.1/":              "link-local",
		"http://[fe80::1]/":                "link-local",
		"http://224.0.0.1/":                "multicast",
		"http://[ff02::1]/":                "multicast",
		"http://0.0.0.0/":                  "unspecified",
		"http://[::]/":                     "unspecified",
		"http://100.100.100.200/":          "special-purpose",
		"http://metadata.google.internal/": "metadata",
		"http://[fd00:ec2::254]/":          "metadata",
		"http://255.255.255.255/":          "special-purpose",
		"http://[64:ff9b::a00:1]/":         "special-purpose",
		"http://[::ffff:8.8.8.8]/":         "IPv4-mapped",
		"http://192.0.2.1/":                "special-purpose",
		"http://[2001:db8::1]/":            "special-purpose",
		"http://[fe80::1%25eth0]/":         "link-local",
		"http://[2001:db8::1%25eth0]/":     "special-purpose",
		"http://example.com/#frag":         "fragment",
		"http://example.com:0/":            "port",
		"http://example.com:99999/":        "port",
	}
	for u, want := range refused {
		err := g.CheckURL(u)
		require.Error(t, err, u)
		require.Contains(t, err.Error(), want, u)
		if errors.Is(err, dispatch.ErrRefused) {
			require.Contains(t, err.Error(), "--dispatch-allow", u)
		}
	}
	for _, u := range []string{"https://example.com/hook", "http://8.8.8.8:8080/x?y=1", "https://[2606:4700::1111]/"} {
		require.NoError(t, g.CheckURL(u), u)
	}
	// The allow-list opens networks and host names.
	open, err := dispatch.ParseAllow("10.0.0.0/8, 127.0.0.1, internal.svc")
	require.NoError(t, err)
	for _, u := range []string{"http://10.1.2.3/", "http://127.0.0.1:9/", "http://internal.svc/", "http://INTERNAL.svc./"} {
		require.NoError(t, open.CheckURL(u), u)
	}
	require.Error(t, open.CheckURL("http://127.0.0.2/"))
	require.Error(t, open.CheckURL("http://192.168.0.1/"))
	_, err = dispatch.ParseAllow("10.0.0.0/33")
	require.Error(t, err)
	require.NoError(t, dispatch.Guard{Disabled: true}.CheckURL("http://127.0.0.1/"))
}

// The guard checks the address dialled, after DNS: a host name that
// resolves to 127.0.0.1 ("localhost", written into a job so that it skips
// the config-time check) is refused at dial time, at once, and the
// receiver never sees the request.
func TestGuardRefusesAtDialTime(t *testing.T) {
	t.Parallel()
	r := newRig(t, dispatch.Guard{}, nil)
	rc := newReceiver(t, nil)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	// The queue's target is public (never dialled here); the job carries
	// its own, built by hand as a client that skipped validation might.
	_, err := r.store.Put(r.ctx, "ssrf", dispatch.QueueConfig{Target: dispatch.Target{URL: "https://example.com/"}})
	require.NoError(t, err)
	require.NoError(t, r.d.Refresh(r.ctx))
	for _, host := range []string{"localhost", "127.0.0.1"} {
		env, _ := json.Marshal(map[string]any{"body": map[string]int{"a": 1},
			"target": map[string]any{"url": "http://" + host + ":" + port + "/"}})
		j := r.enqueue(queue.NewJob{Queue: "ssrf", Kind: dispatch.EnvelopeKind, Payload: env, MaxAttempts: 3})
		done := r.wait("ssrf", j.ID, queue.StatusDead)
		require.Equal(t, 1, done.Attempts, "a refusal is not retried")
		require.Contains(t, done.LastError, "refused by the SSRF guard")
		require.Contains(t, done.LastError, "is a loopback address")
	}
	require.Empty(t, rc.requests())
}

// The allow-list opens a host name at dial time whatever it resolves to.
func TestGuardAllowHostAtDialTime(t *testing.T) {
	t.Parallel()
	r := newRig(t, dispatch.Guard{AllowHosts: []string{"localhost"}}, nil)
	rc := newReceiver(t, nil)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	_, err := r.store.Put(r.ctx, "named", dispatch.QueueConfig{Target: dispatch.Target{URL: "http://localhost:" + port + "/"}})
	require.NoError(t, err)
	require.NoError(t, r.d.Refresh(r.ctx))
	j := r.enqueue(queue.NewJob{Queue: "named"})
	r.wait("named", j.ID, queue.StatusCompleted)
	require.Len(t, rc.requests(), 1)
}

// A redirect to a private address is not followed (nor any redirect).
func TestRedirectToPrivateAddressNotFollowed(t *testing.T) {
	t.Parallel()
	r := newRig(t, loopback, nil)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "http://192.168.0.10/admin", http.StatusTemporaryRedirect)
	})
	r.push("r2p", rc.URL, nil)
	j := r.enqueue(queue.NewJob{Queue: "r2p", MaxAttempts: 1})
	done := r.wait("r2p", j.ID, queue.StatusDead)
	require.Contains(t, done.LastError, "HTTP 307")
	require.Contains(t, done.LastError, "redirects are not followed")
	require.Contains(t, done.LastError, "192.168.0.10")
}

// A receiver listening on all interfaces is not reachable through this
// host's own non-loopback addresses (as a probe reached one through eth0):
// refused at config time as a literal, and at dial time when a job carries
// it, unless the allow-list opens it.
func TestGuardRefusesThisHost(t *testing.T) {
	t.Parallel()
	own := testutil.HostAddrs(t)
	ln, err := net.Listen("tcp", ":0") // every interface, v4 and v6
	require.NoError(t, err)
	rc := newReceiverOn(t, ln, nil)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)

	r := newRig(t, dispatch.Guard{}, nil)
	_, err = r.store.Put(r.ctx, "self", dispatch.QueueConfig{Target: dispatch.Target{URL: "https://example.com/"}})
	require.NoError(t, err)
	require.NoError(t, r.d.Refresh(r.ctx))
	for _, a := range own {
		u := "http://" + netip.AddrPortFrom(a, port).String() + "/"
		err := dispatch.Guard{}.CheckURL(u)
		require.ErrorIs(t, err, dispatch.ErrRefused, u)
		require.Contains(t, err.Error(), "--dispatch-allow", u)
		_, err = r.store.Put(r.ctx, "self", dispatch.QueueConfig{Target: dispatch.Target{URL: u}})
		require.ErrorIs(t, err, queue.ErrInvalid, u)
		require.Contains(t, err.Error(), "refused by the SSRF guard", u)

		// A job that carries it, made by hand past the enqueue's check,
		// is refused at dial time.
		env, _ := json.Marshal(map[string]any{"body": map[string]int{"a": 1}, "target": map[string]any{"url": u}})
		j := r.enqueue(queue.NewJob{Queue: "self", Kind: dispatch.EnvelopeKind, Payload: env, MaxAttempts: 3})
		done := r.wait("self", j.ID, queue.StatusDead)
		require.Equal(t, 1, done.Attempts, "a refusal is not retried")
		require.Contains(t, done.LastError, "refused by the SSRF guard", u)
		require.Contains(t, done.LastError, "--dispatch-allow", u)
	}
	require.Empty(t, rc.requests())

	// The allow-list opens them.
	open := dispatch.Guard{Allow: make([]netip.Prefix, len(own))}
	for i, a := range own {
		open.Allow[i] = netip.PrefixFrom(a, a.BitLen())
	}
	ro := newRig(t, open, nil)
	for i, a := range own {
		u := "http://" + netip.AddrPortFrom(a, port).String() + "/"
		require.NoError(t, open.CheckURL(u))
		ro.push("self", u, nil)
		j := ro.enqueue(queue.NewJob{Queue: "self"})
		ro.wait("self", j.ID, queue.StatusCompleted)
		require.Len(t, rc.requests(), i+1, u)
	}
}
