package server

import (
	"tandem/internal/api/openai"
	"tandem/internal/server/harmony"
	"tandem/internal/server/toolcall"
)

// gpt-oss's harmony output (package harmony): with the reasoning parser on
// harmony (auto chooses it for a template that writes harmony), every chat
// choice's text is read as messages on channels: analysis becomes
// reasoning_content, final (and commentary preambles) content, and
// messages to functions.NAME tool calls, whatever the request's tools (the
// model addressed a function). A choice that made calls and stopped ends
// with finish_reason tool_calls.

// planHarmonyTools checks req's tools for a harmony model: tool_choice auto
// and none are read from the output; a constraint (required, a named
// function, a strict tool) has no harmony grammar and is refused, rather
// than forcing a syntax the parser would not read as calls.
func planHarmonyTools(req *openai.ChatRequest) (*toolPlan, *openai.Error) {
	if len(req.Tools) == 0 || req.ToolChoice.Mode == openai.ChoiceNone {
		return &toolPlan{}, nil
	}
	if req.ToolChoice.Mode != openai.ChoiceAuto {
		return nil, openai.Invalid("tool_choice", openai.CodeUnsupported,
			"This model writes tool calls in the harmony format (gpt-oss), which this server cannot constrain: use tool_choice auto.")
	}
	for i, t := range req.Tools {
		if t.Strict {
			return nil, openai.Invalid("tools", openai.CodeUnsupported,
				"tools[%d] is strict, but this model writes tool calls in the harmony format (gpt-oss), which this server cannot constrain: leave strict unset.", i)
		}
	}
	return &toolPlan{}, nil
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
