package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/server/chat"
	"tandem/internal/server/toolcall"
)

// Tool calling, as vLLM's server does it with --enable-auto-tool-choice:
// the request's tools go to the chat template; with tool_choice "auto"
// the output is parsed into content and tool calls in the model's syntax
// (package toolcall), constrained by a grammar when a tool is strict;
// "required" and a named function constrain the output to calls with
// arguments that follow the tools' schemas; "none" renders the tools but
// parses nothing.

// toolConfig is a server's tool-call setup: the syntax of its model and
// the control tokens whose text the parser needs.
type toolConfig struct {
	format toolcall.Format
	// mistralNames: the template writes Mistral's v11 name form
	// ([TOOL_CALLS]name[ARGS]{...}), which grammars then follow.
	mistralNames bool
	// keep maps the ids of the format's markers that are control tokens
	// (decoded as nothing) to their text, kept in the output that is
	// parsed.
	keep map[int32]string
}

// newToolConfig resolves the --tool-call-parser value parser against the
// chat template (auto: toolcall.Detect) and finds the markers among tok's
// control tokens.
func newToolConfig(parser string, t *chat.Template, tok *tokenizer.Tokenizer) (*toolConfig, error) {
	f, err := toolcall.ParseFormat(parser)
	if err != nil {
		return nil, err
	}
	if f == "" {
		f = toolcall.Detect(t.Source())
	}
	c := &toolConfig{format: f,
		mistralNames: f == toolcall.Mistral && strings.Contains(t.Source(), "[ARGS]")}
	markers := f.Markers()
	if len(markers) == 0 {
		return c, nil
	}
	for id, text := range tok.Vocab().Tokens {
		for _, m := range markers {
			if text == m && len(tok.TokenPiece(int32(id))) == 0 {
				if c.keep == nil {
					c.keep = map[int32]string{}
				}
				c.keep[int32(id)] = text
			}
		}
	}
	return c, nil
}

// toolPlan is what a chat request's tools ask of its generation.
type toolPlan struct {
	parse   bool             // split the output into content and tool calls
	grammar *grammar.Grammar // constrain the output (nil: no constraint)
}

// planTools decides how req's tools are handled: nothing without tools or
// with tool_choice none; parsing for auto, constrained when a tool is
// strict; parsing and a grammar for required and a named function. prompt
// is the rendered prompt: with the reasoning parser on, a required call may
// follow a reasoning block, unless the prompt closed one already (Qwen 3's
// enable_thinking false).
func (s *Server) planTools(ctx context.Context, req *openai.ChatRequest, prompt string) (*toolPlan, *openai.Error) {
	tp := &toolPlan{}
	if len(req.Tools) == 0 || req.ToolChoice.Mode == openai.ChoiceNone {
		return tp, nil
	}
	tp.parse = true
	constrain := req.ToolChoice.Mode != openai.ChoiceAuto
	for _, t := range req.Tools {
		constrain = constrain || t.Strict
	}
	if !constrain {
		return tp, nil
	}
	think := toolcall.ThinkNone
	switch {
	case !s.think:
	case promptOpensThink(prompt):
		think = toolcall.ThinkOpen
	case !strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), thinkClose):
		think = toolcall.ThinkOptional
	}
	g, e := s.grammarFor(ctx, req, think)
	if e != nil {
		return nil, e
	}
	tp.grammar = g
	return tp, nil
}

// grammarFor compiles (or finds in the server's grammar cache) the grammar
// of req's tool calls. The key is prefixed so that it never meets a
// structured-output key.
func (s *Server) grammarFor(ctx context.Context, req *openai.ChatRequest, think toolcall.ThinkMode) (*grammar.Grammar, *openai.Error) {
	c := s.tools
	key := sha256.Sum256(fmt.Appendf(nil, "tools\x00%s\x00%d\x00%q\x00%v\x00%d\x00%v\x00%d\x00%s", c.format, req.ToolChoice.Mode,
		req.ToolChoice.Name, req.Parallel(), think, c.mistralNames, s.o.JSONMaxWhitespace, req.ToolsJSON))
	g, err := s.grammars.get(ctx, key, func(cctx context.Context) (*grammar.Grammar, error) {
		g, e := toolcall.Grammar(toolcall.GrammarSpec{Format: c.format, Tools: req.Tools, Choice: req.ToolChoice,
			Parallel: req.Parallel(), Think: think, MistralNames: c.mistralNames, Options: grammar.Options{MaxWhitespace: s.o.JSONMaxWhitespace}.WithContext(cctx)})
		if e != nil {
			return nil, e
		}
		return g, nil
	})
	if err != nil {
		if e := s.compileRefusal(ctx, err); e != nil {
			return nil, e
		}
		var te *toolcall.Error
		if errors.As(err, &te) {
			return nil, openai.Invalid(te.Param, openai.CodeInvalidValue, "%s", te.Message)
		}
		return nil, openai.Internal(err.Error())
	}
	return g, nil
}

// applyTools puts a tool plan into the generation plan and the encoder:
// the grammar on every choice's request (a request that already carries
// another constraint, such as response_format, cannot take it) and the
// parser in the encoder.
func (s *Server) applyTools(tp *toolPlan, p *genPlan, enc *chatEncoder) *openai.Error {
	if !tp.parse {
		return nil
	}
	if tp.grammar != nil {
		for i := range p.reqs {
			if p.reqs[i].Grammar != nil {
				return openai.Invalid("tool_choice", openai.CodeInvalidValue,
					"Constrained tool calls (tool_choice required or a named function, or a strict tool) cannot be combined with another output constraint such as response_format.")
			}
			p.reqs[i].Grammar = tp.grammar
		}
	}
	p.keep = s.tools.keep
	enc.toolFormat = s.tools.format
	return nil
}

// toolParser returns choice i's streaming tool-call parser.
func (e *chatEncoder) toolParser(i int) *toolcall.Parser {
	if e.toolParsers == nil {
		e.toolParsers = make(map[int]*toolcall.Parser)
	}
	p := e.toolParsers[i]
	if p == nil {
		p = toolcall.NewParser(e.toolFormat, nil)
		e.toolParsers[i] = p
	}
	return p
}

// toolDelta turns a parser's delta into delta.tool_calls pieces; it
// reports the content text too.
func toolDelta(d toolcall.Delta) (string, []openai.ToolCallDelta) {
	var out []openai.ToolCallDelta
	for _, c := range d.Calls {
		td := openai.ToolCallDelta{Index: c.Index, Function: &openai.ToolCallFunctionDelta{Arguments: c.Arguments}}
		if c.ID != "" {
			td.ID, td.Type, td.Function.Name = c.ID, "function", c.Name
		}
		out = append(out, td)
	}
	return d.Content, out
}

// streamTools runs a streamed piece of content through choice pc.index's
// tool parser: it returns the content to send, the tool call pieces, and
// the finish reason (tool_calls when the choice stopped after making
// calls).
func (e *chatEncoder) streamTools(pc *piece, text string) (string, []openai.ToolCallDelta, string) {
	tp := e.toolParser(pc.index)
	d := tp.Feed(text)
	finish := pc.finish
	if pc.final {
		f := tp.Flush()
		d.Content += f.Content
		d.Calls = mergeCallDeltas(d.Calls, f.Calls)
		if finish == openai.FinishReasonStop && tp.Calls() > 0 {
			finish = openai.FinishReasonToolCalls
		}
	}
	content, calls := toolDelta(d)
	return content, calls, finish
}

// mergeCallDeltas appends b to a, joining a piece of the call a ends with.
func mergeCallDeltas(a, b []toolcall.CallDelta) []toolcall.CallDelta {
	for _, c := range b {
		if n := len(a); n > 0 && a[n-1].Index == c.Index && c.ID == "" {
			a[n-1].Arguments += c.Arguments
			continue
		}
		a = append(a, c)
	}
	return a
}

// answerTools splits a whole choice's content into content and tool
// calls, and the finish reason.
func (e *chatEncoder) answerTools(msg *openai.ChatMessage, finish string) string {
	r := toolcall.Parse(e.toolFormat, msg.Content)
	msg.Content = r.Content
	for _, c := range r.Calls {
		msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: c.ID, Type: "function",
			Function: openai.ToolCallFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if finish == openai.FinishReasonStop && len(r.Calls) > 0 {
		finish = openai.FinishReasonToolCalls
	}
	return finish
}
