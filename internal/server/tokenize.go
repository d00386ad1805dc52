package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/server/chat"
)

// vLLM's tokenizer endpoints:
//
//	POST /tokenize    {"model"?, "prompt", "add_special_tokens"?, "return_token_strs"?}
//	                  {"model"?, "messages", "add_generation_prompt"?, "tools"?, "chat_template_kwargs"?,
//	                   "add_special_tokens"?, "return_token_strs"?}
//	               -> {"count", "max_model_len", "tokens", "token_strs"?}
//	POST /detokenize  {"model"?, "tokens"} -> {"prompt"}
//
// A prompt is tokenized as /v1/completions tokenizes it (add_special_tokens
// defaults to true: the vocabulary's BOS); messages as /v1/chat/completions
// renders and tokenizes them (add_generation_prompt defaults to true; BOS
// only when the template did not write it, unless add_special_tokens says
// otherwise), so /tokenize shows what a request became. token_strs are the
// vocabulary's token texts (Hugging Face's convert_ids_to_tokens).
// /detokenize decodes as generation does, with control tokens written as
// their text (as vLLM's and llama.cpp's /detokenize do).
//
// Authentication: with an API key (tandem serve --api-key) both need it, as
// /v1/* does. On a prefill or decode worker (leg keys set) both need the
// cluster credential (the one /pd/* and /debug/* take, which the router's
// probe client sends): they run no generation, so they need no leg
// signature, but a worker answers only its router.
//
// Cost: each request's work and memory are bounded, since the tokenizer's
// working memory is about 70 times its input (8 MB of digits took 560 MB).
// A prompt (or the text messages render to) is at most
// tokenizeBytesPerToken bytes a token of the token cap, twice the model's
// context (tokenizeContextFactor); a longer one is a 400 before it is
// tokenized. A text that tokenizes to more than the cap, or than the
// request's max_count if less, is a 400 context_length_exceeded (param
// prompt or messages) saying so, and /detokenize takes at most the cap's
// ids. So an answer holds at most the cap's tokens and their strings.
// Admission: Options.MaxTokenize requests are worked on at once, as many
// times tokenizeQueueFactor more wait up to tokenizeWait each (or until the
// client leaves), and the rest get 429 with Retry-After, before their body
// is read. This is a semaphore of its own, not the engine's --max-running
// and --max-waiting: those count sequences that hold KV pages and a place
// in the step batch (64 and 256 by default), which tokenizing holds none
// of; sized for that, they would let 256 bodies of 8 MiB each wait, and a
// burst of /tokenize would refuse generations. Tokenizing is CPU work in
// the handler, so the bound is a few cores' worth.

// Bounds of /tokenize and /detokenize (see above).
const (
	tokenizeContextFactor = 2
	tokenizeBytesPerToken = 16
	tokenizeQueueFactor   = 4
	tokenizeWait          = 10 * time.Second
)

// tokenizeCap returns the most tokens /tokenize counts and the most bytes
// of text it takes.
func (s *Server) tokenizeCap() (tokens, bytes int) {
	tokens = tokenizeContextFactor * max(s.b.ModelConfig().Context, 1)
	return tokens, tokenizeBytesPerToken * tokens
}

// TokenizeRequest is a decoded POST /tokenize body.
type TokenizeRequest struct {
	Model               string                     `json:"model"`
	Prompt              *string                    `json:"prompt"`
	Messages            json.RawMessage            `json:"messages"`
	Tools               json.RawMessage            `json:"tools"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	AddSpecialTokens    *bool                      `json:"add_special_tokens"`
	ReturnTokenStrs     bool                       `json:"return_token_strs"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
	// MaxCount, when set (1 to twice the context), is the most tokens to
	// count: a longer text is refused (Tandem's extension).
	MaxCount *int `json:"max_count"`
}

// TokenizeResponse is the answer of POST /tokenize.
type TokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs,omitempty"`
}

// DetokenizeRequest is a decoded POST /detokenize body.
type DetokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

// DetokenizeResponse is the answer of POST /detokenize.
type DetokenizeResponse struct {
	Prompt string `json:"prompt"`
}

// tokenizerAccess checks the caller's right to ask (see above), admits the
// request and reads its body. On success the caller must call release.
func (s *Server) tokenizerAccess(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	if k := s.o.LegKeys; k != nil && !k.CheckCredential(r.Header) {
		leg.WriteUnauthorized(w, leg.Unauthorized("%s on a prefill or decode worker needs the cluster credential "+
			"(Authorization: Bearer <hex of the %q key>); send it to the router instead.", r.URL.Path, leg.LabelDebug))
		return nil, nil, false
	}
	if !s.checkAPIKey(w, r) {
		return nil, nil, false
	}
	if err := s.tokenizer.acquire(r.Context()); err != nil {
		if errors.Is(err, errGateFull) {
			w.Header().Set("Retry-After", "1")
			httpx.WriteError(w, openai.RateLimited(r.URL.Path+" is busy: "+strconv.Itoa(s.o.MaxTokenize)+
				" requests are being tokenized and as many as may wait are waiting; retry in a second."))
		} else {
			httpx.WriteError(w, openai.Unavailable("the request ended while it waited for "+r.URL.Path+": "+err.Error()))
		}
		return nil, nil, false
	}
	body, e := s.readBody(w, r)
	if e != nil {
		s.tokenizer.release()
		httpx.WriteError(w, e)
		return nil, nil, false
	}
	return body, s.tokenizer.release, true
}

// decodeStrict decodes body into v, refusing unknown fields and trailing
// data, with errors in OpenAI's shape.
func decodeStrict(body []byte, v any) *openai.Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
			return openai.Invalid(strings.Trim(f, `"`), openai.CodeUnsupported, "The parameter %s is not supported by this endpoint.", f)
		}
		return openai.Invalid("", openai.CodeInvalidJSON, "We could not parse the JSON body of your request: %s.", msg)
	}
	if dec.More() {
		return openai.Invalid("", openai.CodeInvalidJSON, "The request body holds more than one JSON value.")
	}
	return nil
}

// tokenizerRequest reads a /tokenize or /detokenize body (tokenizerAccess),
// decodes it strictly into v and checks its model (model reads it from v),
// answering any failure itself; it reports whether the handler goes on,
// and then the handler must call release.
func (s *Server) tokenizerRequest(w http.ResponseWriter, r *http.Request, v any, model func() string) (release func(), ok bool) {
	body, release, ok := s.tokenizerAccess(w, r)
	if !ok {
		return nil, false
	}
	if e := decodeStrict(body, v); e != nil {
		release()
		httpx.WriteError(w, e)
		return nil, false
	}
	if e := s.checkModel(model()); e != nil {
		release()
		httpx.WriteError(w, e)
		return nil, false
	}
	return release, true
}

// tokenizeText checks text (what: the prompt, or the rendered chat of
// the param messages) against the byte cap, tokenizes it with encode and
// checks the count against limit.
func (s *Server) tokenizeText(param, what, text string, limit int, encode func(string) []int32) ([]int32, *openai.Error) {
	capTokens, capBytes := s.tokenizeCap()
	if len(text) > capBytes {
		return nil, openai.Invalid(param, openai.CodeContextLength, "/tokenize takes at most %d bytes of text "+
			"(%d a token of %d tokens, twice this model's context of %d), and the %s has %d: send a shorter text.",
			capBytes, tokenizeBytesPerToken, capTokens, s.b.ModelConfig().Context, what, len(text))
	}
	ids := encode(text)
	if len(ids) > limit {
		return nil, openai.Invalid(param, openai.CodeContextLength, "The %s has more than %d tokens (%d), the most /tokenize counts "+
			"(max_count, or twice this model's context of %d).", what, limit, len(ids), s.b.ModelConfig().Context)
	}
	return ids, nil
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req TokenizeRequest
	release, ok := s.tokenizerRequest(w, r, &req, func() string { return req.Model })
	if !ok {
		return
	}
	defer release()
	tok := s.b.Tokenizer()
	capTokens, _ := s.tokenizeCap()
	limit := capTokens
	if req.MaxCount != nil {
		if *req.MaxCount < 1 || *req.MaxCount > capTokens {
			httpx.WriteError(w, openai.Invalid("max_count", openai.CodeInvalidValue, "max_count must be 1 to %d (twice this model's context), got %d.", capTokens, *req.MaxCount))
			return
		}
		limit = *req.MaxCount
	}
	var ids []int32
	var e *openai.Error
	hasMessages := len(req.Messages) > 0 && string(req.Messages) != "null"
	switch {
	case req.Prompt != nil && hasMessages:
		httpx.WriteError(w, openai.Invalid("messages", openai.CodeInvalidValue, "Give either prompt or messages, not both."))
		return
	case req.Prompt != nil:
		add := req.AddSpecialTokens == nil || *req.AddSpecialTokens
		ids, e = s.tokenizeText("prompt", "prompt", *req.Prompt, limit, func(text string) []int32 { return tok.Encode(text, add, true) })
	case hasMessages:
		msgs, me := normalizeMessages(req.Messages)
		if me != nil {
			httpx.WriteError(w, me)
			return
		}
		in := chat.Input{Messages: msgs, Tools: req.Tools, AddGenerationPrompt: req.AddGenerationPrompt == nil || *req.AddGenerationPrompt,
			Kwargs: req.ChatTemplateKwargs}
		out, err := s.chat.tmpl.RenderContext(r.Context(), in)
		if err != nil {
			httpx.WriteError(w, openai.Invalid("messages", openai.CodeInvalidValue, "The messages cannot be formatted with this model's chat template: %v", err))
			return
		}
		ids, e = s.tokenizeText("messages", "rendered chat", out.Text, limit, func(string) []int32 {
			if req.AddSpecialTokens != nil {
				return s.chat.encodeSpecial(tok, out, *req.AddSpecialTokens)
			}
			return s.chat.encode(tok, out)
		})
	default:
		httpx.WriteError(w, openai.Invalid("prompt", openai.CodeInvalidValue, "prompt (a string) or messages (an array of messages) is required."))
		return
	}
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	resp := TokenizeResponse{Count: len(ids), MaxModelLen: s.b.ModelConfig().Context, Tokens: ids}
	if resp.Tokens == nil {
		resp.Tokens = []int32{}
	}
	if req.ReturnTokenStrs {
		v := tok.Vocab()
		resp.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			resp.TokenStrs[i] = v.Tokens[id]
		}
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

// normalizeMessages checks a messages array and applies what chat
// completions does to messages: "developer" is read as "system", content
// given as text parts is joined with "\n". Other members (tool_calls,
// tool_call_id, reasoning_content, name) pass to the template unchanged.
func normalizeMessages(raw json.RawMessage) (json.RawMessage, *openai.Error) {
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, openai.Invalid("messages", openai.CodeInvalidType, "messages must be an array of message objects.")
	}
	if len(msgs) == 0 {
		return nil, openai.Invalid("messages", openai.CodeInvalidValue, "messages must not be empty.")
	}
	for i, m := range msgs {
		var role string
		if err := json.Unmarshal(m["role"], &role); err != nil || role == "" {
			return nil, openai.Invalid("messages["+itoa(i)+"].role", openai.CodeInvalidValue, "Each message needs a role (a string).")
		}
		if role == "developer" {
			m["role"] = json.RawMessage(`"system"`)
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if c, ok := m["content"]; ok && json.Unmarshal(c, &parts) == nil {
			texts := make([]string, 0, len(parts))
			for _, p := range parts {
				if p.Type != "text" {
					return nil, openai.Invalid("messages["+itoa(i)+"].content", openai.CodeUnsupported,
						"content parts of type %q are not supported: this server takes text only.", p.Type)
				}
				texts = append(texts, p.Text)
			}
			joined, _ := json.Marshal(strings.Join(texts, "\n"))
			m["content"] = joined
		}
	}
	out, err := json.Marshal(msgs)
	if err != nil {
		return nil, openai.Invalid("messages", openai.CodeInvalidValue, "messages cannot be encoded: %v", err)
	}
	return out, nil
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var req DetokenizeRequest
	release, ok := s.tokenizerRequest(w, r, &req, func() string { return req.Model })
	if !ok {
		return
	}
	defer release()
	if capTokens, _ := s.tokenizeCap(); len(req.Tokens) > capTokens {
		httpx.WriteError(w, openai.Invalid("tokens", openai.CodeInvalidValue, "tokens has %d ids; /detokenize takes at most %d (twice this model's context).", len(req.Tokens), capTokens))
		return
	}
	tok := s.b.Tokenizer()
	n := int64(tok.VocabSize())
	ids := make([]int32, len(req.Tokens))
	for i, id := range req.Tokens {
		if id < 0 || id >= n {
			httpx.WriteError(w, openai.Invalid("tokens", openai.CodeInvalidValue, "tokens[%d] is %d, not a token id of this model (0 to %d).", i, id, n-1))
			return
		}
		ids[i] = int32(id)
	}
	httpx.WriteJSON(w, http.StatusOK, DetokenizeResponse{Prompt: detokenize(tok, ids)})
}

// detokenize decodes ids as Decode does, but writes control tokens (BOS,
// <|im_start|>, ...) as their text instead of dropping them. Bytes that do
// not form UTF-8 characters become U+FFFD.
func detokenize(tok *tokenizer.Tokenizer, ids []int32) string {
	v := tok.Vocab()
	d := tok.NewDecoder()
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
		if int(id) < len(v.Types) && v.Types[id] == tokenizer.TypeControl {
			b.WriteString(d.Flush())
			b.WriteString(v.Tokens[id])
		}
	}
	b.WriteString(d.Flush())
	return b.String()
}
