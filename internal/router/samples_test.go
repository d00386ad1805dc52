package router_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// seedEcho is a decode gen that answers with the seed it got as the text,
// streamed or not, with usage: prompt 3, completion 2.
func seedEcho(w http.ResponseWriter, r *http.Request, body []byte) {
	var req struct {
		Seed   int64 `json:"seed"`
		N      int   `json:"n"`
		Stream bool  `json:"stream"`
	}
	json.Unmarshal(body, &req)
	if !req.Stream {
		writeJSONBody(w, 200, fmt.Sprintf(`{"id":"cmpl-d%d","object":"text_completion","created":5,"model":"m","choices":[{"index":0,"text":"s%d n%d","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":%d}}}`+"\n", req.Seed, req.Seed, req.N, req.Seed%2))
		return
	}
	writeEvents(w,
		fmt.Sprintf("data: {\"id\":\"cmpl-d%d\",\"object\":\"text_completion\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"s%d\",\"logprobs\":null,\"finish_reason\":null}]}\n\n", req.Seed, req.Seed),
		": comment\n\n",
		fmt.Sprintf("data: {\"id\":\"cmpl-d%d\",\"object\":\"text_completion\",\"created\":5,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n", req.Seed),
		"data: [DONE]\n\n")
}

func TestNSamplesAreMergedNotStreamed(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", seedEcho)
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, body := c.post(t, "/v1/completions", `{"prompt":"x","n":3,"seed":10}`)
	if status != 200 {
		t.Fatalf("POST n=3 = %d %s", status, body)
	}
	var doc struct {
		ID      string `json:"id"`
		Created int    `json:"created"`
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			TotalTokens         int `json:"total_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("merged answer %s: %v", body, err)
	}
	if len(doc.Choices) != 3 {
		t.Fatalf("merged answer has %d choices, want 3: %s", len(doc.Choices), body)
	}
	for i, ch := range doc.Choices {
		if want := fmt.Sprintf("s%d n1", 10+i); ch.Index != i || ch.Text != want {
			t.Errorf("choices[%d] = index %d text %q, want index %d text %q (seed+i, n=1)", i, ch.Index, ch.Text, i, want)
		}
	}
	u := doc.Usage
	if u.PromptTokens != 3 || u.CompletionTokens != 6 || u.TotalTokens != 9 || u.PromptTokensDetails.CachedTokens != 1 {
		t.Errorf("merged usage = %+v, want prompt 3, completion 6, total 9, cached 1", u)
	}
	if !strings.HasPrefix(doc.ID, "cmpl-") || len(doc.ID) != len("cmpl-")+24 || doc.Created != 5 {
		t.Errorf("merged id, created = %q, %d; want the router's own cmpl- id and the first answer's created", doc.ID, doc.Created)
	}
	rooms := map[string]bool{}
	for range 3 {
		pl, dl := p.nextLeg(t), d.nextLeg(t)
		rooms[pl.hdr.Get("X-Tandem-Room")] = true
		rooms[dl.hdr.Get("X-Tandem-Room")] = true
		if !strings.Contains(string(pl.body), `"n":1`) {
			t.Errorf("prefill leg body %s, want n 1", pl.body)
		}
	}
	if len(rooms) != 3 {
		t.Errorf("3 samples used %d distinct rooms, want 3 (one per sample, shared by its two legs)", len(rooms))
	}
}

func TestNSamplesAreMergedStreamed(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", seedEcho)
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, body := c.post(t, "/v1/completions", `{"prompt":"x","n":2,"seed":4,"stream":true,"stream_options":{"include_usage":true}}`)
	if status != 200 {
		t.Fatalf("POST n=2 stream = %d %s", status, body)
	}
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if len(events) != 4 || events[3] != "data: [DONE]" {
		t.Fatalf("merged stream = %q, want two token events, one usage chunk, [DONE]", events)
	}
	type chunk struct {
		ID      string `json:"id"`
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	var got []string
	ids := map[string]bool{}
	for _, ev := range events[:3] {
		var ch chunk
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		ids[ch.ID] = true
		for _, c := range ch.Choices {
			got = append(got, fmt.Sprintf("%d:%s", c.Index, c.Text))
		}
		if ch.Usage != nil && (ch.Usage.CompletionTokens != 4 || ch.Usage.TotalTokens != 7 || len(ch.Choices) != 0) {
			t.Errorf("usage chunk %s, want completion 4, total 7, no choices", ev)
		}
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "0:s4,1:s5" {
		t.Errorf("streamed choices = %v, want 0:s4 and 1:s5", got)
	}
	if len(ids) != 1 {
		t.Errorf("merged stream carries ids %v, want one", ids)
	}
	if !strings.Contains(events[2], `"usage"`) {
		t.Errorf("third event %q, want the merged usage chunk", events[2])
	}
}

func TestOneFailedSampleFailsTheRequest(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", nil)
	others := make(chan struct{}, 2)
	d.gen = func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"seed":1`) {
			<-others // fail once the other samples are running
			<-others
			writeJSONBody(w, 500, `{"error":{"message":"sample one broke"}}`)
			return
		}
		others <- struct{}{}
		d.waitCancel(r) // the other samples are cancelled
	}
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, body := c.post(t, "/v1/completions", `{"prompt":"x","n":3,"seed":0}`)
	if msg, _, _ := errorDoc(t, body); status != 502 || !strings.Contains(msg, "sample one broke") {
		t.Errorf("POST n=3 with one failing sample = %d %q, want one 502 with its message", status, msg)
	}
	d.expectCancel(t)
	d.expectCancel(t)
}
