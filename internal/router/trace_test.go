package router_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"tandem/internal/api/leg"
	"tandem/internal/router"
	"tandem/internal/telemetry"
	"tandem/internal/testenv"
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
	// The handler ends its spans after the answer went out.
	spans := map[string]sdktrace.ReadOnlySpan{}
	testenv.WaitFor(t, 10*time.Second, "the request's spans to end", func() bool {
		for _, s := range rec.Ended() {
			spans[s.Name()] = s
		}
		return len(spans) == 5
	})
	root, ok := spans["text_completion m"]
	if !ok || root.SpanKind() != trace.SpanKindServer || root.Parent().SpanID().String() != clientSpan || root.SpanContext().TraceID().String() != clientTrace {
		t.Fatalf("request span %+v (spans %v)", root, keysOf(spans))
	}
	attrs := map[string]string{}
	for _, kv := range root.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["gen_ai.operation.name"] != "text_completion" || attrs["gen_ai.request.model"] != "m" || attrs["tandem.pd.path"] != "disaggregated" ||
		attrs["tandem.outcome"] != "ok" || attrs["gen_ai.request.id"] == "" {
		t.Errorf("request span attributes %v", attrs)
	}
	att := spans["tandem.attempt"]
	aattrs := map[string]string{}
	for _, kv := range att.Attributes() {
		aattrs[string(kv.Key)] = kv.Value.String()
	}
	if aattrs["tandem.prefill_worker"] != p.url() || aattrs["tandem.decode_worker"] != d.url() || aattrs["tandem.attempt"] != "1" || aattrs["tandem.outcome"] != "ok" {
		t.Errorf("attempt span attributes %v; want the pair picked, attempt 1, ok", aattrs)
	}
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

// TestRouterTracingCost measures the router's own cost of its spans: one
// non-streamed disaggregated request over fake workers, tracing off and on
// (sampling 1.0, exported over OTLP/HTTP to an in-process sink), in
// interleaved rounds of testing.Benchmark; it logs each round's ns per
// request and the medians. It asserts nothing (a shared machine's noise
// is larger than the effect) and runs only with TANDEM_TRACE_COST=1.
func TestRouterTracingCost(t *testing.T) {
	if os.Getenv("TANDEM_TRACE_COST") != "1" {
		t.Skip("a measurement: set TANDEM_TRACE_COST=1")
	}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	tr, err := telemetry.Setup(context.Background(), telemetry.Config{Endpoint: sink.URL, SampleRatio: 1, Role: "router"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	go func() { // the fakes' record of legs is not read here
		for {
			select {
			case <-p.got:
			case <-d.got:
			}
		}
	}()
	clusters := map[bool]*cluster{
		false: newCluster(t, []*fake{p}, []*fake{d}, nil),
		true:  newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.Tracing = tr }),
	}
	client := &http.Client{}
	body := `{"model":"m","prompt":"hi","max_tokens":3}`
	// cpu is the process's CPU time (user + system): client, router,
	// fakes and the exporter together, the same work but the tracing in
	// both modes; steadier than wall time on a shared machine.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	type result struct{ ns, cpuNs, allocs float64 }
	run := func(c *cluster) result {
		reqs, c0 := 0, cpu()
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			reqs += b.N
			for range b.N {
				resp, err := client.Post(c.srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
		return result{float64(r.NsPerOp()), float64(cpu()-c0) / float64(reqs), float64(r.AllocsPerOp())}
	}
	var off, on []result
	for round := range 7 {
		first := round%2 == 0
		for _, mode := range []bool{first, !first} {
			r := run(clusters[mode])
			if mode {
				on = append(on, r)
			} else {
				off = append(off, r)
			}
			t.Logf("round %d tracing %-5v: %7.0f ns/request, CPU %7.0f ns/request, %4.0f allocs/request", round+1, mode, r.ns, r.cpuNs, r.allocs)
		}
	}
	median := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, m := range []struct {
		name string
		f    func(result) float64
	}{{"wall ns/request", func(r result) float64 { return r.ns }}, {"CPU ns/request", func(r result) float64 { return r.cpuNs }},
		{"allocs/request", func(r result) float64 { return r.allocs }}} {
		mo, mn := median(off, m.f), median(on, m.f)
		t.Logf("median %s: off %.0f, on %.0f: tracing adds %+.1f%% (%+.0f)", m.name, mo, mn, 100*(mn/mo-1), mn-mo)
	}
}
