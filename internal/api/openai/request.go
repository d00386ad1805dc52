package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on request fields.
const (
	MaxN          = 8   // choices per request
	MaxLogprobs   = 20  // logprobs (completions) and top_logprobs (chat)
	MaxStop       = 4   // stop strings
	MaxStopBytes  = 512 // bytes in one stop string
	MaxStopTokens = 64  // entries of stop_token_ids
	MaxPrompts    = 64  // prompts in one completions request
	// MaxCompletionChoices bounds prompts times n in one completions request.
	MaxCompletionChoices = 64
	MaxTemperature       = 2 // OpenAI's documented range is [0, 2]
	MaxPenalty           = 2 // presence_penalty and frequency_penalty are in [-2, 2]
	maxTokenID           = 1<<31 - 1
)

// Common holds the request fields both endpoints share, decoded and
// range-checked. Optional numbers are pointers: nil means not given, and the
// server applies its defaults.
type Common struct {
	Model string // "" when not given
	// MaxTokens is max_completion_tokens, or else max_tokens; 0 when neither
	// was given. MaxTokensParam names the field it came from.
	MaxTokens      int
	MaxTokensParam string

	Temperature       *float64 // [0, 2]
	TopP              *float64 // (0, 1]
	TopK              int      // <= 0: off
	MinP              float64  // [0, 1]
	Seed              *int64
	Stop              []string // at most MaxStop, each 1..MaxStopBytes bytes
	StopTokenIDs      []int32  // stop_token_ids (extension): end on any of these tokens
	N                 int      // 1..MaxN (1 when not given)
	PresencePenalty   float64  // [-2, 2]
	FrequencyPenalty  float64  // [-2, 2]
	RepetitionPenalty *float64 // > 0 (extension; 1 is off)
	Stream            bool
	IncludeUsage      bool // stream_options.include_usage
	IgnoreEOS         bool // extension: keep generating past end-of-generation tokens
	// PromptLogprobs is prompt_logprobs (vLLM's extension): 0..MaxLogprobs
	// turns prompt logprobs on; nil when not given. The server reports the
	// prompt's own tokens only, so values above 0 add nothing today.
	PromptLogprobs *int

	// Constraint is the structured-output constraint (response_format,
	// structured_outputs, guided_*, or llama.cpp's json_schema and
	// grammar); nil for unconstrained output. See constraint.go.
	Constraint *Constraint
	// LogitBias is logit_bias: token id -> bias in [-100, 100]; nil when
	// absent or empty.
	LogitBias map[int32]float32
	// MinTokens is min_tokens (vLLM's extension): end-of-generation and
	// stop tokens are held off until this many tokens are generated.
	MinTokens int
}

// CompletionRequest is a decoded POST /v1/completions body. Prompts holds
// the prompts (at least one; several when the prompt member is a list of
// strings or of token-id arrays: each gets N choices, choice index
// i*N+j for prompt i). Prompt, PromptTokens and TokenPrompt repeat the
// first prompt.
type CompletionRequest struct {
	Common
	Prompts      []CompletionPrompt
	Prompt       string
	PromptTokens []int32
	TokenPrompt  bool
	Logprobs     *int // 0..MaxLogprobs; nil: no logprobs
	Echo         bool
}

// CompletionPrompt is one completions prompt: Text, or Tokens when
// Tokenized.
type CompletionPrompt struct {
	Text      string
	Tokens    []int32
	Tokenized bool
}

// Message is one chat message: its role (system, user or assistant;
// "developer" is read as system) and its text. Content given as an array of
// text parts is joined with "\n".
type Message struct {
	Role    string
	Content string
	// ToolCalls are an assistant message's tool calls; ToolCallID is the
	// call a tool message answers (see tools.go).
	ToolCalls  []ToolCall
	ToolCallID string
	// Reasoning is an assistant message's reasoning_content (as this
	// server returns it), given back in a later request: templates that
	// render past reasoning read it (gpt-oss's as "thinking").
	Reasoning string
}

// ChatRequest is a decoded POST /v1/chat/completions body.
type ChatRequest struct {
	Common
	Messages    []Message
	Logprobs    bool
	TopLogprobs int // 0..MaxLogprobs, only with Logprobs
	// ChatTemplateKwargs are extra variables for the chat template
	// (chat_template_kwargs, as vLLM takes them: {"enable_thinking":
	// false} for Qwen3); nil when absent or null.
	ChatTemplateKwargs map[string]json.RawMessage
	ToolFields
}

// harmless lists, for fields that would change results and are not
// implemented, the values that leave results unchanged (null is always
// harmless). Any other value is a 400 naming the field.
var harmless = map[string][]string{
	"functions":              {`[]`},
	"function_call":          {`"none"`, `"auto"`},
	"suffix":                 {`""`},
	"best_of":                {`1`},
	"audio":                  {},
	"modalities":             {`["text"]`},
	"prediction":             {},
	"typical_p":              {`1`, `1.0`},
	"mirostat":               {`0`},
	"add_generation_prompt":  {`true`},
	"continue_final_message": {`false`},
	"chat_template":          {},
	"add_special_tokens":     {},
}

// harmlessOrder is harmless's keys, sorted, so that the first offending
// field reported does not depend on map order.
var harmlessOrder = func() []string {
	keys := make([]string, 0, len(harmless))
	for k := range harmless {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}()

// fields is a request body split into its top-level members.
type fields map[string]json.RawMessage

func split(body []byte) (fields, *Error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, Invalid("", CodeInvalidJSON, "The request body is empty; send a JSON object.")
	}
	if body[0] != '{' {
		return nil, Invalid("", CodeInvalidJSON, "The request body must be a JSON object.")
	}
	var f fields
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, Invalid("", CodeInvalidJSON, "We could not parse the JSON body of your request: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
	for _, name := range harmlessOrder {
		ok := harmless[name]
		raw, present := f[name]
		if !present || isNull(raw) {
			continue
		}
		if !matchesAny(raw, ok) {
			return nil, Invalid(name, CodeUnsupported, "The parameter %s is not supported by this server.", name)
		}
	}
	return f, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func matchesAny(raw json.RawMessage, allowed []string) bool {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	for _, a := range allowed {
		var w any
		if json.Unmarshal([]byte(a), &w) == nil && reflect.DeepEqual(v, w) {
			return true
		}
	}
	return false
}

func typeError(param, want string, raw json.RawMessage) *Error {
	return Invalid(param, CodeInvalidType, "%s must be %s, got %s.", param, want, JSONKind(raw))
}

func (f fields) get(name string) (json.RawMessage, bool) {
	raw, ok := f[name]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

func str(param string, raw json.RawMessage) (string, *Error) {
	var s string
	if JSONKind(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
		return "", typeError(param, "a string", raw)
	}
	return s, nil
}

func boolean(param string, raw json.RawMessage) (bool, *Error) {
	var b bool
	if JSONKind(raw) != "a boolean" || json.Unmarshal(raw, &b) != nil {
		return false, typeError(param, "a boolean", raw)
	}
	return b, nil
}

func number(param string, raw json.RawMessage) (float64, *Error) {
	var x float64
	if JSONKind(raw) != "a number" {
		return 0, typeError(param, "a number", raw)
	}
	if err := json.Unmarshal(raw, &x); err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, Invalid(param, CodeInvalidValue, "%s must be a finite number, got %s.", param, clip(string(raw)))
	}
	return x, nil
}

func integer(param string, raw json.RawMessage) (int64, *Error) {
	if JSONKind(raw) != "a number" {
		return 0, typeError(param, "an integer", raw)
	}
	s := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Accept integral values written as floats (1.0, 1e3) within range.
		x, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, Invalid(param, CodeInvalidType, "%s must be an integer, got %s.", param, clip(s))
		}
		n = int64(x)
	}
	return n, nil
}

// intIn decodes an integer in [lo, hi].
func intIn(param string, raw json.RawMessage, lo, hi int64) (int, *Error) {
	n, e := integer(param, raw)
	if e != nil {
		return 0, e
	}
	if n < lo || n > hi {
		return 0, Invalid(param, CodeInvalidValue, "%s must be in %d..%d, got %d.", param, lo, hi, n)
	}
	return int(n), nil
}

func clip(s string) string {
	if len(s) > 40 {
		s = s[:40]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return s + "…"
	}
	return s
}

// common decodes the shared fields.
func (f fields) common(c *Common) *Error {
	c.N = 1
	if raw, ok := f.get("model"); ok {
		s, e := str("model", raw)
		if e != nil {
			return e
		}
		c.Model = s
	}
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		raw, ok := f.get(name)
		if !ok {
			continue
		}
		n, e := integer(name, raw)
		if e != nil {
			return e
		}
		if n < 1 {
			return Invalid(name, CodeInvalidValue, "%s must be at least 1, got %d.", name, n)
		}
		if n > math.MaxInt32 {
			// Said here, with the value sent: the server compares what
			// fits an int with the context length.
			return Invalid(name, CodeInvalidValue, "%s is %d, longer than any context this server takes (at most %d tokens; "+
				"GET /v1/models gives the model's max_model_len).", name, n, math.MaxInt32)
		}
		c.MaxTokens, c.MaxTokensParam = int(n), name
	}
	type rangeField struct {
		name   string
		dst    **float64
		lo, hi float64
		loOpen bool
	}
	var minP, presence, frequency *float64
	for _, r := range []rangeField{
		{"temperature", &c.Temperature, 0, MaxTemperature, false},
		{"top_p", &c.TopP, 0, 1, true},
		{"min_p", &minP, 0, 1, false},
		{"presence_penalty", &presence, -MaxPenalty, MaxPenalty, false},
		{"frequency_penalty", &frequency, -MaxPenalty, MaxPenalty, false},
		{"repetition_penalty", &c.RepetitionPenalty, 0, math.MaxFloat32, true},
	} {
		raw, ok := f.get(r.name)
		if !ok {
			continue
		}
		x, e := number(r.name, raw)
		if e != nil {
			return e
		}
		if x > r.hi || x < r.lo || (r.loOpen && x == r.lo) {
			lb := "["
			if r.loOpen {
				lb = "("
			}
			hi := strconv.FormatFloat(r.hi, 'g', -1, 64)
			if r.hi == math.MaxFloat32 {
				hi = "inf"
			}
			return Invalid(r.name, CodeInvalidValue, "%s must be in %s%g, %s], got %g.", r.name, lb, r.lo, hi, x)
		}
		*r.dst = &x
	}
	if minP != nil {
		c.MinP = *minP
	}
	if presence != nil {
		c.PresencePenalty = *presence
	}
	if frequency != nil {
		c.FrequencyPenalty = *frequency
	}
	if raw, ok := f.get("top_k"); ok {
		n, e := intIn("top_k", raw, -1, math.MaxInt32)
		if e != nil {
			return e
		}
		c.TopK = n
	}
	if raw, ok := f.get("seed"); ok {
		n, e := integer("seed", raw)
		if e != nil {
			return e
		}
		c.Seed = &n
	}
	if raw, ok := f.get("prompt_logprobs"); ok {
		n, e := intIn("prompt_logprobs", raw, 0, MaxLogprobs)
		if e != nil {
			return e
		}
		c.PromptLogprobs = &n
	}
	if raw, ok := f.get("n"); ok {
		n, e := intIn("n", raw, 1, MaxN)
		if e != nil {
			return e
		}
		c.N = n
	}
	if raw, ok := f.get("stop"); ok {
		stop, e := decodeStop(raw)
		if e != nil {
			return e
		}
		c.Stop = stop
	}
	if raw, ok := f.get("stop_token_ids"); ok {
		var ids []json.RawMessage
		if JSONKind(raw) != "an array" || json.Unmarshal(raw, &ids) != nil {
			return typeError("stop_token_ids", "an array of token ids", raw)
		}
		if len(ids) > MaxStopTokens {
			return Invalid("stop_token_ids", CodeInvalidValue, "stop_token_ids has %d entries; at most %d are allowed.", len(ids), MaxStopTokens)
		}
		for i, r := range ids {
			n, e := intIn(fmt.Sprintf("stop_token_ids[%d]", i), r, 0, maxTokenID)
			if e != nil {
				return e
			}
			c.StopTokenIDs = append(c.StopTokenIDs, int32(n))
		}
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"stream", &c.Stream}, {"ignore_eos", &c.IgnoreEOS}} {
		if raw, ok := f.get(b.name); ok {
			v, e := boolean(b.name, raw)
			if e != nil {
				return e
			}
			*b.dst = v
		}
	}
	if raw, ok := f.get("stream_options"); ok {
		var so map[string]json.RawMessage
		if JSONKind(raw) != "an object" || json.Unmarshal(raw, &so) != nil {
			return typeError("stream_options", "an object", raw)
		}
		if r, ok := so["include_usage"]; ok && !isNull(r) {
			v, e := boolean("stream_options.include_usage", r)
			if e != nil {
				return e
			}
			c.IncludeUsage = v
		}
	}
	return f.constraint(c)
}

func decodeStop(raw json.RawMessage) ([]string, *Error) {
	var list []string
	switch JSONKind(raw) {
	case "a string":
		s, e := str("stop", raw)
		if e != nil {
			return nil, e
		}
		list = []string{s}
	case "an array":
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil, typeError("stop", "a string or an array of strings", raw)
		}
		if len(items) > MaxStop {
			return nil, Invalid("stop", CodeInvalidValue, "stop has %d strings; at most %d are allowed.", len(items), MaxStop)
		}
		for i, r := range items {
			s, e := str(fmt.Sprintf("stop[%d]", i), r)
			if e != nil {
				return nil, e
			}
			list = append(list, s)
		}
	default:
		return nil, typeError("stop", "a string or an array of strings", raw)
	}
	for _, s := range list {
		if s == "" {
			return nil, Invalid("stop", CodeInvalidValue, "stop strings must not be empty.")
		}
		if len(s) > MaxStopBytes {
			return nil, Invalid("stop", CodeInvalidValue, "a stop string is %d bytes long; at most %d are allowed.", len(s), MaxStopBytes)
		}
	}
	return list, nil
}

// DecodeCompletionRequest decodes and checks a /v1/completions body. It
// never panics; every problem is an *Error with status 400 naming the
// field.
func DecodeCompletionRequest(body []byte) (*CompletionRequest, *Error) {
	f, e := split(body)
	if e != nil {
		return nil, e
	}
	r := &CompletionRequest{}
	if e := f.rejectTools(); e != nil {
		return nil, e
	}
	if e := f.common(&r.Common); e != nil {
		return nil, e
	}
	raw, ok := f.get("prompt")
	if !ok {
		return nil, Invalid("prompt", CodeInvalidValue, "prompt is required: a string or an array of token ids.")
	}
	if e := r.decodePrompt(raw); e != nil {
		return nil, e
	}
	if k := len(r.Prompts) * r.N; k > MaxCompletionChoices {
		return nil, Invalid("n", CodeInvalidValue, "%d prompts with n %d make %d choices; at most %d are allowed per request.", len(r.Prompts), r.N, k, MaxCompletionChoices)
	}
	r.Prompt, r.PromptTokens, r.TokenPrompt = r.Prompts[0].Text, r.Prompts[0].Tokens, r.Prompts[0].Tokenized
	if raw, ok := f.get("logprobs"); ok {
		n, e := intIn("logprobs", raw, 0, MaxLogprobs)
		if e != nil {
			return nil, e
		}
		r.Logprobs = &n
	}
	if raw, ok := f.get("echo"); ok {
		v, e := boolean("echo", raw)
		if e != nil {
			return nil, e
		}
		r.Echo = v
	}
	return r, nil
}

func (r *CompletionRequest) decodePrompt(raw json.RawMessage) *Error {
	const want = "a string, an array of token ids, or an array of those"
	switch JSONKind(raw) {
	case "a string":
		s, e := str("prompt", raw)
		if e != nil {
			return e
		}
		r.Prompts = []CompletionPrompt{{Text: s}}
		return nil
	case "an array":
	default:
		return typeError("prompt", want, raw)
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return typeError("prompt", want, raw)
	}
	if len(items) == 0 {
		return Invalid("prompt", CodeInvalidValue, "prompt must not be an empty array.")
	}
	first := JSONKind(items[0])
	switch first {
	case "a number":
		ids, e := decodeTokens("prompt", items)
		if e != nil {
			return e
		}
		r.Prompts = []CompletionPrompt{{Tokens: ids, Tokenized: true}}
		return nil
	case "a string", "an array":
	default:
		return typeError("prompt", want, raw)
	}
	if len(items) > MaxPrompts {
		return Invalid("prompt", CodeInvalidValue, "prompt holds %d prompts; at most %d are allowed per request.", len(items), MaxPrompts)
	}
	for i, it := range items {
		p := fmt.Sprintf("prompt[%d]", i)
		if JSONKind(it) != first {
			return Invalid(p, CodeInvalidType, "%s is %s, but prompt[0] is %s: a list of prompts holds only strings or only arrays of token ids.", p, JSONKind(it), first)
		}
		if first == "a string" {
			s, e := str(p, it)
			if e != nil {
				return e
			}
			r.Prompts = append(r.Prompts, CompletionPrompt{Text: s})
			continue
		}
		var inner []json.RawMessage
		if json.Unmarshal(it, &inner) != nil || len(inner) == 0 {
			return Invalid(p, CodeInvalidValue, "%s must be a non-empty array of token ids.", p)
		}
		ids, e := decodeTokens(p, inner)
		if e != nil {
			return e
		}
		r.Prompts = append(r.Prompts, CompletionPrompt{Tokens: ids, Tokenized: true})
	}
	return nil
}

func decodeTokens(param string, items []json.RawMessage) ([]int32, *Error) {
	ids := make([]int32, len(items))
	for i, it := range items {
		n, e := intIn(fmt.Sprintf("%s[%d]", param, i), it, 0, maxTokenID)
		if e != nil {
			e.Message = "prompt must be a string or an array of token ids: " + e.Message
			return nil, e
		}
		ids[i] = int32(n)
	}
	return ids, nil
}

// DecodeChatRequest decodes and checks a /v1/chat/completions body. It never
// panics; every problem is an *Error with status 400 naming the field.
func DecodeChatRequest(body []byte) (*ChatRequest, *Error) {
	f, e := split(body)
	if e != nil {
		return nil, e
	}
	if raw, ok := f.get("echo"); ok && !matchesAny(raw, []string{`false`}) {
		return nil, Invalid("echo", CodeUnsupported, "The parameter echo is not supported for chat completions.")
	}
	r := &ChatRequest{}
	if e := f.common(&r.Common); e != nil {
		return nil, e
	}
	raw, ok := f.get("messages")
	if !ok {
		return nil, Invalid("messages", CodeInvalidValue, "messages is required: an array of {role, content} objects.")
	}
	msgs, e := decodeMessages(raw)
	if e != nil {
		return nil, e
	}
	r.Messages = msgs
	if e := f.decodeTools(&r.ToolFields); e != nil {
		return nil, e
	}
	if raw, ok := f.get("logprobs"); ok {
		v, e := boolean("logprobs", raw)
		if e != nil {
			return nil, e
		}
		r.Logprobs = v
	}
	if raw, ok := f.get("top_logprobs"); ok {
		n, e := intIn("top_logprobs", raw, 0, MaxLogprobs)
		if e != nil {
			return nil, e
		}
		if n > 0 && !r.Logprobs {
			return nil, Invalid("top_logprobs", CodeInvalidValue, "top_logprobs requires logprobs to be true.")
		}
		r.TopLogprobs = n
	}
	if raw, ok := f.get("chat_template_kwargs"); ok && !isNull(raw) {
		var kw map[string]json.RawMessage
		if err := json.Unmarshal(raw, &kw); err != nil {
			return nil, typeError("chat_template_kwargs", "an object", raw)
		}
		r.ChatTemplateKwargs = kw
	}
	return r, nil
}

func decodeMessages(raw json.RawMessage) ([]Message, *Error) {
	var items []json.RawMessage
	if JSONKind(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return nil, typeError("messages", "an array of message objects", raw)
	}
	if len(items) == 0 {
		return nil, Invalid("messages", CodeInvalidValue, "messages must hold at least one message.")
	}
	out := make([]Message, 0, len(items))
	for i, it := range items {
		p := fmt.Sprintf("messages[%d]", i)
		var m fields
		if JSONKind(it) != "an object" || json.Unmarshal(it, &m) != nil {
			return nil, typeError(p, "an object", it)
		}
		rraw, ok := m.get("role")
		if !ok {
			return nil, Invalid(p+".role", CodeInvalidValue, "%s.role is required.", p)
		}
		role, e := str(p+".role", rraw)
		if e != nil {
			return nil, e
		}
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system"
		case "function":
			return nil, Invalid(p+".role", CodeUnsupported, "%s.role \"function\" is deprecated and not supported; use tool messages.", p)
		default:
			return nil, Invalid(p+".role", CodeInvalidValue, "%s.role must be system, user, assistant or tool, got %q.", p, clip(role))
		}
		msg := Message{Role: role}
		if e := decodeToolMessage(p, role, m, &msg); e != nil {
			return nil, e
		}
		var content string
		if craw, ok := m.get("content"); ok {
			content, e = decodeContent(p+".content", craw)
			if e != nil {
				return nil, e
			}
		} else if role != "assistant" {
			return nil, Invalid(p+".content", CodeInvalidValue, "%s.content is required.", p)
		}
		msg.Content = content
		if rraw, ok := m.get("reasoning_content"); ok && role == "assistant" && JSONKind(rraw) != "null" {
			if msg.Reasoning, e = str(p+".reasoning_content", rraw); e != nil {
				return nil, e
			}
		}
		out = append(out, msg)
	}
	if e := checkToolResults(out); e != nil {
		return nil, e
	}
	return out, nil
}

func decodeContent(param string, raw json.RawMessage) (string, *Error) {
	const want = "a string or an array of text parts"
	switch JSONKind(raw) {
	case "a string":
		return str(param, raw)
	case "an array":
	default:
		return "", typeError(param, want, raw)
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", typeError(param, want, raw)
	}
	texts := make([]string, 0, len(parts))
	for j, pr := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		var part fields
		if JSONKind(pr) != "an object" || json.Unmarshal(pr, &part) != nil {
			return "", typeError(pp, `an object {"type": "text", "text": ...}`, pr)
		}
		traw, ok := part.get("type")
		if !ok {
			return "", Invalid(pp+".type", CodeInvalidValue, "%s.type is required.", pp)
		}
		typ, e := str(pp+".type", traw)
		if e != nil {
			return "", e
		}
		if typ != "text" {
			return "", Invalid(pp+".type", CodeUnsupported, "content parts of type %q are not supported: this server takes text only.", clip(typ))
		}
		xraw, ok := part.get("text")
		if !ok {
			return "", Invalid(pp+".text", CodeInvalidValue, "%s.text is required.", pp)
		}
		text, e := str(pp+".text", xraw)
		if e != nil {
			return "", e
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n"), nil
}
