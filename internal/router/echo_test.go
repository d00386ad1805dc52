package router_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// echoPLP is a prefill worker's prompt_logprobs for the 3-token prompt
// "a b c" (ids 11 12 13), as a worker lays them out.
const echoPLP = `[null,{"12":{"logprob":-2.5,"decoded_token":" b"}},{"13":{"logprob":-3.25,"decoded_token":" c"}}]`

// echoPrefillAnswer is the prefill leg's answer to an echo+logprobs request.
const echoPrefillAnswer = `{"id":"cmpl-p","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"a b c x","logprobs":{"tokens":["a"," b"," c"," x"],"token_logprobs":[null,-2.5,-3.25,-0.1],"top_logprobs":[null,null,null,{" x":-0.1}],"text_offset":[0,1,3,5]},"finish_reason":"length","prompt_logprobs":` + echoPLP + `}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n"

// echoDecodeChoice is a decode worker's choice for echo with logprobs: the
// legacy block starts with the prompt's tokens, whose logprobs it cannot
// know (null).
func echoDecodeChoice(tlp string) string {
	return `{"index":0,"text":"a b c d e","logprobs":{"tokens":["a"," b"," c"," d"," e"],"token_logprobs":` + tlp +
		`,"top_logprobs":[null,null,null,{" d":-0.5},{" e":-0.75}],"text_offset":[0,1,3,5,7]},"finish_reason":"length"`
}

func echoDecodeAnswer(tlp, extra string) string {
	return `{"id":"cmpl-d","object":"text_completion","created":2,"model":"m","choices":[` + echoDecodeChoice(tlp) + extra +
		`}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\n"
}

// Streamed: the opening chunk echoes the prompt with its part of the
// legacy block, then one chunk per token.
func echoStream(openingTLP, extra string) string {
	return `data: {"id":"cmpl-d","object":"text_completion","created":2,"model":"m","choices":[{"index":0,"text":"a b c","logprobs":{"tokens":["a"," b"," c"],"token_logprobs":` +
		openingTLP + `,"top_logprobs":[null,null,null],"text_offset":[0,1,3]},"finish_reason":null` + extra + `}]}` + "\n\n" +
		`data: {"id":"cmpl-d","object":"text_completion","created":2,"model":"m","choices":[{"index":0,"text":" d","logprobs":{"tokens":[" d"],"token_logprobs":[-0.5],"top_logprobs":[{" d":-0.5}],"text_offset":[5]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"cmpl-d","object":"text_completion","created":2,"model":"m","choices":[{"index":0,"text":" e","logprobs":{"tokens":[" e"],"token_logprobs":[-0.75],"top_logprobs":[{" e":-0.75}],"text_offset":[7]},"finish_reason":"length"}]}` + "\n\n" +
		"data: [DONE]\n\n"
}

// TestEchoLogprobsAreFilled: with echo and logprobs the prompt's entries of
// decode's token_logprobs (null there) are filled from prefill's
// prompt_logprobs, entry 0 stays null, and every other byte is decode's.
func TestEchoLogprobsAreFilled(t *testing.T) {
	plpMember := `,"prompt_logprobs":` + echoPLP
	cases := []struct {
		name, client, decode, want string
		streamed                   bool
	}{
		{
			name:   "non-streamed",
			client: `{"prompt":"a b c","echo":true,"logprobs":1,"max_tokens":2}`,
			decode: echoDecodeAnswer(`[null,null,null,-0.5,-0.75]`, ""),
			want:   echoDecodeAnswer(`[null,-2.5,-3.25,-0.5,-0.75]`, plpMember),
		},
		{
			name:   "non-streamed, also asking prompt_logprobs",
			client: `{"prompt":"a b c","echo":true,"logprobs":0,"prompt_logprobs":1,"max_tokens":2}`,
			decode: echoDecodeAnswer(`[null,null,null,-0.5,-0.75]`, ""),
			want:   echoDecodeAnswer(`[null,-2.5,-3.25,-0.5,-0.75]`, plpMember),
		},
		{
			name:   "values decode sent stand",
			client: `{"prompt":"a b c","echo":true,"logprobs":1,"max_tokens":2}`,
			decode: echoDecodeAnswer(`[null,-9,null,-0.5,-0.75]`, ""),
			want:   echoDecodeAnswer(`[null,-9,-3.25,-0.5,-0.75]`, plpMember),
		},
		{
			name:   "prompt_logprobs without echo: the block is decode's",
			client: `{"prompt":"a b c","logprobs":1,"prompt_logprobs":1,"max_tokens":2}`,
			decode: echoDecodeAnswer(`[null,null,null,-0.5,-0.75]`, ""),
			want:   echoDecodeAnswer(`[null,null,null,-0.5,-0.75]`, plpMember),
		},
		{
			name:     "streamed: the opening chunk",
			client:   `{"prompt":"a b c","echo":true,"logprobs":1,"max_tokens":2,"stream":true}`,
			decode:   echoStream(`[null,null,null]`, ""),
			want:     echoStream(`[null,-2.5,-3.25]`, plpMember),
			streamed: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			p := newFake(t, "prefill", func(w http.ResponseWriter, r *http.Request, _ []byte) {
				<-release // decode's answer must wait for prefill's logprobs
				writeJSONBody(w, 200, echoPrefillAnswer)
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

// TestEchoLogprobsAreFilledMerged: with n > 1 every merged choice gets its
// own sample's prompt logprobs, non-streamed and streamed.
func TestEchoLogprobsAreFilledMerged(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		p := newFake(t, "prefill", answer(200, echoPrefillAnswer))
		var d *fake
		if streamed {
			d = newFake(t, "decode", stream(strings.SplitAfter(echoStream(`[null,null,null]`, ""), "\n\n")...))
		} else {
			d = newFake(t, "decode", answer(200, echoDecodeAnswer(`[null,null,null,-0.5,-0.75]`, "")))
		}
		c := newCluster(t, []*fake{p}, []*fake{d}, nil)
		client := `{"prompt":"a b c","echo":true,"logprobs":1,"max_tokens":2,"n":2,"stream":` + map[bool]string{false: "false", true: "true"}[streamed] + `}`
		status, body := c.post(t, "/v1/completions", client)
		if status != 200 {
			t.Fatalf("POST %s = %d %s", client, status, body)
		}
		type choice struct {
			Index    int `json:"index"`
			Logprobs *struct {
				TokenLogprobs []*float64 `json:"token_logprobs"`
			} `json:"logprobs"`
		}
		got := map[int][]*float64{}
		docs := []string{body}
		if streamed {
			docs = nil
			for _, ev := range strings.Split(body, "\n\n") {
				if d, ok := strings.CutPrefix(ev, "data: "); ok && d != "[DONE]" {
					docs = append(docs, d)
				}
			}
		}
		for _, doc := range docs {
			var r struct {
				Choices []choice `json:"choices"`
			}
			if err := json.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatalf("streamed %v: %q does not decode: %v", streamed, doc, err)
			}
			for _, ch := range r.Choices {
				if ch.Logprobs != nil {
					got[ch.Index] = append(got[ch.Index], ch.Logprobs.TokenLogprobs...)
				}
			}
		}
		f := func(x float64) *float64 { return &x }
		want := []*float64{nil, f(-2.5), f(-3.25), f(-0.5), f(-0.75)}
		for i := range 2 {
			if !reflect.DeepEqual(got[i], want) {
				t.Errorf("streamed %v: choice %d token_logprobs %s, want %s", streamed, i, fmtPtrs(got[i]), fmtPtrs(want))
			}
		}
	}
}

func fmtPtrs(xs []*float64) string {
	b, _ := json.Marshal(xs)
	return string(b)
}
