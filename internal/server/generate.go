package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/engine/sample"
)

// genPlan is a checked generation request, ready to submit.
type genPlan struct {
	endpoint string // metric label: "completions" or "chat"
	id       string
	model    string
	created  int64
	// prompts are the request's prompts (several for a completions list
	// prompt); reqs[i] is choice i, whose prompt is prompts[choicePrompt[i]].
	prompts      [][]int32
	choicePrompt []int
	promptParam  string // "prompt" or "messages": the field errors about the prompt name
	reqs         []engine.Request
	stops        []string
	stream       bool
	includeUsage bool
	// promptLogprobs: the answer carries prompt logprobs (prompt_logprobs,
	// or echo with logprobs); the engine is asked for them except on a
	// router's decode leg.
	promptLogprobs bool
	// keep maps control tokens whose text the output keeps (tool-call
	// markers the parser reads) to that text.
	keep map[int32]string
	// leg is the router's verified leg the request came as (nil: none);
	// its sequence goes to Options.Legs.
	leg *leg.Info
}

// promptOf returns choice i's prompt.
func (p *genPlan) promptOf(i int) []int32 { return p.prompts[p.choicePrompt[i]] }

// plan checks the lengths against the context and builds one engine request
// per choice: c.N for each prompt, choice i*N+j being prompt i's j-th.
// defaultMax is the max_tokens used when the request gives none (0: the
// rest of the context); it is clamped to the context, while an explicit
// max_tokens that does not fit is an error. promptLogprobs asks each
// choice's sequence for the prompt's logprobs. The request's constraint is
// compiled (or taken from the cache) and shared by every choice. li is the
// router's verified leg the request came as, or nil.
func (s *Server) plan(ctx context.Context, li *leg.Info, c *openai.Common, prompts [][]int32, param string, defaultMax, topLogprobs int, promptLogprobs bool) (*genPlan, *openai.Error) {
	ctxLen := s.b.ModelConfig().Context
	sp := sample.Params{Temperature: 1, TopP: 1, TopK: max(c.TopK, 0), MinP: float32(c.MinP),
		PresencePenalty: float32(c.PresencePenalty), FrequencyPenalty: float32(c.FrequencyPenalty)}
	if c.Temperature != nil {
		sp.Temperature = float32(*c.Temperature)
	}
	if c.TopP != nil {
		sp.TopP = float32(*c.TopP)
	}
	if c.RepetitionPenalty != nil {
		sp.RepeatPenalty = float32(*c.RepetitionPenalty)
	}
	if err := sp.Validate(); err != nil {
		return nil, openai.Invalid("", openai.CodeInvalidValue, "%v", err)
	}
	if vocab := s.vocabSize(); vocab > 0 {
		for id := range c.LogitBias {
			if int(id) >= vocab {
				return nil, openai.Invalid("logit_bias", openai.CodeInvalidValue,
					"logit_bias names token id %d, outside this model's vocabulary of %d tokens.", id, vocab)
			}
		}
	}
	seed := randomSeed()
	if c.Seed != nil {
		seed = uint64(*c.Seed)
	}
	p := &genPlan{id: newID("cmpl-"), model: s.o.ModelName, created: time.Now().Unix(), prompts: prompts,
		promptParam: param, stops: c.Stop, stream: c.Stream, includeUsage: c.Stream && c.IncludeUsage,
		promptLogprobs: promptLogprobs, leg: li}
	for pi, prompt := range prompts {
		pp := param
		if len(prompts) > 1 {
			pp = fmt.Sprintf("%s[%d]", param, pi)
		}
		n := len(prompt)
		switch {
		case n == 0:
			return nil, openai.Invalid(pp, openai.CodeInvalidValue, "The %s is empty after tokenization; send at least one token.", pp)
		case ctxLen > 0 && n >= ctxLen:
			return nil, openai.ContextLengthExceeded(pp, ctxLen, n, 0)
		}
		maxTokens := c.MaxTokens
		if maxTokens > 0 {
			if ctxLen > 0 && maxTokens > ctxLen {
				return nil, openai.Invalid(c.MaxTokensParam, openai.CodeInvalidValue,
					"%s is %d, but this model's maximum context length is %d tokens.", c.MaxTokensParam, maxTokens, ctxLen)
			}
			if ctxLen > 0 && n+maxTokens > ctxLen {
				return nil, openai.ContextLengthExceeded(pp, ctxLen, n, maxTokens)
			}
		} else {
			maxTokens = defaultMax
			if maxTokens <= 0 || (ctxLen > 0 && n+maxTokens > ctxLen) {
				maxTokens = ctxLen - n
			}
		}
		minTokens := c.MinTokens
		if li != nil && li.Leg == leg.KindPrefill {
			// The router's prefill body asks for one token; min_tokens
			// still applies to it.
			minTokens = min(minTokens, maxTokens)
		}
		if minTokens > maxTokens {
			return nil, openai.Invalid("min_tokens", openai.CodeInvalidValue,
				"min_tokens is %d, more than the %d tokens this request may generate (max_tokens, or the rest of the context).", c.MinTokens, maxTokens)
		}
		for range c.N {
			q := sp
			q.Seed = seed + uint64(len(p.reqs))
			p.choicePrompt = append(p.choicePrompt, pi)
			p.reqs = append(p.reqs, engine.Request{
				Prompt:      prompt,
				MaxTokens:   maxTokens,
				Sample:      q,
				StopTokens:  c.StopTokenIDs,
				IgnoreEOS:   c.IgnoreEOS,
				TopLogprobs: topLogprobs,
				// Each choice computes them (the values are the same): every
				// choice's first chunk carries them without waiting for another.
				PromptLogprobs: promptLogprobs,
				LogitBias:      c.LogitBias,
				MinTokens:      minTokens,
			})
		}
	}
	g, e := s.compileConstraint(ctx, c.Constraint)
	if e != nil {
		return nil, e
	}
	for i := range p.reqs {
		p.reqs[i].Grammar = g
	}
	return p, nil
}

// piece is what a choice's goroutine hands the handler.
type piece struct {
	index  int
	text   string
	toks   []tokenRec
	final  bool
	finish string    // with final and no err
	err    error     // with final: the sequence failed
	tokens int       // with final: completion tokens
	cached int       // prompt tokens served from the prefix cache
	plp    []float32 // the prompt's logprobs, on the choice's first piece when asked for
}

// choiceResult accumulates a choice for a non-streamed answer.
type choiceResult struct {
	text   strings.Builder
	toks   []tokenRec
	finish string
	tokens int
	cached int
	plp    []float32 // the prompt's logprobs (nil: not asked for, or a decode leg)
	opened bool      // streamed: the choice's first chunk went out
}

// encoder builds one endpoint's documents.
type encoder interface {
	// opening returns choice i's chunk streamed before any of its text
	// (nil: none), carrying the prompt's logprobs plp when not nil.
	opening(p *genPlan, i int, plp []float32) any
	// chunk returns the streamed chunk for a piece (with the prompt's
	// logprobs when pc.plp is not nil).
	chunk(p *genPlan, pc *piece) any
	// answer returns the non-streamed answer.
	answer(p *genPlan, res []*choiceResult, u *openai.Usage) any
	// usageChunk returns the final streamed chunk with usage.
	usageChunk(p *genPlan, u *openai.Usage) any
}

// generate submits the plan's requests and answers with their output,
// streamed or not. Every stream is cancelled on every exit path: the
// handler's context is cancelled when generate returns, which ends every
// follow goroutine, each of which cancels its stream; generate waits for
// them.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, p *genPlan, enc encoder, t0 time.Time) {
	ctx, cancel := context.WithCancel(r.Context())
	// A decode leg imports the prompt's K/V instead of computing it, so it
	// has no prompt logprobs: the router splices in the prefill leg's.
	decodeLeg := p.leg != nil && p.leg.Leg == leg.KindDecode
	if p.leg != nil && len(p.reqs) > 1 {
		// A leg is one room: one sequence. The router splits n > 1 and
		// prompt lists into samples, one leg each.
		cancel()
		httpx.WriteError(w, openai.Invalid(p.promptParam, openai.CodeUnsupported,
			"This request makes %d sequences (a list of prompts, or n > 1), but a disaggregated leg serves one: send one request per prompt.", len(p.reqs)))
		return
	}
	streams := make([]Stream, 0, len(p.reqs))
	for i, req := range p.reqs {
		req.ID = fmt.Sprintf("%s-%d", p.id, i)
		if decodeLeg {
			req.PromptLogprobs = false
		}
		st, err := s.submit(ctx, p.leg, req) // a leg goes to Options.Legs, the rest to the Backend
		if err != nil {
			cancel()
			for _, st := range streams {
				st.Cancel()
			}
			httpx.WriteError(w, submitError(err, p.promptParam))
			return
		}
		streams = append(streams, st)
	}
	out := make(chan piece, 4*len(streams))
	var wg sync.WaitGroup
	rc := http.NewResponseController(w)
	defer func() {
		cancel()
		wg.Wait()
	}()
	tok := s.b.Tokenizer()
	for i, st := range streams {
		wantPLP := -1
		if p.promptLogprobs && !decodeLeg {
			wantPLP = len(p.promptOf(i))
		}
		c := newChoiceState(tok.NewContinuationDecoder(), p.stops)
		c.keep = p.keep
		wg.Go(func() { s.follow(ctx, i, st, c, wantPLP, out, t0) })
	}

	res := make([]*choiceResult, len(streams))
	for i := range res {
		res[i] = &choiceResult{}
	}
	var sw *sseWriter
	if p.stream {
		sw = newSSEWriter(w, s.o.WriteTimeout)
		// With prompt logprobs each choice's opening waits for its first
		// piece, which brings them.
		for i, cr := range res {
			if !p.promptLogprobs {
				cr.opened = true
				if doc := enc.opening(p, i, nil); doc != nil && sw.send(doc) != nil {
					return
				}
			}
		}
	}
	for remaining := len(streams); remaining > 0; {
		var pc piece
		select {
		case pc = <-out:
		case <-ctx.Done():
			return // the client went away; the deferred cancel ends the streams
		}
		if pc.err != nil {
			e := streamError(pc.err)
			s.log.Warn("generation failed", "request", p.id, "choice", pc.index, "err", pc.err)
			if sw != nil {
				if sw.send(e.Body()) == nil {
					sw.done()
				}
			} else {
				httpx.WriteError(w, e)
			}
			return
		}
		cr := res[pc.index]
		cr.cached = max(cr.cached, pc.cached)
		if pc.plp != nil {
			cr.plp = pc.plp
		}
		if pc.final {
			remaining--
			cr.finish, cr.tokens = pc.finish, pc.tokens
		}
		if sw != nil {
			if !cr.opened {
				cr.opened = true
				if doc := enc.opening(p, pc.index, pc.plp); doc != nil {
					if sw.send(doc) != nil {
						return
					}
					pc.plp = nil // the opening carried them
				}
			}
			if sw.send(enc.chunk(p, &pc)) != nil {
				return
			}
			continue
		}
		cr.text.WriteString(pc.text)
		cr.toks = append(cr.toks, pc.toks...)
	}
	u := &openai.Usage{}
	for _, pr := range p.prompts {
		u.PromptTokens += len(pr)
	}
	cached := 0
	for _, cr := range res {
		u.CompletionTokens += cr.tokens
		cached = max(cached, cr.cached)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails = &openai.PromptTokensDetails{CachedTokens: cached}
	if sw != nil {
		if p.includeUsage && sw.send(enc.usageChunk(p, u)) != nil {
			return
		}
		if writeLegTiming(w, sw, streams) != nil { // a router leg's worker timings (leg.HeaderTiming)
			return
		}
		if sw.done() != nil {
			return
		}
	} else {
		writeLegTiming(w, nil, streams)
		rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
		httpx.WriteJSON(w, http.StatusOK, enc.answer(p, res, u))
	}
	for i, cr := range res {
		s.met.choiceDone(len(p.prompts[p.choicePrompt[i]]), cr.tokens, p.reqs[i].MaxTokens)
	}
	s.met.requestDone(p.endpoint, time.Since(t0))
}

// streamError maps a failure during generation to an API error.
func streamError(err error) *openai.Error {
	var se StatusError
	if errors.As(err, &se) {
		return statusErrorBody(se)
	}
	if errors.Is(err, engine.ErrClosed) {
		return openai.Unavailable("the engine is shutting down")
	}
	if e := grammarCostError(err); e != nil {
		return e
	}
	return openai.Internal(err.Error())
}

// follow reads one stream until it ends, feeding its tokens through the
// choice's stop-string and UTF-8 hold-back and sending what may be shown.
// With wantPLP >= 0 (the prompt's length) the first update with tokens must
// bring that many prompt logprobs, which go out on the first piece. It
// cancels the stream when it returns, and returns promptly once ctx is
// done.
func (s *Server) follow(ctx context.Context, index int, st Stream, c *choiceState, wantPLP int, out chan<- piece, t0 time.Time) {
	defer st.Cancel()
	var plp []float32 // prompt logprobs not yet sent
	send := func(pc piece) bool {
		pc.index = index
		pc.plp, plp = plp, nil
		select {
		case out <- pc:
			return true
		case <-ctx.Done():
			return false
		}
	}
	fail := func(err error) {
		reason := engine.FinishError
		if errors.Is(err, engine.ErrGrammarTooCostly) {
			reason = engine.FinishGrammarBudget
		}
		s.met.finish(reason)
		send(piece{final: true, err: err})
	}
	var first, last time.Time
	for {
		u, err := st.Next(ctx)
		if ctx.Err() != nil {
			s.met.finish(engine.FinishCancelled)
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the generation stream ended without a final update")
			}
			fail(fmt.Errorf("generation stream: %w", err))
			return
		}
		if wantPLP >= 0 && len(u.Tokens) > 0 {
			if len(u.PromptLogprobs) != wantPLP {
				fail(fmt.Errorf("the engine returned %d prompt logprobs for a %d-token prompt", len(u.PromptLogprobs), wantPLP))
				return
			}
			plp, wantPLP = u.PromptLogprobs, -1
		}
		if k := len(u.Tokens); k > 0 {
			now := time.Now()
			if last.IsZero() {
				s.met.firstToken(now.Sub(t0), u.QueueTime)
				first = now
				k--
			}
			if k > 0 && !last.IsZero() {
				gap := now.Sub(last).Seconds() / float64(k)
				for range k {
					s.met.interToken(gap)
				}
			}
			last = now
		}
		stopped := false
		for _, t := range u.Tokens {
			if c.add(t) {
				stopped = true
				break
			}
		}
		switch {
		case stopped:
			st.Cancel()
			text, toks := c.take()
			s.met.finish(engine.FinishStop)
			s.met.decoded(first, last)
			send(piece{text: text, toks: toks, final: true, finish: openai.FinishReasonStop, tokens: c.tokens, cached: u.CachedTokens})
			return
		case u.Done && (u.Finish == engine.FinishStop || u.Finish == engine.FinishLength):
			c.end()
			text, toks := c.take()
			s.met.finish(u.Finish)
			s.met.decoded(first, last)
			send(piece{text: text, toks: toks, final: true, finish: string(u.Finish), tokens: c.tokens, cached: u.CachedTokens})
			return
		case u.Done:
			err := u.Err
			if err == nil {
				err = fmt.Errorf("the engine ended the sequence (%s)", u.Finish)
			}
			fail(err)
			return
		case c.ready():
			text, toks := c.take()
			if !send(piece{text: text, toks: toks, cached: u.CachedTokens}) {
				return
			}
		}
	}
}

// sseWriter writes server-sent events, each within a write deadline and
// flushed at once.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
}

func newSSEWriter(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (s *sseWriter) write(data []byte) error {
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	return s.raw(buf)
}

// raw writes buf, one or more whole events, and flushes it.
func (s *sseWriter) raw(buf []byte) error {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (s *sseWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode chunk: %w", err)
	}
	return s.write(b)
}

func (s *sseWriter) done() error { return s.write([]byte(openai.StreamDone)) }

// logprob converts an engine logprob to JSON-safe float64 (-Inf and NaN,
// which JSON cannot carry, become -9999 as in OpenAI's answers).
func logprob(x float32) float64 {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) || f < -9999 {
		return -9999
	}
	return f
}
