package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"tandem/internal/api/httpx"
	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/server/chat"
	"tandem/internal/server/harmony"
	"tandem/internal/server/toolcall"
)

// start does what both generation endpoints do first, before any work on
// the request (wrap has checked the API key, admit the server's phase):
// read the body, check the leg signature over it (see authorize). It
// returns the body and the verified router leg (nil when the request is
// none).
func (s *Server) start(w http.ResponseWriter, r *http.Request) ([]byte, *leg.Info, bool) {
	body, e := s.readBody(w, r)
	if e != nil {
		httpx.WriteError(w, e)
		return nil, nil, false
	}
	li, ok := s.authorize(w, r, body)
	return body, li, ok
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
	body, li, ok := s.start(w, r)
	if !ok {
		return
	}
	req, e := openai.DecodeCompletionRequest(body)
	if e == nil {
		e = s.checkModel(req.Model)
	}
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	tok := s.b.Tokenizer()
	top, wantLP := 0, req.Logprobs != nil
	if wantLP {
		top = *req.Logprobs
	}
	// echo with logprobs reports the prompt's tokens too, so it needs the
	// prompt logprobs (and reports them as prompt_logprobs as well, as vLLM
	// does; the router reads them there from the prefill leg).
	echoLP := req.Echo && wantLP
	enc := &completionEncoder{tok: tok, logprobs: wantLP, top: top, echo: req.Echo, fingerprint: s.o.SystemFingerprint}
	prompts := make([][]int32, len(req.Prompts))
	vocab := s.vocabSize()
	for pi, in := range req.Prompts {
		param := "prompt"
		if len(req.Prompts) > 1 {
			param = fmt.Sprintf("prompt[%d]", pi)
		}
		var prompt []int32
		echo := ""
		if in.Tokenized {
			for i, id := range in.Tokens {
				if int(id) >= vocab {
					httpx.WriteError(w, openai.Invalid("prompt", openai.CodeInvalidValue,
						"%s[%d] is token id %d, outside this model's vocabulary of %d tokens.", param, i, id, vocab))
					return
				}
			}
			prompt = in.Tokens
			if req.Echo {
				echo = tok.Decode(prompt)
			}
		} else {
			// The tokenizer's working memory is about 70 times its input:
			// a text longer than /tokenize's byte cap cannot fit the
			// context anyway, so it is refused before it is tokenized.
			if _, capBytes := s.tokenizeCap(); len(in.Text) > capBytes {
				httpx.WriteError(w, openai.Invalid(param, openai.CodeContextLength,
					"This model's maximum context length is %d tokens, and %s has %d bytes of text, more than %d (%d bytes a token of twice the context): it cannot fit. Please reduce the length of the prompt.",
					s.b.ModelConfig().Context, param, len(in.Text), capBytes, tokenizeBytesPerToken))
				return
			}
			prompt = tok.Encode(in.Text, true, true)
			if req.Echo {
				echo = in.Text
			}
		}
		prompts[pi] = prompt
		ec := echoed{text: echo, runes: utf8.RuneCountInString(echo)}
		if echoLP {
			ec.offsets = promptOffsets(tok, prompt, ec.runes)
		}
		enc.echoes = append(enc.echoes, ec)
	}
	p, e := s.plan(r.Context(), li, &req.Common, prompts, "prompt", s.o.DefaultCompletionTokens, top, req.PromptLogprobs != nil || echoLP)
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	p.endpoint = "completions"
	s.generate(w, r, p, enc, t0)
}

// promptOffsets returns the rune offset of each prompt token's text in the
// echoed prompt, as the tokens decode from the start (echoRunes bounds
// them). They are exact when the prompt text is what its tokens decode to
// (always for a token-id prompt); otherwise (text the tokenizer normalizes,
// special tokens written in the prompt) they are the decoded positions,
// clamped to the echoed text.
func promptOffsets(tok *tokenizer.Tokenizer, prompt []int32, echoRunes int) []int {
	d := tok.NewDecoder()
	off := make([]int, len(prompt))
	n := 0
	for i, id := range prompt {
		off[i] = min(n, echoRunes)
		n += utf8.RuneCountInString(d.Add(id))
	}
	return off
}

// promptLogprobsDoc builds a choice's prompt_logprobs member from the
// engine's prompt logprobs (nil for none: a router's decode leg, where the
// router splices in the prefill leg's).
func promptLogprobsDoc(tok *tokenizer.Tokenizer, prompt []int32, plp []float32) openai.PromptLogprobs {
	if plp == nil {
		return nil
	}
	doc := make(openai.PromptLogprobs, len(prompt))
	for i := 1; i < len(prompt) && i < len(plp); i++ {
		id := prompt[i]
		doc[i] = map[string]openai.PromptTokenLogprob{
			strconv.Itoa(int(id)): {Logprob: logprob(plp[i]), DecodedToken: string(tok.TokenPiece(id))},
		}
	}
	return doc
}

// toolsDroppedWarning is the Warning header (RFC 7234's 299, a persistent
// warning) of a chat answer whose request had tools that the chat template
// does not render.
const toolsDroppedWarning = `299 tandem "the chat template does not render tools: the model did not see this request's tools; start the server with --chat-template FILE, a template with a tools section"`

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	body, li, ok := s.start(w, r)
	if !ok {
		return
	}
	req, e := openai.DecodeChatRequest(body)
	if e == nil {
		e = s.checkModel(req.Model)
	}
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	if len(req.Tools) > 0 && !s.chat.tmpl.RendersTools() {
		w.Header().Add("Warning", toolsDroppedWarning)
	}
	tok := s.b.Tokenizer()
	msgs := chat.MessagesJSON(req.Messages)
	if s.harmony {
		msgs = chat.HarmonyMessagesJSON(req.Messages)
	}
	prompt, text, err := s.chat.promptInput(r.Context(), tok, chat.Input{Messages: msgs, Tools: req.ToolsJSON, AddGenerationPrompt: true, Kwargs: req.ChatTemplateKwargs})
	if err != nil {
		httpx.WriteError(w, openai.Invalid("messages", openai.CodeInvalidValue, "The messages cannot be formatted with this model's chat template: %v", err))
		return
	}
	var tp *toolPlan
	if s.harmony {
		tp, e = s.planHarmonyTools(r.Context(), req, text)
	} else {
		tp, e = s.planTools(r.Context(), req, text)
	}
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	req.Stop = append(req.Stop[:len(req.Stop):len(req.Stop)], s.chat.stops...)
	req.StopTokenIDs = append(req.StopTokenIDs[:len(req.StopTokenIDs):len(req.StopTokenIDs)], s.chat.stopTokens...)
	top := 0
	if req.Logprobs {
		top = req.TopLogprobs
	}
	p, e := s.plan(r.Context(), li, &req.Common, [][]int32{prompt}, "messages", 0, top, req.PromptLogprobs != nil)
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	p.endpoint = "chat"
	p.id = newID("chatcmpl-")
	enc := &chatEncoder{tok: tok, logprobs: req.Logprobs, fingerprint: s.o.SystemFingerprint}
	if s.think {
		enc.think, enc.thinkOpen = true, promptOpensThink(text)
	}
	if s.harmony {
		enc.harmony, enc.prompt = true, text
	}
	apply := applyHarmonyTools
	if !s.harmony {
		apply = func(tp *toolPlan, p *genPlan) *openai.Error { return s.applyTools(tp, p, enc) }
	}
	if e := apply(tp, p); e != nil {
		httpx.WriteError(w, e)
		return
	}
	s.generate(w, r, p, enc, t0)
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
	echo        bool     // the prompt is shown before the completion
	echoes      []echoed // per prompt
	fingerprint string
}

// echoed is what echo shows of one prompt.
type echoed struct {
	text    string // the prompt's text
	runes   int
	offsets []int // echo with logprobs: each prompt token's rune offset in text
}

func (e *completionEncoder) doc(p *genPlan, choices []openai.CompletionChoice, u *openai.Usage) *openai.CompletionResponse {
	if choices == nil {
		choices = []openai.CompletionChoice{}
	}
	return &openai.CompletionResponse{ID: p.id, Object: openai.ObjectCompletion, Created: p.created, Model: p.model,
		SystemFingerprint: e.fingerprint, Choices: choices, Usage: u}
}

// legacy builds the logprobs object of toks, led by the prompt's tokens
// when withPrompt (echo): their logprobs from plp (null for the first, and
// for all when plp is nil), top_logprobs null, offsets in the echoed text.
func (e *completionEncoder) legacy(p *genPlan, choice int, toks []tokenRec, withPrompt bool, plp []float32) *openai.CompletionLogprobs {
	if !e.logprobs {
		return nil
	}
	prompt, ec := p.promptOf(choice), e.echoes[p.choicePrompt[choice]]
	np := 0
	if withPrompt && ec.offsets != nil {
		np = len(prompt)
	}
	n := np + len(toks)
	lp := &openai.CompletionLogprobs{
		Tokens:        make([]string, 0, n),
		TokenLogprobs: make([]*float64, 0, n),
		TopLogprobs:   make([]map[string]float64, 0, n),
		TextOffset:    make([]int, 0, n),
	}
	for i := range np {
		id := prompt[i]
		var x *float64
		if i > 0 && i < len(plp) {
			v := logprob(plp[i])
			x = &v
		}
		lp.Tokens = append(lp.Tokens, string(e.tok.TokenPiece(id)))
		lp.TokenLogprobs = append(lp.TokenLogprobs, x)
		lp.TopLogprobs = append(lp.TopLogprobs, nil)
		lp.TextOffset = append(lp.TextOffset, ec.offsets[i])
	}
	for _, t := range toks {
		x := logprob(t.Logprob)
		var m map[string]float64
		if e.top > 0 {
			m = make(map[string]float64, len(t.Top))
			for _, a := range t.Top {
				m[string(e.tok.TokenPiece(a.ID))] = logprob(a.Logprob)
			}
		}
		lp.Tokens = append(lp.Tokens, string(e.tok.TokenPiece(t.ID)))
		lp.TokenLogprobs = append(lp.TokenLogprobs, &x)
		lp.TopLogprobs = append(lp.TopLogprobs, m)
		lp.TextOffset = append(lp.TextOffset, ec.runes+t.runeStart)
	}
	return lp
}

func (e *completionEncoder) opening(p *genPlan, i int, plp []float32) any {
	if !e.echo {
		return nil
	}
	return e.doc(p, []openai.CompletionChoice{{Index: i, Text: e.echoes[p.choicePrompt[i]].text, Logprobs: e.legacy(p, i, nil, true, plp),
		PromptLogprobs: promptLogprobsDoc(e.tok, p.promptOf(i), plp)}}, nil)
}

func (e *completionEncoder) chunk(p *genPlan, pc *piece) any {
	return e.doc(p, []openai.CompletionChoice{{Index: pc.index, Text: pc.text, Logprobs: e.legacy(p, pc.index, pc.toks, false, nil),
		FinishReason: finishPtr(pc.finish), PromptLogprobs: promptLogprobsDoc(e.tok, p.promptOf(pc.index), pc.plp)}}, nil)
}

func (e *completionEncoder) answer(p *genPlan, res []*choiceResult, u *openai.Usage) any {
	choices := make([]openai.CompletionChoice, len(res))
	for i, cr := range res {
		choices[i] = openai.CompletionChoice{Index: i, Text: e.echoes[p.choicePrompt[i]].text + cr.text.String(),
			Logprobs: e.legacy(p, i, cr.toks, e.echo, cr.plp), FinishReason: finishPtr(cr.finish),
			PromptLogprobs: promptLogprobsDoc(e.tok, p.promptOf(i), cr.plp)}
	}
	return e.doc(p, choices, u)
}

func (e *completionEncoder) usageChunk(p *genPlan, u *openai.Usage) any { return e.doc(p, nil, u) }

// chatEncoder builds /v1/chat/completions documents.
type chatEncoder struct {
	tok         *tokenizer.Tokenizer
	logprobs    bool
	fingerprint string
	think       bool                 // split reasoning from content
	thinkOpen   bool                 // the prompt left a <think> block open
	parsers     map[int]*thinkParser // streaming: each choice's parser
	toolFormat  toolcall.Format      // "": no tool-call parsing
	toolParsers map[int]*toolcall.Parser
	harmony     bool                    // read the output as harmony (gpt-oss)
	prompt      string                  // with harmony: the rendered prompt, where the output starts
	hparsers    map[int]*harmony.Parser // streaming: each choice's harmony parser
}

// parser returns choice i's reasoning parser.
func (e *chatEncoder) parser(i int) *thinkParser {
	if e.parsers == nil {
		e.parsers = make(map[int]*thinkParser)
	}
	p := e.parsers[i]
	if p == nil {
		p = newThinkParser(e.thinkOpen)
		e.parsers[i] = p
	}
	return p
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

func (e *chatEncoder) opening(p *genPlan, i int, plp []float32) any {
	empty := ""
	return e.chunkDoc(p, []openai.ChatChunkChoice{{Index: i,
		Delta:          openai.ChatDelta{Role: openai.RoleAssistant, Content: &empty},
		PromptLogprobs: promptLogprobsDoc(e.tok, p.promptOf(i), plp)}}, nil)
}

func (e *chatEncoder) chunk(p *genPlan, pc *piece) any {
	var d openai.ChatDelta
	text := pc.text
	finish := pc.finish
	if e.harmony {
		text, finish = e.streamHarmony(pc, &d)
	}
	if e.think {
		tp := e.parser(pc.index)
		r, c := tp.feed(text)
		if pc.final {
			r2, c2 := tp.flush()
			r, c = r+r2, c+c2
		}
		if r != "" {
			d.ReasoningContent = &r
		}
		text = c
	}
	if e.toolFormat != "" {
		text, d.ToolCalls, finish = e.streamTools(pc, text)
	}
	if text != "" {
		d.Content = &text
	}
	return e.chunkDoc(p, []openai.ChatChunkChoice{{Index: pc.index, Delta: d, Logprobs: e.content(pc.toks),
		FinishReason: finishPtr(finish), PromptLogprobs: promptLogprobsDoc(e.tok, p.promptOf(pc.index), pc.plp)}}, nil)
}

func (e *chatEncoder) answer(p *genPlan, res []*choiceResult, u *openai.Usage) any {
	choices := make([]openai.ChatChoice, len(res))
	for i, cr := range res {
		msg := openai.ChatMessage{Role: openai.RoleAssistant, Content: cr.text.String()}
		if e.think {
			r, c := splitReasoning(msg.Content, e.thinkOpen)
			msg.Content = c
			if r != "" {
				msg.ReasoningContent = &r
			}
		}
		finish := cr.finish
		if e.toolFormat != "" {
			finish = e.answerTools(&msg, finish)
		}
		if e.harmony {
			finish = e.answerHarmony(&msg, finish)
		}
		choices[i] = openai.ChatChoice{Index: i,
			Message:  msg,
			Logprobs: e.content(cr.toks), FinishReason: finishPtr(finish),
			PromptLogprobs: promptLogprobsDoc(e.tok, p.promptOf(i), cr.plp)}
	}
	return &openai.ChatResponse{ID: p.id, Object: openai.ObjectChatCompletion, Created: p.created, Model: p.model,
		SystemFingerprint: e.fingerprint, Choices: choices, Usage: u}
}

func (e *chatEncoder) usageChunk(p *genPlan, u *openai.Usage) any { return e.chunkDoc(p, nil, u) }
