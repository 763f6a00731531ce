package dashboard

import "net/http"

// Placeholder serves a small page that points at the API, its OpenAPI
// document and its metrics: what a server without the dashboard shows at
// "/" (api.Config.Dashboard's default).
func Placeholder() http.Handler {
	b := []byte(mustRead("placeholder.html"))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b)
	})
}
