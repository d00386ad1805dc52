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
	obj                object
	n                  int
	seed               *int64
	stream             bool
	includeUsage       bool
	wantPromptLogprobs bool
	echoLogprobs       bool // completions with echo and logprobs: the legacy block starts with the prompt
	requestID          string
	mergedID           string   // id of the merged answer when n > 1
	decision           decision // selective disaggregation's choice, made once for every sample
}

// parseRequest reads the members the router acts on; requestID is the
// id wrap gave the request. Errors are 400s in
// OpenAI's shape naming the member.
func parseRequest(ep endpoint, body []byte, requestID string) (*clientRequest, *openai.Error) {
	obj, err := parseObject(body)
	if err != nil {
		return nil, openai.Invalid("", openai.CodeInvalidJSON, "The request body must be one JSON object: %v.", err)
	}
	r := &clientRequest{ep: ep, body: body, obj: obj, n: 1, requestID: requestID,
		mergedID: ep.idPrefix + randomHex(12)}
	if raw, ok := obj.get("n"); ok {
		n, ok := jsonInt(raw)
		if !ok || n < 1 || n > openai.MaxN {
			return nil, openai.Invalid("n", openai.CodeInvalidValue, "n must be an integer from 1 to %d, got %s.", openai.MaxN, httpx.Clip(string(raw), 40))
		}
		r.n = int(n)
	}
	if raw, ok := obj.get("seed"); ok {
		s, ok := jsonInt(raw)
		if !ok {
			return nil, openai.Invalid("seed", openai.CodeInvalidType, "seed must be an integer, got %s.", httpx.Clip(string(raw), 40))
		}
		r.seed = &s
	}
	if raw, ok := obj.get("stream"); ok {
		if err := json.Unmarshal(raw, &r.stream); err != nil {
			return nil, openai.Invalid("stream", openai.CodeInvalidType, "stream must be a boolean, got %s.", httpx.Clip(string(raw), 40))
		}
	}
	if raw, ok := obj.get("stream_options"); ok {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if json.Unmarshal(raw, &so) == nil { // a bad value is the workers' to reject
			r.includeUsage = so.IncludeUsage
		}
	}
	r.wantPromptLogprobs = wantsPromptLogprobs(ep, obj)
	r.echoLogprobs = wantsEchoLogprobs(ep, obj)
	return r, nil
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
func wantsPromptLogprobs(ep endpoint, obj object) bool {
	if raw, ok := obj.get("prompt_logprobs"); ok {
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
func wantsEchoLogprobs(ep endpoint, obj object) bool {
	if ep.chat {
		return false
	}
	echo, ok := obj.get("echo")
	if !ok || string(bytes.TrimSpace(echo)) != "true" {
		return false
	}
	lp, ok := obj.get("logprobs")
	return ok && string(bytes.TrimSpace(lp)) != "false"
}

// bodies returns sample i's decode and prefill bodies. With n = 1 the
// decode body is the client's, unchanged; with n > 1 each sample asks for
// n = 1 and, when the client gave a seed, seed + i. The prefill body is the
// decode body with stream false, max_tokens 1 (and max_completion_tokens 1
// for chat, or when given) and no stream_options.
func (r *clientRequest) bodies(i int) (decode, prefill []byte) {
	o := r.obj
	decode = r.body
	if r.n > 1 {
		o = o.set("n", json.RawMessage("1"))
		if r.seed != nil {
			o = o.set("seed", json.RawMessage(strconv.FormatInt(*r.seed+int64(i), 10)))
		}
		decode = o.marshal()
	}
	p := o.set("stream", json.RawMessage("false")).set("max_tokens", json.RawMessage("1")).del("stream_options")
	if _, given := o.get("max_completion_tokens"); given || r.ep.chat {
		p = p.set("max_completion_tokens", json.RawMessage("1"))
	}
	return decode, p.marshal()
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
