package api_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/api/apitest"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/testutil"
)

// A server without a token answers 421 to a Host that does not name it, as
// a page of rebind.example whose name was rebound to 127.0.0.1 sends: on
// every route but /healthz and /readyz, reads and writes, the dashboard,
// the event stream and /metrics; nothing is enqueued or changed.
func TestHostRebinding(t *testing.T) {
	t.Parallel()
	b := setup(t, withPush(dispatch.Guard{}))
	_, port, err := net.SplitHostPort(strings.TrimPrefix(b.http.URL, "http://"))
	require.NoError(t, err)
	for _, host := range []string{"rebind.example:" + port, "rebind.example", "127.0.0.1.nip.io:" + port, "localhost.example",
		"10.0.0.1:" + port, "[2001:db8::1]:" + port} {
		for _, rt := range []struct{ method, path, body string }{
			{http.MethodGet, "/v1/queues", ""},
			{http.MethodPost, "/v1/jobs", `{"queue":"q","kind":"k"}`},
			{http.MethodPut, "/v1/queues/q/config", `{"target":{"url":"https://example.com/"}}`},
			{http.MethodGet, "/v1/queues/q/jobs", ""},
			{http.MethodDelete, "/v1/queues/q", ""},
			{http.MethodGet, "/", ""},
			{http.MethodGet, "/v1/events", ""},
			{http.MethodGet, "/metrics", ""},
			{http.MethodGet, "/v1/openapi.json", ""},
			{http.MethodGet, "/v1/no-such-route", ""},
		} {
			var body any
			if rt.body != "" {
				body = rt.body
			}
			r := b.do(t, rt.method, rt.path, body, "Host", host, "Origin", "http://"+host)
			e := requireError(t, r, http.StatusMisdirectedRequest, api.CodeMisdirectedRequest, "")
			require.Contains(t, e.Message, "--allowed-hosts", "%s %s Host %q", rt.method, rt.path, host)
		}
		for _, open := range []string{"/healthz", "/readyz"} {
			require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, open, nil, "Host", host).status, "%s Host %q", open, host)
		}
	}
	r := b.do(t, http.MethodGet, "/v1/queues/q", nil)
	requireError(t, r, http.StatusNotFound, "not_found", "") // nothing was enqueued, nor configured

	// Hosts that name the server: loopback names and addresses, the
	// address the request arrived at (here 127.0.0.1), any port.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST.", "localhost", "app.localhost:1",
		"127.8.9.10", "[::1]:" + port, "[::ffff:127.0.0.1]"} {
		r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "q", "kind": "k"}, "Host", host)
		require.Equal(t, http.StatusCreated, r.status, "Host %q: %s", host, r.body)
		for _, path := range []string{"/", "/metrics", "/v1/queues", "/v1/openapi.json"} {
			r := b.do(t, http.MethodGet, path, nil, "Host", host)
			require.Equal(t, http.StatusOK, r.status, "%s Host %q: %s", path, host, r.body)
		}
	}

	// The event stream opens for an allowed Host, and events come.
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second) // a stream without the event ends, failing the test
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.http.URL+"/v1/events?queue=hosts", nil)
	require.NoError(t, err)
	req.Host = "localhost:" + port
	res, err := b.http.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	require.Equal(t, http.StatusOK, res.StatusCode)
	sc := bufio.NewScanner(res.Body)
	require.True(t, sc.Scan())
	require.Equal(t, ": connected", sc.Text())
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "hosts", "kind": "k"}).status)
	for sc.Scan() {
		if sc.Text() == "event: enqueued" {
			return
		}
	}
	t.Fatalf("the stream ended without the event: %v", sc.Err())
}

// Config.AllowedHosts adds names and addresses, compared without case,
// port or trailing dot; a server with a token checks no Host.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.api.AllowedHosts = []string{"Chronoq.Internal", "10.1.2.3", "[2001:db8::7]"} })
	for _, host := range []string{"chronoq.internal:8080", "CHRONOQ.INTERNAL.", "10.1.2.3:80", "[2001:db8::7]:8080"} {
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/queues", nil, "Host", host).status, host)
	}
	for _, host := range []string{"other.internal", "sub.chronoq.internal", "10.1.2.4", "chronoq.internal.evil.example"} {
		requireError(t, b.do(t, http.MethodGet, "/v1/queues", nil, "Host", host), http.StatusMisdirectedRequest, api.CodeMisdirectedRequest, "")
	}

	tb := setup(t, withToken("tok"))
	require.Equal(t, http.StatusOK, tb.do(t, http.MethodGet, "/v1/queues", nil, "Host", "rebind.example").status)
	requireError(t, tb.do(t, http.MethodGet, "/v1/queues", nil, "Host", "rebind.example", "Authorization", ""),
		http.StatusUnauthorized, "unauthenticated", "")

	for _, bad := range []string{"", "http://chronoq.internal", "chronoq.internal:8080", "10.1.2.3:80", "[::1]:80",
		"a/b", "user@host", "*.example.com"} {
		_, err := api.New(api.Config{Store: b.client, AllowedHosts: []string{bad}})
		require.Error(t, err, "%q", bad)
		require.Error(t, api.CheckHost(bad), "%q", bad)
	}
	for _, good := range []string{"chronoq.internal", "Chronoq.Internal.", "10.1.2.3", "::1", "[::1]", "0.0.0.0", "::", "localhost"} {
		require.NoError(t, api.CheckHost(good), "%q", good)
	}
}

// A server listening on every interface, reached through one of this
// host's own addresses, answers to that address as Host; to a name, only
// if it was given.
func TestHostThroughOwnAddress(t *testing.T) {
	t.Parallel()
	own := testutil.HostAddrs(t)
	b := setup(t, func(sc *setupConfig) { sc.api.AllowedHosts = []string{"chronoq.lan"} })
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(b.srv)
	_ = hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	apitest.Wrap(t, hs.Client(), b.srv.OpenAPI())
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	get := func(base, host string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/queues", nil)
		require.NoError(t, err)
		req.Host = host
		res, err := hs.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res.StatusCode
	}
	for _, a := range own {
		base := "http://" + netip.AddrPortFrom(a, port).String()
		hostport := netip.AddrPortFrom(a, port).String()
		require.Equal(t, http.StatusOK, get(base, hostport), "%s", a)
		require.Equal(t, http.StatusOK, get(base, "chronoq.lan:80"), "%s", a)
		require.Equal(t, http.StatusMisdirectedRequest, get(base, "rebind.example"), "%s", a)
		// Another of this host's addresses than the one the request came
		// through: not where the client reached the server.
		require.Equal(t, http.StatusMisdirectedRequest, get("http://"+netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String(), hostport), "%s", a)
	}
}
