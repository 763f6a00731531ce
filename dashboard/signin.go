package dashboard

import (
	"net/http"
	"strings"
	"sync"
)

// signInPages are the sign-in page as it first shows ([0]) and after a
// wrong token ([1]), with their Content-Security-Policy: the inlined style
// by hash, no script, a form that posts only to this origin.
var signInPages = sync.OnceValue(func() [2]page {
	css := mustRead("signin.css")
	html := strings.ReplaceAll(mustRead("signin.html"), "{{CSS}}", css)
	csp := "default-src 'none'; style-src " + hashSource(css) +
		"; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	msg := func(m string) page { return page{html: []byte(strings.Replace(html, "{{MESSAGE}}", m, 1)), csp: csp} }
	return [2]page{msg(""), msg(`<p class="err" role="alert">That token is not this server's.</p>`)}
})

// SignIn answers a browser that is not signed in to a server with a token
// (GET / without the session cookie, or with a wrong ?token=): a 401 with
// a page whose form sends the token to GET /?token=, where package api
// checks it, sets the session cookie and redirects to the dashboard.
// wrong says the token just given was not the server's.
func SignIn(w http.ResponseWriter, r *http.Request, wrong bool) {
	p := signInPages()[0]
	if wrong {
		p = signInPages()[1]
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", p.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(p.html)
}
