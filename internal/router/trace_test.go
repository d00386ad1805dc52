package router_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"tandem/internal/api/leg"
	"tandem/internal/router"
	"tandem/internal/telemetry"
)

// TestTraceContextOnLegs: a client's traceparent is honoured: the
// router's request span (SERVER, "text_completion MODEL", GenAI
// attributes) is its child, each leg's CLIENT span is under the attempt,
// and each leg carries its own leg span's traceparent inside what the
// signature covers: the worker's copy verifies, and the same leg with the
// traceparent changed does not. Attempt and legs end with outcome ok.
func TestTraceContextOnLegs(t *testing.T) {
	keys, err := leg.NewKeys([]byte("router-test-cluster-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) {
		o.LegKeys, o.Tracing = keys, telemetry.FromProvider(tp, "router")
	})
	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"model":"m","prompt":"hi","max_tokens":3}`
	req, _ := http.NewRequest("POST", c.srv.URL+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	legs := map[string]string{} // leg kind -> its traceparent's span id
	for _, f := range []*fake{p, d} {
		l := f.nextLeg(t)
		tpHdr := l.hdr.Get("Traceparent")
		parts := strings.Split(tpHdr, "-")
		if len(parts) != 4 || parts[1] != clientTrace {
			t.Fatalf("%s leg traceparent %q, want the client's trace %s", f.role, tpHdr, clientTrace)
		}
		legs[f.role] = parts[2]
		if _, err := keys.Verify("POST", l.path, l.hdr, l.body); err != nil {
			t.Errorf("%s leg does not verify: %v", f.role, err)
		}
		forged := l.hdr.Clone()
		forged.Set("Traceparent", "00-"+strings.Repeat("ab", 16)+"-"+parts[2]+"-01")
		if _, err := keys.Verify("POST", l.path, forged, l.body); !errors.Is(err, leg.ErrBadMAC) {
			t.Errorf("%s leg with a forged traceparent: %v, want ErrBadMAC", f.role, err)
		}
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	root, ok := spans["text_completion m"]
	if !ok || root.SpanKind() != trace.SpanKindServer || root.Parent().SpanID().String() != clientSpan || root.SpanContext().TraceID().String() != clientTrace {
		t.Fatalf("request span %+v (spans %v)", root, keysOf(spans))
	}
	attrs := map[string]string{}
	for _, kv := range root.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["gen_ai.operation.name"] != "text_completion" || attrs["gen_ai.request.model"] != "m" || attrs["tandem.pd.path"] != "disaggregated" ||
		attrs["tandem.outcome"] != "ok" || attrs["gen_ai.request.id"] == "" {
		t.Errorf("request span attributes %v", attrs)
	}
	att := spans["tandem.attempt"]
	for kind, name := range map[string]string{"prefill": "tandem.leg.prefill", "decode": "tandem.leg.decode"} {
		s, ok := spans[name]
		if !ok || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != att.SpanContext().SpanID() || s.SpanContext().SpanID().String() != legs[kind] {
			t.Errorf("%s: %+v; want a CLIENT span under the attempt whose id the %s leg carried (%s)", name, s, kind, legs[kind])
		}
	}
	if _, ok := spans["tandem.route"]; !ok || att.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("route or attempt span missing or not under the request span: %v", keysOf(spans))
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
