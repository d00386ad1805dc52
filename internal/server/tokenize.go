package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

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

// tokenizerAccess reads a /tokenize or /detokenize body after checking the
// caller's right to ask (see above).
func (s *Server) tokenizerAccess(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if k := s.o.LegKeys; k != nil && !k.CheckCredential(r.Header) {
		leg.WriteUnauthorized(w, leg.Unauthorized("%s on a prefill or decode worker needs the cluster credential "+
			"(Authorization: Bearer <hex of the %q key>); send it to the router instead.", r.URL.Path, leg.LabelDebug))
		return nil, false
	}
	if !s.checkAPIKey(w, r) {
		return nil, false
	}
	body, e := s.readBody(w, r)
	if e != nil {
		httpx.WriteError(w, e)
		return nil, false
	}
	return body, true
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
// answering any failure itself; it reports whether the handler goes on.
func (s *Server) tokenizerRequest(w http.ResponseWriter, r *http.Request, v any, model func() string) bool {
	body, ok := s.tokenizerAccess(w, r)
	if !ok {
		return false
	}
	if e := decodeStrict(body, v); e != nil {
		httpx.WriteError(w, e)
		return false
	}
	if e := s.checkModel(model()); e != nil {
		httpx.WriteError(w, e)
		return false
	}
	return true
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req TokenizeRequest
	if !s.tokenizerRequest(w, r, &req, func() string { return req.Model }) {
		return
	}
	tok := s.b.Tokenizer()
	var ids []int32
	hasMessages := len(req.Messages) > 0 && string(req.Messages) != "null"
	switch {
	case req.Prompt != nil && hasMessages:
		httpx.WriteError(w, openai.Invalid("messages", openai.CodeInvalidValue, "Give either prompt or messages, not both."))
		return
	case req.Prompt != nil:
		add := req.AddSpecialTokens == nil || *req.AddSpecialTokens
		ids = tok.Encode(*req.Prompt, add, true)
	case hasMessages:
		msgs, e := normalizeMessages(req.Messages)
		if e != nil {
			httpx.WriteError(w, e)
			return
		}
		in := chat.Input{Messages: msgs, Tools: req.Tools, AddGenerationPrompt: req.AddGenerationPrompt == nil || *req.AddGenerationPrompt,
			Kwargs: req.ChatTemplateKwargs}
		out, err := s.chat.tmpl.RenderContext(r.Context(), in)
		if err != nil {
			httpx.WriteError(w, openai.Invalid("messages", openai.CodeInvalidValue, "The messages cannot be formatted with this model's chat template: %v", err))
			return
		}
		if req.AddSpecialTokens != nil {
			ids = s.chat.encodeSpecial(tok, out, *req.AddSpecialTokens)
		} else {
			ids = s.chat.encode(tok, out)
		}
	default:
		httpx.WriteError(w, openai.Invalid("prompt", openai.CodeInvalidValue, "prompt (a string) or messages (an array of messages) is required."))
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
	if !s.tokenizerRequest(w, r, &req, func() string { return req.Model }) {
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
