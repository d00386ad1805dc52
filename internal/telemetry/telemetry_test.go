package telemetry

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestOffWithoutEndpoint: no flag and no variable: the no-op tracer,
// nothing enabled, spans carry a parent's context and record nothing.
func TestOffWithoutEndpoint(t *testing.T) {
	tr, err := Setup(context.Background(), Config{SampleRatio: 1, Getenv: env(nil)})
	if err != nil || tr.Enabled() || tr.String() != "off" {
		t.Fatalf("Setup = %v, %v; want off", tr, err)
	}
	h := http.Header{}
	h.Set(HeaderTraceParent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	ctx, sp := tr.Tracer().Start(Extract(context.Background(), h), "x")
	if sp.IsRecording() || TraceID(ctx) != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("off: recording %v, trace id %q; want not recording, the client's trace id carried", sp.IsRecording(), TraceID(ctx))
	}
	out := http.Header{}
	Inject(ctx, out)
	if out.Get(HeaderTraceParent) != h.Get(HeaderTraceParent) {
		t.Errorf("off: injected %q, want the client's traceparent", out.Get(HeaderTraceParent))
	}
	if (*Tracing)(nil).Tracer() == nil || (*Tracing)(nil).Enabled() {
		t.Errorf("a nil Tracing must trace nothing")
	}
}

// TestSetupRefuses: a bad protocol, scheme or ratio is an error naming
// what to fix.
func TestSetupRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Endpoint: "localhost:4318", Protocol: "http/json", SampleRatio: 1}, "not supported"},
		{Config{Endpoint: "ftp://x:1", SampleRatio: 1}, "scheme"},
		{Config{Endpoint: "localhost:4318", SampleRatio: 2}, "--trace-sample"},
		{Config{SampleRatio: 1, Getenv: env(map[string]string{EnvEndpoint: "http://"})}, "$" + EnvEndpoint},
	} {
		if c.cfg.Getenv == nil {
			c.cfg.Getenv = env(nil)
		}
		if _, err := Setup(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Setup(%+v) = %v; want an error with %q", c.cfg, err, c.want)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"localhost:4318", ProtocolHTTP}:                "http://localhost:4318/v1/traces",
		{"http://c:4318/", ProtocolHTTP}:                "http://c:4318/v1/traces",
		{"https://c/custom/path", ProtocolHTTP}:         "https://c/custom/path",
		{"c:4317", ProtocolGRPC}:                        "http://c:4317",
		{"http://collector.example:4317", ProtocolGRPC}: "http://collector.example:4317",
	} {
		u, err := endpointURL(in[0], in[1])
		if err != nil || u.String() != want {
			t.Errorf("endpointURL(%q, %s) = %v, %v; want %s", in[0], in[1], u, err, want)
		}
	}
}

// received collects the spans of OTLP exports.
type received struct {
	mu    sync.Mutex
	spans map[string]map[string]string // span name -> resource attributes
	trace map[string]string            // span name -> trace id
}

func (r *received) add(req *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans[sp.GetName()] = res
				r.trace[sp.GetName()] = hex.EncodeToString(sp.GetTraceId())
			}
		}
	}
}

func (r *received) get(name string) (map[string]string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spans[name], r.trace[name]
}

func newReceived() *received {
	return &received{spans: map[string]map[string]string{}, trace: map[string]string{}}
}

// exportOne starts a span under a client's traceparent with tr and
// flushes it.
func exportOne(t *testing.T, tr *Tracing, name string) string {
	t.Helper()
	h := http.Header{}
	h.Set(HeaderTraceParent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, sp := tr.Tracer().Start(Extract(context.Background(), h), name, trace.WithSpanKind(trace.SpanKindServer))
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	return "4bf92f3577b34da6a3ce929d0e0e4736"
}

// TestExportHTTP: $OTEL_EXPORTER_OTLP_ENDPOINT set, the default protocol
// posts OTLP/HTTP protobuf to /v1/traces with the process's resource.
func TestExportHTTP(t *testing.T) {
	got := newReceived()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad", 400)
			return
		}
		got.add(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	tr, err := Setup(context.Background(), Config{SampleRatio: 1, Role: "router", Instance: "r1", Getenv: env(map[string]string{EnvEndpoint: srv.URL})})
	if err != nil || !tr.Enabled() {
		t.Fatalf("Setup = %v, %v", tr, err)
	}
	id := exportOne(t, tr, "chat m")
	res, tid := got.get("chat m")
	if res["service.name"] != "tandem" || res["service.instance.id"] != "r1" || res[AttrRole] != "router" || tid != id {
		t.Errorf("received resource %v trace %s; want tandem/r1/router under the client's trace %s", res, tid, id)
	}
}

type grpcTraces struct {
	coltrace.UnimplementedTraceServiceServer
	got *received
}

func (g grpcTraces) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.got.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestExportGRPC: $OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports to an OTLP
// gRPC trace service.
func TestExportGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := newReceived()
	gs := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(gs, grpcTraces{got: got})
	go gs.Serve(ln)
	defer gs.Stop()
	tr, err := Setup(context.Background(), Config{SampleRatio: 1, Role: "decode", Getenv: env(map[string]string{
		EnvEndpoint: "http://" + ln.Addr().String(), EnvProtocol: ProtocolGRPC})})
	if err != nil || !tr.Enabled() {
		t.Fatalf("Setup = %v, %v", tr, err)
	}
	id := exportOne(t, tr, "tandem.decode")
	if res, tid := got.get("tandem.decode"); res[AttrRole] != "decode" || tid != id || res["service.instance.id"] == "" {
		t.Errorf("received resource %v trace %s", res, tid)
	}
}

func TestLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := NewLogger(&b, FormatJSON, "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown"`) {
		t.Errorf("json at warn wrote %q", s)
	}
	if _, err := NewLogger(&b, "xml", "info"); err == nil {
		t.Errorf("format xml accepted")
	}
	if _, err := NewLogger(&b, FormatText, "loud"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("level loud: %v", err)
	}
}

func TestStatsArgs(t *testing.T) {
	prev := EngineStats{PromptTokens: 100, GeneratedTokens: 50, PrefixHitTokens: 10}
	cur := EngineStats{PromptTokens: 300, GeneratedTokens: 150, PrefixHitTokens: 60, Running: 3, Waiting: 2, KVUsage: 0.4567}
	got := StatsArgs(prev, cur, 10*time.Second)
	want := []any{"prompt_tokens_per_s", 20.0, "generation_tokens_per_s", 10.0, "running", 3, "waiting", 2, "kv_cache_usage_pct", 45.7, "prefix_cache_hit_pct", 25.0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("StatsArgs = %v, want %v", got, want)
		}
	}
}
