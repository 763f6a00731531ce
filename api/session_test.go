package api_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/api/apitest"
)

// login does GET /?token=tok without following the redirect.
// loginAnswer is the answer to a login, its body read and closed.
type loginAnswer struct {
	StatusCode int
	Header     http.Header
	cookies    []*http.Cookie
}

func (a loginAnswer) Cookies() []*http.Cookie { return a.cookies }

func login(t *testing.T, hs *httptest.Server, tok string) loginAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, hs.URL+"/?token="+tok, nil)
	require.NoError(t, err)
	cl := hs.Client()
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := cl.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return loginAnswer{StatusCode: res.StatusCode, Header: res.Header, cookies: res.Cookies()}
}

func sessionCookie(t *testing.T, res loginAnswer) *http.Cookie {
	t.Helper()
	for _, c := range res.Cookies() {
		if c.Name == api.SessionCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", api.SessionCookie, res.Header.Values("Set-Cookie"))
	return nil
}

// extraOpenAPI documents the route /v1/extra of TestDashboardSession.
const extraOpenAPI = `{"paths": {"/v1/extra": {"post": {"operationId": "extra", "responses": {
	"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object",
		"properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}}}},
	"401": {"$ref": "#/components/responses/Unauthenticated"},
	"403": {"$ref": "#/components/responses/Forbidden"}}}}}}`

// TestDashboardSession: GET /?token=T sets the session cookie and
// redirects; the cookie then opens the page and the API, but a
// state-changing request on the cookie must come from the same origin.
func TestDashboardSession(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	extra := api.Route{Method: http.MethodPost, Path: "/v1/extra", Handler: func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]bool{"ok": true})
	}}
	b := setup(t, withToken(token), func(sc *setupConfig) {
		sc.noAuth = true
		sc.api.Routes, sc.api.RoutesOpenAPI = []api.Route{extra}, []byte(extraOpenAPI)
	})
	host := strings.TrimPrefix(b.http.URL, "http://")

	// A wrong token, or none, is refused; the page too.
	for _, tok := range []string{"wrong", "", token + "x"} {
		res := login(t, b.http, tok)
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, tok)
		require.Empty(t, res.Cookies())
	}
	requireError(t, b.do(t, http.MethodGet, "/", nil), 401, "unauthenticated", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/extra", nil), 401, "unauthenticated", "")

	res := login(t, b.http, token)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/", res.Header.Get("Location"))
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	ck := sessionCookie(t, res)
	require.True(t, ck.HttpOnly)
	require.False(t, ck.Secure) // plain HTTP
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.Equal(t, "/", ck.Path)
	require.NotContains(t, ck.Value, token) // derived, not the token
	cookie := ck.Name + "=" + ck.Value

	// Reads on the cookie alone.
	for _, path := range []string{"/", "/v1/queues", "/v1/openapi.json"} {
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, path, nil, "Cookie", cookie).status, path)
	}
	// A forged or stale cookie is nothing.
	requireError(t, b.do(t, http.MethodGet, "/v1/queues", nil, "Cookie", api.SessionCookie+"="+token), 401, "unauthenticated", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/queues", nil, "Cookie", api.SessionCookie+"="), 401, "unauthenticated", "")
	// A wrong bearer header is not rescued by a good cookie.
	requireError(t, b.do(t, http.MethodGet, "/v1/queues", nil, "Cookie", cookie, "Authorization", "Bearer nope"), 401, "unauthenticated", "")

	job := map[string]any{"kind": "k"}
	for _, tt := range []struct {
		name string
		hdr  []string
		ok   bool
	}{
		{"no origin", nil, false},
		{"same origin", []string{"Origin", "http://" + host}, true},
		{"fetch metadata", []string{"Sec-Fetch-Site", "same-origin"}, true},
		{"other origin", []string{"Origin", "http://evil.example"}, false},
		{"other port", []string{"Origin", "http://127.0.0.1:1"}, false},
		{"https origin on http", []string{"Origin", "https://" + host}, false},
		{"null origin", []string{"Origin", "null"}, false},
		{"same site only", []string{"Sec-Fetch-Site", "same-site"}, false},
		{"cross site", []string{"Sec-Fetch-Site", "cross-site"}, false},
		{"origin wins over fetch metadata", []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "same-origin"}, false},
	} {
		hdr := append([]string{"Cookie", cookie}, tt.hdr...)
		for _, m := range []struct{ method, path string }{{http.MethodPost, "/v1/jobs"}, {http.MethodPost, "/v1/extra"}, {http.MethodDelete, "/v1/queues/q/dead"}, {http.MethodPatch, "/v1/queues/q/jobs/nope"}} {
			var body any
			if m.path == "/v1/jobs" {
				body = job
			}
			r := b.do(t, m.method, m.path, body, hdr...)
			if tt.ok {
				require.NotContains(t, []int{401, 403}, r.status, "%s %s %s: %s", tt.name, m.method, m.path, r.body)
			} else {
				requireError(t, r, http.StatusForbidden, "forbidden", "")
			}
		}
	}
	// The bearer token needs no origin check: it is not ambient.
	r := b.do(t, http.MethodPost, "/v1/extra", nil, "Authorization", "Bearer "+token, "Origin", "http://evil.example")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

// TestDashboardSessionTLS: over TLS the cookie is Secure and the origin
// is https.
func TestDashboardSessionTLS(t *testing.T) {
	t.Parallel()
	b := setup(t, withToken("tok"), func(sc *setupConfig) { sc.noAuth = true })
	hs := httptest.NewTLSServer(b.srv)
	t.Cleanup(hs.Close)
	apitest.Wrap(t, hs.Client(), b.srv.OpenAPI())
	res := login(t, hs, "tok")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	ck := sessionCookie(t, res)
	require.True(t, ck.Secure)

	for _, tt := range []struct {
		origin string
		status int
	}{{hs.URL, http.StatusCreated}, {strings.Replace(hs.URL, "https:", "http:", 1), http.StatusForbidden}} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hs.URL+"/v1/jobs", strings.NewReader(`{"kind":"k"}`))
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
		req.Header.Set("Origin", tt.origin)
		req.Header.Set("Content-Type", "application/json")
		res, err := hs.Client().Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, tt.status, res.StatusCode, tt.origin)
	}
}

// TestDashboardNoToken: without a token the page is open and ?token= is
// ignored; clients that are not browsers change jobs freely, but a page of
// another site cannot (a browser marks its requests).
func TestDashboardNoToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	host := strings.TrimPrefix(b.http.URL, "http://")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/?token=x", nil).status)
	job := map[string]any{"kind": "k"}
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/v1/jobs", job).status)
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/v1/jobs", job, "Origin", "http://"+host).status)
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/v1/jobs", job, "Sec-Fetch-Site", "same-origin").status)
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/v1/jobs", job, "Sec-Fetch-Site", "none").status)
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", job, "Origin", "http://evil.example"), 403, "forbidden", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", job, "Sec-Fetch-Site", "cross-site"), 403, "forbidden", "")
	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/q/dead", nil, "Origin", "null"), 403, "forbidden", "")
	// Reads stay open (a browser's same-origin policy keeps their answers
	// from other sites).
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/queues", nil, "Origin", "http://evil.example").status)
}

// TestDashboardSessionEvents: the dashboard's event stream (an
// EventSource, which cannot send an Authorization header) authenticates
// with the session cookie alone; a forged cookie, none, a wrong bearer
// token beside a good cookie, or the token in the stream's address is a
// 401.
func TestDashboardSessionEvents(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	b := setup(t, withToken(token), func(sc *setupConfig) { sc.noAuth = true })
	ck := sessionCookie(t, login(t, b.http, token))
	cookie := ck.Name + "=" + ck.Value

	for _, tt := range []struct {
		name, query string
		hdr         []string
	}{
		{"nothing", "", nil},
		{"forged cookie", "", []string{"Cookie", api.SessionCookie + "=" + token}},
		{"wrong bearer beside a good cookie", "", []string{"Cookie", cookie, "Authorization", "Bearer nope"}},
		{"token in the address", "?token=" + token, nil},
		{"token in the address beside a forged cookie", "?token=" + token, []string{"Cookie", api.SessionCookie + "=x"}},
	} {
		requireError(t, b.do(t, http.MethodGet, "/v1/events"+tt.query, nil, tt.hdr...), 401, "unauthenticated", "")
	}

	// The cookie opens the stream, and events come.
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second) // a stream without the event ends, failing the test
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.http.URL+"/v1/events?queue=dash", nil)
	require.NoError(t, err)
	req.Header.Set("Cookie", cookie)
	res, err := b.http.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	sc := bufio.NewScanner(res.Body)
	require.True(t, sc.Scan())
	require.Equal(t, ": connected", sc.Text())
	r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "dash", "kind": "k"}, "Authorization", "Bearer "+token)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	for sc.Scan() {
		if sc.Text() == "event: enqueued" {
			return
		}
	}
	t.Fatalf("the stream ended without the event: %v", sc.Err())
}

// TestDashboardSignIn: with a token, a browser that is not signed in gets
// the sign-in page (a 401 whose form sends the token to GET /?token=), and
// after a wrong token the page says so; a client that does not ask for
// HTML gets the JSON 401. The form's token signs in.
func TestDashboardSignIn(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	b := setup(t, withToken(token), func(sc *setupConfig) { sc.noAuth = true })
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

	r := b.do(t, http.MethodGet, "/", nil, "Accept", browser)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
	require.Equal(t, `Bearer realm="chronoq"`, r.header.Get("WWW-Authenticate"))
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	csp := r.header.Get("Content-Security-Policy")
	require.Contains(t, csp, "form-action 'self'")
	require.NotContains(t, csp, "script-src")
	page := string(r.body)
	require.Contains(t, page, `<form id="signin" method="get" action="/">`)
	require.Contains(t, page, `name="token" type="password"`)
	require.NotContains(t, page, "not this server's")
	require.NotContains(t, page, "{{")

	r = b.do(t, http.MethodGet, "/?token=wrong", nil, "Accept", browser)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Contains(t, string(r.body), "That token is not this server's.")
	require.NotContains(t, string(r.body), "wrong", "the token given is not echoed")

	// Not a browser: the API's JSON error.
	requireError(t, b.do(t, http.MethodGet, "/", nil), http.StatusUnauthorized, "unauthenticated", "")
	requireError(t, b.do(t, http.MethodGet, "/?token=wrong", nil, "Accept", "application/json"), http.StatusUnauthorized, "unauthenticated", "")

	// The form's request: the token in the query signs in.
	res := login(t, b.http, token)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/", res.Header.Get("Location"))
	cookie := sessionCookie(t, res)
	r = b.do(t, http.MethodGet, "/", nil, "Accept", browser, "Cookie", cookie.Name+"="+cookie.Value)
	require.Equal(t, http.StatusOK, r.status)
}
