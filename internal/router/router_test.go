package router_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"tandem/internal/router"
)

var roomPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

const decodeAnswer = `{"id":"cmpl-d","object":"text_completion","created":2,"model":"m","choices":[{"index":0,"text":" hello there","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}` + "\n"

func TestNonStreamedAnswerIsDecodesByteForByte(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	client := `{"model":"m","prompt":"Say hi","max_tokens":3,"temperature":0.5,"stream":false,"stream_options":null}`
	status, body := c.post(t, "/v1/completions", client)
	if status != 200 || body != decodeAnswer {
		t.Errorf("POST /v1/completions = %d %q, want 200 %q", status, body, decodeAnswer)
	}
	pl, dl := p.nextLeg(t), d.nextLeg(t)
	if string(dl.body) != client {
		t.Errorf("decode leg body = %s, want the client's body unchanged %s", dl.body, client)
	}
	var pb map[string]any
	if err := json.Unmarshal(pl.body, &pb); err != nil {
		t.Fatalf("prefill leg body %s: %v", pl.body, err)
	}
	if pb["stream"] != false || pb["max_tokens"] != 1.0 || pb["temperature"] != 0.5 || pb["prompt"] != "Say hi" {
		t.Errorf("prefill leg body = %s, want the client's with stream false and max_tokens 1", pl.body)
	}
	if _, ok := pb["stream_options"]; ok {
		t.Errorf("prefill leg body = %s, want no stream_options", pl.body)
	}
	if _, ok := pb["max_completion_tokens"]; ok {
		t.Errorf("prefill leg body = %s: a completions request that gave no max_completion_tokens gets none", pl.body)
	}
	room := pl.hdr.Get(router.HeaderRoom)
	if !roomPattern.MatchString(room) || dl.hdr.Get(router.HeaderRoom) != room {
		t.Errorf("room headers: prefill %q, decode %q; want one id of 32 hex digits on both", room, dl.hdr.Get(router.HeaderRoom))
	}
	rid := pl.hdr.Get(router.HeaderRequestID)
	if !strings.HasPrefix(rid, "req-") || dl.hdr.Get(router.HeaderRequestID) != rid {
		t.Errorf("request id headers: prefill %q, decode %q; want one req-... id on both", rid, dl.hdr.Get(router.HeaderRequestID))
	}
	if pl.hdr.Get(router.HeaderLeg) != "prefill" || dl.hdr.Get(router.HeaderLeg) != "decode" {
		t.Errorf("leg headers: prefill %q, decode %q", pl.hdr.Get(router.HeaderLeg), dl.hdr.Get(router.HeaderLeg))
	}
	if got := dl.hdr.Get(router.HeaderPrefill); got != p.transferAddr() {
		t.Errorf("decode leg %s = %q, want the prefill worker's transfer address %q", router.HeaderPrefill, got, p.transferAddr())
	}
	if got := pl.hdr.Get(router.HeaderPrefill); got != "" {
		t.Errorf("prefill leg carries %s %q, want none", router.HeaderPrefill, got)
	}
}

const chatStream = "data: {\"id\":\"chatcmpl-d\",\"object\":\"chat.completion.chunk\",\"created\":2,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"chatcmpl-d\",\"object\":\"chat.completion.chunk\",\"created\":2,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n" +
	": keep-alive comment\n\n" +
	"data: {\"id\":\"chatcmpl-d\",\"object\":\"chat.completion.chunk\",\"created\":2,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"id\":\"chatcmpl-d\",\"object\":\"chat.completion.chunk\",\"created\":2,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n" +
	"data: [DONE]\n\n"

func TestStreamedAnswerIsDecodesByteForByte(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	pieces := strings.SplitAfter(chatStream, "\n\n")
	d := newFake(t, "decode", stream(pieces...))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	client := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`
	resp, err := http.Post(c.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(client))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != chatStream {
		t.Errorf("streamed chat = %d %q, want 200 %q", resp.StatusCode, body, chatStream)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	var pb map[string]any
	pl := p.nextLeg(t)
	json.Unmarshal(pl.body, &pb)
	if pb["stream"] != false || pb["max_tokens"] != 1.0 || pb["max_completion_tokens"] != 1.0 || pb["stream_options"] != nil {
		t.Errorf("chat prefill leg body = %s, want stream false, max_tokens 1, max_completion_tokens 1, no stream_options", pl.body)
	}
	if dl := d.nextLeg(t); string(dl.body) != client || dl.path != "/v1/chat/completions" {
		t.Errorf("decode leg = %s %s, want %s unchanged on /v1/chat/completions", dl.path, dl.body, client)
	}
}

func TestPromptLogprobsAreSpliced(t *testing.T) {
	const plp = `[null,{"1234":-0.5}]`
	pAnswer := `{"id":"cmpl-p","choices":[{"index":0,"text":"x","prompt_logprobs":` + plp + `}]}`
	cases := []struct {
		name, client, decode, want string
		streamed                   bool
	}{
		{
			name:   "non-streamed prompt_logprobs",
			client: `{"prompt":"a b","prompt_logprobs":1}`,
			decode: decodeAnswer,
			want:   `{"id":"cmpl-d","object":"text_completion","created":2,"model":"m","choices":[{"index":0,"text":" hello there","logprobs":null,"finish_reason":"length","prompt_logprobs":` + plp + `}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}` + "\n",
		},
		{
			name:   "prompt_logprobs 0 asks for the prompt tokens' own logprobs",
			client: `{"prompt":"a b","prompt_logprobs":0}`,
			decode: `{"choices":[{"index":0,"text":" c"}]}`,
			want:   `{"choices":[{"index":0,"text":" c","prompt_logprobs":` + plp + `}]}`,
		},
		{
			name:   "non-streamed echo with logprobs",
			client: `{"prompt":"a b","echo":true,"logprobs":0}`,
			decode: `{"choices":[{"index":0,"text":"a b c"}]}`,
			want:   `{"choices":[{"index":0,"text":"a b c","prompt_logprobs":` + plp + `}]}`,
		},
		{
			name:     "streamed: first chunk only",
			client:   `{"prompt":"a b","prompt_logprobs":2,"stream":true}`,
			decode:   "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" c\"}]}\n\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" d\"}]}\n\ndata: [DONE]\n\n",
			want:     "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" c\",\"prompt_logprobs\":" + plp + "}]}\n\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" d\"}]}\n\ndata: [DONE]\n\n",
			streamed: true,
		},
		{
			name:   "not asked for: untouched",
			client: `{"prompt":"a b","prompt_logprobs":null,"echo":true}`,
			decode: decodeAnswer,
			want:   decodeAnswer,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			p := newFake(t, "prefill", func(w http.ResponseWriter, r *http.Request, _ []byte) {
				<-release // decode's answer must wait for prefill's logprobs
				writeJSONBody(w, 200, pAnswer)
			})
			var d *fake
			if tc.streamed {
				d = newFake(t, "decode", stream(strings.SplitAfter(tc.decode, "\n\n")...))
			} else {
				d = newFake(t, "decode", answer(200, tc.decode))
			}
			c := newCluster(t, []*fake{p}, []*fake{d}, nil)
			go func() { d.nextLeg(t); close(release) }()
			status, body := c.post(t, "/v1/completions", tc.client)
			if status != 200 || body != tc.want {
				t.Errorf("POST %s = %d\n%s\nwant 200\n%s", tc.client, status, body, tc.want)
			}
		})
	}
}

func TestPrefillFailureCancelsDecode(t *testing.T) {
	cases := []struct {
		status     int
		body       string
		wantStatus int
		wantInMsg  string
	}{
		{502, `{"error":{"message":"peer lost: decode stopped answering","type":"server_error","param":null,"code":"peer_lost"}}`, 502, "peer lost: decode stopped answering"},
		{409, `{"error":{"message":"room already live","type":"invalid_request_error","param":null,"code":"duplicate_room"}}`, 409, "room already live"},
		{504, `{"error":{"message":"hello timeout","type":"server_error"}}`, 504, "hello timeout"},
		{500, `plain text failure`, 502, "plain text failure"},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			decodeGot := make(chan struct{})
			p := newFake(t, "prefill", func(w http.ResponseWriter, r *http.Request, _ []byte) {
				<-decodeGot
				writeJSONBody(w, tc.status, tc.body)
			})
			d := newFake(t, "decode", nil)
			d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
				close(decodeGot)
				d.waitCancel(r)
			}
			c := newCluster(t, []*fake{p}, []*fake{d}, nil)
			status, body := c.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
			msg, _, _ := errorDoc(t, body)
			if status != tc.wantStatus || !strings.Contains(msg, "prefill") || strings.Contains(msg, p.url()) || !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("prefill answered %d: client got %d %q, want %d naming the prefill leg and %q, not the worker %s", tc.status, status, msg, tc.wantStatus, tc.wantInMsg, p.url())
			}
			d.expectCancel(t)
		})
	}
}

func TestDecodeFailureBeforeStreamingCancelsPrefill(t *testing.T) {
	prefillGot := make(chan struct{})
	p := newFake(t, "prefill", nil)
	p.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		close(prefillGot)
		p.waitCancel(r)
	}
	d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-prefillGot
		writeJSONBody(w, 500, `{"error":{"message":"engine failed","type":"server_error"}}`)
	})
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, body := c.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
	msg, typ, code := errorDoc(t, body)
	if status != 502 || !strings.Contains(msg, "decode") || strings.Contains(msg, d.url()) || !strings.Contains(msg, "engine failed") {
		t.Errorf("client got %d %q, want 502 naming the decode leg and its message, not the worker", status, msg)
	}
	if typ != "server_error" || code != "upstream_error" {
		t.Errorf("error type, code = %q, %q; want server_error, upstream_error", typ, code)
	}
	p.expectCancel(t)
}

func TestDecodeFailureMidStreamEndsWithOneErrorEvent(t *testing.T) {
	first := "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"
	cases := []struct {
		name    string
		gen     func(w http.ResponseWriter, r *http.Request, _ []byte)
		wantMsg string
	}{
		{"error event", stream(first, "data: {\"error\":{\"message\":\"sequence failed\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n", "data: [DONE]\n\n"), "sequence failed"},
		{"connection cut", func(w http.ResponseWriter, r *http.Request, _ []byte) {
			writeEvents(w, first)
			panic(http.ErrAbortHandler)
		}, "decode"},
		{"stream ends without DONE", stream(first), "[DONE]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "prefill", answer(200, prefillAnswer))
			d := newFake(t, "decode", tc.gen)
			c := newCluster(t, []*fake{p}, []*fake{d}, nil)
			status, body := c.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
			events := strings.SplitAfter(body, "\n\n")
			if status != 200 || len(events) != 3 || events[0] != first || events[2] != "" {
				t.Fatalf("client got %d %q, want 200, the first event, one error event, nothing more", status, body)
			}
			msg, _, _ := errorDoc(t, strings.TrimSpace(events[1]))
			if !strings.Contains(msg, "decode") || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("error event message %q, want it to name the decode leg and %q", msg, tc.wantMsg)
			}
			if strings.Contains(body, "data: [DONE]\n\n") {
				t.Errorf("client stream %q carries [DONE] after an error", body)
			}
		})
	}
}

func TestClientDisconnectCancelsBothLegs(t *testing.T) {
	p := newFake(t, "prefill", nil)
	p.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { p.waitCancel(r) }
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeEvents(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n")
		d.waitCancel(r)
	}
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL+"/v1/completions", strings.NewReader(`{"prompt":"x","stream":true}`))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line of the stream = %q, %v", line, err)
	}
	p.nextLeg(t) // both legs reached their workers
	d.nextLeg(t)
	cancel()
	resp.Body.Close()
	rooms := []string{p.expectCancel(t), d.expectCancel(t)}
	if rooms[0] != rooms[1] || !roomPattern.MatchString(rooms[0]) {
		t.Errorf("cancelled rooms = %q, want one room id on both legs", rooms)
	}
}

func TestLegTimeout(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { d.waitCancel(r) }
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.LegTimeout = 200e6 })
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	msg, _, code := errorDoc(t, body)
	if status != 504 || code != "upstream_timeout" || !strings.Contains(msg, "decode") || !strings.Contains(msg, "sent nothing") {
		t.Errorf("silent decode leg: client got %d %q (code %q), want 504 upstream_timeout naming the decode leg", status, msg, code)
	}
	d.expectCancel(t)
}

func TestLegConnectionsAreReused(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", stream(strings.SplitAfter(chatStream, "\n\n")...))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	for i := range 5 {
		if status, body := c.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`); status != 200 || body != chatStream {
			t.Fatalf("request %d = %d %q", i, status, body)
		}
	}
	if n := d.conns.Load(); n != 1 {
		t.Errorf("5 sequential streamed requests opened %d connections to the decode worker, want 1 (the health check's, reused)", n)
	}
}

// TestRestartedPrefillNewTransferAddress: a prefill worker that comes back
// on a new transfer port (a restart) is noticed at the next health round,
// even when it was never taken out, and decode legs name the new address.
func TestRestartedPrefillNewTransferAddress(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	body := `{"prompt":"x","max_tokens":1}`
	c.post(t, "/v1/completions", body)
	p.nextLeg(t)
	if got := d.nextLeg(t).hdr.Get(router.HeaderPrefill); got != p.transferAddr() {
		t.Fatalf("first decode leg names %q, want %q", got, p.transferAddr())
	}
	p.mu.Lock()
	p.status.TransferAddr = "127.0.0.1:1" // the restarted process listens elsewhere
	p.mu.Unlock()
	c.rt.CheckNow(context.Background())
	c.post(t, "/v1/completions", body)
	p.nextLeg(t)
	if got := d.nextLeg(t).hdr.Get(router.HeaderPrefill); got != "127.0.0.1:1" {
		t.Errorf("after the restart the decode leg names %q, want the new address 127.0.0.1:1", got)
	}
}
