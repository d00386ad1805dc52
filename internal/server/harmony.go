package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
	"tandem/internal/server/harmony"
	"tandem/internal/server/toolcall"
)

// gpt-oss's harmony output (package harmony): with the reasoning parser on
// harmony (auto chooses it for a template that writes harmony), every chat
// choice's text is read as messages on channels: analysis becomes
// reasoning_content, final (and commentary preambles) content, and
// messages to functions.NAME tool calls, whatever the request's tools (the
// model addressed a function). A choice that made calls and stopped ends
// with finish_reason tool_calls. tool_choice required and a named function
// constrain the output with harmony.Grammar.

// planHarmonyTools plans req's tools for a harmony model: tool_choice auto
// and none are read from the output. Required and a named function
// constrain it to one call (harmony.Grammar: optional reasoning, then the
// call), which needs the prompt to end with gpt-oss's generation prompt
// "<|start|>assistant". Strict tools under auto have no harmony grammar and
// are refused, rather than forcing a syntax the parser would not read as
// calls.
func (s *Server) planHarmonyTools(ctx context.Context, req *openai.ChatRequest, prompt string) (*toolPlan, *openai.Error) {
	if len(req.Tools) == 0 || req.ToolChoice.Mode == openai.ChoiceNone {
		return &toolPlan{}, nil
	}
	if req.ToolChoice.Mode == openai.ChoiceAuto {
		for i, t := range req.Tools {
			if t.Strict {
				return nil, openai.Invalid("tools", openai.CodeUnsupported,
					"tools[%d] is strict, but this model writes tool calls in the harmony format (gpt-oss), whose calls this server constrains only for tool_choice required or a named function: leave strict unset.", i)
			}
		}
		return &toolPlan{}, nil
	}
	if !strings.HasSuffix(prompt, "<|start|>assistant") {
		return nil, openai.Invalid("tool_choice", openai.CodeUnsupported,
			"This model's chat template does not end its prompt with the harmony generation prompt <|start|>assistant, so its tool calls cannot be constrained: use tool_choice auto.")
	}
	key := sha256.Sum256(fmt.Appendf(nil, "harmony\x00%d\x00%q\x00%d\x00%s", req.ToolChoice.Mode, req.ToolChoice.Name, s.o.JSONMaxWhitespace, req.ToolsJSON))
	g, err := s.grammars.get(ctx, key, func(cctx context.Context) (*grammar.Grammar, error) {
		return harmony.Grammar(req.Tools, req.ToolChoice, grammar.Options{MaxWhitespace: s.o.JSONMaxWhitespace}.WithContext(cctx))
	})
	if err != nil {
		if e := s.compileRefusal(ctx, err); e != nil {
			return nil, e
		}
		return nil, openai.Invalid("tools", openai.CodeInvalidValue, "The tools cannot be used to constrain tool calls: %v.", err)
	}
	return &toolPlan{grammar: g}, nil
}

// applyHarmonyTools puts a harmony tool plan's grammar on every choice's
// request (one that already carries another constraint cannot take it).
func applyHarmonyTools(tp *toolPlan, p *genPlan) *openai.Error {
	if tp.grammar == nil {
		return nil
	}
	for i := range p.reqs {
		if p.reqs[i].Grammar != nil {
			return openai.Invalid("tool_choice", openai.CodeInvalidValue,
				"Constrained tool calls (tool_choice required or a named function) cannot be combined with another output constraint such as response_format.")
		}
		p.reqs[i].Grammar = tp.grammar
	}
	return nil
}

// harmonyParser returns choice i's streaming harmony parser.
func (e *chatEncoder) harmonyParser(i int) *harmony.Parser {
	if e.hparsers == nil {
		e.hparsers = make(map[int]*harmony.Parser)
	}
	p := e.hparsers[i]
	if p == nil {
		p = harmony.NewParser(e.prompt, nil)
		e.hparsers[i] = p
	}
	return p
}

// streamHarmony runs a streamed piece through choice pc.index's harmony
// parser: the reasoning and tool call pieces go into d; it returns the
// content text and the finish reason.
func (e *chatEncoder) streamHarmony(pc *piece, d *openai.ChatDelta) (string, string) {
	hp := e.harmonyParser(pc.index)
	hd := hp.Feed(pc.text)
	finish := pc.finish
	if pc.final {
		f := hp.Flush()
		hd.Reasoning += f.Reasoning
		hd.Content += f.Content
		hd.Calls = mergeCallDeltas(hd.Calls, f.Calls)
		if finish == openai.FinishReasonStop && hp.Calls() > 0 {
			finish = openai.FinishReasonToolCalls
		}
	}
	if hd.Reasoning != "" {
		d.ReasoningContent = &hd.Reasoning
	}
	_, d.ToolCalls = toolDelta(toolcall.Delta{Calls: hd.Calls})
	return hd.Content, finish
}

// answerHarmony splits a whole choice's text into reasoning, content and
// tool calls, and returns the finish reason.
func (e *chatEncoder) answerHarmony(msg *openai.ChatMessage, finish string) string {
	r := harmony.Parse(e.prompt, msg.Content, nil)
	msg.Content = r.Content
	if r.Reasoning != "" {
		msg.ReasoningContent = &r.Reasoning
	}
	for _, c := range r.Calls {
		msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: c.ID, Type: "function",
			Function: openai.ToolCallFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if finish == openai.FinishReasonStop && len(r.Calls) > 0 {
		finish = openai.FinishReasonToolCalls
	}
	return finish
}
