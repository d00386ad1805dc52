package server

import (
	"fmt"
	"strings"
	"tandem/internal/server/chat"
	"tandem/internal/server/harmony"
)

// Reasoning output, as vLLM's and llama.cpp's servers return it: a model
// that thinks writes "<think>reasoning</think>answer"; the chat API returns
// the reasoning in message.reasoning_content (delta.reasoning_content when
// streaming) and only the answer in content.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// Reasoning parser names (--reasoning-parser, Options.ReasoningParser).
const (
	ReasoningAuto  = "auto"  // think when the chat template writes <think> and </think>
	ReasoningNone  = "none"  // everything is content
	ReasoningThink = "think" // split <think>...</think>
	// ReasoningHarmony reads gpt-oss's harmony channels (analysis is the
	// reasoning, final the content, messages to functions tool calls);
	// auto chooses it when the chat template writes harmony.
	ReasoningHarmony = "harmony"
)

// reasoningEnabled resolves a parser name against a chat template: whether
// chat output is split, or an error for an unknown name.
func reasoningEnabled(parser string, t *chat.Template) (bool, error) {
	switch parser {
	case "", ReasoningAuto:
		return templateThinks(t.Source()), nil
	case ReasoningNone, ReasoningHarmony:
		return false, nil
	case ReasoningThink:
		return true, nil
	}
	return false, fmt.Errorf("reasoning parser %q is not supported: use none, auto, think or harmony", parser)
}

// harmonyEnabled reports whether chat output is read as harmony: the
// parser is harmony, or auto and the chat template writes harmony
// (gpt-oss). The model's template decides, never its output.
func harmonyEnabled(parser string, t *chat.Template) bool {
	switch parser {
	case "", ReasoningAuto:
		return harmony.Detect(t.Source())
	case ReasoningHarmony:
		return true
	}
	return false
}

// templateThinks reports whether a chat template writes thinking blocks
// (Qwen3, QwQ, DeepSeek-R1 distills).
func templateThinks(src string) bool {
	return strings.Contains(src, thinkOpen) && strings.Contains(src, thinkClose)
}

// promptOpensThink reports whether a rendered prompt leaves a thinking
// block open (it ends inside <think>, as templates that force thinking
// do), so that the output starts as reasoning.
func promptOpensThink(prompt string) bool {
	i := strings.LastIndex(prompt, thinkOpen)
	return i >= 0 && !strings.Contains(prompt[i:], thinkClose)
}

// thinkState is where a thinkParser is in the output.
type thinkState int

const (
	thinkStart   thinkState = iota // nothing decided yet: the output may open with <think>
	thinkInside                    // in the reasoning
	thinkContent                   // after the reasoning (or no reasoning at all)
)

// thinkParser splits a stream of generated text into reasoning and content.
// The reasoning is what lies between a leading <think> (or the start, when
// the prompt opened the block) and </think>, without the newlines next to
// the tags; the content is the rest, without the newlines that follow
// </think>. Output that does not open with <think> is all content. Text that
// could be the start of a tag is held back until the next piece decides it,
// so the split does not depend on where the pieces break. Not safe for
// concurrent use.
type thinkParser struct {
	state  thinkState
	held   string // text not yet emitted
	trimNL bool   // drop newlines at the head of what comes next
}

// newThinkParser returns a parser; open is set when the prompt left a
// <think> block open.
func newThinkParser(open bool) *thinkParser {
	p := &thinkParser{}
	if open {
		p.state, p.trimNL = thinkInside, true
	}
	return p
}

// feed takes the next piece of output and returns what it decides:
// reasoning and content text, either possibly empty.
func (p *thinkParser) feed(text string) (reasoning, content string) {
	p.held += text
	var r, c strings.Builder
	for {
		switch p.state {
		case thinkStart:
			s := strings.TrimLeft(p.held, " \t\r\n")
			switch {
			case strings.HasPrefix(s, thinkOpen):
				p.held = s[len(thinkOpen):]
				p.state, p.trimNL = thinkInside, true
				continue
			case strings.HasPrefix(thinkOpen, s):
				return r.String(), c.String() // undecided: "" or a prefix of <think>
			}
			p.state = thinkContent
			continue
		case thinkInside:
			if p.trimNL {
				p.held = strings.TrimLeft(p.held, "\n")
				if p.held == "" {
					return r.String(), c.String()
				}
				p.trimNL = false
			}
			if i := strings.Index(p.held, thinkClose); i >= 0 {
				r.WriteString(strings.TrimRight(p.held[:i], "\n"))
				p.held = p.held[i+len(thinkClose):]
				p.state, p.trimNL = thinkContent, true
				continue
			}
			keep := heldSuffix(p.held, thinkClose)
			r.WriteString(p.held[:len(p.held)-keep])
			p.held = p.held[len(p.held)-keep:]
			return r.String(), c.String()
		case thinkContent:
			if p.trimNL {
				p.held = strings.TrimLeft(p.held, "\n")
				if p.held == "" {
					return r.String(), c.String()
				}
				p.trimNL = false
			}
			c.WriteString(p.held)
			p.held = ""
			return r.String(), c.String()
		}
	}
}

// flush ends the output and returns what was held back.
func (p *thinkParser) flush() (reasoning, content string) {
	held := p.held
	p.held = ""
	switch p.state {
	case thinkInside:
		return strings.TrimRight(held, "\n"), ""
	case thinkStart:
		p.state = thinkContent
		return "", held
	}
	if p.trimNL {
		return "", strings.TrimLeft(held, "\n")
	}
	return "", held
}

// heldSuffix returns how many trailing bytes of s must wait for more text
// inside the reasoning: newlines that may precede tag, followed by a proper
// prefix of tag.
func heldSuffix(s, tag string) int {
	n := 0
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			n = k
			break
		}
	}
	rest := s[:len(s)-n]
	return n + len(rest) - len(strings.TrimRight(rest, "\n"))
}

// splitReasoning splits a whole output as a thinkParser fed in pieces
// would.
func splitReasoning(text string, open bool) (reasoning, content string) {
	p := newThinkParser(open)
	r, c := p.feed(text)
	r2, c2 := p.flush()
	return r + r2, c + c2
}
