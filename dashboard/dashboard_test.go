package dashboard_test

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dashboard"
)

// TestHandler: one self-contained page, nothing loaded from elsewhere, and
// a CSP that allows exactly its inline script and style.
func TestHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	dashboard.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil))
	res := rec.Result()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	html := string(body)
	require.NotContains(t, html, "{{")
	require.Contains(t, html, `id="queues"`)
	require.Contains(t, html, "/v1/queues")
	// Live from the event stream, with a view per hash route.
	require.Contains(t, html, `new EventSource(url)`)
	require.Contains(t, html, `stream("/v1/events"`)
	for _, view := range []string{"queues", "job", "notfound"} {
		require.Contains(t, html, `data-view="`+view+`"`)
	}
	// Offline: no external resource.
	require.NotRegexp(t, `(src|href)="(https?:)?//`, html)
	require.Equal(t, 1, strings.Count(html, "<link"))
	require.Contains(t, html, `<link rel="icon" href="data:,">`) // no /favicon.ico request

	csp := res.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "connect-src 'self'")
	require.Contains(t, csp, "frame-ancestors 'none'")
	for tag, dir := range map[string]string{"script": "script-src", "style": "style-src"} {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(html, -1)
		require.Len(t, m, 1, tag)
		sum := sha256.Sum256([]byte(m[0][1]))
		require.Contains(t, csp, dir+" 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	// No inline handlers or style attributes, which the CSP would block.
	require.NotRegexp(t, `<[^>]+\s(on[a-z]+|style)=`, strings.ReplaceAll(html, m0(html), ""))
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
}

// m0 is the inline script, left out of the markup checks.
func m0(html string) string {
	return regexp.MustCompile(`(?s)<script>.*?</script>`).FindString(html)
}

// TestPlaceholder: the page a server without the dashboard shows points
// at the API, its document and its metrics.
func TestPlaceholder(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	dashboard.Placeholder().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	for _, link := range []string{`href="/v1/openapi.json"`, `href="/v1/queues"`, `href="/metrics"`} {
		require.Contains(t, rec.Body.String(), link)
	}
}

// TestSignIn: the sign-in page is a 401 with a token form that sends to
// GET /, no script, its style allowed by hash; a wrong token is said.
func TestSignIn(t *testing.T) {
	t.Parallel()
	for _, wrong := range []bool{false, true} {
		rec := httptest.NewRecorder()
		dashboard.SignIn(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil), wrong)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
		html := rec.Body.String()
		require.Contains(t, html, `<form id="signin" method="get" action="/">`)
		require.Contains(t, html, `<input id="token" name="token" type="password"`)
		require.NotContains(t, html, "<script")
		require.NotContains(t, html, "{{")
		require.Equal(t, wrong, strings.Contains(html, "That token is not this server's."))
		m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(html)
		require.Len(t, m, 2)
		sum := sha256.Sum256([]byte(m[1]))
		csp := rec.Header().Get("Content-Security-Policy")
		require.Contains(t, csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		require.Contains(t, csp, "form-action 'self'")
		require.NotRegexp(t, `<[^>]+\s(on[a-z]+|style)=`, html)
	}
}

// TestLoadingFirst: before its first answer the page says "Loading…",
// not that there are no queues or no workflows; the script turns the
// loading lines off once the answers are in.
func TestLoadingFirst(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	dashboard.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil))
	html := rec.Body.String()
	require.Contains(t, html, `<p id="queues-loading" class="muted">Loading…</p>`) // shown
	require.Contains(t, html, `<p id="no-queues" class="muted" hidden>`)
	require.Contains(t, html, `<p id="workflows-loading" class="muted" hidden>Loading…</p>`) // shown on entering the view
	require.Contains(t, html, `<p id="wf-loading" class="muted" hidden>Loading…</p>`)
	require.Contains(t, html, `$("queues-loading").hidden = state.queuesRead;`)
	require.Contains(t, html, `$("no-queues").hidden = qs.length > 0 || !state.queuesRead;`)
}

// TestDashboardFlowPanel: the queue's flow keys panel is hidden until a
// read of the queue's keys says it has some (or flow limits, or a key is
// open), reads the top 20 keys and a key's first 50 jobs, and has an
// address per key. What it shows is driven in a browser by
// cmd/chronoq's TestDashboardFlowKeys.
func TestDashboardFlowPanel(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	dashboard.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil))
	html := rec.Body.String()
	require.Contains(t, html, `<section id="flow-panel" hidden>`)
	require.Contains(t, html, `<div id="flow-key-box" hidden>`)
	require.Contains(t, html, `const FLOW_TOP = 20;`)
	require.Contains(t, html, `const FLOW_JOBS = 50;`)
	require.Contains(t, html, `api("GET", base + "/keys?offset=0&limit=" + FLOW_TOP)`)
	require.Contains(t, html, `api("GET", base + "/keys/" + encodeURIComponent(key) + "?limit=" + FLOW_JOBS)`)
	require.Contains(t, html, `$("flow-panel").hidden = !keys || (total === 0 && !lim && !flow.key);`)
	require.Contains(t, html, `["/queues/:queue/flow/:key", "queues"]`)
}
