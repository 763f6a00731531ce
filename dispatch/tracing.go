package dispatch

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
)

// startSpan starts the span of one push request, "dispatch <queue>" (an
// HTTP client span, a child of the run's span the handler's ctx holds),
// and puts its context into req's headers: traceparent (W3C Trace
// Context, always) and what else the global propagator writes. The
// request's signature covers its body, not these headers.
func startSpan(t trace.Tracer, req *http.Request, job *queue.Job) trace.Span {
	ctx, span := t.Start(req.Context(), "dispatch "+job.Queue, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(tracing.Attrs(job.Queue, "dispatch", ""), tracing.AttrMessageID.String(job.ID),
			attribute.String("http.request.method", req.Method), attribute.String("server.address", req.URL.Hostname()),
			attribute.String("url.scheme", req.URL.Scheme))...))
	tracing.Propagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	return span
}

// endSpan ends a push request's span with its attempt's outcome: the
// response's status, and an error status for a transport error or a
// status that is not 2xx.
func endSpan(span trace.Span, a Attempt) {
	if a.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", a.Status))
	}
	if a.Error != "" || a.Status < 200 || a.Status > 299 {
		msg := a.Error
		if msg == "" {
			msg = "HTTP " + strconv.Itoa(a.Status)
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}
