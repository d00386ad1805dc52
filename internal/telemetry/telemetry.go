package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Environment variables read by Setup (the OpenTelemetry SDK's names).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// Protocols an exporter speaks.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// ServiceName is every Tandem process's service.name.
const ServiceName = "tandem"

// exportTimeout bounds one export; shutdownTimeout is what Shutdown's
// callers are advised to give it.
const exportTimeout = 10 * time.Second

// The batch span processor: ending a span only queues it (a full queue
// drops it, never blocks the request); one goroutine exports batches of
// up to batchSize spans when one is full or batchTimeout after the
// first, so the export (conversion, protobuf, the POST) is off the
// request path and its per-export cost is shared by many spans. The
// queue holds a few seconds of spans of a busy router (about 5 a
// request) so an export of up to exportTimeout does not drop them.
const (
	batchTimeout = time.Second
	batchSize    = 512
	queueSize    = 8192
)

// Config is what Setup needs. Zero fields take their environment
// variable or default.
type Config struct {
	// Endpoint is the OTLP collector: a URL (http://host:4318) or
	// host:port. "": $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// $OTEL_EXPORTER_OTLP_ENDPOINT, else tracing is off.
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC. "": the environment's,
	// else ProtocolHTTP.
	Protocol string
	// SampleRatio is the fraction of new traces recorded, 0..1. A trace a
	// client started keeps its own sampling decision.
	SampleRatio float64
	// Role is the process's role (tandem.role): router, prefill, decode,
	// serve.
	Role string
	// Instance is service.instance.id; "": hostname:pid.
	Instance string
	// Getenv reads the environment (os.Getenv when nil; tests replace it).
	Getenv func(string) string
}

// Tracing is a process's tracer. A nil *Tracing traces nothing.
type Tracing struct {
	tracer   trace.Tracer
	sdk      *sdktrace.TracerProvider // nil when off
	external bool                     // FromProvider: on, its provider is not ours
	desc     string                   // where spans go, for the start-up log line
}

// Off is a Tracing with the no-op tracer.
func Off() *Tracing {
	return &Tracing{tracer: noop.NewTracerProvider().Tracer(ServiceName), desc: "off"}
}

var noopTracer = noop.NewTracerProvider().Tracer(ServiceName)

// Setup builds the process's Tracing from cfg and the environment (see
// the package doc). With no endpoint it returns Off(); an endpoint or
// protocol it cannot use is an error naming the flag or variable.
func Setup(ctx context.Context, cfg Config) (*Tracing, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ep, from := cfg.Endpoint, "--otlp-endpoint"
	for _, v := range []string{EnvTracesEndpoint, EnvEndpoint} {
		if ep == "" {
			ep, from = strings.TrimSpace(getenv(v)), "$"+v
		}
	}
	if ep == "" {
		return Off(), nil
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 || cfg.SampleRatio != cfg.SampleRatio {
		return nil, fmt.Errorf("--trace-sample %v is out of range 0..1", cfg.SampleRatio)
	}
	proto := cfg.Protocol
	for _, v := range []string{EnvTracesProtocol, EnvProtocol} {
		if proto == "" {
			proto = strings.TrimSpace(getenv(v))
		}
	}
	if proto == "" {
		proto = ProtocolHTTP
	}
	u, err := endpointURL(ep, proto)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", from, ep, err)
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case ProtocolHTTP, "http":
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()), otlptracehttp.WithTimeout(exportTimeout))
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u.String()), otlptracegrpc.WithTimeout(exportTimeout))
	default:
		return nil, fmt.Errorf("OTLP protocol %q is not supported: use %s or %s ($%s)", proto, ProtocolHTTP, ProtocolGRPC, EnvProtocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter to %s: %w", u, err)
	}
	inst := cfg.Instance
	if inst == "" {
		host, _ := os.Hostname()
		inst = host + ":" + strconv.Itoa(os.Getpid())
	}
	res := resource.NewWithAttributes("",
		attribute.String("service.name", ServiceName),
		attribute.String("service.instance.id", inst),
		attribute.String(AttrRole, cfg.Role))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(batchTimeout), sdktrace.WithMaxQueueSize(queueSize),
			sdktrace.WithMaxExportBatchSize(batchSize), sdktrace.WithExportTimeout(exportTimeout)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	return &Tracing{tracer: tp.Tracer("tandem/" + cfg.Role), sdk: tp,
		desc: fmt.Sprintf("%s %s sample=%g", proto, u.Redacted(), cfg.SampleRatio)}, nil
}

// endpointURL turns an endpoint into the exporter's URL: host:port gets
// http://, and an HTTP URL without a path gets /v1/traces.
func endpointURL(ep, proto string) (*url.URL, error) {
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("the scheme must be http or https, not %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	if proto != ProtocolGRPC && (u.Path == "" || u.Path == "/") {
		u.Path = "/v1/traces"
	}
	return u, nil
}

// Tracer returns the tracer (the no-op one for a nil or off Tracing).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil || t.tracer == nil {
		return noopTracer
	}
	return t.tracer
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && (t.sdk != nil || t.external) }

// String says where spans go ("off" when nowhere).
func (t *Tracing) String() string {
	if t == nil {
		return "off"
	}
	return t.desc
}

// Shutdown exports what is buffered and stops the exporter, within ctx.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() || t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// ForceFlush exports what is buffered now.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if !t.Enabled() || t.sdk == nil {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}

// propagator is W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// W3C trace context headers.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// Extract returns ctx with the remote span context of h's traceparent
// (ctx itself when h has none or a malformed one).
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get(HeaderTraceParent) == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject writes ctx's span context into h (nothing when it has none).
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// TraceID returns the hex trace id of ctx's span, "" when it has none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// FromProvider is a Tracing over tp (an SDK provider a program or test
// built itself); Enabled reports true, Shutdown and ForceFlush do nothing.
func FromProvider(tp trace.TracerProvider, role string) *Tracing {
	return &Tracing{tracer: tp.Tracer("tandem/" + role), external: true, desc: "provider"}
}
