// Package dashboard is chronoq's web page: one HTML document, its CSS and
// JavaScript inlined, embedded in the binary (no CDN: it works offline).
// The page reads the JSON API and acts through it, and keeps itself live
// with the job event stream (GET /v1/events, Server-Sent Events), not by
// polling: events move its counts, charts, lists and job pages, and it
// reads everything again when the stream (re)connects and every 30 s. Its
// views are hash routes (#/queues, #/queues/{queue}/jobs/{id}); a job's
// page also holds the job's own stream (its log, progress and status,
// resumed after the last line shown) while it is shown. It holds
// no credential of its own: the browser sends the session cookie that
// GET /?token=T set (see package api) with every request and with the
// event stream. See docs/DASHBOARD.md.
//
// Serve it as api.Config.Dashboard:
//
//	srv, err := api.New(api.Config{Store: client, Dashboard: dashboard.Handler()})
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
)

//go:embed static
var static embed.FS

// page is the document with its assets inlined, and its
// Content-Security-Policy, which allows exactly the inlined script and
// style (by hash) and requests to this origin.
type page struct {
	html []byte
	csp  string
}

var built = sync.OnceValue(func() page {
	css, js := mustRead("app.css"), mustRead("app.js")
	html := strings.NewReplacer("{{CSS}}", css, "{{JS}}", js).Replace(mustRead("index.html"))
	csp := "default-src 'none'; script-src " + hashSource(js) + "; style-src " + hashSource(css) +
		"; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	return page{html: []byte(html), csp: csp}
})

// mustRead is an embedded file of static/.
func mustRead(name string) string {
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		panic("dashboard: " + err.Error()) // embedded: cannot happen
	}
	return string(b)
}

// hashSource is a CSP source that allows the inline script or style s.
func hashSource(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Handler serves the dashboard page. It answers every request with the
// page: mount it at "/" only.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := built()
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", p.csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(p.html)
	})
}
