package server

import (
	"net/http"
	"time"
	"unicode/utf8"

	"tandem/internal/openai"
	"tandem/internal/tokenizer"
)

// start does what both generation endpoints do first: refuse when not
// ready, read the body.
func (s *Server) start(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if !s.ready.Load() {
		writeError(w, openai.Unavailable("the model is not ready (loading or shutting down)"))
		return nil, false
	}
	body, e := s.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return nil, false
	}
	return body, true
}

func (s *Server) checkModel(model string) *openai.Error {
	if model != "" && model != s.o.ModelName {
		return openai.ModelNotFound(model, s.o.ModelName)
	}
	return nil
}

func (s *Server) vocabSize() int {
	if v := s.b.ModelConfig().Vocab; v > 0 {
		return v
	}
	return s.b.Tokenizer().VocabSize()
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	body, ok := s.start(w, r)
	if !ok {
		return
	}
	req, e := openai.DecodeCompletionRequest(body)
	if e == nil {
		e = s.checkModel(req.Model)
	}
	if e == nil && req.Echo && req.Logprobs != nil {
		e = openai.Invalid("echo", openai.CodeUnsupported, "echo together with logprobs is not supported (it needs prompt logprobs).")
	}
	if e != nil {
		writeError(w, e)
		return
	}
	tok := s.b.Tokenizer()
	var prompt []int32
	echo := ""
	if req.TokenPrompt {
		vocab := s.vocabSize()
		for i, id := range req.PromptTokens {
			if int(id) >= vocab {
				writeError(w, openai.Invalid("prompt", openai.CodeInvalidValue,
					"prompt[%d] is token id %d, outside this model's vocabulary of %d tokens.", i, id, vocab))
				return
			}
		}
		prompt = req.PromptTokens
		if req.Echo {
			echo = tok.Decode(prompt)
		}
	} else {
		prompt = tok.Encode(req.Prompt, true, true)
		if req.Echo {
			echo = req.Prompt
		}
	}
	top, wantLP := 0, req.Logprobs != nil
	if wantLP {
		top = *req.Logprobs
	}
	p, e := s.plan(&req.Common, prompt, "prompt", s.o.DefaultCompletionTokens, top)
	if e != nil {
		writeError(w, e)
		return
	}
	p.endpoint = "completions"
	s.generate(w, r, p, &completionEncoder{tok: tok, logprobs: wantLP, top: top, echo: echo,
		echoRunes: utf8.RuneCountInString(echo), fingerprint: s.o.SystemFingerprint}, t0)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	body, ok := s.start(w, r)
	if !ok {
		return
	}
	req, e := openai.DecodeChatRequest(body)
	if e == nil {
		e = s.checkModel(req.Model)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	tok := s.b.Tokenizer()
	prompt, err := s.chat.prompt(tok, req.Messages)
	if err != nil {
		writeError(w, openai.Invalid("messages", openai.CodeInvalidValue, "The messages cannot be formatted with this model's chat template: %v", err))
		return
	}
	req.Stop = append(req.Stop[:len(req.Stop):len(req.Stop)], s.chat.stops...)
	req.StopTokenIDs = append(req.StopTokenIDs[:len(req.StopTokenIDs):len(req.StopTokenIDs)], s.chat.stopTokens...)
	top := 0
	if req.Logprobs {
		top = req.TopLogprobs
	}
	p, e := s.plan(&req.Common, prompt, "messages", 0, top)
	if e != nil {
		writeError(w, e)
		return
	}
	p.endpoint = "chat"
	p.id = newID("chatcmpl-")
	s.generate(w, r, p, &chatEncoder{tok: tok, logprobs: req.Logprobs, fingerprint: s.o.SystemFingerprint}, t0)
}

func finishPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// completionEncoder builds /v1/completions documents.
type completionEncoder struct {
	tok         *tokenizer.Tokenizer
	logprobs    bool
	top         int
	echo        string // prompt text shown before the completion (echo)
	echoRunes   int
	fingerprint string
}

func (e *completionEncoder) doc(p *genPlan, choices []openai.CompletionChoice, u *openai.Usage) *openai.CompletionResponse {
	if choices == nil {
		choices = []openai.CompletionChoice{}
	}
	return &openai.CompletionResponse{ID: p.id, Object: openai.ObjectCompletion, Created: p.created, Model: p.model,
		SystemFingerprint: e.fingerprint, Choices: choices, Usage: u}
}

func (e *completionEncoder) legacy(toks []tokenRec) *openai.CompletionLogprobs {
	if !e.logprobs {
		return nil
	}
	lp := &openai.CompletionLogprobs{
		Tokens:        make([]string, len(toks)),
		TokenLogprobs: make([]float64, len(toks)),
		TopLogprobs:   make([]map[string]float64, len(toks)),
		TextOffset:    make([]int, len(toks)),
	}
	for i, t := range toks {
		lp.Tokens[i] = string(e.tok.TokenPiece(t.ID))
		lp.TokenLogprobs[i] = logprob(t.Logprob)
		lp.TextOffset[i] = e.echoRunes + t.runeStart
		if e.top > 0 {
			m := make(map[string]float64, len(t.Top))
			for _, a := range t.Top {
				m[string(e.tok.TokenPiece(a.ID))] = logprob(a.Logprob)
			}
			lp.TopLogprobs[i] = m
		}
	}
	return lp
}

func (e *completionEncoder) opening(p *genPlan) []any {
	if e.echo == "" {
		return nil
	}
	docs := make([]any, len(p.reqs))
	for i := range p.reqs {
		var lp *openai.CompletionLogprobs
		if e.logprobs {
			lp = e.legacy(nil)
		}
		docs[i] = e.doc(p, []openai.CompletionChoice{{Index: i, Text: e.echo, Logprobs: lp}}, nil)
	}
	return docs
}

func (e *completionEncoder) chunk(p *genPlan, pc *piece) any {
	return e.doc(p, []openai.CompletionChoice{{Index: pc.index, Text: pc.text, Logprobs: e.legacy(pc.toks),
		FinishReason: finishPtr(pc.finish)}}, nil)
}

func (e *completionEncoder) answer(p *genPlan, res []*choiceResult, u *openai.Usage) any {
	choices := make([]openai.CompletionChoice, len(res))
	for i, cr := range res {
		choices[i] = openai.CompletionChoice{Index: i, Text: e.echo + cr.text.String(), Logprobs: e.legacy(cr.toks),
			FinishReason: finishPtr(cr.finish)}
	}
	return e.doc(p, choices, u)
}

func (e *completionEncoder) usageChunk(p *genPlan, u *openai.Usage) any { return e.doc(p, nil, u) }

// chatEncoder builds /v1/chat/completions documents.
type chatEncoder struct {
	tok         *tokenizer.Tokenizer
	logprobs    bool
	fingerprint string
}

func (e *chatEncoder) tokenBytes(id int32) (string, []int) {
	b := e.tok.TokenPiece(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return string(b), ints
}

func (e *chatEncoder) content(toks []tokenRec) *openai.ChatLogprobs {
	if !e.logprobs {
		return nil
	}
	lp := &openai.ChatLogprobs{Content: make([]openai.ChatTokenLogprob, len(toks))}
	for i, t := range toks {
		s, b := e.tokenBytes(t.ID)
		c := openai.ChatTokenLogprob{Token: s, Logprob: logprob(t.Logprob), Bytes: b,
			TopLogprobs: make([]openai.TopLogprob, len(t.Top))}
		for j, a := range t.Top {
			as, ab := e.tokenBytes(a.ID)
			c.TopLogprobs[j] = openai.TopLogprob{Token: as, Logprob: logprob(a.Logprob), Bytes: ab}
		}
		lp.Content[i] = c
	}
	return lp
}

func (e *chatEncoder) chunkDoc(p *genPlan, choices []openai.ChatChunkChoice, u *openai.Usage) *openai.ChatChunk {
	if choices == nil {
		choices = []openai.ChatChunkChoice{}
	}
	return &openai.ChatChunk{ID: p.id, Object: openai.ObjectChatChunk, Created: p.created, Model: p.model,
		SystemFingerprint: e.fingerprint, Choices: choices, Usage: u}
}

func (e *chatEncoder) opening(p *genPlan) []any {
	docs := make([]any, len(p.reqs))
	for i := range p.reqs {
		empty := ""
		docs[i] = e.chunkDoc(p, []openai.ChatChunkChoice{{Index: i,
			Delta: openai.ChatDelta{Role: openai.RoleAssistant, Content: &empty}}}, nil)
	}
	return docs
}

func (e *chatEncoder) chunk(p *genPlan, pc *piece) any {
	var d openai.ChatDelta
	if pc.text != "" {
		d.Content = &pc.text
	}
	return e.chunkDoc(p, []openai.ChatChunkChoice{{Index: pc.index, Delta: d, Logprobs: e.content(pc.toks),
		FinishReason: finishPtr(pc.finish)}}, nil)
}

func (e *chatEncoder) answer(p *genPlan, res []*choiceResult, u *openai.Usage) any {
	choices := make([]openai.ChatChoice, len(res))
	for i, cr := range res {
		choices[i] = openai.ChatChoice{Index: i,
			Message:  openai.ChatMessage{Role: openai.RoleAssistant, Content: cr.text.String()},
			Logprobs: e.content(cr.toks), FinishReason: finishPtr(cr.finish)}
	}
	return &openai.ChatResponse{ID: p.id, Object: openai.ObjectChatCompletion, Created: p.created, Model: p.model,
		SystemFingerprint: e.fingerprint, Choices: choices, Usage: u}
}

func (e *chatEncoder) usageChunk(p *genPlan, u *openai.Usage) any { return e.chunkDoc(p, nil, u) }
