package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracingFlushTimeout bounds the flush of the spans still buffered when
// serve stops.
const tracingFlushTimeout = 5 * time.Second

// setupTracing turns OpenTelemetry tracing on when the standard OTEL_*
// environment asks for it, and answers the function that flushes and
// stops it (nil when it stays off). Tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or when it is unset and an OTLP
// endpoint is (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); off for "none", with
// OTEL_SDK_DISABLED=true, and by default. The exporter is OTLP over
// HTTP (protobuf): it and the SDK read the rest of the OTEL_* variables
// themselves (endpoint, headers, timeout, compression, TLS; the sampler,
// OTEL_TRACES_SAMPLER; the batching, OTEL_BSP_*; the resource,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the service name is
// "chronoq" unless they name one). Propagation is W3C Trace Context and
// Baggage.
func setupTracing(ctx context.Context, getenv func(string) string) (func(context.Context) error, error) {
	on, err := tracingWanted(getenv)
	if err != nil || !on {
		return nil, err
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s=%q: chronoq exports traces over OTLP/HTTP only (http/protobuf)", v, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "chronoq")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// tracingWanted reads whether the environment turns tracing on (see
// setupTracing).
func tracingWanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: chronoq exports traces over OTLP only (otlp, or none)", exp)
	}
}
