package harmony

import (
	"strings"

	"tandem/internal/server/toolcall"
)

// Harmony's markers, as gpt-oss writes them.
const (
	markStart     = "<|start|>"
	markChannel   = "<|channel|>"
	markConstrain = "<|constrain|>"
	markMessage   = "<|message|>"
	markEnd       = "<|end|>"
	markCall      = "<|call|>"
	markReturn    = "<|return|>"
)

var markers = []string{markStart, markChannel, markConstrain, markMessage, markEnd, markCall, markReturn}

// MaxHeader bounds a message header (the text between <|start|> or
// <|channel|> and <|message|>): a longer one is not a header, and its text
// becomes content.
const MaxHeader = 512

// Channels of a message.
const (
	ChannelAnalysis   = "analysis"
	ChannelCommentary = "commentary"
	ChannelFinal      = "final"
)

// Detect reports whether a chat template writes harmony (gpt-oss): it
// writes the <|start|>, <|channel|> and <|message|> markers.
func Detect(template string) bool {
	return strings.Contains(template, markStart) && strings.Contains(template, markChannel) &&
		strings.Contains(template, markMessage)
}

// Header is a message's parsed header.
type Header struct {
	Role      string // "assistant", or "" when the header has none
	Channel   string // "analysis", "commentary", "final", or "" when none
	Recipient string // the to= target ("functions.get_weather"), or ""
	Constrain string // the content type (<|constrain|>json, or "json" after the channel)
}

// ParseHeader reads the text of a header (between <|start|> and
// <|message|>, the <|start|> left out), such as
// "assistant<|channel|>analysis", "assistant to=functions.f<|channel|>commentary json"
// or "<|channel|>commentary to=functions.f <|constrain|>json".
func ParseHeader(h string) Header {
	var out Header
	role, rest, _ := strings.Cut(h, markChannel)
	if !strings.Contains(h, markChannel) {
		role, rest = h, ""
	}
	fields := func(s string) []string {
		return strings.Fields(strings.ReplaceAll(s, markConstrain, " "+markConstrain))
	}
	for i, f := range fields(role) {
		switch {
		case strings.HasPrefix(f, "to="):
			out.Recipient = f[3:]
		case strings.HasPrefix(f, markConstrain):
			out.Constrain = f[len(markConstrain):]
		case i == 0:
			out.Role = f
		}
	}
	for i, f := range fields(rest) {
		switch {
		case strings.HasPrefix(f, "to="):
			out.Recipient = f[3:]
		case strings.HasPrefix(f, markConstrain):
			if c := f[len(markConstrain):]; c != "" {
				out.Constrain = c
			}
		case i == 0:
			out.Channel = f
		case out.Constrain == "":
			out.Constrain = f
		}
	}
	return out
}

// kind is where a message's body goes.
type kind int

const (
	kindContent   kind = iota // final, commentary without recipient, or no channel
	kindReasoning             // analysis
	kindCall                  // a message to a tool: a call
)

func (h Header) kind() kind {
	switch {
	case h.Recipient != "" && h.Recipient != "assistant" && h.Recipient != "user":
		return kindCall
	case h.Channel == ChannelAnalysis:
		return kindReasoning
	}
	return kindContent
}

// CallName is the function name of a call addressed to recipient:
// "functions.get_weather" calls get_weather; a built-in tool's recipient
// ("browser.search", "python") is the name as it is.
func CallName(recipient string) string {
	return strings.TrimPrefix(recipient, "functions.")
}

// Delta is what a Parser decided after one piece of text, in this order:
// reasoning, content, then tool call pieces (toolcall.CallDelta: the first
// piece of call Index has ID and Name, later ones only Arguments text).
type Delta struct {
	Reasoning string
	Content   string
	Calls     []toolcall.CallDelta
}

func (d *Delta) add(e Delta) {
	d.Reasoning += e.Reasoning
	d.Content += e.Content
	for _, c := range e.Calls {
		if n := len(d.Calls); n > 0 && d.Calls[n-1].Index == c.Index && c.ID == "" {
			d.Calls[n-1].Arguments += c.Arguments
			continue
		}
		d.Calls = append(d.Calls, c)
	}
}

// state is where a Parser is in the output.
type state int

const (
	outside state = iota // between messages
	header               // after <|start|> or <|channel|>, before <|message|>
	body                 // in a message's text
)

// Parser splits a stream of gpt-oss output into reasoning, content and
// tool calls. Text that could be the start of a marker is held back until
// the next piece decides it, so the result does not depend on where the
// pieces break. Not safe for concurrent use.
type Parser struct {
	newID func() string
	st    state
	held  string // text not yet decided
	hdr   string // the header so far (state header)
	inh   int    // how much of hdr the prompt wrote
	kind  kind   // the body's kind (state body)
	calls int    // calls started
}

// NewParser returns a parser for the output that follows prompt: when the
// prompt ends inside a header ("<|start|>assistant", as gpt-oss's template's
// generation prompt does) or inside a message ("...<|channel|>final<|message|>")
// the output continues it. newID makes tool call ids (nil: OpenAI's shape,
// call_ and 24 letters and digits).
func NewParser(prompt string, newID func() string) *Parser {
	if newID == nil {
		newID = toolcall.Generic.NewID
	}
	p := &Parser{newID: newID}
	i := strings.LastIndex(prompt, markStart)
	if i < 0 {
		return p
	}
	tail := prompt[i+len(markStart):]
	for _, m := range []string{markEnd, markCall, markReturn} {
		if strings.Contains(tail, m) {
			return p // the last message is closed
		}
	}
	if h, _, ok := strings.Cut(tail, markMessage); ok {
		p.st, p.kind = body, ParseHeader(h).kind()
		if p.kind == kindCall {
			p.kind = kindContent // a call the prompt opened has no id here: its text is content
		}
		return p
	}
	if len(tail) <= MaxHeader {
		p.st, p.hdr, p.inh = header, tail, len(tail)
	}
	return p
}

// Calls returns how many tool calls the parser has started.
func (p *Parser) Calls() int { return p.calls }

// markerAt returns the marker text begins with, or "".
func markerAt(text string) string {
	for _, m := range markers {
		if strings.HasPrefix(text, m) {
			return m
		}
	}
	return ""
}

// heldTail is the length of the longest suffix of text that is a proper
// prefix of a marker.
func heldTail(text string) int {
	for n := min(len(text), len("<|constrain|>")-1); n > 0; n-- {
		s := text[len(text)-n:]
		for _, m := range markers {
			if strings.HasPrefix(m, s) {
				return n
			}
		}
	}
	return 0
}

// Feed takes the next piece of output and returns what it decides.
func (p *Parser) Feed(text string) Delta {
	p.held += text
	var d Delta
	for {
		i := strings.Index(p.held, "<|")
		for i >= 0 && markerAt(p.held[i:]) == "" {
			if heldTail(p.held[i:]) == len(p.held)-i {
				break // undecided: the rest could still be a marker
			}
			j := strings.Index(p.held[i+2:], "<|")
			if j < 0 {
				i = -1
				break
			}
			i += 2 + j
		}
		if i < 0 || markerAt(p.held[i:]) == "" {
			// No marker: emit what cannot be the start of one.
			keep := 0
			if i >= 0 {
				keep = len(p.held) - i
			} else {
				keep = heldTail(p.held)
			}
			p.text(&d, p.held[:len(p.held)-keep])
			p.held = p.held[len(p.held)-keep:]
			return d
		}
		m := markerAt(p.held[i:])
		p.text(&d, p.held[:i])
		p.held = p.held[i+len(m):]
		p.marker(&d, m)
	}
}

// text handles text without markers in the current state.
func (p *Parser) text(d *Delta, s string) {
	if s == "" {
		return
	}
	switch p.st {
	case outside:
		d.Content += s // text outside any message: content, as written
	case header:
		p.hdr += s
		if len(p.hdr) > MaxHeader {
			p.notHeader(d)
		}
	case body:
		p.bodyText(d, s)
	}
}

func (p *Parser) bodyText(d *Delta, s string) {
	switch p.kind {
	case kindReasoning:
		d.Reasoning += s
	case kindCall:
		d.add(Delta{Calls: []toolcall.CallDelta{{Index: p.calls - 1, Arguments: s}}})
	default:
		d.Content += s
	}
}

// marker handles a marker in the current state.
func (p *Parser) marker(d *Delta, m string) {
	switch p.st {
	case outside:
		switch m {
		case markStart:
			p.st, p.hdr, p.inh = header, "", 0
		case markChannel, markConstrain:
			p.st, p.hdr, p.inh = header, m, 0
		case markMessage:
			p.st, p.kind = body, kindContent // a message without a header: content
		}
		// <|end|>, <|call|> and <|return|> between messages close nothing.
	case header:
		switch m {
		case markMessage:
			h := ParseHeader(p.hdr)
			p.st, p.hdr, p.inh, p.kind = body, "", 0, h.kind()
			if p.kind == kindCall {
				p.calls++
				d.add(Delta{Calls: []toolcall.CallDelta{{Index: p.calls - 1, ID: p.newID(), Name: CallName(h.Recipient)}}})
			}
		case markStart:
			p.headerCut(d)
			p.st = header // a header without a message: the next begins
		case markEnd, markCall, markReturn:
			p.headerCut(d)
		default:
			p.hdr += m
			if len(p.hdr) > MaxHeader {
				p.notHeader(d)
			}
		}
	case body:
		switch m {
		case markEnd, markCall, markReturn:
			p.st = outside
		case markStart:
			p.st, p.hdr, p.inh = header, "", 0 // a message left open: the next begins
		case markChannel:
			p.st, p.hdr, p.inh = header, m, 0
		default:
			p.bodyText(d, m) // <|message|> or <|constrain|> inside a body is its text
		}
	}
}

// Flush ends the output and returns what was held back. A header cut short
// (the output ended before its <|message|>) carried no text and gives
// nothing; a call cut short keeps the arguments text it got.
func (p *Parser) Flush() Delta {
	var d Delta
	held := p.held
	p.held = ""
	p.text(&d, held)
	if p.st == header {
		p.headerCut(&d)
	}
	return d
}

// notHeader ends a header that is too long to be one: the text the model
// wrote becomes content.
func (p *Parser) notHeader(d *Delta) {
	d.Content += p.hdr[p.inh:]
	p.st, p.hdr, p.inh = outside, "", 0
}

// headerCut ends a header that no <|message|> followed. One that names a
// channel was a header cut short and carried no text; other text (a model
// that writes no header after the prompt's "<|start|>assistant") is
// content.
func (p *Parser) headerCut(d *Delta) {
	if !strings.Contains(p.hdr, markChannel) {
		d.Content += p.hdr[p.inh:]
	}
	p.st, p.hdr, p.inh = outside, "", 0
}

// Result is a whole output, parsed.
type Result struct {
	Reasoning string
	Content   string
	Calls     []toolcall.Call
}

// Parse parses the whole output text that followed prompt.
func Parse(prompt, text string, newID func() string) Result {
	p := NewParser(prompt, newID)
	d := p.Feed(text)
	d.add(p.Flush())
	return Collect(d)
}

// Collect joins deltas into the result a client assembling the stream
// gets.
func Collect(deltas ...Delta) Result {
	var r Result
	for _, d := range deltas {
		r.Reasoning += d.Reasoning
		r.Content += d.Content
		for _, c := range d.Calls {
			for len(r.Calls) <= c.Index {
				r.Calls = append(r.Calls, toolcall.Call{})
			}
			if c.ID != "" {
				r.Calls[c.Index].ID, r.Calls[c.Index].Name = c.ID, c.Name
			}
			r.Calls[c.Index].Arguments += c.Arguments
		}
	}
	return r
}
