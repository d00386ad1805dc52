package router

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"

	"tandem/internal/api/httpx"
	"tandem/internal/api/openai"
	"tandem/internal/router/answer"
)

// endpoint is one generation endpoint the router fronts.
type endpoint struct {
	name     string // metrics label
	path     string // the same path on the router and on the workers
	chat     bool
	idPrefix string // of the id of merged n > 1 answers
}

// The generation endpoints.
var (
	endpointCompletions = endpoint{name: "completions", path: "/v1/completions", idPrefix: "cmpl-"}
	endpointChat        = endpoint{name: "chat", path: "/v1/chat/completions", chat: true, idPrefix: "chatcmpl-"}
)

// clientRequest is a client's generation request as the router reads it:
// only what it needs to split and merge samples. Everything else is the
// workers' to check.
type clientRequest struct {
	ep                 endpoint
	body               []byte // exactly as the client sent it
	obj                answer.Object
	n                  int               // choices per prompt
	prompts            []json.RawMessage // a completions list of several prompts, each as the client wrote it; nil otherwise
	samples            int               // max(1, len(prompts)) * n: one room each
	seed               *int64
	stream             bool
	includeUsage       bool
	wantPromptLogprobs bool
	echoLogprobs       bool // completions with echo and logprobs: the legacy block starts with the prompt
	requestID          string
	mergedID           string     // id of the merged answer when samples > 1
	decisions          []decision // selective disaggregation's choice for each prompt's samples
}

// parseRequest reads the members the router acts on; requestID is the
// id wrap gave the request. Errors are 400s in OpenAI's shape naming the
// member. The handler checks the body with decodeAsWorkers first.
func parseRequest(ep endpoint, body []byte, requestID string) (*clientRequest, *openai.Error) {
	obj, err := answer.ParseObject(body)
	if err != nil {
		return nil, openai.Invalid("", openai.CodeInvalidJSON, "The request body must be one JSON object: %v.", err)
	}
	r := &clientRequest{ep: ep, body: body, obj: obj, n: 1, requestID: requestID,
		mergedID: ep.idPrefix + randomHex(12)}
	if raw, ok := obj.Get("n"); ok {
		n, ok := jsonInt(raw)
		if !ok || n < 1 || n > openai.MaxN {
			return nil, openai.Invalid("n", openai.CodeInvalidValue, "n must be an integer from 1 to %d, got %s.", openai.MaxN, httpx.Clip(string(raw), 40))
		}
		r.n = int(n)
	}
	if raw, ok := obj.Get("seed"); ok {
		s, ok := jsonInt(raw)
		if !ok {
			return nil, openai.Invalid("seed", openai.CodeInvalidType, "seed must be an integer, got %s.", httpx.Clip(string(raw), 40))
		}
		r.seed = &s
	}
	if raw, ok := obj.Get("stream"); ok {
		if err := json.Unmarshal(raw, &r.stream); err != nil {
			return nil, openai.Invalid("stream", openai.CodeInvalidType, "stream must be a boolean, got %s.", httpx.Clip(string(raw), 40))
		}
	}
	if raw, ok := obj.Get("stream_options"); ok {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if json.Unmarshal(raw, &so) == nil { // a bad value is the workers' to reject
			r.includeUsage = so.IncludeUsage
		}
	}
	r.wantPromptLogprobs = wantsPromptLogprobs(ep, obj)
	r.echoLogprobs = wantsEchoLogprobs(ep, obj)
	if !ep.chat {
		ps, e := promptList(obj, r.n)
		if e != nil {
			return nil, e
		}
		r.prompts = ps
	}
	r.samples = max(1, len(r.prompts)) * r.n
	return r, nil
}

// decodeAsWorkers checks body with the decoder the workers (and `tandem
// serve`) use, so that a malformed request gets the very 400 serve would
// give it. What depends on the model (its name, the context length, the
// chat template) is the workers' to check, and their 4xx answers reach the
// client as they wrote them (legError.clientError).
func decodeAsWorkers(ep endpoint, body []byte) *openai.Error {
	var e *openai.Error
	if ep.chat {
		_, e = openai.DecodeChatRequest(body)
	} else {
		_, e = openai.DecodeCompletionRequest(body)
	}
	return e
}

// promptList returns the prompts of a completions body whose prompt is a
// list of several prompts (strings, or arrays of token ids), each element's
// bytes as the client sent them; nil for one prompt (a string, an array of
// token ids, or a list of one), which goes to the workers as it is. A list
// is checked as a worker checks it, with the same 400s (openai's limits: at
// most MaxPrompts prompts, MaxCompletionChoices prompts times n, one kind
// of element): once split, no worker sees the whole list.
func promptList(obj answer.Object, n int) ([]json.RawMessage, *openai.Error) {
	raw, ok := obj.Get("prompt")
	if !ok {
		return nil, nil
	}
	items, err := answer.ParseArray(raw)
	if err != nil || len(items) < 2 {
		return nil, nil // one prompt, or not a list: the worker's to read and check
	}
	if s := bytes.TrimSpace(items[0]); len(s) == 0 || (s[0] != '"' && s[0] != '[') {
		return nil, nil // an array of token ids: one prompt
	}
	check := answer.Object{{Key: "prompt", Val: raw}, {Key: "n", Val: json.RawMessage(strconv.Itoa(n))}}
	if _, e := openai.DecodeCompletionRequest(check.Marshal()); e != nil {
		return nil, e
	}
	return items, nil
}

// jsonInt reads a JSON number with an integral value that fits an int64.
func jsonInt(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// wantsPromptLogprobs reports whether the client asked for prompt
// logprobs: any prompt_logprobs but null or false (0 asks for the prompt
// tokens' own logprobs, as in vLLM), or (completions) echo together with
// logprobs.
func wantsPromptLogprobs(ep endpoint, obj answer.Object) bool {
	if raw, ok := obj.Get("prompt_logprobs"); ok {
		s := string(bytes.TrimSpace(raw))
		if s != "null" && s != "false" {
			return true
		}
	}
	return wantsEchoLogprobs(ep, obj)
}

// wantsEchoLogprobs reports whether a completions request asks for echo
// together with logprobs, so that the legacy logprobs block of the answer
// starts with the prompt's tokens.
func wantsEchoLogprobs(ep endpoint, obj answer.Object) bool {
	if ep.chat {
		return false
	}
	echo, ok := obj.Get("echo")
	if !ok || string(bytes.TrimSpace(echo)) != "true" {
		return false
	}
	lp, ok := obj.Get("logprobs")
	return ok && string(bytes.TrimSpace(lp)) != "false"
}

// promptOf returns the prompt index of sample i: samples i*n .. i*n+n-1
// are prompt i's n choices, as the choice indexes of `tandem serve`.
func (r *clientRequest) promptOf(i int) int { return i / r.n }

// promptObj returns the request with prompt p of a list as its only
// prompt (the element's bytes as the client sent them), or the request
// itself when its prompt is not a list of several.
func (r *clientRequest) promptObj(p int) answer.Object {
	if r.prompts == nil {
		return r.obj
	}
	return r.obj.Set("prompt", r.prompts[p])
}

// bodies returns sample i's decode and prefill bodies. With one sample the
// decode body is the client's, unchanged; otherwise each sample asks for
// its own prompt of a list (promptOf), n = 1 and, when the client gave a
// seed, seed + i (i = prompt*n + j, as `tandem serve` seeds its choices).
// The prefill body is the decode body with stream false, max_tokens 1 (and
// max_completion_tokens 1 for chat, or when given) and no stream_options.
func (r *clientRequest) bodies(i int) (decode, prefill []byte) {
	o := r.promptObj(r.promptOf(i))
	decode = r.body
	if r.samples > 1 {
		o = o.Set("n", json.RawMessage("1"))
		if r.seed != nil {
			o = o.Set("seed", json.RawMessage(strconv.FormatInt(*r.seed+int64(i), 10)))
		}
		decode = o.Marshal()
	}
	p := o.Set("stream", json.RawMessage("false")).Set("max_tokens", json.RawMessage("1")).Del("stream_options")
	if _, given := o.Get("max_completion_tokens"); given || r.ep.chat {
		p = p.Set("max_completion_tokens", json.RawMessage("1"))
	}
	return decode, p.Marshal()
}

// newRoomID mints a room id: 128 bits from crypto/rand as 32 lower-case
// hex digits. One per sample; a retry gets a new one.
func newRoomID() string { return randomHex(16) }

// randomHex returns n random bytes from crypto/rand in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b)
}
