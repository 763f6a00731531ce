package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestFormatParse(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x0a, 0xf7, 0x65}, SpanID: trace.SpanID{0xb7, 0xad},
		TraceFlags: trace.FlagsSampled})
	s := Format(sc)
	if want := "00-0af76500000000000000000000000000-b7ad000000000000-01"; s != want {
		t.Fatalf("Format = %q, want %q", s, want)
	}
	got, ok := Parse(s)
	if !ok || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || !got.IsRemote() {
		t.Fatalf("Parse(%q) = %v, %v", s, got, ok)
	}
	if Format(trace.SpanContext{}) != "" {
		t.Fatal("an invalid span context formats as a traceparent")
	}
	for _, bad := range []string{"", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", // short
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",       // upper case
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",       // zero trace id
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",       // zero span id
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",       // version ff
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", // version 00 has no more
		"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) took it", bad)
		}
	}
	// a later version: its first four fields
	if _, ok := Parse("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-ever"); !ok {
		t.Error("Parse refused a later version")
	}
}

// Off (no provider installed), and on once the tracer is known, deciding
// costs no allocation: the hot paths ask on every call.
func TestTracerAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	if _, on := Tracer(); on {
		t.Fatal("tracing is on before a provider was installed")
	}
	if n := testing.AllocsPerRun(100, func() {
		_, _ = Tracer()
		_ = FromContext(ctx)
	}); n != 0 {
		t.Fatalf("off: %v allocations a call", n)
	}
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	otel.SetTracerProvider(noop.NewTracerProvider())
	if On() {
		t.Fatal("a no-op provider turns tracing on")
	}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	otel.SetTracerProvider(tp)
	if !On() {
		t.Fatal("an SDK provider leaves tracing off")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Tracer() }); n != 0 {
		t.Fatalf("on: %v allocations a call", n)
	}
	otel.SetTracerProvider(prev)
	if On() {
		t.Fatal("tracing stays on once the default provider is back")
	}
}
