package router_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"tandem/internal/router"
)

// promptEcho is a decode gen that answers with the prompt's bytes as it
// got them, its seed and its n as the text, streamed or not, with usage:
// prompt tokens the prompt's byte length, completion 2, cached 1.
func promptEcho(w http.ResponseWriter, r *http.Request, body []byte) {
	var req struct {
		Prompt json.RawMessage `json:"prompt"`
		Seed   int64           `json:"seed"`
		N      int             `json:"n"`
		Stream bool            `json:"stream"`
	}
	json.Unmarshal(body, &req)
	text, _ := json.Marshal(fmt.Sprintf("%s|s%d|n%d", req.Prompt, req.Seed, req.N))
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":2,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":1}}`, len(req.Prompt), len(req.Prompt)+2)
	if !req.Stream {
		writeJSONBody(w, 200, fmt.Sprintf(`{"id":"cmpl-d","object":"text_completion","created":5,"model":"m","choices":[{"index":0,"text":%s,"logprobs":null,"finish_reason":"length"}],"usage":%s}`+"\n", text, usage))
		return
	}
	writeEvents(w,
		fmt.Sprintf("data: {\"id\":\"cmpl-d\",\"object\":\"text_completion\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":%s,\"logprobs\":null,\"finish_reason\":null}]}\n\n", text),
		"data: {\"id\":\"cmpl-d\",\"object\":\"text_completion\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
		fmt.Sprintf("data: {\"id\":\"cmpl-d\",\"object\":\"text_completion\",\"created\":5,\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\n", usage),
		"data: [DONE]\n\n")
}

// listUsage is a usage member.
type listUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// listAnswer reads a router answer, streamed or not, into its choices'
// texts by index and its usage (nil when none). It fails the test when an
// index repeats, a stream does not end with [DONE], or ids differ.
func listAnswer(t *testing.T, body string, stream bool) (map[int]string, *listUsage) {
	t.Helper()
	type doc struct {
		ID      string `json:"id"`
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
		Usage *listUsage `json:"usage"`
	}
	var docs []doc
	if !stream {
		var d doc
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			t.Fatalf("answer %s: %v", body, err)
		}
		docs = append(docs, d)
	} else {
		events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
		if events[len(events)-1] != "data: [DONE]" {
			t.Fatalf("stream %q does not end with [DONE]", events)
		}
		for _, ev := range events[:len(events)-1] {
			var d doc
			if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &d); err != nil {
				t.Fatalf("event %q: %v", ev, err)
			}
			docs = append(docs, d)
		}
	}
	texts := map[int]string{}
	ids := map[string]bool{}
	var u *listUsage
	for _, d := range docs {
		ids[d.ID] = true
		for _, c := range d.Choices {
			if !stream {
				if _, dup := texts[c.Index]; dup {
					t.Errorf("choice index %d repeats in %s", c.Index, body)
				}
			}
			texts[c.Index] += c.Text
		}
		if d.Usage != nil {
			if u != nil {
				t.Errorf("two usage members in %s", body)
			}
			u = d.Usage
		}
	}
	if len(ids) != 1 {
		t.Errorf("answer carries ids %v, want one", ids)
	}
	for id := range ids {
		if !strings.HasPrefix(id, "cmpl-") || len(id) != len("cmpl-")+24 {
			t.Errorf("answer id %q, want the router's merged cmpl- id", id)
		}
	}
	return texts, u
}

// A list of prompts is split into one sample per (prompt, choice): each
// leg carries its prompt as the client wrote it and n 1, choices are
// indexed prompt*n+j with seed+index, and usage counts each prompt once
// and every completion.
func TestPromptListIsSplit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prompt  string   // the client's prompt member
		each    []string // its elements' bytes
		n       int
		stream  bool
		include bool
	}{
		{"strings n1", `["a", "b\u00e9b" ,"ccc"]`, []string{`"a"`, `"b\u00e9b"`, `"ccc"`}, 1, false, false},
		{"strings n2", `["a","bb"]`, []string{`"a"`, `"bb"`}, 2, false, false},
		{"ids n2", `[[1, 2],[3,4,5],[6]]`, []string{`[1, 2]`, `[3,4,5]`, `[6]`}, 2, false, false},
		{"strings n2 stream", `["a","bb","ccc"]`, []string{`"a"`, `"bb"`, `"ccc"`}, 2, true, true},
		{"ids n1 stream", `[[1,2],[3,4,5]]`, []string{`[1,2]`, `[3,4,5]`}, 1, true, true},
		{"ids n2 stream no usage", `[[1,2],[3,4,5]]`, []string{`[1,2]`, `[3,4,5]`}, 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "prefill", answer(200, prefillAnswer))
			d := newFake(t, "decode", promptEcho)
			c := newCluster(t, []*fake{p}, []*fake{d}, nil)
			body := fmt.Sprintf(`{"model":"m",  "prompt":%s,"n":%d,"seed":100,"max_tokens":7,"stream":%t`, tc.prompt, tc.n, tc.stream)
			if tc.include {
				body += `,"stream_options":{"include_usage":true}`
			}
			body += "}"
			status, resp := c.post(t, "/v1/completions", body)
			if status != 200 {
				t.Fatalf("POST %s = %d %s", body, status, resp)
			}
			texts, u := listAnswer(t, resp, tc.stream)
			k := len(tc.each) * tc.n
			if len(texts) != k {
				t.Fatalf("answer has %d choices, want %d: %s", len(texts), k, resp)
			}
			wantPrompt, wantCompletion := 0, 0
			for pi, el := range tc.each {
				wantPrompt += len(el)
				for j := range tc.n {
					i := pi*tc.n + j
					wantCompletion += 2
					if want := fmt.Sprintf("%s|s%d|n1", el, 100+i); texts[i] != want {
						t.Errorf("choice %d = %q, want %q (prompt %d, seed+%d, n 1)", i, texts[i], want, pi, i)
					}
				}
			}
			switch {
			case tc.stream && !tc.include:
				if u != nil {
					t.Errorf("usage %+v without include_usage", *u)
				}
			case u == nil:
				t.Errorf("answer has no usage: %s", resp)
			case u.PromptTokens != wantPrompt || u.CompletionTokens != wantCompletion || u.TotalTokens != wantPrompt+wantCompletion:
				t.Errorf("usage = %+v, want prompt %d (each prompt once), completion %d", *u, wantPrompt, wantCompletion)
			case !tc.stream && u.PromptTokensDetails.CachedTokens != 1:
				t.Errorf("cached tokens = %d, want 1 (the most of any sample)", u.PromptTokensDetails.CachedTokens)
			}
			var got []string
			for range k {
				dl := d.nextLeg(t)
				pl := p.nextLeg(t)
				if pl.hdr.Get(router.HeaderRoom) == "" {
					t.Errorf("prefill leg without a room")
				}
				for _, l := range []legReq{pl, dl} {
					if !bytes.Contains(l.body, []byte(`"model":"m",`)) || !bytes.Contains(l.body, []byte(`"n":1`)) {
						t.Errorf("leg body %s, want the client's members and n 1", l.body)
					}
				}
				var doc struct {
					Prompt json.RawMessage `json:"prompt"`
				}
				json.Unmarshal(dl.body, &doc)
				got = append(got, string(doc.Prompt))
			}
			var want []string
			for _, el := range tc.each {
				for range tc.n {
					want = append(want, el)
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("decode legs carried prompts %v, want %v (each element's bytes, n times)", got, want)
			}
		})
	}
}

// One prompt (a string, token ids, a list of one) is not split: its leg
// carries the client's body unchanged.
func TestOnePromptIsNotSplit(t *testing.T) {
	for _, prompt := range []string{`"abc"`, `[1, 2, 3]`, `["abc"]`, `[[1,2]]`} {
		p := newFake(t, "prefill", answer(200, prefillAnswer))
		d := newFake(t, "decode", promptEcho)
		c := newCluster(t, []*fake{p}, []*fake{d}, nil)
		body := `{"prompt":` + prompt + `}`
		if status, resp := c.post(t, "/v1/completions", body); status != 200 {
			t.Fatalf("POST %s = %d %s", body, status, resp)
		}
		if l := d.nextLeg(t); string(l.body) != body {
			t.Errorf("decode leg body %s, want the client's %s", l.body, body)
		}
	}
}

// A list the router cannot split as `tandem serve` would serve it gets
// `tandem serve`'s 400, and no worker sees it.
func TestPromptListLimits(t *testing.T) {
	many := func(k int, el string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(el+",", k), ",") + "]"
	}
	for _, tc := range []struct {
		body, param, msg string
	}{
		{`{"prompt":` + many(65, `"a"`) + `}`, "prompt", "prompt holds 65 prompts; at most 64 are allowed per request."},
		{`{"prompt":` + many(33, `[1]`) + `,"n":2}`, "n", "33 prompts with n 2 make 66 choices; at most 64 are allowed per request."},
		{`{"prompt":["a",[1]]}`, "prompt[1]", "prompt[1] is an array, but prompt[0] is a string"},
		{`{"prompt":[[1],[]]}`, "prompt[1]", "prompt[1] must be a non-empty array of token ids."},
	} {
		p := newFake(t, "prefill", answer(200, prefillAnswer))
		d := newFake(t, "decode", promptEcho)
		c := newCluster(t, []*fake{p}, []*fake{d}, nil)
		status, resp := c.post(t, "/v1/completions", tc.body)
		var doc struct {
			Error struct {
				Message string `json:"message"`
				Param   string `json:"param"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(resp), &doc)
		if status != 400 || doc.Error.Param != tc.param || !strings.Contains(doc.Error.Message, tc.msg) {
			t.Errorf("POST %.60s... = %d %s, want 400 on %s: %q", tc.body, status, resp, tc.param, tc.msg)
		}
		if len(d.got) != 0 || len(p.got) != 0 {
			t.Errorf("POST %.60s...: a worker received a leg", tc.body)
		}
	}
	// 64 prompts with n 1, and 32 with n 2, are allowed.
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", promptEcho)
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	for _, body := range []string{`{"prompt":` + many(64, `"a"`) + `}`, `{"prompt":` + many(32, `[1]`) + `,"n":2}`} {
		status, resp := c.post(t, "/v1/completions", body)
		if texts, _ := listAnswer(t, resp, false); status != 200 || len(texts) != 64 {
			t.Errorf("POST %.60s... = %d with %d choices, want 200 with 64", body, status, len(texts))
		}
		for range 64 {
			d.nextLeg(t)
			p.nextLeg(t)
		}
	}
}

// A chat request's messages are never split, whatever they hold.
func TestChatIsNotSplitByPrompt(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	body := `{"messages":[{"role":"user","content":"x"}],"prompt":["a","b"]}`
	if status, resp := c.post(t, "/v1/chat/completions", body); status != 200 {
		t.Fatalf("POST chat = %d %s", status, resp)
	}
	if l := d.nextLeg(t); string(l.body) != body {
		t.Errorf("chat decode leg body %s, want the client's %s", l.body, body)
	}
	if len(d.got) != 0 {
		t.Errorf("one chat request made %d more decode legs", len(d.got))
	}
}

// One prompt's sample failing fails the whole request, as one of n does.
func TestPromptListOneFailure(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, body []byte) {
		if bytes.Contains(body, []byte(`"prompt":"bad"`)) {
			writeJSONBody(w, 400, `{"error":{"message":"prompt bad is refused","type":"invalid_request_error"}}`)
			return
		}
		promptEcho(w, r, body)
	})
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, resp := c.post(t, "/v1/completions", `{"prompt":["ok","bad","ok2"]}`)
	if msg, _, _ := errorDoc(t, resp); status != 400 || !strings.Contains(msg, "prompt bad is refused") {
		t.Errorf("POST with one refused prompt = %d %s, want its 400", status, resp)
	}
}

// Each prompt of a list is decided on its own length: a short one runs
// locally, a long one is disaggregated.
func TestPromptListDecidedPerPrompt(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", promptEcho)
	c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(8))
	long := "[" + strings.TrimSuffix(strings.Repeat("7,", 20), ",") + "]"
	status, resp := c.post(t, "/v1/completions", `{"prompt":[[1,2],`+long+`]}`)
	if status != 200 {
		t.Fatalf("POST = %d %s", status, resp)
	}
	if texts, _ := listAnswer(t, resp, false); texts[0] != "[1,2]|s0|n1" || texts[1] != long+"|s0|n1" {
		t.Errorf("choices %v, want the short prompt's then the long one's", texts)
	}
	legs := map[string]string{}
	for range 2 {
		l := d.nextLeg(t)
		var doc struct {
			Prompt json.RawMessage `json:"prompt"`
		}
		json.Unmarshal(l.body, &doc)
		legs[string(doc.Prompt)] = l.hdr.Get(router.HeaderLeg)
	}
	if legs["[1,2]"] != "local" || legs[long] != "decode" {
		t.Errorf("legs by prompt %v, want the short one local and the long one a decode leg", legs)
	}
	if pl := p.nextLeg(t); !bytes.Contains(pl.body, []byte(long)) || len(p.got) != 0 {
		t.Errorf("prefill got %s (and %d more), want the long prompt only", pl.body, len(p.got))
	}
}

// A list's sample whose decode leg fails before anything reached the
// client is retried on another pair, as one of n is; the others are not
// resent.
func TestPromptListRetriesOneSample(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	var failed atomic.Bool
	flaky := func(w http.ResponseWriter, r *http.Request, body []byte) {
		if bytes.Contains(body, []byte(`"prompt":"b"`)) && failed.CompareAndSwap(false, true) {
			writeJSONBody(w, 500, `{"error":{"message":"engine failed","type":"server_error"}}`)
			return
		}
		promptEcho(w, r, body)
	}
	d1 := newFake(t, "decode", flaky)
	d2 := newFake(t, "decode", flaky)
	c := newCluster(t, []*fake{p}, []*fake{d1, d2}, nil)
	status, resp := c.post(t, "/v1/completions", `{"prompt":["a","b","c"],"seed":1}`)
	if status != 200 {
		t.Fatalf("POST = %d %s", status, resp)
	}
	texts, u := listAnswer(t, resp, false)
	for i, el := range []string{`"a"`, `"b"`, `"c"`} {
		if want := fmt.Sprintf("%s|s%d|n1", el, 1+i); texts[i] != want {
			t.Errorf("choice %d = %q, want %q", i, texts[i], want)
		}
	}
	if u == nil || u.PromptTokens != 9 || u.CompletionTokens != 6 {
		t.Errorf("usage %+v, want prompt 9, completion 6 (the failed attempt not counted)", u)
	}
	if !failed.Load() {
		t.Fatal("no leg failed")
	}
	if _, metrics := c.get(t, "/metrics"); !strings.Contains(metrics, "tandem_router_retries_total 1") {
		t.Errorf("/metrics does not count one retry")
	}
	if legs := len(d1.got) + len(d2.got); legs != 4 {
		t.Errorf("decode workers got %d legs, want 4 (3 samples, one retried)", legs)
	}
}

// A client that goes away cancels every sample of its list.
func TestPromptListClientAbortCancelsEverySample(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { d.waitCancel(r) }
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL+"/v1/completions",
			strings.NewReader(`{"prompt":[[1],[2]],"n":2,"stream":true}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for range 4 {
		d.nextLeg(t)
	}
	cancel()
	<-done
	rooms := map[string]bool{}
	for range 4 {
		rooms[d.expectCancel(t)] = true
	}
	if len(rooms) != 4 {
		t.Errorf("cancelled rooms %v, want the 4 samples'", rooms)
	}
}

// Text prompts of a list in the counting band are each counted by a
// decode worker's /tokenize and decided on their own count.
func TestPromptListCountsEachPrompt(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", promptEcho)
	var counts atomic.Int64
	d.count = func(body []byte) int {
		counts.Add(1)
		if bytes.Contains(body, []byte("long")) {
			return 20
		}
		return 3
	}
	c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(8))
	var list []string
	for i := range 10 {
		w := "short"
		if i%5 == 4 {
			w = "long"
		}
		list = append(list, fmt.Sprintf(`"%s prompt %02d"`, w, i)) // a bound of 17 or 16 tokens: in the band
	}
	status, resp := c.post(t, "/v1/completions", `{"prompt":[`+strings.Join(list, ",")+`]}`)
	if status != 200 {
		t.Fatalf("POST = %d %s", status, resp)
	}
	if texts, _ := listAnswer(t, resp, false); len(texts) != 10 || texts[4] != list[4]+"|s0|n1" {
		t.Errorf("choices %v, want 10 in prompt order", texts)
	}
	if n := counts.Load(); n != 10 {
		t.Errorf("%d /tokenize calls, want one per prompt (10)", n)
	}
	legs := map[string]int{}
	for seen := 0; seen < 10; {
		if l := d.nextLeg(t); l.path == "/v1/completions" { // the fake lists /tokenize calls too
			legs[l.hdr.Get(router.HeaderLeg)]++
			seen++
		}
	}
	if legs["local"] != 8 || legs["decode"] != 2 {
		t.Errorf("decode legs by kind %v, want 8 local, 2 disaggregated", legs)
	}
	// The fake decode answers without waiting for prefill, so the router may
	// end a disaggregated request, and cancel its prefill leg, before that
	// leg reached the fake (CI's -race run saw 0 of 2): every prefill leg
	// that did arrive must be a long prompt's.
	for n := 0; ; n++ {
		select {
		case l := <-p.got:
			if n >= 2 || !bytes.Contains(l.body, []byte("long")) {
				t.Errorf("prefill leg %d: %s, want at most the two long prompts", n, l.body)
			}
			continue
		default:
		}
		break
	}
}
