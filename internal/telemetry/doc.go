// Package telemetry is Tandem's tracing and logging setup: one place that
// turns the OpenTelemetry environment and flags into a tracer, carries the
// W3C trace context across HTTP hops, and builds the slog loggers every
// command uses.
//
// # Tracing
//
// Setup returns a Tracing. With no endpoint (neither --otlp-endpoint nor
// $OTEL_EXPORTER_OTLP_ENDPOINT / $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) it
// holds the no-op tracer of go.opentelemetry.io/otel/trace/noop: no
// exporter, no goroutine, no allocation per span. With one it holds an SDK
// tracer provider exporting OTLP over HTTP (protobuf, the default) or gRPC
// ($OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf or grpc), through a batch
// span processor, sampling a ratio of new traces (--trace-sample, default
// 1.0) and following the sampling decision of a client's traceparent.
// Every process names itself in its resource: service.name "tandem",
// service.instance.id (a name given, or host:pid), and tandem.role
// (router, prefill, decode, serve).
//
// An endpoint may be a URL (http://host:4318, https://...) or host:port;
// for HTTP the path /v1/traces is added when the URL has none, as the OTel
// specification says for the OTEL_EXPORTER_OTLP_ENDPOINT variable.
//
// # Context across hops
//
// Extract and Inject read and write the W3C traceparent and tracestate
// headers. The router carries them to both legs, where package leg's
// signature covers them: a worker only believes a trace context the router
// signed.
//
// # Names
//
// The span and attribute names of a Tandem trace are declared here
// (GenAI semantic conventions where one exists: gen_ai.operation.name,
// gen_ai.request.model, gen_ai.usage.input_tokens/output_tokens,
// gen_ai.response.finish_reasons; tandem.* for the rest), so the router
// and the workers agree on them.
//
// # Logs
//
// NewLogger builds the slog.Logger of --log-format (text or json) and
// --log-level (debug, info, warn, error).
package telemetry
