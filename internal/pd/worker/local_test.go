package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/room"
	"tandem/internal/server"
)

func localLeg(id room.ID) apileg.Info {
	return apileg.Info{Room: id.String(), RequestID: "req-" + id.String()[:6], Leg: apileg.KindLocal}
}

// TestLocalLegMatchesColocated: a local leg on a decode worker runs the
// whole request in its engine (prefill included) and yields what the
// engine gives it colocated, without a room or a transfer; its room id is
// single-use; prefill workers and mislabelled local legs are refused.
func TestLocalLegMatchesColocated(t *testing.T) {
	pp := newPair(t, 512)
	for _, n := range []int{3, 40, 150} {
		p := prompt(n)
		want := colocated(t, pp.de, p, 10)
		id := newRoomID()
		req := engine.Request{Prompt: p, MaxTokens: 10, IgnoreEOS: true}
		s, err := pp.d.SubmitLeg(context.Background(), localLeg(id), req)
		if err != nil {
			t.Fatal(err)
		}
		got, last := drain(t, s)
		if !slices.Equal(got, want) || last.Err != nil || last.Finish != engine.FinishLength || last.PromptTokens != n {
			t.Errorf("prompt %d: local leg %v (final %+v), colocated %v", n, got, last, want)
		}
		if _, _, ok := pp.d.roomState(id); ok {
			t.Errorf("prompt %d: a local leg made a room on the decode worker", n)
		}
		_, err = pp.d.SubmitLeg(context.Background(), localLeg(id), req)
		var le *Error
		if !errors.As(err, &le) || le.Status != http.StatusConflict {
			t.Errorf("prompt %d: the same local room again: %v, want 409", n, err)
		}
	}
	req := engine.Request{Prompt: prompt(5), MaxTokens: 2}
	var le *Error
	if _, err := pp.p.SubmitLeg(context.Background(), localLeg(newRoomID()), req); !errors.As(err, &le) || le.Status != http.StatusBadRequest {
		t.Errorf("a local leg on a prefill worker: %v, want 400", err)
	}
	li := localLeg(newRoomID())
	li.Prefill = pp.p.TransferAddr()
	if _, err := pp.d.SubmitLeg(context.Background(), li, req); !errors.As(err, &le) || le.Status != http.StatusBadRequest {
		t.Errorf("a local leg naming a prefill worker: %v, want 400", err)
	}
	if pp.p.live() != 0 || pp.d.live() != 0 {
		t.Errorf("rooms live after local legs: prefill %d decode %d", pp.p.live(), pp.d.live())
	}
}

// TestLocalLegOverHTTP is the router's entry point: a POST to the decode
// worker's /v1/completions with X-Tandem-Leg: local, a room and a request
// id, signed with the cluster token over the unchanged client body, is
// answered like `tandem serve` answers the body (the same streamed text);
// unsigned, it is refused.
func TestLocalLegOverHTTP(t *testing.T) {
	pp := newPair(t, 512)
	keys, err := apileg.NewKeys([]byte("0123456789abcdef-test-token"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	worker := server.New(server.EngineBackend(pp.de), server.Options{LegKeys: keys, Legs: pp.d, Registry: prometheus.NewRegistry(), Logger: quiet})
	worker.SetReady(true)
	serve := server.New(server.EngineBackend(pp.de), server.Options{Registry: prometheus.NewRegistry(), Logger: quiet})
	serve.SetReady(true)
	ws, ss := httptest.NewServer(worker.Handler()), httptest.NewServer(serve.Handler())
	defer ws.Close()
	defer ss.Close()
	const path = "/v1/completions"
	body := `{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"ignore_eos":true,"stream":true}`
	post := func(url string, h http.Header) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := http.NewRequestWithContext(ctx, "POST", url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			r.Header[k] = v
		}
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	texts := func(sse string) string { // the "text" fields of the stream, in order
		var out []string
		for _, line := range strings.Split(sse, "\n") {
			if i := strings.Index(line, `"text":"`); i >= 0 {
				rest := line[i+len(`"text":"`):]
				out = append(out, rest[:strings.Index(rest, `"`)])
			}
		}
		return strings.Join(out, "")
	}
	wantCode, want := post(ss.URL, nil)
	if wantCode != http.StatusOK || !strings.Contains(want, "data: [DONE]") {
		t.Fatalf("tandem serve: %d %s", wantCode, want)
	}
	h := http.Header{}
	localLeg(newRoomID()).Set(h)
	keys.Sign(h, "POST", path, []byte(body))
	code, got := post(ws.URL, h)
	if code != http.StatusOK || !strings.Contains(got, "data: [DONE]") || texts(got) != texts(want) || texts(want) == "" {
		t.Errorf("local leg: %d, text %q; tandem serve: text %q\n%s", code, texts(got), texts(want), got)
	}
	unsigned := http.Header{}
	localLeg(newRoomID()).Set(unsigned)
	if code, _ := post(ws.URL, unsigned); code != http.StatusUnauthorized {
		t.Errorf("an unsigned local leg: %d, want 401", code)
	}
}
