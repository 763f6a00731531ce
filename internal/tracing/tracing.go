// Package tracing is chronoq's side of OpenTelemetry tracing: whether it
// is on, the tracer every package starts its spans with, the attributes
// of the messaging semantic conventions those spans carry, and the W3C
// traceparent a job stores (its record's "trace" field).
//
// Tracing is on once a program installs a TracerProvider with
// otel.SetTracerProvider (chronoq serve does when the OTEL_* environment
// asks for it). Until then Tracer answers false and every caller skips its
// spans and the traceparent altogether: OpenTelemetry's default global
// provider records nothing, but even its no-op spans cost a context and an
// allocation or two a call, which the hot paths (enqueue, claim,
// complete) do not pay.
package tracing

import (
	"context"
	"encoding/hex"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of chronoq's spans.
const ScopeName = "github.com/chronoq/chronoq"

// System is the messaging.system attribute of chronoq's spans.
const System = "chronoq"

// defaultProvider is the global provider as OpenTelemetry starts it: a
// delegate that records nothing until a provider is set.
var defaultProvider = otel.GetTracerProvider()

type cached struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

var last atomic.Pointer[cached]

// Tracer answers chronoq's tracer from the global TracerProvider, and
// whether tracing is on: false while no provider was installed (or a
// no-op one was), and the caller then starts no span. It allocates
// nothing when off, nor, once the provider's tracer is known, when on.
func Tracer() (trace.Tracer, bool) {
	tp := otel.GetTracerProvider()
	if tp == defaultProvider { // a pointer: comparing never panics
		return nil, false
	}
	if c := last.Load(); c != nil && sameProvider(c.tp, tp) {
		return c.t, c.t != nil
	}
	var t trace.Tracer
	if _, isNoop := tp.(noop.TracerProvider); !isNoop {
		t = tp.Tracer(ScopeName)
	}
	if reflect.TypeOf(tp).Comparable() {
		last.Store(&cached{tp: tp, t: t})
	}
	return t, t != nil
}

// sameProvider compares two providers without panicking on a provider
// type that is not comparable.
func sameProvider(a, b trace.TracerProvider) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	return reflect.TypeOf(a).Comparable() && a == b
}

// On reports whether tracing is on (see Tracer).
func On() bool {
	_, on := Tracer()
	return on
}

// The attributes of the messaging semantic conventions chronoq's spans
// carry.
const (
	AttrSystem      = attribute.Key("messaging.system")
	AttrDestination = attribute.Key("messaging.destination.name")
	AttrOperation   = attribute.Key("messaging.operation.name")
	AttrOpType      = attribute.Key("messaging.operation.type")
	AttrMessageID   = attribute.Key("messaging.message.id")
	AttrBatchCount  = attribute.Key("messaging.batch.message_count")
	AttrKind        = attribute.Key("chronoq.job.kind")
	AttrAttempt     = attribute.Key("chronoq.job.attempt")
)

// Operation types (messaging.operation.type).
const (
	OpSend    = "send"
	OpReceive = "receive"
	OpProcess = "process"
	OpSettle  = "settle"
)

// Attrs answers the attributes every span of an operation on queue
// carries: the system, the destination, the operation's name and type
// (none for "": an operation of chronoq's own, as promote).
func Attrs(queue, op, opType string) []attribute.KeyValue {
	a := []attribute.KeyValue{AttrSystem.String(System), AttrDestination.String(queue), AttrOperation.String(op)}
	if opType != "" {
		a = append(a, AttrOpType.String(opType))
	}
	return a
}

// Start starts the span "<op> <queue>" of kind with Attrs and extra
// attributes, a child of ctx's span. Call it only when Tracer answered on.
func Start(ctx context.Context, t trace.Tracer, queue, op, opType string, kind trace.SpanKind, extra ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.Start(ctx, op+" "+queue, trace.WithSpanKind(kind), trace.WithAttributes(append(Attrs(queue, op, opType), extra...)...))
}

// End ends span, recording err (nil: none) as its status.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// ParentLen is the length of a traceparent: "00-" 32 hex digits "-" 16
// hex digits "-" 2 hex digits.
const ParentLen = 55

// Format answers sc as a W3C traceparent, "" when sc is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [ParentLen]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// FromContext answers the traceparent of ctx's span, "" when tracing is
// off or ctx holds no valid span.
func FromContext(ctx context.Context) string {
	if !On() {
		return ""
	}
	return Format(trace.SpanContextFromContext(ctx))
}

// Parse reads a W3C traceparent of version 00 (or of a later version, by
// its first four fields, as the recommendation asks), marked remote; ok is
// false when s is not one or its ids are zero.
func Parse(s string) (sc trace.SpanContext, ok bool) {
	if len(s) < ParentLen || (len(s) > ParentLen && (s[:2] == "00" || s[ParentLen] != '-')) {
		return trace.SpanContext{}, false
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' || s[:2] == "ff" || !lowerHex(s[:2]) {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(tid[:], []byte(s[3:35])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(s[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(flags[:], []byte(s[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

// lowerHex reports whether s is lower-case hex digits only (the
// recommendation's form).
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// StartedAt makes the span "<op> <queue>" of an operation that began at
// start and has ended, once it proved worth a span (a claim that took
// jobs, a promote that moved some: an idle poll makes none), a child of
// ctx's span with links to the traceparents given, and ends it with err.
func StartedAt(ctx context.Context, t trace.Tracer, start time.Time, queue, op, opType string, kind trace.SpanKind,
	parents []string, err error, extra ...attribute.KeyValue) {
	var links []trace.Link
	for _, p := range parents {
		if sc, ok := Parse(p); ok {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	_, span := t.Start(ctx, op+" "+queue, trace.WithSpanKind(kind), trace.WithTimestamp(start), trace.WithLinks(links...),
		trace.WithAttributes(append(Attrs(queue, op, opType), extra...)...))
	End(span, err)
}

// Propagator answers the global TextMapPropagator, with W3C Trace Context
// first when the global one does not carry traceparent (OpenTelemetry's
// default global propagator carries nothing): chronoq always reads and
// writes traceparent, and what else the program configured.
func Propagator() propagation.TextMapPropagator {
	p := otel.GetTextMapPropagator()
	if slices.Contains(p.Fields(), "traceparent") {
		return p
	}
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, p)
}
