package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/internal/tracing"
)

// tracedHandler answers the router wrapped in otelhttp, when tracing is on
// (a TracerProvider was installed before New; see package
// internal/tracing), or nil. Each request but the probes' and the
// metrics' then has a server span, a child of the trace context it
// carries (traceparent); the enqueue stores that span's context with the
// job, and a claim answers it (the Job resource's traceparent).
func (s *Server) tracedHandler() http.Handler {
	if !tracing.On() {
		return nil
	}
	return otelhttp.NewHandler(s.e, "chronoq",
		otelhttp.WithPropagators(tracing.Propagator()),
		otelhttp.WithFilter(func(r *http.Request) bool {
			switch r.URL.Path {
			case "/healthz", "/readyz", "/metrics":
				return false
			}
			return true
		}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// nameSpan names the request's span after its route once the router found
// it ("POST /v1/queues/:queue/jobs"), as the HTTP semantic conventions
// ask, and sets http.route.
func nameSpan(c echo.Context) {
	span := trace.SpanFromContext(c.Request().Context())
	if !span.IsRecording() || c.Path() == "" {
		return
	}
	span.SetName(c.Request().Method + " " + c.Path())
	span.SetAttributes(attribute.String("http.route", c.Path()))
}
