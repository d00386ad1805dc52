package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/embed"
	"tandem/internal/engine"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tokenizer"
)

// Embedder computes embeddings for /v1/embeddings (package embed's
// Service): one unit-length vector per input, in order.
type Embedder interface {
	Embed(ctx context.Context, inputs [][]int32) ([][]float32, error)
	Info() embed.Info
}

// maxEmbeddingInputs bounds the inputs of one request, as OpenAI does.
const maxEmbeddingInputs = 2048

// embeddingRequest is the body of POST /v1/embeddings.
type embeddingRequest struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingAnswer struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

// embeddingInputs decodes "input": a string, a list of strings, a list of
// token ids, or a list of such lists. Strings are tokenized with the
// model's special tokens added (BOS/CLS, EOS/SEP as the vocabulary says)
// and special-token text read as text; token lists are taken as they are.
func embeddingInputs(raw json.RawMessage, tok *tokenizer.Tokenizer, vocab int) ([][]int32, *openai.Error) {
	raw = bytes.TrimSpace(raw)
	bad := func(format string, args ...any) *openai.Error {
		return openai.Invalid("input", openai.CodeInvalidValue, format, args...)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, openai.Invalid("input", openai.CodeInvalidValue, "input is required: a string, a list of strings, a list of token ids or a list of such lists.")
	}
	text := func(s string, param string) ([]int32, *openai.Error) {
		if s == "" {
			return nil, openai.Invalid(param, openai.CodeInvalidValue, "%s is an empty string; every input needs at least one character.", param)
		}
		return tok.Encode(s, true, false), nil
	}
	ids := func(xs []int64, param string) ([]int32, *openai.Error) {
		if len(xs) == 0 {
			return nil, openai.Invalid(param, openai.CodeInvalidValue, "%s is an empty list of token ids.", param)
		}
		out := make([]int32, len(xs))
		for i, x := range xs {
			if x < 0 || x >= int64(vocab) {
				return nil, openai.Invalid(param, openai.CodeInvalidValue, "%s[%d] = %d is not a token id of this model (0..%d).", param, i, x, vocab-1)
			}
			out[i] = int32(x)
		}
		return out, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, bad("input is not a valid JSON string: %v", err)
		}
		in, e := text(s, "input")
		return [][]int32{in}, e
	}
	if raw[0] != '[' {
		return nil, openai.Invalid("input", openai.CodeInvalidType, "input must be a string, a list of strings, a list of token ids or a list of such lists.")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, bad("input is not a valid JSON list: %v", err)
	}
	if len(items) == 0 {
		return nil, bad("input is an empty list; give at least one input.")
	}
	if len(items) > maxEmbeddingInputs {
		return nil, bad("input has %d items; at most %d are allowed in one request.", len(items), maxEmbeddingInputs)
	}
	first := bytes.TrimSpace(items[0])
	if len(first) > 0 && (first[0] == '-' || (first[0] >= '0' && first[0] <= '9')) {
		var xs []int64
		if err := json.Unmarshal(raw, &xs); err != nil {
			return nil, openai.Invalid("input", openai.CodeInvalidType, "input starts with a token id, so it must be a list of integer token ids: %v", err)
		}
		in, e := ids(xs, "input")
		return [][]int32{in}, e
	}
	out := make([][]int32, len(items))
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		it = bytes.TrimSpace(it)
		var e *openai.Error
		switch {
		case len(it) > 0 && it[0] == '"':
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return nil, openai.Invalid(param, openai.CodeInvalidType, "%s is not a valid string: %v", param, err)
			}
			out[i], e = text(s, param)
		case len(it) > 0 && it[0] == '[':
			var xs []int64
			if err := json.Unmarshal(it, &xs); err != nil {
				return nil, openai.Invalid(param, openai.CodeInvalidType, "%s must be a list of integer token ids: %v", param, err)
			}
			out[i], e = ids(xs, param)
		default:
			return nil, openai.Invalid(param, openai.CodeInvalidType, "%s must be a string or a list of token ids.", param)
		}
		if e != nil {
			return nil, e
		}
	}
	return out, nil
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	if k := s.o.LegKeys; k != nil && !k.CheckCredential(r.Header) {
		leg.WriteUnauthorized(w, leg.Unauthorized("/v1/embeddings on a prefill or decode worker needs the cluster credential "+
			"(Authorization: Bearer <hex of the %q key>); send it to the router instead.", leg.LabelDebug))
		return
	}
	body, e := s.readBody(w, r)
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	var req embeddingRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		httpx.WriteError(w, openai.Invalid("", openai.CodeInvalidJSON, "The request body is not a valid JSON object: %v", err))
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		httpx.WriteError(w, e)
		return
	}
	emb := s.o.Embeddings
	if emb == nil {
		httpx.WriteError(w, openai.Invalid("model", openai.CodeUnsupported,
			"The model %q is not an embedding model (its file sets no pooling type), so this server does not serve /v1/embeddings; serve an embedding model (nomic-bert, bert, or a file with {arch}.pooling_type) for embeddings.", s.o.ModelName))
		return
	}
	info := emb.Info()
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		httpx.WriteError(w, openai.Invalid("encoding_format", openai.CodeInvalidValue, "encoding_format %q is not supported: use \"float\" or \"base64\".", req.EncodingFormat))
		return
	}
	dims := info.Dim
	if req.Dimensions != nil {
		dims = *req.Dimensions
		switch {
		case dims < 1 || dims > info.Dim:
			httpx.WriteError(w, openai.Invalid("dimensions", openai.CodeInvalidValue, "dimensions %d is out of range: this model's embeddings have %d dimensions.", dims, info.Dim))
			return
		case dims != info.Dim && !slices.Contains(info.Dims, dims):
			allowed := "none: it was not trained for truncated (Matryoshka) embeddings, so only the full length is served"
			if len(info.Dims) > 0 {
				allowed = fmt.Sprint(info.Dims)
			}
			httpx.WriteError(w, openai.Invalid("dimensions", openai.CodeUnsupported, "dimensions %d is not supported by the model %q (truncations allowed: %s; the full length is %d).", dims, s.o.ModelName, allowed, info.Dim))
			return
		}
	}
	inputs, e := embeddingInputs(req.Input, s.b.Tokenizer(), info.Vocab)
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	tokens := 0
	for i, in := range inputs {
		if len(in) > info.Context {
			param := "input"
			if len(inputs) > 1 {
				param = fmt.Sprintf("input[%d]", i)
			}
			httpx.WriteError(w, openai.Invalid(param, openai.CodeContextLength, "This model's maximum input length is %d tokens; %s has %d tokens. Please shorten it.", info.Context, param, len(in)))
			return
		}
		tokens += len(in)
	}
	vecs, err := emb.Embed(r.Context(), inputs)
	if err != nil {
		httpx.WriteError(w, embedError(err))
		return
	}
	ans := embeddingAnswer{Object: openai.ObjectList, Model: s.o.ModelName, Data: make([]embeddingData, len(vecs)),
		Usage: embeddingUsage{PromptTokens: tokens, TotalTokens: tokens}}
	for i, v := range vecs {
		if dims != len(v) {
			v = embed.Truncate(v, dims)
		}
		var val any = v
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
			}
			val = base64.StdEncoding.EncodeToString(b)
		}
		ans.Data[i] = embeddingData{Object: "embedding", Index: i, Embedding: val}
	}
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	httpx.WriteJSON(w, http.StatusOK, ans)
}

// embedError maps an Embedder error to an API error.
func embedError(err error) *openai.Error {
	switch {
	case errors.Is(err, embed.ErrQueueFull):
		return openai.RateLimited(err.Error())
	case errors.Is(err, embed.ErrTooLong):
		return openai.Invalid("input", openai.CodeContextLength, "%v", err)
	case errors.Is(err, embed.ErrBadInput):
		return openai.Invalid("input", openai.CodeInvalidValue, "%v", err)
	case errors.Is(err, embed.ErrClosed):
		return openai.Unavailable(err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return openai.Unavailable("the request ended before its embeddings were computed: " + err.Error())
	}
	return openai.Internal(err.Error())
}

// EmbeddingBackend is the Backend of a server whose model only embeds (an
// encoder, or a decoder file with a pooling type): /v1/embeddings is
// served through Options.Embeddings, and generation requests get a 400
// that says so. It is a Legs too, refusing a router's legs alike.
func EmbeddingBackend(info embed.Info, tok *tokenizer.Tokenizer) Backend {
	return &embeddingBackend{cfg: model.Config{Arch: info.Arch, Name: info.Name, Dim: info.Dim, Vocab: info.Vocab, Context: info.Context}, tok: tok}
}

type embeddingBackend struct {
	cfg model.Config
	tok *tokenizer.Tokenizer
}

type embeddingOnlyError struct{ name string }

func (e embeddingOnlyError) Error() string {
	return fmt.Sprintf("the model %q is an embedding model: it computes embeddings (POST /v1/embeddings) and does not generate text", e.name)
}

func (embeddingOnlyError) HTTPStatus() int { return http.StatusBadRequest }

func (b *embeddingBackend) Submit(context.Context, engine.Request) (Stream, error) {
	return nil, embeddingOnlyError{b.cfg.Name}
}

// SubmitLeg refuses a router's leg as Submit refuses a request: the
// backend is also the Legs of an embedding model's prefill or decode
// worker.
func (b *embeddingBackend) SubmitLeg(context.Context, leg.Info, engine.Request) (Stream, error) {
	return nil, embeddingOnlyError{b.cfg.Name}
}

func (b *embeddingBackend) Stats() engine.Stats             { return engine.Stats{} }
func (b *embeddingBackend) ModelConfig() model.Config       { return b.cfg }
func (b *embeddingBackend) Tokenizer() *tokenizer.Tokenizer { return b.tok }
