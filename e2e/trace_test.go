package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"tandem/internal/cluster"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/testenv"
)

// otlpSpan is one span an otlpReceiver decoded, with its process's
// resource attributes.
type otlpSpan struct {
	service, instance, role string
	span                    *tracepb.Span
}

func (s otlpSpan) attr(key string) string {
	for _, kv := range s.span.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			switch {
			case v.GetStringValue() != "":
				return v.GetStringValue()
			case v.GetArrayValue() != nil:
				var parts []string
				for _, e := range v.GetArrayValue().GetValues() {
					parts = append(parts, e.GetStringValue())
				}
				return strings.Join(parts, ",")
			default:
				return strconv.FormatInt(v.GetIntValue(), 10)
			}
		}
	}
	return ""
}

func (s otlpSpan) dur() time.Duration {
	return time.Duration(s.span.GetEndTimeUnixNano() - s.span.GetStartTimeUnixNano())
}

// otlpReceiver is an OTLP/HTTP trace endpoint: it decodes the real wire
// format (protobuf ExportTraceServiceRequest) and keeps every span.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
	bad   []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
		var msg coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			r.bad = append(r.bad, req.URL.Path+" "+req.Header.Get("Content-Type")+" "+errString(err))
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		for _, rs := range msg.GetResourceSpans() {
			res := map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				res[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					r.spans = append(r.spans, otlpSpan{service: res["service.name"], instance: res["service.instance.id"], role: res["tandem.role"], span: sp})
				}
			}
		}
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// trace returns the spans of trace id (hex).
func (r *otlpReceiver) trace(id string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if hex.EncodeToString(s.span.GetTraceId()) == id {
			out = append(out, s)
		}
	}
	return out
}

func byName(spans []otlpSpan, name string) (otlpSpan, bool) {
	for _, s := range spans {
		if s.span.GetName() == name {
			return s, true
		}
	}
	return otlpSpan{}, false
}

// startKillable runs tandem with args like startProcess, but returns the
// process so the test can kill it; it is killed when the test ends.
func startKillable(t *testing.T, port int, args ...string) (string, *exec.Cmd) {
	t.Helper()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	var out lockedBuffer
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "TANDEM_CLUSTER_TOKEN="+e2eClusterToken)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("tandem %s output:\n%s", args[0], out.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	if err := cluster.WaitReady(ctx, &http.Client{Timeout: 2 * time.Second}, base, done); err != nil {
		t.Fatalf("tandem %s: %v\n%s", args[0], err, out.String())
	}
	return base, cmd
}

// traceParent is a client's W3C traceparent with a fresh trace id.
func traceParent(t *testing.T) (header, traceID string) {
	traceID, span := randomRoom(t), randomRoom(t)[:16]
	return "00-" + traceID + "-" + span + "-01", traceID
}

// streamTTFT sends a streamed completion with traceparent tp through
// base and returns the request id, the time to its first token and a
// reader of the rest.
func streamTTFT(t *testing.T, base, tp, prompt string, maxTokens int) (rid string, ttft time.Duration, rest *bufio.Reader, closeFn func()) {
	t.Helper()
	body := `{"prompt":` + strconv.Quote(prompt) + `,"max_tokens":` + strconv.Itoa(maxTokens) + `,"ignore_eos":true,"stream":true,"temperature":0}`
	req, _ := http.NewRequest("POST", base+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", tp)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(rd)
		resp.Body.Close()
		return resp.Header.Get("X-Request-Id"), 0, nil, func() { t.Logf("status %d: %s", resp.StatusCode, b) }
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before a token: %v", err)
		}
		if strings.HasPrefix(line, "data: {") && strings.Contains(line, `"text":"`) && !strings.Contains(line, `"text":""`) {
			return resp.Header.Get("X-Request-Id"), time.Since(t0), rd, func() { resp.Body.Close() }
		}
	}
}

// TestTraceAcrossCluster: with OTEL_EXPORTER_OTLP_ENDPOINT set, a
// disaggregated request through a real router, prefill and decode worker
// (processes of their own) gives spans under the client's trace id that an
// OTLP/HTTP endpoint receives in the wire format: the router's GenAI
// SERVER span, its route, attempt and leg spans, the prefill room with
// queue, compute and transfer, the decode room with its KV wait and first
// decode step, each from its own process (resource service.name tandem,
// its role). The critical path's phases (route, queue, prefill, transfer,
// first decode) add up to the client's measured TTFT within 5%. While the
// request still streams, the decode worker's /debug/rooms shows its room
// live (state decoding) with the trace id, and `tandem inspect ROUTER
// REQUEST_ID` follows it. A request whose decode worker is killed in the
// middle of its transfer has the failure's reason on the router's and the
// prefill worker's spans.
func TestTraceAcrossCluster(t *testing.T) {
	setup(t)
	model := slowModelPath(t) // prefill takes long enough that loopback hops are a small part of TTFT
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL) // the children inherit it
	t.Setenv("TANDEM_CLUSTER_TOKEN", e2eClusterToken)
	worker := func(role string) string {
		port := freePort(t)
		return startProcess(t, port, role, "--model", model, "--port", strconv.Itoa(port), "--threads", "1", "--prefix-cache=false")
	}
	prefill := worker("prefill")
	dport := freePort(t)
	decode, dcmd := startKillable(t, dport, "decode", "--model", model, "--port", strconv.Itoa(dport), "--threads", "1", "--prefix-cache=false")
	rport := freePort(t)
	router := startProcess(t, rport, "route", "--port", strconv.Itoa(rport), "--prefill", prefill, "--decode", decode, "--pd-threshold", "0")
	prompt := strings.Repeat("Once upon a time there was a little fox who lived in the woods. ", 6)

	tp, traceID := traceParent(t)
	rid, ttft, rd, closeStream := streamTTFT(t, router, tp, prompt, 48)
	if rd == nil {
		closeStream()
		t.Fatal("the traced request failed")
	}
	// Still streaming: the decode room is live and carries the trace id.
	ctx := context.Background()
	dt, err := roomTable(ctx, http.DefaultClient, decode)
	if err != nil {
		t.Fatal(err)
	}
	var live *debugdoc.Room
	for i, r := range dt.Rooms {
		if r.RequestID == rid {
			live = &dt.Rooms[i]
		}
	}
	if live == nil || live.State != "decoding" || live.Terminal() || live.TraceID != traceID || dt.Live < 1 {
		t.Errorf("decode /debug/rooms while the request streams: room %+v, live %d; want state decoding, trace %s", live, dt.Live, traceID)
	}
	out := runTandem(t, time.Minute, "inspect", router, rid)
	if s := string(out); !strings.Contains(s, "request "+rid+": live, trace "+traceID) || !strings.Contains(s, "decoding/generating") {
		t.Errorf("tandem inspect %s while it streams:\n%s\nwant it live with trace %s and the decode room decoding", rid, s, traceID)
	}
	io.Copy(io.Discard, rd)
	closeStream()
	waitFor(t, "the decode room to end with its stream", func() bool {
		dt, err := roomTable(ctx, http.DefaultClient, decode)
		if err != nil {
			return false
		}
		for _, r := range dt.Rooms {
			if r.RequestID == rid {
				return r.State == debugdoc.StateSucceeded
			}
		}
		return false
	})

	var spans []otlpSpan
	names := []string{"text_completion", "tandem.route", "tandem.attempt", "tandem.leg.prefill", "tandem.leg.decode",
		"tandem.prefill", "tandem.queue", "tandem.prefill.compute", "tandem.kv_transfer", "tandem.decode", "tandem.kv_wait",
		"tandem.first_decode", "tandem.decoding"}
	testenv.WaitFor(t, 30*time.Second, "every span of the trace at the OTLP receiver", func() bool {
		spans = rcv.trace(traceID)
		for _, n := range names {
			found := false
			for _, s := range spans {
				found = found || strings.HasPrefix(s.span.GetName(), n)
			}
			if !found {
				return false
			}
		}
		return true
	})
	roles := map[string]bool{}
	for _, s := range spans {
		roles[s.role] = true
		if s.service != "tandem" || s.instance == "" {
			t.Errorf("span %s: resource service.name %q, instance %q", s.span.GetName(), s.service, s.instance)
		}
		if s.attr("tandem.outcome") != "" && s.attr("gen_ai.request.id") != rid {
			t.Errorf("span %s has request id %q, want %s", s.span.GetName(), s.attr("gen_ai.request.id"), rid)
		}
	}
	if !roles["router"] || !roles["prefill"] || !roles["decode"] {
		t.Errorf("the trace crosses roles %v; want router, prefill and decode", roles)
	}
	var root otlpSpan
	for _, s := range spans {
		if n := s.span.GetName(); n == "text_completion" || strings.HasPrefix(n, "text_completion ") { // the request names no model
			root = s
		}
	}
	if root.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER || root.attr("gen_ai.operation.name") != "text_completion" ||
		root.attr("tandem.pd.path") != "disaggregated" || root.attr("gen_ai.usage.output_tokens") != "48" || root.attr("gen_ai.response.finish_reasons") != "length" ||
		hex.EncodeToString(root.span.GetParentSpanId()) != strings.Split(tp, "-")[2] {
		t.Errorf("request span %q kind %v attrs %v parent %x", root.span.GetName(), root.span.GetKind(), root.span.GetAttributes(), root.span.GetParentSpanId())
	}
	for _, n := range []string{"tandem.leg.prefill", "tandem.leg.decode"} {
		if s, _ := byName(spans, n); s.span.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || s.attr("tandem.outcome") != "ok" {
			t.Errorf("%s: kind %v outcome %q", n, s.span.GetKind(), s.attr("tandem.outcome"))
		}
	}
	pr, _ := byName(spans, "tandem.prefill")
	dr, _ := byName(spans, "tandem.decode")
	if pr.role != "prefill" || dr.role != "decode" || pr.attr("tandem.outcome") != "ok" || dr.attr("tandem.room.id") == "" {
		t.Errorf("room spans: prefill from %q outcome %q, decode from %q room %q", pr.role, pr.attr("tandem.outcome"), dr.role, dr.attr("tandem.room.id"))
	}
	if c, _ := byName(spans, "tandem.prefill.compute"); len(c.span.GetEvents()) == 0 {
		t.Errorf("the prefill compute span has no chunk events")
	}
	phases := []string{"tandem.route", "tandem.queue", "tandem.prefill.compute", "tandem.kv_transfer", "tandem.first_decode"}
	offBy := func(spans []otlpSpan, ttft time.Duration) float64 {
		var sum time.Duration
		parts := []string{}
		for _, n := range phases {
			s, _ := byName(spans, n)
			sum += s.dur()
			parts = append(parts, n+"="+s.dur().String())
		}
		off := float64(sum-ttft) / float64(ttft)
		t.Logf("client TTFT %v; phases %s; sum %v (%+.1f%%)", ttft, strings.Join(parts, " "), sum, 100*off)
		return off
	}
	// On a loaded machine a descheduled process can add time outside every
	// span to one request; the sum must be within 5% for one of up to three
	// requests (a systematic gap fails all three).
	off := offBy(spans, ttft)
	for try := 2; try <= 3 && (off > 0.05 || off < -0.05); try++ {
		tpN, traceN := traceParent(t)
		_, ttftN, rdN, closeN := streamTTFT(t, router, tpN, prompt, 48)
		if rdN == nil {
			closeN()
			t.Fatalf("traced request %d failed", try)
		}
		io.Copy(io.Discard, rdN)
		closeN()
		var spansN []otlpSpan
		testenv.WaitFor(t, 30*time.Second, "the phase spans of another traced request", func() bool {
			spansN = rcv.trace(traceN)
			for _, n := range phases {
				if _, ok := byName(spansN, n); !ok {
					return false
				}
			}
			return true
		})
		off = offBy(spansN, ttftN)
	}
	if off > 0.05 || off < -0.05 {
		t.Errorf("the phases add up to %+.1f%% off the client's TTFT in three requests; want within 5%%", 100*off)
	}

	// A request whose decode worker dies in the middle of its transfer.
	tp2, trace2 := traceParent(t)
	errc := make(chan error, 1)
	go func() {
		body := `{"prompt":` + strconv.Quote(strings.Repeat(prompt, 3)) + `,"max_tokens":8,"stream":false}`
		req, _ := http.NewRequest("POST", router+"/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", tp2)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				err = errors.New("the request succeeded: " + string(b))
			}
		}
		errc <- err
	}()
	waitFor(t, "the second request's prefill room transferring", func() bool {
		pt, err := roomTable(ctx, http.DefaultClient, prefill)
		if err != nil {
			return false
		}
		for _, r := range pt.Rooms {
			if r.TraceID == trace2 && r.State == "transferring" {
				return true
			}
		}
		return false
	})
	dcmd.Process.Kill()
	if err := <-errc; err != nil {
		t.Fatalf("the request whose decode worker was killed: %v", err)
	}
	testenv.WaitFor(t, 60*time.Second, "the failed request's spans with their reason", func() bool {
		sp := rcv.trace(trace2)
		p, ok1 := byName(sp, "tandem.prefill")
		a, ok2 := byName(sp, "tandem.attempt")
		l, ok3 := byName(sp, "tandem.leg.decode")
		if !ok1 || !ok2 || !ok3 {
			return false
		}
		// The router's attempt and decode leg failed, naming the decode
		// leg; the prefill room ended unsuccessfully (the router cancels
		// it at once, or its peer is found lost) with its reason.
		if p.attr("tandem.outcome") == "ok" || p.attr("tandem.reason") == "" || a.attr("tandem.outcome") != "failed" ||
			!strings.Contains(a.attr("tandem.reason"), "decode leg") || l.attr("tandem.outcome") != "failed" || l.attr("tandem.reason") == "" {
			return false
		}
		t.Logf("failed transfer: prefill span %s (%q); router attempt %q; decode leg %q", p.attr("tandem.outcome"), p.attr("tandem.reason"),
			a.attr("tandem.reason"), l.attr("tandem.reason"))
		return true
	})
	rcv.mu.Lock()
	if len(rcv.bad) > 0 {
		t.Errorf("exports the receiver refused: %v", rcv.bad)
	}
	rcv.mu.Unlock()
}
